"""The store's one-record put (fastmq._ext.lone_put): each twin leaves the store byte for byte as
the general put path does, answers the same, counts the same statistics, and hands every unusual
case to the general path."""
from __future__ import annotations

import re
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fastmq.store.disk_space import DISK_CHECK_INTERVAL
from fastmq.store.message_store import PUT_OK, MessageStore, PutResult, PutStatus
from tests.support import HOST, open_store, queue_bodies
from tests.support import send_batch as _send_batch
from tests.support import store_config as cfg

_NOW_MS = 1_700_000_000_500  # one store timestamp for every put of both stores: their bytes compare


def _store_bytes(root: Path) -> dict[str, bytes]:
    """Every commit-log, consume-queue and index file's bytes, by path (index files by order:
    their names are creation times)."""
    out = {str(p.relative_to(root)): p.read_bytes()
           for sub in ("commitlog", "consumequeue") for p in sorted((root / sub).rglob("*")) if p.is_file()}
    for i, p in enumerate(sorted((root / "index").iterdir())):
        out[f"index#{i}"] = p.read_bytes()
    return out


Send = tuple[int, str, str]


def _run(root: Path, lone_put: ModuleType, monkeypatch: pytest.MonkeyPatch, sends: list[Send] | list[list[Send]],
         lone: bool, **kw: Any) -> tuple[Any, ...]:
    """Put ``sends`` one record a put (or one list of records a put): through ``lone_put``'s
    LonePut (``lone``), or only the general path (which ends through that LonePut's ``stored``
    and ``took``)."""
    monkeypatch.setattr(time, "time", lambda: _NOW_MS / 1000)  # (the general path's and the batches' clock)
    arrivals: list = []
    s = open_store(root, arrivals, **kw)
    general = s._put_batch
    calls: list = []
    s._lone = lone_put.LonePut(s, PutResult, PUT_OK, DISK_CHECK_INTERVAL, clock=lambda: _NOW_MS)
    if not lone:
        s.put_batch_now = general  # type: ignore[method-assign]
    else:
        s._put_batch = lambda b: calls.append(b) or general(b)  # type: ignore[method-assign]
    try:
        results = []
        for put in sends:
            r = s.put_batch_now(_send_batch(put if isinstance(put, list) else [put]))
            assert type(r) is PutResult and r.status is PutStatus.PUT_OK
            results.append((r.status, r.msg_id, r.queue_offset, r.wrote_offset, r.wrote_bytes, r.msg_num, r.remark,
                            r.store_timestamp))
        assert s.check_consistency() == []
        queues = [queue_bodies(s, q) for q in range(3)]
        stats = {k: s.stats[k] for k in ("putMessageTimesTotal", "putMessageSizeTotal", "putMessageFailedTimes",
                                         "putMessageEntireTimeMax")}
        state = (results, queues, arrivals, stats, s.commit_log_max_offset, s.queues.last_dispatched_store_timestamp,
                 s.commit_log.last_store_timestamp)
    finally:
        s.shutdown()
    monkeypatch.undo()
    return state, _store_bytes(root), len(calls)


@pytest.mark.parametrize("index", [{}, {"maxIndexNum": 20, "maxHashSlotNum": 8}], ids=["one-index-file", "index-rolls"])
def test_each_twin_stores_the_general_paths_bytes(tmp_path: Path, lone_put: ModuleType,
                                                  monkeypatch: pytest.MonkeyPatch, index: dict) -> None:
    """90 lone puts over three queues, across commit-log, consume-queue (and index) file rolls:
    the twin's store equals the general path's byte for byte (records, queue entries, index
    entries and headers), with the same answers, arrivals and statistics; only the first put of
    each new queue and the rolls went the general way."""
    sends = [(i % 3, "AB"[i % 2], f"k{i}") for i in range(90)]
    kw = dict(mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=20 * 16, **index)
    want, want_bytes, _ = _run(tmp_path / "general", lone_put, monkeypatch, sends, False, **kw)
    got, got_bytes, general_calls = _run(tmp_path / "lone", lone_put, monkeypatch, sends, True, **kw)
    assert got == want
    assert got_bytes.keys() == want_bytes.keys() and len(want_bytes) > 6
    for name in want_bytes:
        assert got_bytes[name] == want_bytes[name], name
    assert 3 <= general_calls < 30


