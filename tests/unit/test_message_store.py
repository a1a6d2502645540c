"""The MessageStore facade: put/get, statuses, tag filtering, sync flush, restarts, bad input."""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from fastmq.protocol.message import (
    decode_offset_msg_id, decode_records, java_string_hash, tags_code,
)
from fastmq.store.consume_queue import ConsumeQueue
from fastmq.store.index import COUNT, SLOT_COUNT
from fastmq.store.message_store import (
    SCHEDULE_TOPIC, GetStatus, MessageStore, PutResult, PutStatus, parse_delay_levels,
)
from tests.support import HOST, bodies, msg, open_store, queue_bodies
from tests.support import rss_kib_by_file as _rss_kib_by_file
from tests.support import send_batch as _send_batch
from tests.support import store_config as cfg


@pytest.fixture
def store(tmp_path: Path):
    s = open_store(tmp_path)
    try:
        yield s
    finally:
        s.shutdown()


async def test_put_get_single_and_batch(tmp_path: Path) -> None:
    arrivals: list = []
    s = open_store(tmp_path, arrivals)
    try:
        r = await s.put_messages([msg(body=b"one")])
        assert r.status is PutStatus.PUT_OK and r.msg_num == 1 and r.queue_offset == 0
        ip, port, off = decode_offset_msg_id(r.msg_id)
        assert (ip, port, off) == ("127.0.0.1", 10911, r.wrote_offset)
        batch = [msg(body=b"b%d" % i) for i in range(5)] + [msg(qid=1, body=b"q1", tags="B")]
        r2 = await s.put_messages(batch)
        assert r2.status is PutStatus.PUT_OK and r2.msg_num == 6 and r2.queue_offset == 1
        assert len(r2.msg_id.split(",")) == 6
        assert s.max_offset_in_queue("T", 0) == 6 and s.max_offset_in_queue("T", 1) == 1
        assert arrivals == [("T", 0, 1, java_string_hash("A")), ("T", 0, 6, java_string_hash("A")),
                            ("T", 1, 1, java_string_hash("B"))]
        g = s.get_message("g", "T", 0, 0, 32)
        assert g.status is GetStatus.FOUND and g.msg_count == 6 and g.next_begin_offset == 6
        assert bodies(g) == [b"one"] + [b"b%d" % i for i in range(5)]
        recs = decode_records(b"".join(g.buffers))
        assert recs[0].store_host == ("127.0.0.1", 10911) and recs[0].born_host == ("10.0.0.7", 5555)
        assert [m.queue_offset for m in recs] == list(range(6)) == g.queue_offsets
        g = s.get_message("g", "T", 0, 2, 3)
        assert g.msg_count == 3 and g.next_begin_offset == 5
        m = s.look_message_by_offset(off)
        assert m is not None and m.body == b"one"
        assert s.look_message_by_offset(10**9) is None
        assert s.message_store_time_stamp("T", 0, 0) == recs[0].store_timestamp
        assert s.earliest_message_time("T", 0) == recs[0].store_timestamp
        assert s.earliest_message_time("T", 9) == -1
        info = s.runtime_info()
        assert info["commitLogMaxOffset"] == str(s.commit_log_max_offset)
        assert info["commitLogMinOffset"] == "0"
        assert s.check_consistency() == []
    finally:
        s.shutdown()


