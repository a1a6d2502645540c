"""The RemotingCommand codec: both twins, round trips, garbage, and that the twins agree byte for byte."""
from __future__ import annotations

import importlib
import json
import os
import struct
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fastmq.errors import FrameError, RemotingCommandError

VECTORS = Path(os.environ.get("FASTMQ_WIRE_VECTORS", Path(__file__).resolve().parents[2] / "shared" / "wire-vectors"
                              / "cpp-client"))
if not VECTORS.exists():
    VECTORS = Path("/work/shared/wire-vectors/cpp-client")

i32 = st.integers(-(2**31), 2**31 - 1)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # no lone surrogates: not encodable
ext = st.one_of(st.none(), st.dictionaries(text, text, max_size=8))
body = st.one_of(st.none(), st.binary(min_size=1, max_size=300))


def _cmd(mod, code=0, **kw):
    return mod.RemotingCommand(code, **kw)


def _fields(c) -> tuple:
    return (c.code, c.language, c.version, c.opaque, c.flag, c.remark, c.ext_fields, c.serialize_type, c.body)


def _frame(header: bytes, body: bytes = b"", st_: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (st_ << 24) | len(header)) + header + body


# ------------------------------------------------------------------ round trips, both twins

@settings(max_examples=150, deadline=None)
@given(code=i32, lang=st.integers(0, 13), version=i32, opaque=i32, flag=i32, remark=st.one_of(st.none(), text),
       ext=ext, body=body)
def test_json_round_trip(codec, code, lang, version, opaque, flag, remark, ext, body) -> None:
    c = _cmd(codec, code, language=lang, version=version, opaque=opaque, flag=flag, remark=remark, ext_fields=ext,
             body=body)
    d = codec.decode_frame(codec.encode_frame(c))
    assert _fields(d) == _fields(c)


@settings(max_examples=150, deadline=None)
@given(code=st.integers(-32768, 32767), lang=st.integers(0, 127), version=st.integers(-32768, 32767), opaque=i32,
       flag=i32, remark=st.one_of(st.none(), text), ext=ext, body=body)
def test_binary_round_trip(codec, code, lang, version, opaque, flag, remark, ext, body) -> None:
    c = _cmd(codec, code, language=lang, version=version, opaque=opaque, flag=flag, remark=remark, ext_fields=ext,
             serialize_type=1, body=body)
    d = codec.decode_frame(codec.encode_frame(c))
    # RocketMQSerializable writes an empty remark or map as length 0 and reads them back as null.
    assert _fields(d) == (code, lang, version, opaque, flag, remark or None, ext or None, 1, body)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(i32, body), min_size=1, max_size=6), st.lists(st.integers(1, 50), max_size=20))
def test_decoder_any_chunking(codec, cmds, cuts) -> None:
    frames = [_cmd(codec, c, opaque=i, body=b) for i, (c, b) in enumerate(cmds)]
    stream = codec.encode_frames(frames)
    dec = codec.FrameDecoder()
    out, pos = [], 0
    for cut in cuts:
        out += dec.feed(stream[pos:pos + cut])
        pos += cut
    out += dec.feed(stream[pos:])
    assert [_fields(x) for x in out] == [_fields(f) for f in frames]
    assert dec.buffered() == 0


def test_cpp_style_header(codec) -> None:
    # jsoncpp: sorted keys, numbers and strings mixed in extFields, trailing newline, \u0001 escapes.
    header = (b'{"code":10,"extFields":{"batch":"0","flag":0,"properties":"TAGS\\u0001tagA\\u0002","queueId":3,'
              b'"unitMode":"0","x":true,"y":null,"z":-0,"f":1.50},"flag":0,"language":"CPP","opaque":"7",'
              b'"remark":"","version":63}\n')
    c = codec.decode_frame(_frame(header, b"hello"))
    assert (c.code, c.language, c.opaque, c.version, c.remark, c.body) == (10, 1, 7, 63, "", b"hello")
    assert c.ext_fields == {"batch": "0", "flag": "0", "properties": "TAGS\x01tagA\x02", "queueId": "3",
                            "unitMode": "0", "x": "true", "z": "0", "f": "1.50"}


