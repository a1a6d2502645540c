"""Timer messages: memory of a million held, a burst due in one second, CPU per delivery against
the delay-level path.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_timer_benchmarks.py --benchmark-only``.

- ``test_hold_million``: 10^6 timer-topic consume-queue entries with slots spread over a day are
  read into the timer service's index (what a broker does at start or as they arrive). One round
  is the whole ingestion; ``extra_info`` keeps the index's bytes (``index_bytes``,
  ``bytes_per_held``) and the peak of Python-traced allocations while it was built
  (``peak_bytes``, numpy's arrays included).
- ``test_restart_rebuild_million``: the same held set rebuilt from the consume queue and a
  checkpoint, as after a crash.
- ``test_burst_due_together``: ``BURST`` stored timer messages all due in the same second are
  delivered to their topic (read, converted, re-put in batches); one round delivers them all.
- ``test_deliver_cpu[timer|delay-level]``: ``DELIVER`` due messages delivered by the timer
  service and by the delay-level service (``messageDelayLevel`` of 1 ms), per message; both in
  this process on the same store, so the per-message figures compare the two paths' work.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
import tracemalloc
from typing import Iterator

import numpy as np
import pytest

from fastmq.broker.schedule import ScheduleMessageService
from fastmq.broker.timer import TimerMessageService
from fastmq.protocol.message import MessageConst, MessageExt
from fastmq.protocol.topic import TIMER_TOPIC
from fastmq.store.config import ASYNC_FLUSH, MessageStoreConfig
from fastmq.store.message_store import MessageStore

HELD = 1_000_000
BURST = 100_000
DELIVER = 10_000
#: A smoke run (timing disabled, as scripts/test.sh runs benchmarks) takes a tenth of each count:
#: every path runs and its checks hold, nothing is measured.
SMOKE_DIVISOR = 10
TOPIC = "BenchTimer"


def _count(benchmark, full: int) -> int:
    return full // SMOKE_DIVISOR if benchmark.disabled else full


@contextlib.contextmanager
def _store(root, **conf) -> Iterator[MessageStore]:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=256 * 1024 * 1024,
                             mappedFileSizeConsumeQueue=300_000 * 20, flushDiskType=ASYNC_FLUSH, **conf)
    s = MessageStore(cfg, "127.0.0.1:10911")
    s.load()
    s.start()
    try:
        yield s
    finally:
        s.shutdown()


def _fill_queue(s: MessageStore, n: int) -> None:
    """``n`` entries in the timer consume queue, slots spread over the next day (index only:
    ingestion reads nothing else)."""
    cq = s.queues.find_or_create(TIMER_TOPIC, 0)
    rng = np.random.default_rng(7)
    now = int(time.time() * 1000)
    step = 200_000
    for start in range(0, n, step):
        k = min(step, n - start)
        offs = (np.arange(start, start + k, dtype=np.int64) * 256)
        sizes = np.full(k, 256, np.int32)
        slots = now + 1000 + rng.integers(0, 86_400, k, dtype=np.int64) * 1000
        cq.put_run(start, offs, sizes, slots)


def test_hold_million(benchmark, tmp_path) -> None:
    held = _count(benchmark, HELD)
    with _store(tmp_path) as s:
        _fill_queue(s, held)
        peak = [0]

        def setup():
            return (TimerMessageService(s, path=str(tmp_path / "timercheck.json")),), {}

        def ingest_all(svc: TimerMessageService) -> int:
            tracemalloc.start()
            try:
                while svc.ingest():
                    pass
                peak[0] = max(peak[0], tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
            assert svc.held == held
            benchmark.extra_info["index_bytes"] = svc.index_bytes
            return svc.held

        assert benchmark.pedantic(ingest_all, setup=setup, rounds=3, iterations=1) == held
    benchmark.extra_info["msgs_per_round"] = held
    benchmark.extra_info["bytes_per_held"] = benchmark.extra_info["index_bytes"] / held
    benchmark.extra_info["peak_bytes"] = peak[0]


def test_restart_rebuild_million(benchmark, tmp_path) -> None:
    held = _count(benchmark, HELD)
    with _store(tmp_path) as s:
        _fill_queue(s, held)
        first = TimerMessageService(s, path=str(tmp_path / "timercheck.json"))
        while first.ingest():
            pass
        first.persist()

        def rebuild() -> int:
            svc = TimerMessageService(s, path=str(tmp_path / "timercheck.json"))
            svc.load()
            return svc.held

        assert benchmark.pedantic(rebuild, rounds=3, iterations=1) == held
    benchmark.extra_info["msgs_per_round"] = held


def _held_messages(n: int, slot: int, start: int = 0) -> list[MessageExt]:
    """Timer messages as the send path stores them (already in the timer topic, due at ``slot``)."""
    return [MessageExt(TIMER_TOPIC, b"x" * 64, properties={
        MessageConst.TIMER_DELIVER_MS: str(slot + 1), MessageConst.TIMER_OUT_MS: str(slot),
        MessageConst.REAL_TOPIC: TOPIC, MessageConst.REAL_QUEUE_ID: str(i % 4), "TAGS": "t",
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{i:032X}"}, queue_id=0,
        born_host=("127.0.0.1", 50000), born_timestamp=1_700_000_000_000) for i in range(start, start + n)]


def _put(loop: asyncio.AbstractEventLoop, s: MessageStore, msgs: list[MessageExt]) -> None:
    for i in range(0, len(msgs), 1000):
        assert loop.run_until_complete(s.put_messages(msgs[i:i + 1000])).ok


def _deliver_all(loop: asyncio.AbstractEventLoop, svc: TimerMessageService, n: int) -> int:
    before = svc.delivered
    for _ in range(10 * n):  # bounded
        svc.ingest()
        loop.run_until_complete(svc.deliver_due())
        if svc.delivered - before >= n and not svc.held:
            break
    return svc.delivered - before


def test_burst_due_together(benchmark, tmp_path) -> None:
    burst = _count(benchmark, BURST)
    loop = asyncio.new_event_loop()
    try:
        with _store(tmp_path) as s:
            slot = int(time.time() * 1000) // 1000 * 1000 - 2000  # one second's slot, already due
            made = [0]

            def setup():
                _put(loop, s, _held_messages(burst, slot, made[0]))
                made[0] += burst
                svc = TimerMessageService(s, path=str(tmp_path / "timercheck.json"))
                svc._read = s.queues.get(TIMER_TOPIC, 0).max_offset - burst  # this round's burst only
                return (svc,), {}

            got = benchmark.pedantic(lambda svc: _deliver_all(loop, svc, burst), setup=setup, rounds=3,
                                     iterations=1)
            assert got == burst
    finally:
        loop.close()
    benchmark.extra_info["msgs_per_round"] = burst


@pytest.mark.parametrize("path", ["timer", "delay-level"])
def test_deliver_cpu(benchmark, tmp_path, path: str) -> None:
    deliver = _count(benchmark, DELIVER)
    loop = asyncio.new_event_loop()
    try:
        with _store(tmp_path, messageDelayLevel="1ms") as s:
            made = [0]

            def setup_timer():
                slot = int(time.time() * 1000) // 1000 * 1000 - 2000
                _put(loop, s, _held_messages(deliver, slot, made[0]))
                made[0] += deliver
                svc = TimerMessageService(s, path=str(tmp_path / "timercheck.json"))
                svc._read = s.queues.get(TIMER_TOPIC, 0).max_offset - deliver
                return (svc,), {}

            sched = ScheduleMessageService(s, path=str(tmp_path / "delayOffset.json"))
            sched.load()

            def setup_delay():
                msgs = [MessageExt(TOPIC, b"x" * 64, properties={
                    "DELAY": "1", "TAGS": "t", MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{i:032X}"},
                    queue_id=i % 4, born_host=("127.0.0.1", 50000), born_timestamp=1_700_000_000_000)
                    for i in range(made[0], made[0] + deliver)]
                _put(loop, s, msgs)
                made[0] += deliver
                time.sleep(0.01)  # the 1 ms level is due
                return (), {}

            def deliver_delay() -> int:
                before = sched.delivered
                for _ in range(10 * deliver):
                    loop.run_until_complete(sched.deliver_due(1))
                    if sched.delivered - before >= deliver:
                        break
                return sched.delivered - before

            if path == "timer":
                got = benchmark.pedantic(lambda svc: _deliver_all(loop, svc, deliver), setup=setup_timer,
                                         rounds=5, iterations=1)
            else:
                got = benchmark.pedantic(deliver_delay, setup=setup_delay, rounds=5, iterations=1)
            assert got == deliver
    finally:
        loop.close()
    benchmark.extra_info["msgs_per_round"] = deliver
