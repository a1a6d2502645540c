"""The message store on its own: append and read, ASYNC_FLUSH and SYNC_FLUSH, consume-queue lookups.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_store_benchmarks.py --benchmark-only``.
One round = a batch of 500 messages (ops/s x 500 = msgs/s).
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Iterator

import pytest

from fastmq.protocol.message import MessageExt
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
