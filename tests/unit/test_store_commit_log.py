"""Mapped files and the commit log: append, roll, read, flush, group commit."""
from __future__ import annotations

import asyncio
import struct
import threading
from pathlib import Path

import pytest

from fastmq.errors import FastMQError
from fastmq.protocol.message import BLANK_MAGIC, decode_records, encode_record, tags_code
from fastmq.store import FlushTimeoutError, MessageTooLargeError, StoreCorruptError, StoreError
from fastmq.store.commit_log import AppendRequest, CommitLog, GroupCommitService
from fastmq.store.mapped_file import MappedFile, offset_to_file_name
from fastmq.store.mapped_file_queue import MappedFileQueue
from tests.support import COMMIT_LOG_FILE as FILE
from tests.support import commit_log_config as cfg
from tests.support import req


# --------------------------------------------------------------------------- mapped files

def test_offset_file_name() -> None:
    assert offset_to_file_name(0) == "0" * 20
    assert offset_to_file_name(1073741824) == "00000000001073741824"


def test_mapped_file_append_select_flush(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / offset_to_file_name(8192), FILE)
    assert mf.file_from_offset == 8192 and (tmp_path / offset_to_file_name(8192)).stat().st_size == FILE
    assert mf.append(b"abc") == 0 and mf.append(b"de") == 3
    assert bytes(mf.select(1, 3)) == b"bcd" and bytes(mf.select(0)) == b"abcde"
    assert not mf.is_able_to_flush(1)  # less than one page dirty
    assert mf.is_able_to_flush(0)
    assert mf.flush(0) == 5 and mf.flushed_position == 5
    with pytest.raises(StoreError):
        mf.select(4, 10)
    with pytest.raises(StoreError):
        mf.append(b"z" * FILE)
    mf.close()
    mf.close()  # idempotent


def test_mapped_file_bad_name_and_size(tmp_path: Path) -> None:
    with pytest.raises(StoreCorruptError):
        MappedFile(tmp_path / "nope", FILE)
    p = tmp_path / offset_to_file_name(0)
    p.write_bytes(b"x" * 100)
    with pytest.raises(StoreCorruptError) as ei:
        MappedFile(p, FILE)
    assert isinstance(ei.value, FastMQError)


def test_mapped_file_queue_roll_and_find(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path, FILE)
    q.load()
    mf = q.get_last_mapped_file()
    mf.append(b"a" * FILE)
    mf2 = q.get_last_mapped_file()
    assert mf2.file_from_offset == FILE and len(q) == 2
    assert q.find_mapped_file_by_offset(10) is mf
    assert q.find_mapped_file_by_offset(FILE + 1) is mf2
    assert q.find_mapped_file_by_offset(3 * FILE) is None
    assert q.find_mapped_file_by_offset(-1) is None
    q.close()
    # a gap between files is refused at load
    (tmp_path / offset_to_file_name(3 * FILE)).write_bytes(bytes(FILE))
    q2 = MappedFileQueue(tmp_path, FILE)
    with pytest.raises(StoreCorruptError, match="gap"):
        q2.load()
    q2.close()


