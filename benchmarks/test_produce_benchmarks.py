"""The producer's hot path per call: compiled ``produce_c`` vs its pure twin, and the general path
(a RemotingCommand with its header dict, then the codec) the compiled writer replaces.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_produce_benchmarks.py --benchmark-only``.
A SEND_MESSAGE_V2 of 128 B with TAGS, KEYS and UNIQ_KEY, as a producer sends it.
"""
from __future__ import annotations

import importlib
import os

import pytest

from fastmq._ext.codec import encode_frame
from fastmq.client.producer import Producer
from fastmq.protocol.message import Message
from fastmq.protocol.message_queue import MessageQueue

TWINS = [pytest.param("py", id="py"), pytest.param("c", id="c", marks=pytest.mark.c_ext)]
PROPS = {"TAGS": "tagA", "KEYS": "order-1 order-2", "UNIQ_KEY": "7F0000010B5C18B4AAC2512F4B6F0001"}
BODY = b"x" * 128
PREFIX = "7F0000010B5CCAFEBABE"


def _twin(kind: str):
    if kind == "c" and os.environ.get("FASTMQ_NO_EXTENSIONS"):
        pytest.skip("compiled twins deselected")
    return importlib.import_module(f"fastmq._ext.produce_{kind}")


@pytest.mark.parametrize("kind", TWINS)
def test_send_frame(benchmark, kind: str) -> None:
    w = _twin(kind).SendRequestWriter("PG_BENCH", "TBW102", 4, 3, 409)
    frame = benchmark(w.frame, 42, "TopicTest", 3, 0, 1763900000000, 0, PROPS, BODY, False)
    assert len(frame) > 128


def test_send_frame_general_path(benchmark) -> None:
    """What the general path spends on the same frame: the header dict, the command, the codec."""
    p = Producer("PG_BENCH", namesrv_addr="127.0.0.1:1")
    msg, mq = Message("TopicTest", BODY, 0, dict(PROPS)), MessageQueue("TopicTest", "b", 3)
    frame = benchmark(lambda: encode_frame(p._request(msg, mq)))
    assert len(frame) > 128


@pytest.mark.parametrize("kind", TWINS)
def test_uniq_id(benchmark, kind: str) -> None:
    ids = _twin(kind).UniqIds(PREFIX)
    assert len(benchmark(ids.next)) == 32


@pytest.mark.parametrize("kind", TWINS)
def test_encode_batch_100(benchmark, kind: str) -> None:
    """A batch of 100 checked, numbered and encoded (fresh messages each round: ids are given once)."""
    produce = _twin(kind)
    ids = produce.UniqIds(PREFIX)

    def setup():
        return ([Message("TopicTest", BODY) for _ in range(100)], "TopicTest", 4 * 1024 * 1024, ids), {}
    body, joined = benchmark.pedantic(produce.encode_batch, setup=setup, rounds=2000)
    assert len(body) > 100 * 128 and joined.count(",") == 99