@pytest.mark.parametrize("index", [{}, {"maxIndexNum": 20, "maxHashSlotNum": 8}], ids=["one-index-file", "index-rolls"])
def test_puts_to_queues_of_their_own_store_the_general_paths_bytes(tmp_path: Path, lone_put: ModuleType,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   index: dict) -> None:
    """Puts of two or three records, each to a queue of its own (a commit's real and op
    messages), across file rolls: the twin's store equals the general path's byte for byte;
    puts of two records to one queue, first puts of a queue and rolls go the general way."""
    sends = [[(i % 3, "AB"[i % 2], f"k{i}"), ((i + 1) % 3, "C", f"o{i}")] + ([(2, "D", f"t{i}")] if i % 5 == 1 else [])
             if i % 7 else [(0, "A", f"a{i}"), (0, "B", f"b{i}")] for i in range(60)]
    sends = [put for put in sends if len({q for q, _, _ in put}) == len(put) or put[0][0] == put[1][0]]
    kw = dict(mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=20 * 16, **index)
    want, want_bytes, _ = _run(tmp_path / "general", lone_put, monkeypatch, sends, False, **kw)
    got, got_bytes, general_calls = _run(tmp_path / "lone", lone_put, monkeypatch, sends, True, **kw)
    assert got == want
    assert got_bytes.keys() == want_bytes.keys() and len(want_bytes) > 6
    for name in want_bytes:
        assert got_bytes[name] == want_bytes[name], name
    assert 9 <= general_calls < 30  # (one queue twice: 9 of them; first puts and rolls)


def test_unusual_cases_go_the_general_way(tmp_path: Path, lone_put: ModuleType) -> None:
    """The twin answers None, having written nothing, for what it does not handle: a batch of
    two records, a queue never written, a refusing store, a consume-queue file without its room,
    a commit-log file without room for the record."""
    s = open_store(tmp_path, mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=20 * 16)
    lone = lone_put.LonePut(s, PutResult, PUT_OK, DISK_CHECK_INTERVAL)
    try:
        assert s.put_batch_now(_send_batch([(0, "A", "k0")])).status is PutStatus.PUT_OK  # (checks the disk)
        end = s.commit_log_max_offset
        assert lone.put(_send_batch([(0, "A", "k1"), (0, "A", "k2")])) is None
        assert lone.put(_send_batch([(1, "A", "k1")])) is None  # queue 1 has no file yet
        s._refusing = "stopping"
        assert lone.put(_send_batch([(0, "A", "k1")])) is None
        s._refusing = None
        cq_file = s.queues.queues[("T", 0)].mfq.files[-1]
        reserved, cq_file.reserved_to = cq_file.reserved_to, cq_file.wrote_position + 19
        assert lone.put(_send_batch([(0, "A", "k1")])) is None
        cq_file.reserved_to = reserved
        mf = s.commit_log.mfq.files[-1]
        reserved, mf.reserved_to = mf.reserved_to, mf.wrote_position + 8
        assert lone.put(_send_batch([(0, "A", "k1")])) is None
        mf.reserved_to = reserved
        assert s.commit_log_max_offset == end and queue_bodies(s, 0) == [b"k0"]
        r = lone.put(_send_batch([(0, "A", "k1")]))  # and the usual case is taken
        assert type(r) is PutResult and r.status is PutStatus.PUT_OK and r.queue_offset == 1
        assert queue_bodies(s, 0) == [b"k0", b"k1"] and s.stats["putMessageTimesTotal"] == 2
    finally:
        s.shutdown()


