"""RemotingCommand codec: compiled vs reference in the same run.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_codec_benchmarks.py --benchmark-only``
(figures and the exact command in benchmarks/RESULTS.md). Goal: >= 1,000,000 decodes/s of a
SEND_MESSAGE_V2 JSON header with the extension, and >= 10x the reference.
"""
from __future__ import annotations

import importlib
import os

import pytest

TWINS = [pytest.param("py", id="py"), pytest.param("c", id="c", marks=pytest.mark.c_ext)]
SERIALIZE = [pytest.param(0, id="json"), pytest.param(1, id="binary")]

#: What a Java 4.9 producer puts in a SEND_MESSAGE_V2 header (SendMessageRequestHeaderV2's letters).
SEND_V2_EXT = {
    "a": "please_rename_unique_group_name", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "0",
    "g": "1700000000000", "h": "0",
    "i": "KEYS\x01OrderID188\x02UNIQ_KEY\x017F0000010B5C18B4AAC2512F4B6F0000\x02WAIT\x01true\x02TAGS\x01TagA\x02",
    "j": "0", "k": "false", "m": "false"}
SEND_RESPONSE_EXT = {"msgId": "7F00000100002A9F0000000000012D45", "queueId": "3", "queueOffset": "1234",
                     "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}


def _codec(kind: str):
    if kind == "c" and os.environ.get("FASTMQ_NO_EXTENSIONS"):
        pytest.skip("compiled twins deselected")
    return importlib.import_module(f"fastmq._ext.codec_{kind}")


def _send_v2(mod, st: int):
    return mod.RemotingCommand(310, language=0, version=409, opaque=123456, ext_fields=dict(SEND_V2_EXT),
                               serialize_type=st, body=b"x" * 128)


def _send_response(mod, st: int):
    return mod.RemotingCommand(0, language=0, version=409, opaque=123456, flag=1, ext_fields=dict(SEND_RESPONSE_EXT),
                               serialize_type=st)


@pytest.mark.parametrize("st", SERIALIZE)
@pytest.mark.parametrize("kind", TWINS)
def test_decode_send_v2(benchmark, kind: str, st: int) -> None:
    mod = _codec(kind)
    frame = mod.encode_frame(_send_v2(mod, st))
    cmd = benchmark(mod.decode_frame, frame)
    assert cmd.ext_fields["b"] == "TopicTest" and len(cmd.body) == 128


@pytest.mark.parametrize("st", SERIALIZE)
@pytest.mark.parametrize("kind", TWINS)
def test_encode_send_v2(benchmark, kind: str, st: int) -> None:
    mod = _codec(kind)
    cmd = _send_v2(mod, st)
    assert len(benchmark(mod.encode_frame, cmd)) > 128


@pytest.mark.parametrize("st", SERIALIZE)
@pytest.mark.parametrize("kind", TWINS)
def test_decode_send_response(benchmark, kind: str, st: int) -> None:
    mod = _codec(kind)
    frame = mod.encode_frame(_send_response(mod, st))
    assert benchmark(mod.decode_frame, frame).ext_fields["queueId"] == "3"


@pytest.mark.parametrize("st", SERIALIZE)
@pytest.mark.parametrize("kind", TWINS)
def test_encode_send_response(benchmark, kind: str, st: int) -> None:
    mod = _codec(kind)
    cmd = _send_response(mod, st)
    assert benchmark(mod.encode_frame, cmd)


@pytest.mark.parametrize("kind", TWINS)
def test_feed_64k_of_send_v2(benchmark, kind: str) -> None:
    """One socket read's worth of pipelined sends through the push decoder (ops = chunks)."""
    mod = _codec(kind)
    frame = mod.encode_frame(_send_v2(mod, 0))
    n = 65536 // len(frame)
    chunk = frame * n
    dec = mod.FrameDecoder()
    assert len(benchmark(dec.feed, chunk)) == n
    benchmark.extra_info["frames_per_chunk"] = n


@pytest.mark.parametrize("kind", TWINS)
def test_encode_frames_batch_of_responses(benchmark, kind: str) -> None:
    """The responses of one read, written together (ops = batches of 100)."""
    mod = _codec(kind)
    cmds = [_send_response(mod, 0) for _ in range(100)]
    assert len(benchmark(mod.encode_frames, cmds)) > 100 * 100