def test_response_written_like_java(codec) -> None:
    c = _cmd(codec, 0, language=0, version=409, opaque=5, flag=1, ext_fields={"msgId": "AB", "queueId": "1"})
    header = codec.encode_frame(c)[8:]
    assert header == (b'{"code":0,"extFields":{"msgId":"AB","queueId":"1"},"flag":1,"language":"JAVA",'
                      b'"opaque":5,"serializeTypeCurrentRPC":"JSON","version":409}')


def test_unknown_language_name_and_escaped_keys(codec) -> None:
    c = codec.decode_frame(_frame(b'{"co\\u0064e":12,"language":"COBOL","unknown":{"deep":[1,{"x":null}]}}'))
    assert (c.code, c.language, c.remark, c.ext_fields) == (12, 7, None, None)


# ------------------------------------------------------------------ bad input

BAD_FRAMES = [
    pytest.param(b"\x00\x00\x00", id="truncated-length"),
    pytest.param(struct.pack(">II", 2, 0), id="total-below-4"),
    pytest.param(struct.pack(">II", 20 * 1024 * 1024, 0) + b"x", id="over-max"),
    pytest.param(struct.pack(">II", 8, 9) + b"{}{}", id="header-past-frame"),
    pytest.param(_frame(b"{}", st_=7), id="unknown-serialize-type"),
    pytest.param(_frame(b'{"code":1'), id="invalid-json"),
    pytest.param(_frame(b'{"code":1}x'), id="trailing-garbage"),
    pytest.param(_frame(b'{"remark":"\xff"}'), id="invalid-utf8"),
    pytest.param(_frame(b'{"skipped":"\xc3"}'), id="invalid-utf8-in-skipped"),
    pytest.param(_frame(b'{"remark":"\\ud800"}'), id="lone-surrogate"),
    pytest.param(_frame(b'{"remark":"a\nb"}'), id="raw-control-char"),
    pytest.param(_frame(b'{"remark":"\\x"}'), id="bad-escape"),
    pytest.param(_frame(b'{"code":"12a"}'), id="code-not-a-number"),
    pytest.param(_frame(b'{"code":1.5}'), id="code-float"),
    pytest.param(_frame(b'{"code":true}'), id="code-bool"),
    pytest.param(_frame(b'{"opaque":4294967296}'), id="opaque-out-of-range"),
    pytest.param(_frame(b'{"code":012}'), id="leading-zero"),
    pytest.param(_frame(b'{"extFields":[]}'), id="ext-not-object"),
    pytest.param(_frame(b'{"extFields":{"a":{"b":1}}}'), id="ext-nested"),
    pytest.param(_frame(b'{"remark":5}'), id="remark-number"),
    pytest.param(_frame(b'{"language":1.5}'), id="language-float"),
    pytest.param(_frame(b'[1,2]'), id="not-an-object"),
    pytest.param(_frame(b'{"code":NaN}'), id="nan"),
    pytest.param(_frame(b'{"a":1,}'), id="trailing-comma"),
    pytest.param(_frame(b"\x00\x01\x00", st_=1), id="binary-short"),
    pytest.param(_frame(struct.pack(">hbhii", 1, 0, 1, 1, 0) + struct.pack(">i", 100) + b"\0\0\0\0", st_=1),
                 id="binary-remark-past-end"),
    pytest.param(_frame(struct.pack(">hbhii", 1, 0, 1, 1, 0) + b"\0\0\0\0" + struct.pack(">i", 9) + b"\0\1", st_=1),
                 id="binary-ext-length-mismatch"),
    pytest.param(_frame(struct.pack(">hbhii", 1, -1, 1, 1, 0) + b"\0\0\0\0\0\0\0\0", st_=1), id="binary-negative-lang"),
]