def test_stray_file_refused(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("hi")
    q = MappedFileQueue(tmp_path, FILE)
    with pytest.raises(StoreCorruptError):
        q.load()


# --------------------------------------------------------------------------- commit log

def test_append_assigns_offsets_and_reads_back(tmp_path: Path) -> None:
    cl = CommitLog(cfg(tmp_path))
    cl.load()
    out = cl.put_records([req(qid=0), req(qid=1), req(qid=0, tags="标签")], store_timestamp=1234)
    assert [d.queue_offset for d in out] == [0, 0, 1]
    assert out[0].commit_log_offset == 0 and out[1].commit_log_offset == out[0].size
    assert out[2].tags_code == tags_code("标签") and out[2].store_timestamp == 1234
    assert cl.max_offset == sum(d.size for d in out)
    m = cl.get_message(out[2].commit_log_offset)
    assert (m.queue_id, m.queue_offset, m.commit_log_offset, m.store_timestamp) == (0, 1, out[2].commit_log_offset, 1234)
    assert m.tags == "标签"
    # a range read is a slice of the file holding concatenated records (a PULL body)
    view = cl.get_data(0, cl.max_offset)
    assert isinstance(view, memoryview)
    assert [x.queue_offset for x in decode_records(view)] == [0, 0, 1]
    assert cl.store_timestamp_at(out[1].commit_log_offset, out[1].size) == 1234
    del view
    cl.close()


def test_roll_writes_blank_marker(tmp_path: Path) -> None:
    cl = CommitLog(cfg(tmp_path))
    cl.load()
    size = len(req().record)
    n = FILE // size + 3
    out = []
    for _ in range(n):  # one by one and then as a batch: both roll
        out += cl.put_records([req()])
    out += cl.put_records([req() for _ in range(n)])
    assert len(cl.mfq) >= 2
    first = cl.mfq.files[0]
    per_file = (FILE - 8) // size
    end = per_file * size
    assert struct.unpack_from(">iI", first.buffer, end) == (FILE - end, BLANK_MAGIC)
    assert out[per_file].commit_log_offset == FILE
    assert [d.queue_offset for d in out] == list(range(2 * n))
    assert cl.read_from(0, 10**9).nbytes == FILE
    assert cl.check_consistency() == []
    cl.close()


def test_append_rejects_bad_input(tmp_path: Path) -> None:
    cl = CommitLog(cfg(tmp_path, maxMessageSize=1024))
    cl.load()
    with pytest.raises(MessageTooLargeError):
        cl.put_records([req(), req(body=b"x" * 2000)])
    assert cl.max_offset == 0  # nothing of the batch was written
    with pytest.raises(StoreError):
        cl.put_records([AppendRequest(b"\x00" * 64, "T", 0)])
    bad = bytearray(req().record)
    bad[0] ^= 1  # total size disagrees with the buffer
    with pytest.raises(StoreError):
        cl.put_records([AppendRequest(bad, "T", 0)])
    with pytest.raises(StoreError):
        cl.get_data(10_000, 10)
    assert cl.max_offset == 0
    cl.close()


def test_transactional_prepared_does_not_advance_queue(tmp_path: Path) -> None:
    cl = CommitLog(cfg(tmp_path))
    cl.load()
    rec = encode_record(topic="T", body=b"half", sys_flag=0x4)
    out = cl.put_records([AppendRequest(rec, "T", 0), req()])
    assert [d.queue_offset for d in out] == [0, 0]
    cl.close()


def test_async_flush_service(tmp_path: Path) -> None:
    c = cfg(tmp_path, flushIntervalCommitLog=10, flushCommitLogThoroughInterval=30)
    cl = CommitLog(c)
    cl.load()
    cl.start()
    try:
        cl.put_records([req()])
        for _ in range(200):  # bounded: the thorough flush runs every 30 ms
            if cl.flushed_offset == cl.max_offset:
                break
            threading.Event().wait(0.01)
        assert cl.flushed_offset == cl.max_offset
    finally:
        cl.shutdown()
        cl.close()


async def test_sync_flush_group_commit(tmp_path: Path) -> None:
    cl = CommitLog(cfg(tmp_path, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20))
    cl.load()
    cl.start()
    try:
        assert isinstance(cl.flush_service, GroupCommitService)

        async def send(i: int) -> int:
            d = cl.put_records([req(qid=i % 4)])[-1]
            await cl.wait_flushed(d.commit_log_offset + d.size)
            return d.commit_log_offset + d.size

        ends = await asyncio.gather(*(send(i) for i in range(200)))
        assert cl.flushed_offset >= max(ends)
        # concurrent waiters shared syncs
        assert cl.flush_service.flushes < 200
    finally:
        cl.shutdown()
        cl.close()


async def test_flush_timeout_is_typed(tmp_path: Path) -> None:
    cl = CommitLog(cfg(tmp_path, flushDiskType="SYNC_FLUSH"))
    cl.load()
    cl.start()
    try:
        # an offset past the end can never be flushed: the waiter gets False -> typed error
        with pytest.raises(FlushTimeoutError):
            await cl.wait_flushed(10**9, timeout=2)
    finally:
        cl.shutdown()
        cl.close()


def test_preload_prepares_and_uses_next_file(tmp_path: Path) -> None:
    cl = CommitLog(cfg(tmp_path, preloadMappedFile=True))
    cl.load()
    size = len(req().record)
    n = (FILE // 2) // size + 1  # past half the first file: the next one is prepared
    cl.put_records([req() for _ in range(n)])
    nxt = cl.mfq._next
    assert nxt is not None and nxt[0] == FILE
    prepared = nxt[1].result(timeout=10)
    cl.put_records([req() for _ in range(n)])  # rolls into the prepared file
    assert cl.mfq.files[1] is prepared
    assert cl.check_consistency() == []
    # a prepared file the log never reached is removed at close
    for _ in range(100):  # bounded: until the file after the last is being prepared
        cl.put_records([req()])
        if cl.mfq._next is not None:
            break
    used = [mf.path.name for mf in cl.mfq.files]
    assert cl.mfq._next is not None
    cl.close()
    assert sorted(p.name for p in Path(cl.config.commit_log_dir).iterdir()) == used


def test_warm_keeps_pace_with_the_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages are brought in at most ``ahead`` bytes past the write position, not the whole file at
    once, the warming thread sleeping until the writer wakes it; ``limit`` brings in a first part
    without waiting; closing the file ends the warming."""
    import os
    import time
    mib = 1 << 20
    read: list[int] = []
    real_preadv = os.preadv
    monkeypatch.setattr(os, "preadv", lambda fd, bufs, off: read.append(off) or real_preadv(fd, bufs, off))
    mf = MappedFile(tmp_path / offset_to_file_name(0), 8 * mib)
    mf.warm(limit=2 * mib)
    assert read == [0, mib]
    read.clear()
    t = threading.Thread(target=mf.warm, kwargs={"ahead": 2 * mib})
    t.start()

    def settle(n: int) -> None:  # bounded: until the warming has read n chunks
        deadline = time.monotonic() + 10
        while len(read) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # and has had the time to read more, were it not paced
    settle(2)
    assert read == [0, mib] and t.is_alive()
    mf.append(b"x" * (3 * mib + 10))
    mf.wake_warm()  # the writer's call after its appends (MappedFileQueue.after_append)
    settle(5)
    assert read == [0, mib, 2 * mib, 3 * mib, 4 * mib, 5 * mib] and t.is_alive()
    mf.close()
    t.join(timeout=10)
    assert not t.is_alive()
