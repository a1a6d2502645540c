"""SYNC_FLUSH on the event loop's own thread (syncFlushInlineMaxMicros): what one inline sync
answers, when the group-commit thread takes over, a failing disk, many producers, the config key.

In process, ``os.fdatasync`` of commit-log files is wrapped to record what each sync covers, so
every answer can be checked against the syncs that had returned when it was given; against real
``fastmq-broker`` processes for what a client sees.
"""
from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import pytest

from fastmq._ext import sync_wait_py
from fastmq._ext.codec import FrameDecoder, encode_frames
from fastmq.broker.config import BrokerConfig, check_configs
from fastmq.errors import ConfigError
from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.store import FlushTimeoutError
from fastmq.store import group_commit as group_commit_module
from fastmq.store.commit_log import CommitLog, GroupCommitService
from fastmq.store.config import MessageStoreConfig
from fastmq.store.message_store import PutStatus
from fastmq.testing import broker_process, namesrv_process
from tests.support import create_topic, send_request
from tests.process.helpers import BROKER_WITH_DISK_FAULTS as _BROKER_WITH_DISK_FAULTS
from tests.process.helpers import runtime_info as _runtime_info
from tests.process.helpers import scripted_broker, send_until_ok
from tests.support import commit_log_config as cfg
from tests.support import msg, open_store, req


class RecordingDisk:
    """``os.fdatasync`` for commit-log files that records the log's end when each sync began
    (what it can cover) and, once it returned, marks it done; optionally slow or failing."""

    def __init__(self, cl: CommitLog | None = None) -> None:
        self.real = os.fdatasync
        self.cl = cl
        self.covered = 0  # the highest offset a returned sync covers
        self.syncs = 0
        self.delay = 0.0
        self.fail: OSError | None = None

    def __call__(self, fd: int) -> None:
        if "commitlog" not in os.readlink(f"/proc/self/fd/{fd}"):
            self.real(fd)
            return
        start = self.cl.max_offset if self.cl is not None else 0
        if self.delay:
            time.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        self.real(fd)
        self.syncs += 1
        self.covered = max(self.covered, start)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingDisk]:
    d = RecordingDisk()
    monkeypatch.setattr(os, "fdatasync", d)
    # the compiled wait-then-sync calls libc's fdatasync, not os.fdatasync: the pure twin does
    monkeypatch.setattr(group_commit_module, "wait_and_sync", sync_wait_py.wait_and_sync)
    # no idle round racing the test's own syncs (a round mid-sync sends waits to the thread)
    monkeypatch.setattr(GroupCommitService, "IDLE_WAIT_S", 5.0)
    yield d
    d.fail = None
    d.delay = 0.0


def sync_log(tmp_path: Path, disk: RecordingDisk | None = None, **kw: object) -> tuple[CommitLog, GroupCommitService]:
    """A SYNC_FLUSH commit log; the inline bound 1 s unless given (a real sync slower than the
    default 2 ms, on a busy disk, would send a wait to the thread)."""
    kw.setdefault("syncFlushInlineMaxMicros", 1_000_000)
    cl = CommitLog(cfg(tmp_path, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20, **kw))
    cl.load()
    if disk is not None:
        disk.cl = cl
    cl.start()
    svc = cl.flush_service
    assert isinstance(svc, GroupCommitService)
    return cl, svc


def _append(cl: CommitLog) -> int:
    d = cl.put_records([req()])[-1]
    return d.commit_log_offset + d.size


async def test_one_inline_sync_answers_every_waiter_of_the_turn(tmp_path: Path, disk: RecordingDisk) -> None:
    cl, svc = sync_log(tmp_path, disk)
    try:
        await asyncio.sleep(0.05)  # (the thread's first idle round: nothing to sync)
        loop = asyncio.get_running_loop()
        answered: list[tuple[int, int]] = []  # (offset, what the returned syncs covered when answered)
        futs = []
        for _ in range(10):  # one loop turn: ten appends and ten waits before the loop runs again
            end = _append(cl)
            fut = svc.wait(end, loop)
            fut.add_done_callback(lambda f, end=end: answered.append((end, disk.covered)))
            futs.append(fut)
        syncs, inline = disk.syncs, svc.inline_flushes
        assert all(await asyncio.wait_for(asyncio.gather(*futs), 10))
        assert svc.inline_flushes == inline + 1 and disk.syncs == syncs + 1  # one sync for the turn
        assert len(answered) == 10 and all(covered >= end for end, covered in answered)
        assert cl.flushed_offset == cl.max_offset
    finally:
        cl.shutdown()
        cl.close()