@pytest.mark.parametrize("frame", BAD_FRAMES)
def test_bad_frames_raise_frame_error(codec, frame: bytes) -> None:
    with pytest.raises(FrameError):
        codec.decode_frame(frame)
    dec = codec.FrameDecoder(max_frame_size=16 * 1024 * 1024)
    try:
        dec.feed(frame)
    except FrameError as exc:
        with pytest.raises(FrameError) as again:  # poisoned: the same error from now on
            dec.feed(b"\x00\x00\x00\x04\x00\x00\x00\x00")
        assert again.value is exc
    else:
        assert dec.buffered() == len(frame)  # a prefix of a frame: it waits for more


def test_configurable_max_frame(codec) -> None:
    f = codec.encode_frame(_cmd(codec, 1, body=b"x" * 2000))
    with pytest.raises(FrameError, match="exceeds the maximum of 1000"):
        codec.FrameDecoder(max_frame_size=1000).feed(f)
    assert len(codec.FrameDecoder(max_frame_size=4096).feed(f)) == 1


@pytest.mark.parametrize("kw, msg", [({"serialize_type": 5}, "serialize type"),
                                     ({"ext_fields": {"a": 1}}, "str -> str"),
                                     ({"remark": "\ud800"}, "UTF-8"),
                                     ({"language": 300}, "language"),
                                     ({"body": "text"}, "body must be bytes")])
def test_unencodable_commands(codec, kw, msg) -> None:
    with pytest.raises(RemotingCommandError, match=msg):
        codec.encode_frame(_cmd(codec, 1, **kw))


def test_binary_narrow_fields(codec) -> None:
    with pytest.raises(RemotingCommandError, match="code"):
        codec.encode_frame(_cmd(codec, 70000, serialize_type=1))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
@example(b"\x00\x00\x00\x05\x00\x00\x00\x01{")
def test_garbage_only_raises_frame_error(codec, data: bytes) -> None:
    dec = codec.FrameDecoder()
    try:
        dec.feed(data)
    except FrameError:
        pass


# ------------------------------------------------------------------ the twins agree

def _both():
    return importlib.import_module("fastmq._ext.codec_py"), importlib.import_module("fastmq._ext.codec_c")


def _decode_or_error(mod, frame: bytes):
    try:
        return ("ok", _fields(mod.decode_frame(frame)))
    except FrameError:
        return ("FrameError",)


json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), text,
                        st.floats(allow_nan=False, allow_infinity=False),
                        st.from_regex(r"\A ?[+-]?[0-9]{1,12} ?\Z"))
header_obj = st.fixed_dictionaries({}, optional={
    "code": json_scalar, "flag": json_scalar, "opaque": json_scalar, "version": json_scalar,
    "language": st.one_of(st.sampled_from(["JAVA", "CPP", "PYTHON", "GO", "X"]), st.integers(-1, 300), json_scalar),
    "remark": json_scalar, "serializeTypeCurrentRPC": st.sampled_from(["JSON", "ROCKETMQ"]),
    "extFields": st.one_of(st.none(), st.dictionaries(text, json_scalar, max_size=6), json_scalar),
    "other": st.recursive(json_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(text, c, max_size=3),
                          max_leaves=6)})


@pytest.mark.c_ext
@settings(max_examples=400, deadline=None)
@given(header_obj, st.booleans(), st.booleans(), body)
def test_twins_decode_alike(obj, ensure_ascii, newline, b) -> None:
    py, c = _both()
    header = json.dumps(obj, ensure_ascii=ensure_ascii).encode("utf-8") + (b"\n" if newline else b"")
    frame = _frame(header, b or b"")
    assert _decode_or_error(py, frame) == _decode_or_error(c, frame)


@pytest.mark.c_ext
@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=120))
def test_twins_agree_on_garbage_headers(h) -> None:
    py, c = _both()
    for st_ in (0, 1):
        frame = _frame(h, b"", st_)
        assert _decode_or_error(py, frame)[0] == _decode_or_error(c, frame)[0]


@pytest.mark.c_ext
@settings(max_examples=200, deadline=None)
@given(code=i32, lang=st.integers(0, 13), opaque=i32, flag=i32, remark=st.one_of(st.none(), text), ext=ext, b=body,
       st_=st.sampled_from([0, 1]))
