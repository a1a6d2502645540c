"""The message store on its own: append and read, ASYNC_FLUSH and SYNC_FLUSH, consume-queue lookups.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_store_benchmarks.py --benchmark-only``.
One round = a batch of 500 messages (ops/s x 500 = msgs/s).
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Iterator

import pytest

from fastmq._ext.send import encode_sends
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import MessageExt, pack_host
from fastmq.store.config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig
from fastmq.store.message_store import MessageStore

BATCH = 500


@pytest.fixture(params=[ASYNC_FLUSH, SYNC_FLUSH])
def store(request, tmp_path):
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=256 * 1024 * 1024,
                             mappedFileSizeConsumeQueue=300_000 * 20, flushDiskType=request.param)
    s = MessageStore(cfg, "127.0.0.1:10911")
    s.load()
    s.start()
    try:
        yield s
    finally:
        s.shutdown()


def _msgs(size: int, n: int = BATCH) -> list[MessageExt]:
    body = b"x" * size
    return [MessageExt("BenchTopic", body, properties={"TAGS": "tagA", "UNIQ_KEY": f"{i:032X}"}, queue_id=i % 4,
                       born_host=("127.0.0.1", 50000), born_timestamp=1_700_000_000_000) for i in range(n)]


@pytest.mark.parametrize("size", [128, 1024])
def test_append_batch(benchmark, store, size: int) -> None:
    msgs = _msgs(size)
    loop = asyncio.new_event_loop()
    try:
        result = benchmark(lambda: loop.run_until_complete(store.put_messages(msgs)))
    finally:
        loop.close()
    assert result.ok
    benchmark.extra_info["msgs_per_round"] = BATCH
    benchmark.extra_info["bytes_per_msg"] = size


@pytest.mark.parametrize("size", [128, 1024])
def test_append_send_batch(benchmark, store, size: int) -> None:
    """The broker's hot path into the store: encode_sends of 500 SEND_MESSAGE_V2 requests (as one
    socket read delivers them) and one put_batch."""
    body = b"x" * size
    reqs = [create_request(RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeader(
        "PG", "BenchTopic", "TBW102", 4, i % 4, 0, 1_700_000_000_000, 0, f"TAGS\x01tagA\x02UNIQ_KEY\x01{i:032X}\x02",
        0).to_v2_fields(), body) for i in range(BATCH)]
    born, host = pack_host("127.0.0.1", 50000), pack_host("127.0.0.1", 10911)
    topics = {"BenchTopic": (4, 4, 0)}
    loop = asyncio.new_event_loop()

    def once():
        b = encode_sends(reqs, topics, born, host, b"CLUSTER\x01DefaultCluster\x02", 4 << 20)
        return loop.run_until_complete(store.put_batch(b))

    try:
        result = benchmark(once)
    finally:
        loop.close()
    assert result.ok and result.msg_num == BATCH
    benchmark.extra_info["msgs_per_round"] = BATCH
    benchmark.extra_info["bytes_per_msg"] = size


@contextlib.contextmanager
def _filled_store(tmp_path, batches: int, size: int) -> Iterator[MessageStore]:
    """An ASYNC_FLUSH store holding ``batches`` x 500 messages of ``size`` bytes."""
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=64 * 1024 * 1024)
    s = MessageStore(cfg, "127.0.0.1:10911")
    s.load()
    s.start()
    loop = asyncio.new_event_loop()
    try:
        for _ in range(batches):
            loop.run_until_complete(s.put_messages(_msgs(size)))
        yield s
    finally:
        loop.close()
        s.shutdown()


@pytest.mark.parametrize("size", [128, 1024])
def test_read_32(benchmark, tmp_path, size: int) -> None:
    with _filled_store(tmp_path, 8, size) as s:
        offsets = iter(range(10**9))

        def read() -> int:
            off = (next(offsets) * 32) % 900
            return s.get_message("G", "BenchTopic", 0, off, 32, None).msg_count
        assert benchmark(read) == 32
    benchmark.extra_info["msgs_per_round"] = 32


def test_consume_queue_lookup_by_time(benchmark, tmp_path) -> None:
    with _filled_store(tmp_path, 10, 128) as s:
        mid = s.message_store_time_stamp("BenchTopic", 0, 600)
        assert benchmark(s.offset_in_queue_by_time, "BenchTopic", 0, mid) >= 0
