"""The timer service's figures behind RocketMQ 5's timer metrics, on a real store in a temp dir
(no processes): per-topic counts taken in and gone out, the held set per topic, the deliver-time
bands, and the topics read back after a restart rebuilds the held set."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Iterator

import pytest

from fastmq.broker.timer import SNAPSHOT_BOUNDS_S, TimerMessageService
from fastmq.protocol.message import MessageConst, MessageExt
from fastmq.protocol.topic import TIMER_TOPIC
from fastmq.store.config import ASYNC_FLUSH, MessageStoreConfig
from fastmq.store.message_store import MessageStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1024 * 1024,
                             flushDiskType=ASYNC_FLUSH, timerPrecisionMs=100)
    s = MessageStore(cfg, "127.0.0.1:10911")
    s.load()
    s.start()
    try:
        yield s
    finally:
        s.shutdown()


def _held(topic: str, slot: int, i: int) -> MessageExt:
    """A timer message as the send path stores it (in the timer topic, due at ``slot``)."""
    return MessageExt(TIMER_TOPIC, b"x" * 2000, properties={
        MessageConst.TIMER_OUT_MS: str(slot), MessageConst.REAL_TOPIC: topic, MessageConst.REAL_QUEUE_ID: "0",
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{i:032X}"}, queue_id=0, born_host=("127.0.0.1", 5),
        born_timestamp=1_700_000_000_000)


def test_counts_per_topic_bands_and_restart(store: MessageStore, tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    try:
        now = int(time.time() * 1000)
        due, hour = now - 1000, now + 3_000_000
        # ~2 KB records in 1 MiB commit-log files: the batch spans several files
        msgs = ([_held("A", due, i) for i in range(300)] + [_held("B", hour, i) for i in range(300, 700)]
                + [_held("A", now + 30_000, i) for i in range(700, 710)])
        no_topic = _held("A", hour, 999)
        del no_topic.properties[MessageConst.REAL_TOPIC]
        for i in range(0, len(msgs), 100):
            assert loop.run_until_complete(store.put_messages(msgs[i:i + 100])).ok
        assert loop.run_until_complete(store.put_messages([no_topic])).ok
        assert store.commit_log.max_offset > 1024 * 1024  # (more than one file)
        svc = TimerMessageService(store, path=str(tmp_path / "timercheck.json"))
        while svc.ingest():
            pass
        names = svc.topic_names()
        a, b = names.index("A"), names.index("B")
        assert svc.held == 711 and svc.enqueued == 711
        assert svc.enqueued_by_topic[a] == 310 and svc.enqueued_by_topic[b] == 400
        assert svc.timing_by_topic().tolist()[a] == 310
        bands = dict(zip(SNAPSHOT_BOUNDS_S, svc.distribution(int(time.time() * 1000))))
        assert bands[60] == 10 and bands[3600] == 401 and sum(bands.values()) == 411  # due ones in no band
        assert svc.dequeue_behind_ms(now + 100) > 0
        for _ in range(20):  # bounded: 300 due, one batch
            if not loop.run_until_complete(svc.deliver_due()) == 0:
                break
        assert svc.delivered == 300 and svc.dequeued_by_topic[a] == 300
        assert dict(zip(names, svc.timing_by_topic().tolist())) == {"A": 10, "B": 400}
        assert svc.dequeue_behind_ms(int(time.time() * 1000)) == 0
        svc.persist()

        again = TimerMessageService(store, path=str(tmp_path / "timercheck.json"))
        again.load()
        assert again.held == 411 and not again.topic_names()  # topics not read yet at start
        again.ingest()  # the first look reads them
        t = dict(zip(again.topic_names(), again.timing_by_topic().tolist()))
        assert t == {"A": 10, "B": 400} and again.enqueued == 0
    finally:
        loop.close()


def test_a_failed_topic_read_never_stops_holding(store: MessageStore, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import fastmq.broker.timer as timer_mod

    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(timer_mod, "real_topic_ids", broken)
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(store.put_messages([_held("A", int(time.time() * 1000) + 60_000, 1)])).ok
        svc = TimerMessageService(store, path=str(tmp_path / "timercheck.json"))
        assert svc.ingest() == 1 and svc.held == 1 and svc.enqueued == 1
        assert svc.timing_by_topic().tolist() == []  # in the lags, in no per-topic figure
    finally:
        loop.close()