async def test_lone_waits_are_synced_inline_and_never_answered_early(tmp_path: Path, disk: RecordingDisk) -> None:
    cl, svc = sync_log(tmp_path, disk)
    try:
        for _ in range(30):  # wait_flushed's way (the call_soon round)
            end = _append(cl)
            await asyncio.wait_for(cl.wait_flushed(end), 10)
            assert disk.covered >= end and cl.flushed_offset >= end
        for _ in range(30):  # sync_now's way (the send fast path at the end of its turn)
            end = _append(cl)
            assert svc.sync_now(end) is True
            assert disk.covered >= end and cl.flushed_offset >= end
        assert svc.inline_flushes >= 58  # (the thread's idle round may take one now and then)
    finally:
        cl.shutdown()
        cl.close()


async def test_many_requests_keep_the_thread(tmp_path: Path, disk: RecordingDisk) -> None:
    cl, svc = sync_log(tmp_path, disk)
    try:
        end = _append(cl)
        assert svc.sync_now(end, weight=3) is None  # three requests in the turn: not here
        end = _append(cl)
        assert svc.sync_now(end) is None  # nor one alone just after (INLINE_QUIET_S)
        inline = svc.inline_flushes
        assert await asyncio.wait_for(svc.wait(end, asyncio.get_running_loop()), 10) is True
        assert svc.inline_flushes == inline and disk.covered >= end  # the thread synced it
        svc._many_at -= svc.INLINE_QUIET_S  # (as if quiet for that long)
        end = _append(cl)
        assert svc.sync_now(end) is True and svc.inline_flushes == inline + 1
    finally:
        cl.shutdown()
        cl.close()


async def test_a_slow_sync_falls_back_to_the_thread(tmp_path: Path, disk: RecordingDisk) -> None:
    """The first sync that took longer than the bound sends the next waits to the thread, until
    its syncs are fast again. (The thread's pure wait-then-sync: the slow disk is injected
    through ``os.fdatasync``, which the compiled twin does not call.)"""
    cl, svc = sync_log(tmp_path, disk, syncFlushInlineMaxMicros=100_000)
    try:
        disk.delay = 0.2  # over the bound
        end = _append(cl)
        await asyncio.wait_for(cl.wait_flushed(end), 10)
        inline = svc.inline_flushes
        assert inline == 1
        for _ in range(3):
            end = _append(cl)
            assert svc.sync_now(end) is None  # the last sync was slow
            await asyncio.wait_for(cl.wait_flushed(end), 10)
            assert disk.covered >= end
        assert svc.inline_flushes == inline  # all three by the thread
        disk.delay = 0.0
        for _ in range(5):  # the thread's fast syncs bring the inline path back
            end = _append(cl)
            await asyncio.wait_for(cl.wait_flushed(end), 10)
            assert disk.covered >= end
        end = _append(cl)
        assert svc.sync_now(end) is True and svc.inline_flushes > inline
    finally:
        cl.shutdown()
        cl.close()