def test_a_failing_arrival_listener_does_not_fail_the_put(tmp_path: Path, lone_put: ModuleType,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """A listener that raises is logged; the record stays stored and acknowledged."""
    def boom(*_: Any) -> None:
        raise RuntimeError("listener bug")

    s = MessageStore(cfg(tmp_path), HOST, on_arrival=boom)
    s.load()
    s.start()
    try:
        s._lone = lone_put.LonePut(s, PutResult, PUT_OK, DISK_CHECK_INTERVAL)
        assert s.put_batch_now(_send_batch([(0, "A", "k0")])).status is PutStatus.PUT_OK
        r = s._lone.put(_send_batch([(0, "A", "k1")]))
        assert type(r) is PutResult and r.status is PutStatus.PUT_OK
        assert "on_arrival callback failed for T/0" in caplog.text
        assert queue_bodies(s, 0) == [b"k0", b"k1"]
    finally:
        s.shutdown()


async def test_each_twin_owes_the_sync_flush_wait(tmp_path: Path, lone_put: ModuleType) -> None:
    """Under SYNC_FLUSH a lone put that asked to wait is answered by a coroutine that returns once
    the flush covers the record; one that said WAIT=false is answered at once."""
    import asyncio
    s = open_store(tmp_path, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20, syncFlushInlineMaxMicros=0)
    try:
        s._lone = lone_put.LonePut(s, PutResult, PUT_OK, DISK_CHECK_INTERVAL)
        first = s.put_batch_now(_send_batch([(0, "A", "k0")]))  # (a new queue: the general path)
        if asyncio.iscoroutine(first):
            first = await asyncio.wait_for(first, 10)
        assert first.status is PutStatus.PUT_OK
        owed = s._lone.put(_send_batch([(0, "A", "k1")]))
        assert asyncio.iscoroutine(owed)
        r = await asyncio.wait_for(owed, 10)
        assert r.status is PutStatus.PUT_OK and r.queue_offset == 1
        assert s.commit_log.flushed_offset >= r.wrote_offset + r.wrote_bytes
        nowait = s._lone.put(_send_batch([(0, "A", "k2")], wait=False))
        assert type(nowait) is PutResult and nowait.status is PutStatus.PUT_OK and nowait.queue_offset == 2
        assert queue_bodies(s, 0) == [b"k0", b"k1", b"k2"] and s.stats["putMessageTimesTotal"] == 3
    finally:
        s.shutdown()


def test_the_general_path_ends_through_the_lone_puts_end(tmp_path: Path, lone_put: ModuleType,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A put of several records (the general path) is ended by the twin's ``stored`` and ``took``:
    its statistics, its PutResult and the put-latency maximum, read from the twin's clock; the
    maximum only ever rises."""
    monkeypatch.setattr(time, "time", lambda: _NOW_MS / 1000)
    s = open_store(tmp_path)
    try:
        clock = [_NOW_MS + 7]
        s._lone = lone_put.LonePut(s, PutResult, PUT_OK, DISK_CHECK_INTERVAL, clock=lambda: clock[0])
        batch = _send_batch([(0, "A", "k0"), (0, "B", "k1")])
        r = s.put_batch_now(batch)
        assert type(r) is PutResult
        assert (r.status, r.remark, r.queue_offset, r.wrote_offset, r.wrote_bytes, r.msg_num, r.store_timestamp) == (
            PutStatus.PUT_OK, None, 0, 0, batch.total_size, 2, _NOW_MS)
        assert (s.stats["putMessageTimesTotal"], s.stats["putMessageSizeTotal"]) == (2, batch.total_size)
        assert s.stats["putMessageEntireTimeMax"] == 7
        assert s.queues.last_dispatched_store_timestamp == _NOW_MS
        assert s.query_message("T", "k1", 10, 0, _NOW_MS + 1)  # (the index entries: the index service's)
        clock[0] = _NOW_MS + 3
        assert s._lone.took(r, _NOW_MS) is r and s.stats["putMessageEntireTimeMax"] == 7
        clock[0] = _NOW_MS + 11
        assert s._lone.took(r, _NOW_MS) is r and s.stats["putMessageEntireTimeMax"] == 11
    finally:
        s.shutdown()
        monkeypatch.undo()


def test_every_store_flag_the_compiled_twin_reads_is_a_plain_instance_attribute(tmp_path: Path) -> None:
    """The compiled twin reads the store's flags from its instance dict (``sd["..."]``): each must
    be set in the running store's ``__dict__`` and shadowed by nothing on its class (a property
    there would be stepped around, or the key missing), else this names the key."""
    import fastmq._ext
    src = (Path(fastmq._ext.__file__).parent / "lone_put_c.pyx").read_text()
    keys = sorted(set(re.findall(r'\bsd\["(\w+)"\]', src)))
    assert len(keys) >= 10, keys  # (the pattern still finds the reads)
    s = open_store(tmp_path)
    try:
        for key in keys:
            assert key in vars(s), f"MessageStore.{key} is not in the running store's instance dict"
            owners = [c.__name__ for c in type(s).__mro__ if key in vars(c)]
            assert not owners, f"MessageStore.{key} is also defined on {owners}: the compiled LonePut reads around it"
    finally:
        s.shutdown()


def test_the_pure_twins_layout_constants_are_the_stores() -> None:
    """The twins sit below the store and restate two of its layout facts (the compiled twin as a C
    enum, whose equal behaviour the byte-for-byte test above checks): the pure twin's must be the
    store's own."""
    from fastmq._ext import lone_put_py
    from fastmq.store.config import CQ_STORE_UNIT_SIZE
    from fastmq.store.index import COUNT
    assert (lone_put_py._CQ_UNIT, lone_put_py._INDEX_COUNT) == (CQ_STORE_UNIT_SIZE, COUNT)
