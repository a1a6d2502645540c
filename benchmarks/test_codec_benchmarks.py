"""RemotingCommand codec: compiled vs reference in the same run.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_codec_benchmarks.py --benchmark-only``
(figures and the exact command in benchmarks/RESULTS.md). Goal: >= 1,000,000 decodes/s of a
SEND_MESSAGE_V2 JSON header with the extension, and >= 10x the reference.
"""
from __future__ import annotations

import pytest

# Rounds of at least 50 us: one call of the compiled twin takes about 1 us, and timing every call
# on its own would add the clock's own cost (tens of ns) to each figure.
pytestmark = pytest.mark.benchmark(min_time=0.00005)

TWINS = [pytest.param("py", id="py"), pytest.param("c", id="c", marks=pytest.mark.c_ext)]
SERIALIZE = [pytest.param(0, id="json"), pytest.param(1, id="binary")]

#: What a Java 4.9.8 producer puts in a SEND_MESSAGE_V2 header (SendMessageRequestHeaderV2's letters):
#: a producerGroup, b topic, c defaultTopic, d defaultTopicQueueNums, e queueId, f sysFlag,
#: g bornTimestamp, h flag, i properties, j reconsumeTimes, k unitMode, m batch, n brokerName.
#: l (maxReconsumeTimes) is null, hence absent, except on consumer retries.
SEND_V2_EXT = {
    "a": "please_rename_unique_group_name", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "0",
    "g": "1700000000000", "h": "0",
    "i": "KEYS\x01OrderID188\x02UNIQ_KEY\x017F0000010B5C18B4AAC2512F4B6F0000\x02WAIT\x01true\x02TAGS\x01TagA\x02",
    "j": "0", "k": "false", "m": "false", "n": "broker-a"}
SEND_RESPONSE_EXT = {"msgId": "7F00000100002A9F0000000000012D45", "queueId": "3", "queueOffset": "1234",
                     "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}


@pytest.fixture
def mod(codec_twins: dict, kind: str):
    if kind not in codec_twins:
        pytest.skip("compiled twins deselected")
    return codec_twins[kind]


def _send_v2(mod, st: int):
    return mod.RemotingCommand(310, language=0, version=409, opaque=123456, ext_fields=dict(SEND_V2_EXT),
                               serialize_type=st, body=b"x" * 128)


def _send_response(mod, st: int):
    return mod.RemotingCommand(0, language=0, version=409, opaque=123456, flag=1, ext_fields=dict(SEND_RESPONSE_EXT),
                               serialize_type=st)


@pytest.mark.parametrize("st", SERIALIZE)
@pytest.mark.parametrize("kind", TWINS)
def test_decode_send_v2(benchmark, mod, kind: str, st: int) -> None:
    frame = mod.encode_frame(_send_v2(mod, st))
    cmd = benchmark(mod.decode_frame, frame)
    assert cmd.ext_fields["b"] == "TopicTest" and len(cmd.body) == 128


@pytest.mark.parametrize("st", SERIALIZE)
@pytest.mark.parametrize("kind", TWINS)
def test_encode_send_v2(benchmark, mod, kind: str, st: int) -> None:
    cmd = _send_v2(mod, st)
    assert len(benchmark(mod.encode_frame, cmd)) > 128


@pytest.mark.parametrize("st", SERIALIZE)
@pytest.mark.parametrize("kind", TWINS)
def test_decode_send_response(benchmark, mod, kind: str, st: int) -> None:
    frame = mod.encode_frame(_send_response(mod, st))
    assert benchmark(mod.decode_frame, frame).ext_fields["queueId"] == "3"


@pytest.mark.parametrize("st", SERIALIZE)
@pytest.mark.parametrize("kind", TWINS)
def test_encode_send_response(benchmark, mod, kind: str, st: int) -> None:
    cmd = _send_response(mod, st)
    assert benchmark(mod.encode_frame, cmd)


@pytest.mark.parametrize("kind", TWINS)
def test_feed_64k_of_send_v2(benchmark, mod, kind: str) -> None:
    """One socket read's worth of pipelined sends through the push decoder (ops = chunks)."""
    frame = mod.encode_frame(_send_v2(mod, 0))
    n = 65536 // len(frame)
    chunk = frame * n
    dec = mod.FrameDecoder()
    assert len(benchmark(dec.feed, chunk)) == n
    benchmark.extra_info["frames_per_chunk"] = n


@pytest.mark.parametrize("kind", TWINS)
def test_encode_frames_batch_of_responses(benchmark, mod, kind: str) -> None:
    """The responses of one read, written together (ops = batches of 100)."""
    cmds = [_send_response(mod, 0) for _ in range(100)]
    assert len(benchmark(mod.encode_frames, cmds)) > 100 * 100


#: A SEND_MESSAGE header as the C++ client writes it (jsoncpp: sorted keys, ints among the
#: strings, a trailing newline): the general scanner, not the Java-layout fast path.
CPP_SEND_HEADER = (b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN",'
                   b'"Signature":"uIPnmJ0QLuW5I21p8yS+nBdRaX8=","batch":"false","bornTimestamp":"1700000000123",'
                   b'"defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,"producerGroup":"GID_CPP",'
                   b'"properties":"KEYS\\u0001k1\\u0002TAGS\\u0001tagA\\u0002","queueId":3,"reconsumeTimes":0,'
                   b'"sysFlag":0,"topic":"TopicCppProducer","unitMode":"false"},"flag":0,"language":"CPP",'
                   b'"opaque":17,"remark":"","version":63}\n')


@pytest.mark.parametrize("kind", TWINS)
def test_decode_cpp_client_send(benchmark, mod, kind: str) -> None:
    body = b"x" * 128
    frame = (4 + len(CPP_SEND_HEADER) + len(body)).to_bytes(4, "big") + len(CPP_SEND_HEADER).to_bytes(4, "big")
    frame += CPP_SEND_HEADER + body
    assert benchmark(mod.decode_frame, frame).ext_fields["queueId"] == "3"