@pytest.mark.parametrize("spread", [True, False], ids=["a-few-per-queue", "many-per-queue"])
async def test_put_batch_writes_every_queue_and_index_entry(tmp_path: Path, spread: bool) -> None:
    """The send fast path's put: sends gathered from many connections (one or two records a
    queue, written entry by entry) and one connection's run (many a queue, written with numpy)
    leave the same store: queue entries, arrivals once per queue and tag, index keys, after a restart."""
    arrivals: list = []
    s = open_store(tmp_path, arrivals, mappedFileSizeCommitLog=1 << 20)
    if spread:
        sends = [(q, "A", f"k{q}") for q in range(16)] + [(3, "B", "k3b")]
    else:
        sends = [(q // 8, "A" if q % 8 else "B", f"k{q}") for q in range(16)] + [(9, "A", "k9b")]
    try:
        r = await s.put_batch(_send_batch(sends))
        assert r.status is PutStatus.PUT_OK and r.msg_num == 17
        want: dict[int, list[bytes]] = {}
        for qid, _, key in sends:
            want.setdefault(qid, []).append(key.encode())
        for qid, keys in want.items():
            g = s.get_message("g", "T", qid, 0, 32)
            assert bodies(g) == keys and g.queue_offsets == list(range(len(keys)))
        tags = {q: {t for qq, t, _ in sends if qq == q} for q in want}
        assert sorted(arrivals) == sorted(
            ("T", q, len(keys), java_string_hash(t)) for q, keys in want.items() for t in tags[q])
        assert [m.body for m in decode_records(b"".join(s.query_message("T", "k3", 8, 0, 2**62)))] == [b"k3"]
        assert s.check_consistency() == []
    finally:
        s.shutdown()
    again = open_store(tmp_path, mappedFileSizeCommitLog=1 << 20)
    try:
        for qid, keys in want.items():
            assert bodies(again.get_message("g", "T", qid, 0, 32)) == keys
        assert len(again.query_message("T", sends[-1][2], 8, 0, 2**62)) == 1
    finally:
        again.shutdown()


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_put_batch_now_waits_only_when_a_flush_is_owed(tmp_path: Path, flush: str) -> None:
    """put_batch_now stores and dispatches before it returns; it answers a PutResult at once
    unless a flush is owed (SYNC_FLUSH and a record that asked to wait), and then a coroutine
    that waits for the group commit (here with the loop's own syncs off, see
    test_lone_puts_under_sync_flush_wait_for_their_flush). A store that is not running refuses
    with a PutResult."""
    s = open_store(tmp_path, flushDiskType=flush, mappedFileSizeCommitLog=1 << 20, syncFlushInlineMaxMicros=0)
    try:
        res = s.put_batch_now(_send_batch([(0, "A", "k1")]))
        assert s.max_offset_in_queue("T", 0) == 1  # in the queue before any wait
        if flush == "SYNC_FLUSH":
            assert asyncio.iscoroutine(res)
            res = await asyncio.wait_for(res, 10)
            assert s.commit_log.flushed_offset >= s.commit_log_max_offset
        assert type(res) is PutResult and res.status is PutStatus.PUT_OK and res.msg_num == 1
        nowait = s.put_batch_now(_send_batch([(0, "A", "k2")], wait=False))
        assert type(nowait) is PutResult and nowait.status is PutStatus.PUT_OK  # WAIT=false: nothing owed
        assert queue_bodies(s, 0) == [b"k1", b"k2"]
        assert s.stats["putMessageTimesTotal"] == 2
    finally:
        s.shutdown()
    refused = s.put_batch_now(_send_batch([(0, "A", "k3")]))
    assert type(refused) is PutResult and refused.status is PutStatus.SERVICE_NOT_AVAILABLE


@pytest.mark.parametrize("index", [{}, {"maxIndexNum": 20, "maxHashSlotNum": 8}], ids=["one-index-file", "index-rolls"])
async def test_lone_puts_store_what_the_general_path_stores(tmp_path: Path, index: dict) -> None:
    """One record a put (one send in flight) takes the one-record path while its files have room,
    and the general path when a file rolls over (the index's too) or a queue is new: the same
    results, queue entries, arrivals, index and commit log as every put through the general path."""
    seen = {}
    for mode in ("lone", "general"):
        arrivals: list = []
        s = open_store(tmp_path / mode, arrivals, mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=20 * 16,
                       **index)
        general = s._put_batch
        calls = []
        if mode == "general":
            s.put_batch_now = general  # type: ignore[method-assign]
        else:
            s._put_batch = lambda b: calls.append(b) or general(b)  # type: ignore[method-assign]
        try:
            results = []
            for i in range(90):  # ~200 B records over 8 KiB commit-log files, 16-entry queue files
                r = s.put_batch_now(_send_batch([(i % 3, "AB"[i % 2], f"k{i}")]))
                assert type(r) is PutResult and r.status is PutStatus.PUT_OK
                results.append((r.queue_offset, r.wrote_offset, r.wrote_bytes, r.msg_num))
            if mode == "lone":  # the first put, a new queue's, a roll: the rest took the one-record path
                assert 3 <= len(calls) < 45
            queues = [queue_bodies(s, q) for q in range(3)]
            keys = [bodies_of(s.query_message("T", f"k{i}", 4, 0, 2**62)) for i in range(90)]
            assert keys == [[f"k{i}".encode()] for i in range(90)]
            counts = [(f.state[COUNT], f.state[SLOT_COUNT]) for f in s.index.files]  # (not the timestamps)
            if index:  # 19 keys a file (entry 0 is never used): the index rolled 4 times
                assert [c for c, _ in counts] == [20] * 4 + [1 + 90 - 4 * 19]
            assert s.check_consistency() == []
            seen[mode] = (results, queues, keys, arrivals, s.commit_log_max_offset, s.stats["putMessageTimesTotal"],
                          s.stats["putMessageSizeTotal"], counts)
        finally:
            s.shutdown()
    assert seen["lone"] == seen["general"]
    assert seen["lone"][1][1] == [f"k{i}".encode() for i in range(1, 90, 3)]


def test_lone_puts_prepare_the_next_file_and_wake_its_warming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-record path calls the commit log's after-append work only from the file's append
    mark: still the next file is prepared once past half the file (and again after a truncation
    dropped that preparation), the warming woken at its mark, and the roll takes the prepared file.
    Each lone put's queue entry is written with its record (no ConsumeQueue.put)."""
    s = open_store(tmp_path, preloadMappedFile=True, mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=20 * 1000)
    general = s._put_batch
    calls = []
    s._put_batch = lambda b: calls.append(b) or general(b)  # type: ignore[method-assign]
    mfq = s.commit_log.mfq
    try:
        assert s.put_batch_now(_send_batch([(0, "A", "k0")])).status is PutStatus.PUT_OK
        real_put = ConsumeQueue.put
        cq_puts: list = []
        monkeypatch.setattr(ConsumeQueue, "put", lambda self, *a: cq_puts.append(a) or real_put(self, *a))
        mf = mfq.files[-1]
        assert mfq._next is None and mf.append_mark == 8192 // 2 + 1
        i = 1
        while mf.wrote_position <= 8192 // 2 and i < 100:  # bounded: past half the first file
            assert mfq._next is None
            assert s.put_batch_now(_send_batch([(0, "A", f"k{i}")])).status is PutStatus.PUT_OK
            i += 1
        assert mfq._next is not None and mfq._next[0] == 8192 and len(calls) == 1
        assert cq_puts == []  # every lone put's queue entry was written with its record
        assert mf.append_mark == 8192 + 1  # prepared: nothing more to do past half
        mfq.truncate_dirty_files(s.commit_log_max_offset)  # keeps every record, drops the preparation
        assert mfq._next is None and mf.append_mark == 8192 // 2 + 1
        assert s.put_batch_now(_send_batch([(0, "A", f"k{i}")])).status is PutStatus.PUT_OK
        assert mfq._next is not None  # asked for again by the next lone put
        prepared = mfq._next[1].result(timeout=10)
        wake = mf._warm_wake
        assert wake is not None
        mf._warm_mark = mf.wrote_position + 1  # as warm() sets it, waiting for the writer
        mf.append_mark = mf._warm_mark
        wake.clear()
        assert s.put_batch_now(_send_batch([(0, "A", "kw")])).status is PutStatus.PUT_OK
        assert wake.is_set() and mf.append_mark == 8192 + 1
        n = len(calls)
        while len(mfq.files) < 2 and i < 200:  # bounded: until the log rolls
            s.put_batch_now(_send_batch([(0, "A", f"k{i}")]))
            i += 1
        assert mfq.files[1] is prepared and len(calls) == n + 1  # the roll went the general way
        assert s.check_consistency() == []
    finally:
        s.shutdown()


@pytest.mark.parametrize("inline_max_us", [0, 1_000_000])
async def test_lone_puts_under_sync_flush_wait_for_their_flush(tmp_path: Path, inline_max_us: int) -> None:
    """The one-record path owes the same wait as the general one: each put that asked to wait is
    answered once the flush covers it: synced at once on the caller's thread (syncs fast enough
    for syncFlushInlineMaxMicros), or by a coroutine that returns then (the thread's rounds)."""
    s = open_store(tmp_path, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20,
                   syncFlushInlineMaxMicros=inline_max_us)
    general = s._put_batch
    calls = []
    s._put_batch = lambda b: calls.append(b) or general(b)  # type: ignore[method-assign]
    try:
        for i in range(4):
            res = s.put_batch_now(_send_batch([(0, "A", f"k{i}")]))
            if inline_max_us == 0:
                assert asyncio.iscoroutine(res)
            if asyncio.iscoroutine(res):  # (inline: a thread's round mid-way sends it there too)
                res = await asyncio.wait_for(res, 10)
            assert res.status is PutStatus.PUT_OK and res.queue_offset == i
            assert s.commit_log.flushed_offset >= res.wrote_offset + res.wrote_bytes
        assert len(calls) == 1  # the first (disk not checked yet, a new queue); the rest took the one-record path
        assert queue_bodies(s, 0) == [b"k0", b"k1", b"k2", b"k3"]
    finally:
        s.shutdown()


async def test_lone_puts_are_refused_on_a_full_disk(tmp_path: Path) -> None:
    """The one-record path re-reads the disk's use once a second, as the general path does: a
    disk over the warning ratio refuses the next lone put (SERVICE_NOT_AVAILABLE, RocketMQ's
    remark), nothing of it stored; once the disk has room again puts are taken."""
    s = open_store(tmp_path, mappedFileSizeCommitLog=1 << 20)
    try:
        assert s.put_batch_now(_send_batch([(0, "A", "k0")])).status is PutStatus.PUT_OK
        assert s.put_batch_now(_send_batch([(0, "A", "k1")])).status is PutStatus.PUT_OK
        s.disk_ratio_fn = lambda _: 0.95
        await asyncio.sleep(1.1)  # the ratio is read at most once a second
        refused = s.put_batch_now(_send_batch([(0, "A", "k2")]))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE and "disk is full" in refused.remark
        assert queue_bodies(s, 0) == [b"k0", b"k1"]
        s.disk_ratio_fn = lambda _: 0.10
        await asyncio.sleep(1.1)
        assert s.put_batch_now(_send_batch([(0, "A", "k3")])).status is PutStatus.PUT_OK
        assert queue_bodies(s, 0) == [b"k0", b"k1", b"k3"]
    finally:
        s.shutdown()


def bodies_of(buffers: list) -> list[bytes]:
    return [m.body for m in decode_records(b"".join(buffers))]


async def test_rolls_over_many_files(store: MessageStore) -> None:
    for i in range(40):  # ~40 x 300 bytes over 8 KiB files: several commit-log and CQ files
        r = await store.put_messages([msg(body=bytes([i]) * 200)])
        assert r.ok
    got: list[bytes] = []
    off = 0
    for _ in range(100):
        g = store.get_message("g", "T", 0, off, 32)
        if g.status is not GetStatus.FOUND:
            assert g.status is GetStatus.OFFSET_OVERFLOW_ONE
            break
        got += bodies(g)
        off = g.next_begin_offset
    assert got == [bytes([i]) * 200 for i in range(40)]
    assert store.check_consistency() == []


async def test_statuses_and_next_begin_offset(store: MessageStore) -> None:
    g = store.get_message("g", "NOPE", 0, 5, 32)
    assert g.status is GetStatus.NO_MESSAGE_IN_QUEUE and g.next_begin_offset == 0
    for i in range(3):
        await store.put_messages([msg(body=b"%d" % i)])
    g = store.get_message("g", "T", 0, 3, 32)
    assert g.status is GetStatus.OFFSET_OVERFLOW_ONE and g.next_begin_offset == 3
    assert (g.min_offset, g.max_offset) == (0, 3)
    g = store.get_message("g", "T", 0, 10, 32)
    assert g.status is GetStatus.OFFSET_OVERFLOW_BADLY and g.next_begin_offset == 3  # the max, as 4.9.4 on
    g = store.get_message("g", "T", 0, -1, 32)
    assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_begin_offset == 0
    g = store.get_message("g", "T", 0, 1, 32)
    assert g.status is GetStatus.FOUND and bodies(g) == [b"1", b"2"]


async def test_tag_filter_non_ascii(store: MessageStore) -> None:
    tags = ["TagA", "标签", "ü-tag", "\U0001F600", "TagA"]
    await store.put_messages([msg(body=t.encode(), tags=t) for t in tags])
    await store.put_messages([msg(body=b"none", tags=None)])
    want = {java_string_hash("标签"), java_string_hash("\U0001F600")}
    g = store.get_message("g", "T", 0, 0, 32, want)
    assert g.status is GetStatus.FOUND
    assert bodies(g) == ["标签".encode(), "\U0001F600".encode()]
    assert g.next_begin_offset == 6
    assert set(g.tag_codes_seen) == want
    g = store.get_message("g", "T", 0, 0, 32, {java_string_hash("nothing")})
    assert g.status is GetStatus.NO_MATCHED_MESSAGE and g.next_begin_offset == 6 and not g.buffers
    g = store.get_message("g", "T", 0, 0, 32, None)
    assert g.msg_count == 6
    assert tags_code("标签") == java_string_hash("标签")


async def test_byte_cap_limits_a_pull(tmp_path: Path) -> None:
    s = open_store(tmp_path, mappedFileSizeCommitLog=1 << 20, maxTransferBytesOnMessageInMemory=2500)
    try:
        await s.put_messages([msg(body=b"x" * 1000) for _ in range(10)])
        g = s.get_message("g", "T", 0, 0, 32)
        assert g.msg_count == 2 and g.next_begin_offset == 2 and g.buffer_total_size <= 2500
    finally:
        s.shutdown()


async def test_sync_flush_group_commit(tmp_path: Path) -> None:
    s = open_store(tmp_path, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20)
    try:
        results = await asyncio.wait_for(
            asyncio.gather(*(s.put_messages([msg(body=b"%d" % i, qid=i % 4)]) for i in range(200))), 30)
        assert all(r.status is PutStatus.PUT_OK for r in results)
        assert s.commit_log.flushed_offset >= s.commit_log_max_offset
        svc = s.commit_log.flush_service
        assert svc is not None and 0 < svc.flushes <= 200
        assert sum(s.max_offset_in_queue("T", q) for q in range(4)) == 200
    finally:
        s.shutdown()


async def test_sync_flush_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = open_store(tmp_path, flushDiskType="SYNC_FLUSH", syncFlushTimeout=50)
    try:
        # a sync that never ends (tests/process/test_group_commit.py holds a real one at a gate)
        monkeypatch.setattr(s.commit_log.flush_service, "wait", lambda off, loop: loop.create_future())
        r = await s.put_messages([msg()])
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT and r.msg_num == 1 and r.remark
        assert s.max_offset_in_queue("T", 0) == 1  # stored anyway
    finally:
        s.shutdown()


async def _fill(s: MessageStore, n: int) -> list[bytes]:
    out = []
    for i in range(n):
        body = b"m%03d" % i
        r = await s.put_messages([msg(body=body, qid=i % 3, tags="T%d" % (i % 2))])
        assert r.ok
        out.append(body)
    return out


def _all_bodies(s: MessageStore) -> list[bytes]:
    return sorted(b for q in range(3) for b in queue_bodies(s, q))


async def test_restart_after_clean_shutdown(tmp_path: Path) -> None:
    s = open_store(tmp_path)
    sent = await _fill(s, 60)
    s.shutdown()
    assert not os.path.exists(os.path.join(tmp_path, "abort"))
    s2 = open_store(tmp_path)
    try:
        assert s2.recovery is not None and not s2.recovery.abnormal
        assert _all_bodies(s2) == sorted(sent)
        r = await s2.put_messages([msg(qid=0, body=b"after")])
        assert r.queue_offset == 20  # queue offsets continue
        assert s2.check_consistency() == []
    finally:
        s2.shutdown()


async def test_restart_after_crash_with_lost_queues(tmp_path: Path) -> None:
    s = open_store(tmp_path)
    sent = await _fill(s, 60)
    s.commit_log.flush(0)  # what a SYNC_FLUSH or the OS would have written back
    # simulate kill -9: no shutdown (abort file stays); throw away the consume queues too
    s.commit_log.shutdown()
    if s._cq_flusher is not None:
        s._cq_flusher.stop()
    s.queues.close()
    s.commit_log.close()
    if s.checkpoint is not None:
        s.checkpoint.close()
    s.store_lock.release()  # the kernel's part of a process death
    import shutil
    shutil.rmtree(tmp_path / "consumequeue")
    assert os.path.exists(os.path.join(tmp_path, "abort"))
    s2 = open_store(tmp_path)
    try:
        assert s2.recovery is not None and s2.recovery.abnormal
        assert _all_bodies(s2) == sorted(sent)
        assert s2.check_consistency() == []
    finally:
        s2.shutdown()


async def test_bad_input(store: MessageStore) -> None:
    r = await store.put_messages([msg(body=b"x" * (store.config.maxMessageSize + 1))])
    assert r.status is PutStatus.MESSAGE_ILLEGAL and "maxMessageSize" in (r.remark or "")
    r = await store.put_messages([msg(big="v" * 40000)])
    assert r.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    r = await store.put_messages([msg(topic="T" * 200)])
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    r = await store.put_messages([msg(bad="a\x01b")])
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    r = await store.put_messages([msg(), msg(body=b"x" * (store.config.maxMessageSize + 1))])
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    r = await store.put_messages([])
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert store.max_offset_in_queue("T", 0) == 0  # nothing of a failed batch was stored
    r = await store.put_messages([msg(DELAY="oops")])
    assert r.status is PutStatus.UNKNOWN_ERROR  # SYSTEM_ERROR with Java's text, as 4.9.8
    r = await store.put_messages([msg()])
    assert r.status is PutStatus.PUT_OK


async def test_disk_full_refuses(store: MessageStore) -> None:
    store.disk_ratio_fn = lambda path: 0.95
    store._disk_checked_at = -1e9
    r = await store.put_messages([msg()])
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and "disk is full" in (r.remark or "")
    store.disk_ratio_fn = lambda path: 0.5
    store._disk_checked_at = -1e9
    assert (await store.put_messages([msg()])).status is PutStatus.PUT_OK


def test_disk_ratio_is_dfs_use_percent(monkeypatch, tmp_path: Path) -> None:
    """UtilAll.getDiskPartitionSpaceUsedPercent: blocks reserved for root are neither used nor
    available, and the percentage rounds up. This machine's own disk: 252 GB with 196 GB free but
    only 34.6 GB available to users is 62% used (df says so too), not 87%: at 87% retention deletes
    every commit-log file but the last, whatever its age."""
    import collections

    from fastmq.store.message_store import disk_used_ratio, human_readable_bytes

    Vfs = collections.namedtuple("Vfs", "f_blocks f_bfree f_bavail f_frsize")
    stat = Vfs(61_606_656, 47_908_140, 8_452_848, 4096)
    monkeypatch.setattr(os, "statvfs", lambda path: stat)
    assert disk_used_ratio(str(tmp_path)) == 0.62
    stat = Vfs(100, 50, 50, 4096)     # exactly half: no rounding up
    assert disk_used_ratio(str(tmp_path)) == 0.5
    stat = Vfs(0, 0, 0, 4096)
    assert disk_used_ratio(str(tmp_path)) == -1.0

    def gone(path):
        raise OSError("no such filesystem")
    monkeypatch.setattr(os, "statvfs", gone)
    assert disk_used_ratio(str(tmp_path / "not" / "yet")) == -1.0
    assert [human_readable_bytes(n) for n in (0, 1023, 1536, 252 * 2**30 + 2**29)] == \
           ["0 B", "1023 B", "1.5 KiB", "252.5 GiB"]


async def test_put_after_shutdown(tmp_path: Path) -> None:
    s = open_store(tmp_path)
    s.shutdown()
    r = await s.put_messages([msg()])
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE


async def test_delay_rewrite(store: MessageStore) -> None:
    r = await store.put_messages([msg(topic="Real", qid=2, DELAY="3")])
    assert r.ok
    assert store.max_offset_in_queue("Real", 2) == 0
    assert store.max_offset_in_queue(SCHEDULE_TOPIC, 2) == 1
    cq = store.queues.get(SCHEDULE_TOPIC, 2)
    assert cq is not None
    o, size, code = cq.get_entry(0)
    m = store.look_message_by_offset(o)
    assert m is not None and m.topic == SCHEDULE_TOPIC and m.queue_id == 2
    assert m.properties["REAL_TOPIC"] == "Real" and m.properties["REAL_QID"] == "2"
    assert code == m.store_timestamp + 10_000  # level 3 = 10s
    r = await store.put_messages([msg(topic="Real", DELAY="99")])  # clamped to the last level
    assert store.max_offset_in_queue(SCHEDULE_TOPIC, 17) == 1


async def test_offset_by_time(store: MessageStore) -> None:
    assert store.offset_in_queue_by_time("T", 0, 0) == 0
    for i in range(5):
        await store.put_messages([msg(body=b"%d" % i)])
        await asyncio.sleep(0.005)
    ts = [store.message_store_time_stamp("T", 0, i) for i in range(5)]
    assert store.offset_in_queue_by_time("T", 0, ts[2]) == 2
    assert store.offset_in_queue_by_time("T", 0, 0) == 0
    assert store.offset_in_queue_by_time("T", 0, ts[4] + 10_000) == 4


async def test_delete_topics(store: MessageStore) -> None:
    await store.put_messages([msg(topic="Gone"), msg(topic="Kept")])
    assert store.delete_topics({"Gone"}) == 1
    assert store.max_offset_in_queue("Gone", 0) == 0
    assert not (Path(store.config.consume_queue_dir) / "Gone").exists()
    assert store.max_offset_in_queue("Kept", 0) == 1
    r = await store.put_messages([msg(topic="Gone")])
    assert r.queue_offset == 0


def test_parse_delay_levels() -> None:
    t = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    assert len(t) == 18 and t[1] == 1000 and t[5] == 60_000 and t[18] == 7_200_000
    assert parse_delay_levels("200ms 1d") == {1: 200, 2: 86_400_000}
    with pytest.raises(ValueError):
        parse_delay_levels("1x")


async def test_retention_deletes_old_files(store: MessageStore) -> None:
    for i in range(60):  # ~60 x 300 bytes: 3 commit-log files of 8 KiB, several CQ files
        assert (await store.put_messages([msg(body=bytes([i]) * 200)])).ok
    cl_files = len(store.commit_log.mfq.files)
    assert cl_files >= 3
    ret = store.retention
    ret._disk_ratio_fn = lambda path: 0.10
    # too young and not the hour: nothing goes
    assert ret.run_once(now=time.time(), manual=False)[0] == 0
    assert ret.delete_expired_commit_log(time.time(), 3600.0, False) == 0
    # old enough (a manual round three days later): every file but the last goes
    cl, cq = ret.run_once(now=time.time() + 73 * 3600, manual=True)
    assert cl == cl_files - 1 and len(store.commit_log.mfq.files) == 1
    assert cq > 0
    assert store.commit_log_min_offset == store.commit_log.mfq.files[0].file_from_offset
    # the queue now starts at its first kept file; reads skip entries below the log minimum
    lo = store.min_offset_in_queue("T", 0)
    assert lo > 0
    g = store.get_message("g", "T", 0, 0, 32)
    assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_begin_offset == lo
    assert store.earliest_message_time("T", 0) > 0
    got: list[bytes] = []
    off = lo
    for _ in range(50):
        g = store.get_message("g", "T", 0, off, 32)
        if g.status is GetStatus.OFFSET_OVERFLOW_ONE:
            break
        assert g.status is GetStatus.FOUND
        got += bodies(g)
        off = g.next_begin_offset
    assert got == [bytes([i]) * 200 for i in range(lo, 60)]
    assert store.check_consistency() == []
    assert (await store.put_messages([msg(body=b"after")])).ok


async def test_retention_forced_when_disk_nearly_full(store: MessageStore) -> None:
    for i in range(60):
        await store.put_messages([msg(body=bytes([i]) * 200)])
    store.retention._disk_ratio_fn = lambda path: 0.88  # over 85 %: age does not matter
    cl, _ = store.retention.run_once(now=time.time())
    assert cl >= 2 and len(store.commit_log.mfq.files) == 1


async def test_delayed_message_after_crash_recovery(tmp_path: Path) -> None:
    s = open_store(tmp_path, messageDelayLevel="100ms 1s")
    await s.put_messages([msg(topic="Real", DELAY="1", body=b"d")])
    s.commit_log.flush(0)
    s.commit_log.shutdown()
    if s._cq_flusher is not None:
        s._cq_flusher.stop()
    s.queues.close()
    s.commit_log.close()
    if s.checkpoint is not None:
        s.checkpoint.close()
    s.store_lock.release()  # the kernel's part of a process death
    import shutil
    shutil.rmtree(tmp_path / "consumequeue")
    s2 = open_store(tmp_path, messageDelayLevel="100ms 1s")
    try:
        from fastmq.broker.schedule import ScheduleMessageService
        svc = ScheduleMessageService(s2, poll_interval=0.02)
        await svc.start()
        try:
            for _ in range(100):
                if s2.max_offset_in_queue("Real", 0):
                    break
                await asyncio.sleep(0.02)
            assert s2.max_offset_in_queue("Real", 0) == 1
        finally:
            await svc.stop()
    finally:
        s2.shutdown()


_CHILD = r"""
import asyncio, sys, time
from fastmq.store.config import MessageStoreConfig
from fastmq.store.message_store import MessageStore
from fastmq.protocol.message import MessageExt

async def main():
    c = MessageStoreConfig(storePathRootDir=sys.argv[1], mappedFileSizeCommitLog=16384,
                           mappedFileSizeConsumeQueue=20 * 32, flushDiskType="SYNC_FLUSH",
                           preloadMappedFile=False)
    s = MessageStore(c, "127.0.0.1:10911")
    s.load()
    s.start()
    i = 0
    while i < 100000:
        batch = [MessageExt(topic="T", body=b"m%06d" % (i + k), queue_id=(i + k) % 3,
                            properties={"TAGS": "A"}) for k in range(3)]
        r = await s.put_messages(batch)
        if r.status.name == "PUT_OK":
            sys.stdout.write("".join("m%06d\n" % (i + k) for k in range(3)))
            sys.stdout.flush()
        i += 3

asyncio.run(main())
"""


def test_kill_9_keeps_every_acknowledged_message(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    root = tmp_path / "store"
    p = subprocess.Popen([sys.executable, "-c", _CHILD, str(root)], stdout=subprocess.PIPE,
                         cwd=str(Path(__file__).resolve().parents[2]))
    acked: list[bytes] = []
    try:
        assert p.stdout is not None
        deadline = time.monotonic() + 60
        while len(acked) < 600 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            acked.append(line.strip())
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        if p.stdout is not None:
            p.stdout.close()
    assert len(acked) >= 600
    assert (root / "abort").exists()
    s = MessageStore(cfg(root, mappedFileSizeCommitLog=16384, mappedFileSizeConsumeQueue=20 * 32), HOST)
    s.load()
    s.start()
    try:
        assert s.recovery is not None and s.recovery.abnormal
        assert s.check_consistency() == []
        stored = set(_all_bodies(s))
        assert set(acked) <= stored
        for q in range(3):  # queue order is send order
            got = queue_bodies(s, q, 1000)
            assert got == sorted(got)
    finally:
        s.shutdown()


async def test_cold_pages_are_released_and_still_readable(tmp_path: Path, monkeypatch) -> None:
    """Files that are on disk and no longer written leave resident memory; reads fault them in."""
    # the commit log's last MiB stays mapped (16 MiB by default: more than this test writes)
    monkeypatch.setattr("fastmq.store.message_store._RESIDENT_BEHIND_WRITER", 1 << 20)
    s = open_store(tmp_path, mappedFileSizeCommitLog=1 << 20)
    try:
        want = []
        for i in range(16):  # 16 x 400 x ~1.1 KiB: six 1 MiB commit-log files, all pages touched
            batch = [msg(body=bytes([i % 251]) * 1000) for _ in range(400)]
            want += [m.body for m in batch]
            assert (await s.put_messages(batch)).ok
        s.commit_log.flush(0)
        for cq in s.queues.queues.values():
            cq.flush(0)
        log_dir = tmp_path / "commitlog"
        files = sorted(str(p) for p in log_dir.iterdir())
        cold = files[:-2]  # all but the two newest commit-log files
        before = _rss_kib_by_file(log_dir)
        released = s.release_cold_pages()
        after = _rss_kib_by_file(log_dir)
        assert released >= 3 and len(cold) >= 3
        assert before.get(files[-1], 0) > 0, before  # the file being written is resident (smaps read right)
        # every cold file has left RSS (the store may already have released some as it rolled on)
        assert all(after.get(f, 0) == 0 for f in cold), (before, after)
        assert queue_bodies(s, 0, 1000) == want
        assert s.check_consistency() == []
    finally:
        s.shutdown()


def _outcome(g) -> tuple:
    return (g.status, g.next_begin_offset, g.min_offset, g.max_offset, g.msg_count, g.buffer_total_size,
            b"".join(g.buffers), g.queue_offsets, g.tag_codes_seen, g.suggest_pulling_from_slave)


@pytest.mark.parametrize("limits", [{}, {"maxTransferBytesOnMessageInMemory": 700},
                                    {"maxTransferCountOnMessageInMemory": 3},
                                    {"accessMessageInMemoryMaxRatio": 0}], ids=["defaults", "bytes", "count", "disk"])
async def test_a_pull_in_one_step_answers_as_the_loop_does(tmp_path: Path, limits, monkeypatch) -> None:
    """_collect_run takes the usual pull at once; it must answer exactly as _collect's loop does,
    across file ends (8 KiB files), records end to end (a batch into one queue) or not (puts
    alternating between queues), byte and count limits, and records judged on disk."""
    s = open_store(tmp_path, **limits)
    try:
        for round_ in range(6):
            await s.put_messages([msg(body=b"b" * (40 + 13 * i), qid=0, tags=f"t{i % 3}") for i in range(9)])
            for i in range(7):
                await s.put_messages([msg(body=b"s" * (100 + i), qid=i % 2, tags="x")])
        for qid in (0, 1):
            top = s.queues.get("T", qid).max_offset
            for off in range(0, top + 2):
                for nums in (1, 4, 32):
                    fast = _outcome(s.get_message("g", "T", qid, off, nums))
                    with monkeypatch.context() as m:
                        m.setattr(s.reader, "_collect_run", lambda *a: False)
                        slow = _outcome(s.get_message("g", "T", qid, off, nums))
                    assert fast == slow, (qid, off, nums)
    finally:
        s.shutdown()


async def test_a_small_unfiltered_pull_answers_as_the_array_read_does(tmp_path: Path, monkeypatch) -> None:
    """Unfiltered pulls of up to 64 messages read their consume-queue entries with struct; they
    must answer exactly as the numpy read does: across files, at every offset, with damaged
    records skipped, with and without the one-step collection."""
    from fastmq.store import get_message as gm

    s = open_store(tmp_path)
    try:
        for _ in range(4):
            await s.put_messages([msg(body=b"b" * (40 + 13 * i), qid=0, tags=f"t{i % 3}") for i in range(9)])
            for i in range(5):
                await s.put_messages([msg(body=b"s" * (100 + i), qid=i % 2, tags="x")])
        cq0 = s.queues.get("T", 0)
        for damaged in (set(), {cq0.get_entry(3)[0], cq0.get_entry(10)[0]}):
            s.reader.damaged_offsets = damaged
            for qid in (0, 1):
                top = s.queues.get("T", qid).max_offset
                for off in range(-1, top + 2):
                    for nums in (0, 1, 4, 32, 64):
                        small = _outcome(s.get_message("g", "T", qid, off, nums))
                        with monkeypatch.context() as m:
                            m.setattr(gm, "_FEW", -1)
                            array = _outcome(s.get_message("g", "T", qid, off, nums))
                        assert small == array, (damaged, qid, off, nums)
    finally:
        s.reader.damaged_offsets = set()
        s.shutdown()


async def test_the_reader_needs_only_the_log_the_queues_and_the_config(tmp_path: Path) -> None:
    """The read side is a class of its own: a MessageReader given just the store's commit log,
    consume queues and config (and its own stats) answers every read as the store does, and
    counts its pulls into the stats it was given, not the store's."""
    from fastmq.store.get_message import MessageReader

    s = open_store(tmp_path)
    try:
        await s.put_messages([msg(body=b"m%d" % i, tags=f"t{i % 2}") for i in range(12)])
        stats = {k: 0 for k in ("getMessageTimesTotalFound", "getMessageTimesTotalMiss",
                                "getMessageTransferedMsgCount", "getMessageEntireTimeMax")}
        reader = MessageReader(s.config, s.commit_log, s.queues, stats)
        before = dict(s.stats)
        for off in (-1, 0, 5, 11, 12, 40):
            for codes in (None, {java_string_hash("t1")}):
                assert _outcome(reader.get_message("g", "T", 0, off, 4, codes)) == \
                    _outcome(s.get_message("g", "T", 0, off, 4, codes)), (off, codes)
        assert _outcome(reader.get_message("g", "NOPE", 3, 0, 4)) == _outcome(s.get_message("g", "NOPE", 3, 0, 4))
        assert stats["getMessageTimesTotalFound"] + stats["getMessageTimesTotalMiss"] == 13
        assert s.stats["getMessageTimesTotalFound"] - before["getMessageTimesTotalFound"] == \
            stats["getMessageTimesTotalFound"]
        now = int(time.time() * 1000)
        for ask in (lambda r: r.max_offset_in_queue("T", 0), lambda r: r.min_offset_in_queue("T", 0),
                    lambda r: r.offset_in_queue_by_time("T", 0, now), lambda r: r.earliest_message_time("T", 0),
                    lambda r: r.message_store_time_stamp("T", 0, 3), lambda r: r.earliest_message_time_in_log(),
                    lambda r: r.select_one_message_by_offset(0), lambda r: r.select_one_message_by_offset(7)):
            assert ask(reader) == ask(s)
        assert reader.look_message_by_offset(0).body == s.look_message_by_offset(0).body == b"m0"
        assert reader.look_message_by_offset(7) is None
    finally:
        s.shutdown()


async def test_caught_up_is_get_messages_overflow_one_and_counts_its_miss(tmp_path: Path) -> None:
    """The pull processor's short way for a caught-up long-polling pull: ``caught_up`` is True
    exactly where the full read says OFFSET_OVERFLOW_ONE (the end of a queue with messages, not
    an empty or unknown one), across file rolls, and counts the miss as the full read does."""
    from fastmq.store.get_message import GetStatus

    s = open_store(tmp_path, mappedFileSizeConsumeQueue=20 * 8)  # a queue file holds 8 entries
    try:
        for _ in range(2):
            r = s.reader
            for qid in (0, 1, 2):
                top = s.queues.get("T", qid).max_offset if s.queues.get("T", qid) else 0
                for off in (-1, 0, 1, top - 1, top, top + 1):
                    before = dict(s.stats)
                    full = s.get_message("g", "T", qid, off, 32).status is GetStatus.OFFSET_OVERFLOW_ONE
                    after_full = dict(s.stats)
                    assert r.caught_up("T", qid, off) is full, (qid, off, top)
                    misses = s.stats["getMessageTimesTotalMiss"] - after_full["getMessageTimesTotalMiss"]
                    assert misses == (after_full["getMessageTimesTotalMiss"] - before["getMessageTimesTotalMiss"]
                                      if full else 0), (qid, off)
                    assert s.stats["getMessageTimesTotalFound"] == after_full["getMessageTimesTotalFound"]
            assert not r.caught_up("NOPE", 0, 0) and not r.caught_up("NOPE", 0, 3)
            await s.put_messages([msg(body=b"c%d" % i, qid=i % 2) for i in range(19)])  # queue 0 rolls a file
    finally:
        s.shutdown()


def test_store_stats_service_windows() -> None:
    from fastmq.store.stats_service import StoreStatsService

    now = [0.0]
    stats = {"putMessageTimesTotal": 0, "getMessageTransferedMsgCount": 0}
    svc = StoreStatsService(stats, clock=lambda: now[0])
    svc.sample()
    assert svc.runtime_info()["putTps"] == "  "  # no window covered yet: empty figures, as Java
    for _ in range(60):
        now[0] += 1.0
        stats["putMessageTimesTotal"] += 100
        stats["getMessageTransferedMsgCount"] += 50
        svc.sample()
    info = svc.runtime_info()
    assert info["putTps"] == "100.0 100.0 "  # 10 s and 1 min covered, 10 min not yet
    assert info["getTransferedTps"] == "50.0 50.0 " and info["getMissTps"] == "0.0 0.0 "


async def test_arrivals_name_every_tag_a_put_stored(tmp_path: Path) -> None:
    """Long polling's arrival callback gets each queue once per tag code a put stored in it, so a
    pull held for one tag is not woken by a batch that mixes in only others (4.9's filter)."""
    arrivals: list = []
    s = open_store(tmp_path, arrivals)
    try:
        r = await s.put_messages([msg(body=b"a", tags="A"), msg(body=b"b", tags="B"), msg(body=b"a2", tags="A")])
        assert r.status is PutStatus.PUT_OK
        assert sorted(arrivals) == sorted([("T", 0, 3, java_string_hash("A")), ("T", 0, 3, java_string_hash("B"))])
    finally:
        s.shutdown()


async def test_record_view_is_the_stored_record_or_none(store) -> None:
    """record_view: the bytes select_one_message_by_offset copies, as a view; None where no record
    can start (the end of what was written, past it, a negative offset)."""
    a = await store.put_messages([msg(body=b"first")])
    b = await store.put_messages([msg(body=b"second" * 50)])
    for r in (a, b):
        off = r.wrote_offset
        view = store.record_view(off)
        assert view is not None and bytes(view) == store.select_one_message_by_offset(off)
        view.release()
    end = store.commit_log_max_offset
    for bad in (end, end + 1000, -1, 1 << 40):
        assert store.record_view(bad) is None, bad