async def test_bound_zero_leaves_every_sync_to_the_thread(tmp_path: Path, sync_wait: ModuleType,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """syncFlushInlineMaxMicros=0: the thread (either twin of its wait-then-sync) syncs and
    answers every wait; the loop never syncs."""
    monkeypatch.setattr(group_commit_module, "wait_and_sync", sync_wait.wait_and_sync)
    cl, svc = sync_log(tmp_path, syncFlushInlineMaxMicros=0)
    try:
        for _ in range(20):
            end = _append(cl)
            assert svc.sync_now(end) is None
            await asyncio.wait_for(cl.wait_flushed(end), 10)
            assert cl.flushed_offset >= end
        assert svc.inline_flushes == 0 and svc.flushes >= 20
    finally:
        cl.shutdown()
        cl.close()


async def test_a_failed_inline_sync_answers_flush_disk_timeout(tmp_path: Path, disk: RecordingDisk) -> None:
    s = open_store(tmp_path, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20,
                   syncFlushInlineMaxMicros=1_000_000)
    disk.cl = s.commit_log
    svc = s.commit_log.flush_service
    assert isinstance(svc, GroupCommitService)
    try:
        r = await asyncio.wait_for(s.put_messages([msg()]), 10)
        assert r.status is PutStatus.PUT_OK and svc.inline_flushes >= 1
        disk.fail = OSError(errno.EIO, "Input/output error")
        r = await asyncio.wait_for(s.put_messages([msg()]), 10)
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT and "Input/output error" in (r.remark or "")
        end = _append(s.commit_log)
        assert svc.sync_now(end) is None  # failing: the thread's rounds retry
        with pytest.raises(FlushTimeoutError):
            await asyncio.wait_for(s.commit_log.wait_flushed(end), 10)
        disk.fail = None
        r = await asyncio.wait_for(s.put_messages([msg()]), 10)
        assert r.status is PutStatus.PUT_OK
        assert s.commit_log.flushed_offset == s.commit_log_max_offset
    finally:
        s.shutdown()


def test_the_bound_is_refused_when_negative() -> None:
    store = MessageStoreConfig(syncFlushInlineMaxMicros=-1)
    with pytest.raises(ConfigError, match=r"syncFlushInlineMaxMicros=-1: must be >= 0"):
        check_configs(BrokerConfig(), store)
    check_configs(BrokerConfig(), MessageStoreConfig(syncFlushInlineMaxMicros=0))


# ------------------------------------------------------------------------- real broker processes

async def test_broker_refuses_a_bad_bound_at_start_and_in_an_update(tmp_path: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    try:
        (tmp_path / "bad").mkdir()
        bad = broker_process(tmp_path / "bad", ns.addr, syncFlushInlineMaxMicros=-5)
        with pytest.raises(RuntimeError, match="exited"):
            bad.start(timeout=10)
        assert "syncFlushInlineMaxMicros=-5: must be >= 0" in bad.output()
        (tmp_path / "b").mkdir()
        b = broker_process(tmp_path / "b", ns.addr, flushDiskType="SYNC_FLUSH").start()
        client = RemotingClient()
        try:
            r = await client.invoke(b.addr, create_request(RequestCode.UPDATE_BROKER_CONFIG, {},
                                                           b"syncFlushInlineMaxMicros=abc\n"), 5)
            assert r.code != ResponseCode.SUCCESS and "syncFlushInlineMaxMicros" in (r.remark or "")
            r = await client.invoke(b.addr, create_request(RequestCode.UPDATE_BROKER_CONFIG, {},
                                                           b"syncFlushInlineMaxMicros=-1\n"), 5)
            assert r.code != ResponseCode.SUCCESS and "must be >= 0" in (r.remark or "")
            await create_topic(client, b.addr, "StillUp")
            r = await client.invoke(b.addr, send_request("StillUp", b"x"), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark
        finally:
            await client.close()
            assert b.stop() == 0, b.output()[-3000:]
    finally:
        ns.stop()


async def test_broker_inline_sync_failing_then_slow_disk(tmp_path: Path) -> None:
    """Default bound: a failed inline fdatasync answers FLUSH_DISK_TIMEOUT and the broker goes on;
    a sync slower than the bound (1 s, injected) is answered once it returned (on the loop: late,
    but true), and the next send goes to the thread, answered FLUSH_DISK_TIMEOUT at syncFlushTimeout."""
    flags = tmp_path / "flags"
    flags.mkdir()
    ns = namesrv_process(tmp_path).start()
    broker = scripted_broker(tmp_path, ns.addr, _BROKER_WITH_DISK_FAULTS, flags, flushDiskType="SYNC_FLUSH",
                             syncFlushTimeout=300)
    client = RemotingClient()
    try:
        await create_topic(client, broker.addr, "InlineFault")
        for i in range(5):
            r = await client.invoke(broker.addr, send_request("InlineFault", b"ok-%d" % i), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark

        (flags / "fail").touch()
        r = await client.invoke(broker.addr, send_request("InlineFault", b"eio"), 5)
        assert r.code == ResponseCode.FLUSH_DISK_TIMEOUT, (r.code, r.remark)
        assert "Input/output error" in (r.remark or "")
        assert r.ext_fields and len(r.ext_fields["msgId"]) == 32  # stored, not known durable
        (flags / "fail").unlink()
        await send_until_ok(client, broker.addr, "InlineFault", b"ok-after-eio")  # the thread's next round clears it
        for i in range(5):  # fast syncs again: back on the loop
            r = await client.invoke(broker.addr, send_request("InlineFault", b"ok2-%d" % i), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark

        (flags / "slow").touch()
        t0 = time.monotonic()
        r = await client.invoke(broker.addr, send_request("InlineFault", b"slow-inline"), 5)
        took = time.monotonic() - t0
        if r.code == ResponseCode.SUCCESS:  # synced on the loop: answered after the sync returned
            assert took >= 0.9, took
            t0 = time.monotonic()
            r = await client.invoke(broker.addr, send_request("InlineFault", b"slow-thread"), 5)
            assert r.code == ResponseCode.FLUSH_DISK_TIMEOUT, (r.code, r.remark)
            assert time.monotonic() - t0 < 1.0  # at syncFlushTimeout, by the thread
        else:  # (an idle round of the thread took the slow sync first: the thread's answer)
            assert r.code == ResponseCode.FLUSH_DISK_TIMEOUT, (r.code, r.remark)
        (flags / "slow").unlink()
        await send_until_ok(client, broker.addr, "InlineFault", b"ok-3")
    finally:
        await client.close()
        for f in flags.iterdir():
            f.unlink()
        assert broker.stop() == 0, broker.output()[-3000:]
        ns.stop()


def _frame(topic: str, i: int) -> bytes:
    return encode_frames([send_request(topic, b"m%06d" % i, {"WAIT": "true"}, queue_id=i % 4)])


async def test_sixteen_producers_are_all_acked_and_share_flushes(tmp_path: Path) -> None:
    """16 connections, each with one send in flight, on a broker with the default bound: every
    send answered SUCCESS, stored, and fewer fdatasyncs than sends."""
    ns = namesrv_process(tmp_path).start()
    b = broker_process(tmp_path, ns.addr, flushDiskType="SYNC_FLUSH").start()
    client = RemotingClient()
    producers, each = 16, 40
    try:
        await create_topic(client, b.addr, "Many")
        before = await _runtime_info(client, b.addr)
        conns = [await asyncio.open_connection("127.0.0.1", b.port) for _ in range(producers)]
        for _, w in conns:
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        async def produce(c: int) -> list[int]:
            reader, writer = conns[c]
            dec = FrameDecoder()
            codes = []
            for i in range(each):
                writer.write(_frame("Many", c * each + i))
                got: list[Any] = []
                while not got:
                    chunk = await asyncio.wait_for(reader.read(65536), 30)
                    assert chunk, "broker closed the connection"
                    got = dec.feed(chunk)
                codes.append(got[0].code)
            return codes

        try:
            results = await asyncio.wait_for(asyncio.gather(*(produce(c) for c in range(producers))), 120)
        finally:
            for _, w in conns:
                w.close()
        assert all(code == ResponseCode.SUCCESS for codes in results for code in codes)
        after = await _runtime_info(client, b.addr)
        n = producers * each
        assert int(after["putMessageTimesTotal"]) - int(before["putMessageTimesTotal"]) == n
        flushes = int(after["commitLogFlushTimesTotal"]) - int(before["commitLogFlushTimesTotal"])
        assert 0 < flushes < n, flushes
    finally:
        await client.close()
        assert b.stop() == 0, b.output()[-3000:]
        ns.stop()
