"""SYNC_FLUSH group commit: what one fdatasync answers, a disk that fails or hangs, the flush counter.

The commit log's ``os.fdatasync`` is replaced by one under the test's control (held at a gate,
failing, or slow): in-process for the ordering checks, and inside a real ``fastmq-broker``
process (a wrapper that patches it before the broker's main runs) for the answers a client sees.
"""
from __future__ import annotations

import asyncio
import errno
import os
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from fastmq.protocol.codes import ResponseCode
from fastmq.remoting import RemotingClient
from fastmq.store import FlushTimeoutError
from fastmq._ext import sync_wait_py
from fastmq.store import group_commit as group_commit_module
from fastmq.store.commit_log import CommitLog, GroupCommitService
from fastmq.store.mapped_file import MappedFile
from fastmq.store.mapped_file_queue import MappedFileQueue
from fastmq.store.message_store import PutStatus
from fastmq.testing import broker_process, namesrv_process
from tests.support import create_topic, send_request
from tests.support import commit_log_config as cfg
from tests.support import msg, open_store, req
from tests.process.helpers import BROKER_WITH_DISK_FAULTS as _BROKER_WITH_DISK_FAULTS
from tests.process.helpers import runtime_info as _runtime_info
from tests.process.helpers import scripted_broker, send_until_ok


class Disk:
    """``os.fdatasync`` for commit-log files under the test's control; other files sync as usual."""

    def __init__(self) -> None:
        self.real = os.fdatasync
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail: OSError | None = None
        self.completed = 0  # commit-log syncs that returned

    def __call__(self, fd: int) -> None:
        if "commitlog" not in os.readlink(f"/proc/self/fd/{fd}"):
            self.real(fd)
            return
        self.entered.set()
        self.gate.wait(10)  # bounded: a test that forgets to open it still ends
        if self.fail is not None:
            raise self.fail
        self.real(fd)
        self.completed += 1


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    d = Disk()
    monkeypatch.setattr(os, "fdatasync", d)
    # the compiled wait-then-sync calls libc's fdatasync, not os.fdatasync: the pure twin does
    monkeypatch.setattr(group_commit_module, "wait_and_sync", sync_wait_py.wait_and_sync)
    try:
        yield d
    finally:
        d.fail = None
        d.gate.set()  # a flush thread held at the gate must be able to stop


def sync_log(tmp_path: Path, **kw: object) -> CommitLog:
    cl = CommitLog(cfg(tmp_path, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20, **kw))
    cl.load()
    cl.start()
    return cl


async def _put_and_wait(cl: CommitLog, answered_after: list[int], disk: Disk) -> bool:
    d = cl.put_records([req()])[-1]
    end = d.commit_log_offset + d.size
    await cl.wait_flushed(end)
    answered_after.append(disk.completed)
    assert cl.flushed_offset >= end  # never answered before its bytes are covered
    return True


async def test_one_sync_answers_every_waiter_that_queued_during_the_last(tmp_path: Path, disk: Disk) -> None:
    cl = sync_log(tmp_path, syncFlushInlineMaxMicros=0)  # the thread's rounds (a held inline sync holds the loop)
    try:
        svc = cl.flush_service
        assert isinstance(svc, GroupCommitService)
        disk.gate.clear()
        first_done: list[int] = []
        first = asyncio.ensure_future(_put_and_wait(cl, first_done, disk))
        assert await asyncio.to_thread(disk.entered.wait, 5)  # the first sync is under way, held
        later_done: list[int] = []
        later = [asyncio.ensure_future(_put_and_wait(cl, later_done, disk)) for _ in range(50)]
        await asyncio.sleep(0.2)
        # the held sync started before these bytes were appended: it answers none of them, and
        # the first waiter's own sync has not returned
        assert not first.done() and not any(t.done() for t in later)
        disk.gate.set()
        assert await asyncio.wait_for(asyncio.gather(first, *later), 10)
        # (the count when each resumed: never before the sync that covers it returned; a slow
        # loop may resume the first only after the second sync returned too)
        assert len(first_done) == 1 and first_done[0] >= 1
        assert len(later_done) == 50 and min(later_done) == 2  # all 50 by the one sync after it
        assert svc.flushes == 2 and cl.flush_times == 2
    finally:
        cl.shutdown()
        cl.close()


