"""Every frame the official C++ client sent or accepted (wire_vectors/cpp-client/) through both codec twins.

client->server frames are byte-for-byte what librocketmq.so wrote (jsoncpp: sorted keys, ints
mixed with strings in extFields, a trailing newline). server->client frames are answers that
client accepted; re-encoding them must give a header it would accept too: JSON serialize type,
the same keys and values, every ext value a string.
"""
from __future__ import annotations

import json
import struct

import pytest

from tests.support import WIRE_VECTOR_FILES as FILES, ext_text, wire_vector_records

#: LanguageCode names; the recorded headers carry the name, decoded commands the number.
LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS",
             "RUST", "NODE_JS")
_records = wire_vector_records
_ext_text = ext_text


def _recorded_ext(header: dict) -> dict | None:
    ext = header.get("extFields")
    if ext is None:
        return None
    return {k: _ext_text(v) for k, v in ext.items() if v is not None}


def _split(frame: bytes) -> tuple[int, bytes, bytes]:
    total, mark = struct.unpack(">II", frame[:8])
    assert total == len(frame) - 4
    hlen = mark & 0xFFFFFF
    return mark >> 24, frame[8:8 + hlen], frame[8 + hlen:]


ALL = _records()


def test_the_vectors_are_all_there() -> None:
    assert len(ALL) >= 150
    assert any(r["direction"] == "client->server" for r in ALL)
    assert any(r["direction"] == "server->client" for r in ALL)


def test_every_frame_decodes_to_its_recorded_header_and_body(codec) -> None:
    for r in ALL:
        frame = bytes.fromhex(r["frame_hex"])
        _, _, body = _split(frame)
        c = codec.decode_frame(frame)
        h = r["header"]
        got = (c.code, c.flag, c.opaque, c.version, LANGUAGES[c.language], c.remark, c.ext_fields, c.serialize_type)
        want = (h["code"], h["flag"], h["opaque"], h["version"], h["language"], h.get("remark"), _recorded_ext(h), 0)
        assert got == want, r["_id"]
        assert (c.body or b"") == body and len(body) == r["body_len"], r["_id"]
        assert c.is_response == (r["kind"] == "response"), r["_id"]
        assert c.is_oneway == r["oneway"], r["_id"]


def test_the_whole_recording_through_the_push_decoder(codec) -> None:
    """Each file as one byte stream, fed in awkward chunk sizes, gives every frame in order."""
    for name in FILES:
        recs = [r for r in ALL if r["_id"].startswith(name + "#")]
        stream = b"".join(bytes.fromhex(r["frame_hex"]) for r in recs)
        for size in (1, 7, 100, 4096, len(stream)):
            dec = codec.FrameDecoder()
            out = []
            for i in range(0, len(stream), size):
                out += dec.feed(stream[i:i + size])
            assert [(c.code, c.opaque) for c in out] == [(r["header"]["code"], r["opaque"]) for r in recs]
            assert dec.buffered() == 0


def test_client_frames_keep_numbers_and_trailing_newline() -> None:
    """The quirks the decoders must live with are really in the vectors (else the tests above prove less)."""
    client = _records("client->server")
    assert all(_split(bytes.fromhex(r["frame_hex"]))[1].endswith(b"}\n") for r in client)
    assert any(isinstance(v, int) for r in client for v in (r["header"].get("extFields") or {}).values())


@pytest.mark.parametrize("r", _records("server->client"), ids=lambda r: r["_id"])
def test_reencoded_answers_are_headers_the_client_accepts(codec, r: dict) -> None:
    c = codec.decode_frame(bytes.fromhex(r["frame_hex"]))
    again = codec.encode_frame(c)
    st, header, body = _split(again)
    assert st == 0  # the C++ client misreads the binary form: always JSON towards it
    ours = json.loads(header)
    recorded = r["header"]
    # The fields we add: serializeTypeCurrentRPC always; extFields/remark only when the command has them.
    assert ours.pop("serializeTypeCurrentRPC") == "JSON"
    assert set(ours) == set(recorded) - {"serializeTypeCurrentRPC"}
    for key in ("code", "flag", "opaque", "language", "version", "remark"):
        assert ours.get(key) == recorded.get(key), key
    ext = ours.get("extFields")
    assert ext == _recorded_ext(recorded)
    assert ext is None or all(type(v) is str for v in ext.values())
    assert body == bytes.fromhex(r["frame_hex"])[8 + r["header_len"]:]
    # and our bytes decode back to the same command, in either twin
    assert codec.decode_frame(again) == c


@pytest.mark.parametrize("r", _records("client->server")[:40], ids=lambda r: r["_id"])
def test_reencoded_requests_keep_every_value(codec, r: dict) -> None:
    """Requests (what the fastmq client will send) survive a round trip with ints turned into strings."""
    c = codec.decode_frame(bytes.fromhex(r["frame_hex"]))
    ours = json.loads(_split(codec.encode_frame(c))[1])
    assert ours["extFields"] == _recorded_ext(r["header"])
    assert (ours["code"], ours["opaque"], ours["language"]) == (r["code"], r["opaque"], "CPP")