def test_twins_encode_the_same_bytes(code, lang, opaque, flag, remark, ext, b, st_) -> None:
    py, c = _both()
    if st_ == 1:
        code = code % 32768
    kw = dict(language=lang, version=409, opaque=opaque, flag=flag, remark=remark, ext_fields=ext,
              serialize_type=st_, body=b)
    fp = py.encode_frame(py.RemotingCommand(code, **kw))
    assert fp == c.encode_frame(c.RemotingCommand(code, **kw))
    assert _fields(py.decode_frame(fp)) == _fields(c.decode_frame(fp))


# ------------------------------------------------------------------ recorded C++ client frames

def _records():
    for name in ("producer", "push-consumer", "pull-consumer"):
        path = VECTORS / f"{name}.jsonl"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r["kind"] != "note":
                yield r


def _stringified(ext: dict) -> dict:
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in ext.items() if v is not None}


@pytest.mark.skipif(not VECTORS.exists(), reason="wire vectors not present")
def test_every_recorded_frame_decodes(codec) -> None:
    n = 0
    for r in _records():
        frame = bytes.fromhex(r["frame_hex"])
        c = codec.decode_frame(frame)
        h = r["header"]
        assert (c.code, c.opaque, c.flag, c.version) == (h["code"], h["opaque"], h["flag"], h["version"])
        assert c.remark == h.get("remark")
        assert (c.ext_fields or {}) == _stringified(h.get("extFields") or {})
        assert len(c.body or b"") == r["body_len"]
        n += 1
    assert n > 150


@pytest.mark.skipif(not VECTORS.exists(), reason="wire vectors not present")
def test_reencoded_answers_are_what_the_client_accepted(codec) -> None:
    """Our encoding of every server->client frame carries the recorded header (string values, JSON)."""
    for r in _records():
        if r["direction"] != "server->client":
            continue
        c = codec.decode_frame(bytes.fromhex(r["frame_hex"]))
        again = codec.encode_frame(c)
        total, mark = struct.unpack(">II", again[:8])
        assert mark >> 24 == 0 and total == len(again) - 4
        ours = json.loads(again[8:8 + (mark & 0xFFFFFF)])
        recorded = r["header"]
        for key in ("code", "flag", "opaque", "language", "version"):
            assert ours[key] == recorded[key]
        assert ours.get("extFields", {}) == recorded.get("extFields", {})
        assert all(isinstance(v, str) for v in ours.get("extFields", {}).values())
        assert again[8 + (mark & 0xFFFFFF):] == (c.body or b"")


canon_value = st.one_of(text, st.integers(-(2**33), 2**33), st.sampled_from([0, -0.0, 1.5, True, False, None]))


@pytest.mark.c_ext
@settings(max_examples=400, deadline=None)
@given(code=st.integers(-(2**32), 2**32), ext=st.one_of(st.none(), st.lists(st.tuples(text, canon_value), max_size=6)),
       lang=st.sampled_from(["JAVA", "CPP", "PYTHON", "NODE_JS", "COBOL", ""]),
       remark=st.one_of(st.none(), text), ser=st.sampled_from(["JSON", "ROCKETMQ", None]), tail=st.sampled_from(["", "\n", " x"]),
       ascii_only=st.booleans())
def test_twins_agree_on_the_compact_layout(code, ext, lang, remark, ser, tail, ascii_only) -> None:
    """Headers in the exact layout Java and fastmq write (the compiled fast path), with hostile values."""
    py, c = _both()
    d = lambda v: json.dumps(v, ensure_ascii=ascii_only, separators=(",", ":"))  # noqa: E731
    parts = ['{"code":' + d(code)]
    if ext is not None:
        parts.append(',"extFields":{' + ",".join(d(k) + ":" + d(v) for k, v in ext) + "}")
    parts.append(',"flag":0,"language":' + d(lang) + ',"opaque":7')
    if remark is not None:
        parts.append(',"remark":' + d(remark))
    if ser is not None:
        parts.append(',"serializeTypeCurrentRPC":' + d(ser))
    parts.append(',"version":409}' + tail)
    frame = _frame("".join(parts).encode("utf-8"))
    assert _decode_or_error(py, frame) == _decode_or_error(c, frame)