async def test_thread_waiters_share_a_sync(tmp_path: Path, disk: Disk) -> None:
    cl = sync_log(tmp_path)
    try:
        disk.gate.clear()
        cl.put_records([req()])
        first = cl.flush_waiter(cl.max_offset)
        assert await asyncio.to_thread(disk.entered.wait, 5)
        futs = []
        for _ in range(20):
            cl.put_records([req()])
            futs.append(cl.flush_waiter(cl.max_offset))
        await asyncio.sleep(0.1)
        assert not first.done() and not any(f.done() for f in futs)
        disk.gate.set()
        assert first.result(10) is True and all(f.result(10) is True for f in futs)
        assert cl.flush_times == 2 and cl.flushed_offset == cl.max_offset
    finally:
        cl.shutdown()
        cl.close()


async def test_failed_fdatasync_fails_the_waiters_and_the_next_sync_answers(tmp_path: Path, disk: Disk) -> None:
    cl = sync_log(tmp_path)
    try:
        disk.fail = OSError(errno.EIO, "Input/output error")
        d = cl.put_records([req()])[-1]
        with pytest.raises(FlushTimeoutError, match="failed.*Input/output error"):
            await asyncio.wait_for(cl.wait_flushed(d.commit_log_offset + d.size), 10)
        assert cl.flushed_offset < d.commit_log_offset + d.size and cl.flush_times == 0
        disk.fail = None
        d2 = cl.put_records([req()])[-1]
        await asyncio.wait_for(cl.wait_flushed(d2.commit_log_offset + d2.size), 10)
        # the failed bytes with it (or first, by an idle round)
        assert cl.flushed_offset == cl.max_offset and 1 <= cl.flush_times <= 2
    finally:
        cl.shutdown()
        cl.close()


async def test_a_hung_disk_times_out_and_the_flusher_carries_on(tmp_path: Path, disk: Disk) -> None:
    # the thread's rounds: an inline sync holds the loop, timers included, until the disk answers
    s = open_store(tmp_path, flushDiskType="SYNC_FLUSH", syncFlushTimeout=200, mappedFileSizeCommitLog=1 << 20,
                   syncFlushInlineMaxMicros=0)
    try:
        disk.gate.clear()
        t0 = time.monotonic()
        r = await asyncio.wait_for(s.put_messages([msg()]), 10)
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT and "not done within 0.200s" in (r.remark or "")
        assert time.monotonic() - t0 < 5  # answered at syncFlushTimeout, not when the disk came back
        assert s.max_offset_in_queue("T", 0) == 1  # stored anyway, as RocketMQ does
        disk.gate.set()
        r = await asyncio.wait_for(s.put_messages([msg()]), 10)
        assert r.status is PutStatus.PUT_OK
        assert s.commit_log.flushed_offset == s.commit_log_max_offset
    finally:
        s.shutdown()


async def test_waiter_past_the_end_and_after_stop(tmp_path: Path) -> None:
    cl = sync_log(tmp_path)
    try:
        with pytest.raises(FlushTimeoutError, match="failed"):  # bytes never appended: answered, not hung
            await asyncio.wait_for(cl.wait_flushed(10**9, timeout=5), 10)
        cl.put_records([req()])
        svc = cl.flush_service
        assert isinstance(svc, GroupCommitService)
        svc.stop()
        assert cl.flushed_offset == cl.max_offset  # the last round flushed everything
        assert svc.request(cl.max_offset + 1).result(1) is False
        assert await svc.wait(cl.max_offset + 1, asyncio.get_running_loop()) is False
    finally:
        cl.shutdown()
        cl.close()


# ------------------------------------------------------------------------- a real broker process


async def test_flush_counter_through_a_real_request(tmp_path: Path) -> None:
    """commitLogFlushTimesTotal in GET_BROKER_RUNTIME_INFO: one send in flight at a time needs
    one sync per send (each answer waits for a sync that began after its append)."""
    ns = namesrv_process(tmp_path).start()
    broker = broker_process(tmp_path, ns.addr, flushDiskType="SYNC_FLUSH").start()
    client = RemotingClient()
    try:
        await create_topic(client, broker.addr, "FlushCount")
        before = await _runtime_info(client, broker.addr)
        n = 20
        for i in range(n):
            r = await client.invoke(broker.addr, send_request("FlushCount", b"m%d" % i), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark
        after = await _runtime_info(client, broker.addr)
        flushes = int(after["commitLogFlushTimesTotal"]) - int(before["commitLogFlushTimesTotal"])
        assert n <= flushes <= n + 2
        assert int(after["commitLogFlushMicrosTotal"]) > int(before["commitLogFlushMicrosTotal"])
        assert int(after["putMessageTimesTotal"]) - int(before["putMessageTimesTotal"]) == n
    finally:
        await client.close()
        assert broker.stop() == 0, broker.output()[-3000:]
        ns.stop()


async def test_broker_answers_flush_disk_timeout_when_fdatasync_fails_or_hangs(tmp_path: Path) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    ns = namesrv_process(tmp_path).start()
    # the thread's rounds (test_group_commit_inline: the loop's)
    broker = scripted_broker(tmp_path, ns.addr, _BROKER_WITH_DISK_FAULTS, flags, flushDiskType="SYNC_FLUSH",
                             syncFlushTimeout=300, syncFlushInlineMaxMicros=0)
    client = RemotingClient()
    try:
        await create_topic(client, broker.addr, "DiskFault")
        r = await client.invoke(broker.addr, send_request("DiskFault", b"ok-1"), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark

        (flags / "fail").touch()
        r = await client.invoke(broker.addr, send_request("DiskFault", b"eio"), 5)
        assert r.code == ResponseCode.FLUSH_DISK_TIMEOUT, (r.code, r.remark)
        assert r.ext_fields and len(r.ext_fields["msgId"]) == 32  # stored, not known durable
        (flags / "fail").unlink()

        (flags / "slow").touch()
        t0 = time.monotonic()
        r = await client.invoke(broker.addr, send_request("DiskFault", b"slow"), 5)
        assert r.code == ResponseCode.FLUSH_DISK_TIMEOUT, (r.code, r.remark)
        assert time.monotonic() - t0 < 1.0  # at syncFlushTimeout (0.3 s), before the 1 s sync returned
        (flags / "slow").unlink()

        # the slow sync still under way answers nothing wrongly
        await send_until_ok(client, broker.addr, "DiskFault", b"ok-2")
        info = await _runtime_info(client, broker.addr)
        assert int(info["commitLogFlushTimesTotal"]) >= 2
    finally:
        await client.close()
        for f in flags.iterdir():
            f.unlink()
        assert broker.stop() == 0, broker.output()[-3000:]
        ns.stop()


_BROKER_WITH_A_FAILING_WAIT = textwrap.dedent("""
    import os, sys
    flags = sys.argv.pop(1)
    from fastmq.store.message_store import MessageStore
    real = MessageStore._finish_put
    async def _finish_put(self, *args, **kwargs):
        result = await real(self, *args, **kwargs)  # (raising after the wait: the batch's task is under way)
        if os.path.exists(os.path.join(flags, "boom")):
            raise RuntimeError("injected wait failure")
        return result
    MessageStore._finish_put = _finish_put
    from fastmq.broker.cli import main
    sys.exit(main(sys.argv[1:]))
""")


async def test_a_wait_that_raises_after_the_store_is_still_answered(tmp_path: Path) -> None:
    """A bug in the wait after a SYNC_FLUSH put (not a flush failure, which the store answers
    itself) used to be logged and never answered: the producer waited out its timeout. Now each
    request gets SYSTEM_ERROR with the error's text, alone or gathered with other connections'
    sends, and the broker goes on."""
    flags = tmp_path / "flags"
    flags.mkdir()
    ns = namesrv_process(tmp_path).start()
    # the thread's rounds: a lone send synced inline is answered without the wait this breaks
    broker = scripted_broker(tmp_path, ns.addr, _BROKER_WITH_A_FAILING_WAIT, flags, flushDiskType="SYNC_FLUSH",
                             syncFlushInlineMaxMicros=0)
    clients = [RemotingClient() for _ in range(8)]
    try:
        await create_topic(clients[0], broker.addr, "WaitFault")
        r = await clients[0].invoke(broker.addr, send_request("WaitFault", b"ok-1"), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark

        (flags / "boom").touch()
        r = await clients[0].invoke(broker.addr, send_request("WaitFault", b"lone"), 5)
        assert r.code == ResponseCode.SYSTEM_ERROR, (r.code, r.remark)
        assert "injected wait failure" in (r.remark or "")
        for _ in range(5):  # bounded: tries to have several connections' sends gathered in one turn
            answers = await asyncio.gather(*(c.invoke(broker.addr, send_request("WaitFault", b"many"), 5)
                                             for c in clients))
            assert all(a.code == ResponseCode.SYSTEM_ERROR and "injected" in (a.remark or "") for a in answers), \
                [(a.code, a.remark) for a in answers]
        (flags / "boom").unlink()

        r = await clients[0].invoke(broker.addr, send_request("WaitFault", b"ok-2"), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
    finally:
        for c in clients:
            await c.close()
        for f in flags.iterdir():
            f.unlink()
        assert broker.stop() == 0, broker.output()[-3000:]
        ns.stop()


async def test_switch_interval_is_lowered_while_a_service_runs_and_put_back(tmp_path: Path) -> None:
    """The flush thread must not wait the interpreter's default 5 ms for the GIL at each round:
    lowered while any group commit service runs, the caller's value back once the last stops."""
    was = sys.getswitchinterval()
    assert was > GroupCommitService.SWITCH_INTERVAL_S  # (the default, 5 ms)
    first = sync_log(tmp_path / "a")
    second = sync_log(tmp_path / "b")
    try:
        assert sys.getswitchinterval() == GroupCommitService.SWITCH_INTERVAL_S
        svc = first.flush_service
        assert isinstance(svc, GroupCommitService)
        first.shutdown()
        svc.stop()  # (a second stop counts once)
        assert sys.getswitchinterval() == GroupCommitService.SWITCH_INTERVAL_S  # the second still runs
    finally:
        second.shutdown()
        first.close()
        second.close()
    assert sys.getswitchinterval() == was


async def test_one_waiter_at_a_time_across_file_rolls(tmp_path: Path) -> None:
    """One producer (the compiled wait-then-sync's case) whose records fill several files: each
    wait is answered only once its bytes are flushed, the rolls included (a wake for bytes in
    the next file goes to the general round)."""
    cl = CommitLog(cfg(tmp_path, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=64 * 1024))
    cl.load()
    cl.start()
    try:
        done: list[int] = []
        body = b"y" * 3000
        for _ in range(60):  # ~3 KB each: three files and a bit
            d = cl.put_records([req(body=body)])[-1]
            end = d.commit_log_offset + d.size
            await asyncio.wait_for(cl.wait_flushed(end, timeout=5), 10)
            assert cl.flushed_offset >= end
            done.append(end)
        assert len(cl.mfq.files) >= 3
        assert cl.flushed_offset == cl.max_offset
        svc = cl.flush_service
        assert isinstance(svc, GroupCommitService) and svc.flushes >= 60 and cl.flush_times >= 60
    finally:
        cl.shutdown()
        cl.close()


def _watched_marks(q: MappedFileQueue, seen: dict[int, list[int]]) -> None:
    """Make ``q`` and its files record every value their flushed marks are set to (in ``seen``,
    by object id), every read of a mark giving the other threads a turn before it returns: the
    moment between a flusher's check of a mark and its set is where a lower value could win."""
    slot_q = MappedFileQueue.__dict__["flushed_where"]
    slot_f = MappedFile.__dict__["flushed_position"]

    def watched(slot: Any) -> property:
        def get(self: Any) -> int:
            v = slot.__get__(self)
            time.sleep(0)  # (after the read: what the caller compares with may be stale by its set)
            return v

        def put(self: Any, v: int) -> None:
            seen.setdefault(id(self), []).append(v)
            slot.__set__(self, v)
        return property(get, put)

    class F(MappedFile):
        __slots__ = ()
        flushed_position = watched(slot_f)

    class Q(MappedFileQueue):
        __slots__ = ()
        flushed_where = watched(slot_q)

        def _new_file(self, from_offset: int) -> MappedFile:
            mf = super()._new_file(from_offset)
            mf.__class__ = F
            return mf

    q.__class__ = Q


def test_two_flushers_never_move_the_flushed_marks_back(tmp_path: Path) -> None:
    """A loop's inline sync and the group commit thread's idle round both flush one log: each
    reads the mark, syncs, and sets its own target, so the one that read less could set its
    value after the other's, and a waiter covered by the higher one would wait for the next sync."""
    q = MappedFileQueue(tmp_path / "log", 64 * 1024)
    seen: dict[int, list[int]] = {}
    _watched_marks(q, seen)
    record = b"r" * 512  # 128 to a file: the flushers cross file rolls too
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            for _ in range(2000):  # bounded, and ended early once the appends are done
                q.flush(0)
                if stop.is_set():
                    return
        except BaseException as exc:  # (reported by the test, not lost in the thread)
            errors.append(exc)

    was = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    threads = [threading.Thread(target=flusher) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        for i in range(600):  # five files and a bit
            q.get_last_mapped_file().append(record)
            if i % 8 == 0:
                time.sleep(0.0005)  # let the flushers take turns with the appends
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        sys.setswitchinterval(was)
    try:
        assert not errors and not any(t.is_alive() for t in threads)
        q.flush(0)
        assert q.flushed_where == q.max_offset == 600 * 512
        assert all(mf.flushed_position == mf.wrote_position for mf in q.files)
        assert len(seen) > 2  # (the queue and several files were watched)
        for marks in seen.values():
            assert marks == sorted(marks), marks
    finally:
        q.close()
