"""Consume queues: entries, numpy reads, offsets, timestamp lookup, truncation, recovery."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from fastmq.protocol.message import encode_record, java_string_hash, tags_code
from fastmq.store import StoreCorruptError, StoreError
from fastmq.store.commit_log import AppendRequest, CommitLog
from fastmq.store.config import MessageStoreConfig
from fastmq.store.consume_queue import CQ_DTYPE, ConsumeQueue, ConsumeQueueTable

CQ_FILE = 20 * 8  # 8 entries per file: rolls often


def test_dtype_is_20_bytes_big_endian() -> None:
    assert CQ_DTYPE.itemsize == 20
    raw = struct.pack(">qiq", 123, 45, -29146616)
    arr = np.frombuffer(raw, dtype=CQ_DTYPE)
    assert (int(arr["offset"][0]), int(arr["size"][0]), int(arr["tags_code"][0])) == (123, 45, -29146616)


def test_put_read_roll(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 3, CQ_FILE)
    cq.load()
    for i in range(20):
        assert cq.put(i, 1000 + i * 50, 50, java_string_hash("TagA" if i % 2 else "TagB"))
    assert not cq.put(5, 0, 1, 0)  # already there: skipped, unchanged
    assert (cq.min_offset, cq.max_offset) == (0, 20)
    assert len(cq.mfq) == 3
    assert (tmp_path / "T" / "3" / f"{CQ_FILE:020d}").exists()
    arr = cq.get_entries(6, 100)
    assert len(arr) == 2  # stops at the end of the file holding offset 6
    assert arr["offset"].tolist() == [1300, 1350]
    chunks = list(cq.iter_entries(0))
    allv = np.concatenate(chunks)
    assert allv["offset"].tolist() == [1000 + i * 50 for i in range(20)]
    # vectorised tag filter: what the pull path does with a subscription's codeSet
    mask = np.isin(allv["tags_code"], [java_string_hash("TagA")])
    assert mask.sum() == 10
    assert cq.get_entry(19) == (1950, 50, java_string_hash("TagA"))
    assert len(cq.get_entries(20, 5)) == 0 and len(cq.get_entries(-1, 5)) == 0
    with pytest.raises(StoreError):
        cq.get_entry(20)
    del arr, chunks, allv, mask
    cq.close()


def test_entry_lists_read_what_the_array_reads(tmp_path: Path) -> None:
    """The few-entries read of a pull (struct) against the array read: same entries, same bounds."""
    cq = ConsumeQueue(tmp_path, "T", 0, CQ_FILE)
    cq.load()
    assert cq.get_entry_lists(0, 4) == ([], [], [])  # empty queue
    for i in range(20):
        cq.put(i, 7000 + i * 90, 90 - i, java_string_hash(f"Tag{i % 3}") - (1 << 40) * (i % 2))
    for start in (-1, 0, 1, 6, 7, 8, 15, 19, 20, 25):
        for count in (0, 1, 2, 5, 8, 100):
            arr = cq.get_entries(start, count)
            want = (arr["offset"].tolist(), arr["size"].tolist(), arr["tags_code"].tolist())
            assert cq.get_entry_lists(start, count) == want, (start, count)
            del arr
    cq.close()


def test_recover_cuts_after_last_valid_entry(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, CQ_FILE)
    cq.load()
    for i in range(11):
        cq.put(i, i * 100, 100, 0)
    cq.flush(0)
    cq.close()
    cq2 = ConsumeQueue(tmp_path, "T", 0, CQ_FILE)
    cq2.load()
    assert cq2.max_offset == 16  # loaded files count as full until recovered
    cq2.recover()
    assert cq2.max_offset == 11 and cq2.max_physic_offset == 1100
    cq2.close()


def test_truncate_dirty_by_commit_log_offset(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, CQ_FILE)
    cq.load()
    for i in range(20):
        cq.put(i, i * 100, 100, 0)
    cq.truncate_dirty(950)  # entries at 1000.. point past the end
    assert cq.max_offset == 10 and cq.max_physic_offset == 1000
    assert len(cq.mfq) == 2
    assert cq.put(10, 1000, 100, 0)
    cq.truncate_dirty(0)
    assert cq.max_offset == 0 and cq.max_physic_offset == -1
    cq.close()


def test_gap_is_written_with_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, CQ_FILE)
    cq.load()
    cq.put(0, 0, 10, 0)
    cq.put(20, 500, 10, 0)
    assert cq.max_offset == 21 and "gap" in caplog.text
    assert cq.get_entry(20) == (500, 10, 0)
    cq.close()


def test_next_unit_pos_names_only_the_usual_entry(tmp_path: Path) -> None:
    """MappedFile.next_unit_pos, the usual-entry test of ConsumeQueue.put (the lone put asks the same):
    the file's next entry with its room reserved, and -1 for the rest (ahead of the end, behind
    it, no room reserved yet)."""
    cq = ConsumeQueue(tmp_path, "T", 0, CQ_FILE)
    cq.load()
    cq.put(0, 0, 10, 0)  # (the first entry makes the file and reserves a step)
    mf = cq.mfq.files[-1]
    assert mf.file_from_offset == 0 and mf.wrote_position == 20 and mf.reserved_to >= 40
    assert mf.next_unit_pos(20, 20) == 20             # the next entry
    assert mf.next_unit_pos(40, 20) == -1             # past it: a gap, the general case
    assert mf.next_unit_pos(0, 20) == -1              # already there
    assert mf.next_unit_pos(20, mf.reserved_to) == -1  # beyond the reserved room
    assert cq.put(1, 10, 10, 0) and mf.wrote_position == 40 and mf.next_unit_pos(40, 20) == 40
    cq.close()


def test_bad_file_size() -> None:
    with pytest.raises(StoreError):
        ConsumeQueue("/tmp", "T", 0, 30)


def test_search_by_timestamp_with_commit_log(tmp_path: Path) -> None:
    c = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=8192,
                           mappedFileSizeConsumeQueue=CQ_FILE)
    cl = CommitLog(c)
    cl.load()
    table = ConsumeQueueTable(c.consume_queue_dir, CQ_FILE)
    for t in range(10):  # store timestamps 100, 110, ..., 190
        rec = encode_record(topic="T", body=b"b", properties={"TAGS": "x"})
        table.dispatch(cl.put_records([AppendRequest(rec, "T", 0, tags_code("x"))], store_timestamp=100 + 10 * t))
    cq = table.get("T", 0)
    assert cq is not None and cq.max_offset == 10
    look = cl.store_timestamp_at
    assert cq.search_offset_by_timestamp(100, look) == 0
    assert cq.search_offset_by_timestamp(105, look) == 1
    assert cq.search_offset_by_timestamp(190, look) == 9
    assert cq.search_offset_by_timestamp(500, look) == 10
    assert cq.search_offset_by_timestamp(0, look) == 0
    assert cq.search_offset_by_timestamp(105, look, boundary="upper") == 0
    assert cq.search_offset_by_timestamp(500, look, boundary="upper") == 9
    assert cq.search_offset_by_timestamp(50, look, boundary="upper") == 0
    with pytest.raises(ValueError):
        cq.search_offset_by_timestamp(5, look, boundary="middle")
    table.close()
    cl.close()


def test_table_load_and_bad_dir(tmp_path: Path) -> None:
    t = ConsumeQueueTable(tmp_path, CQ_FILE)
    t.find_or_create("A", 0).put(0, 0, 10, 0)
    t.find_or_create("B", 2).put(0, 10, 10, 0)
    t.flush(0)
    t.close()
    t2 = ConsumeQueueTable(tmp_path, CQ_FILE)
    t2.load()
    t2.recover()
    assert t2.max_offsets() == {("A", 0): 1, ("B", 2): 1}
    assert t2.max_physic_offset() == 20
    t2.close()
    (tmp_path / "A" / "x").mkdir()
    with pytest.raises(StoreCorruptError):
        ConsumeQueueTable(tmp_path, CQ_FILE).load()


def test_flush_service_reports_timestamp(tmp_path: Path) -> None:
    from types import SimpleNamespace
    import threading

    from fastmq.store.consume_queue import FlushConsumeQueueService

    t = ConsumeQueueTable(tmp_path, CQ_FILE)
    seen: list[tuple[int, bool]] = []
    svc = FlushConsumeQueueService(t, interval_ms=10, least_pages=0, thorough_interval_ms=20,
                                   on_flushed=lambda ts, th: seen.append((ts, th)))
    svc.start()
    try:
        t.dispatch([SimpleNamespace(topic="T", queue_id=0, queue_offset=0, commit_log_offset=0,
                                    size=10, tags_code=0, store_timestamp=777)])
        for _ in range(300):  # bounded wait for a thorough round after the dispatch
            if any(ts == 777 and th for ts, th in seen):
                break
            threading.Event().wait(0.01)
    finally:
        svc.stop()
    assert seen[-1] == (777, True)
    cq = t.get("T", 0)
    assert cq is not None and cq.mfq.files[0].flushed_position == 20
    t.close()


def test_recovery_passes_over_the_zeros_below_a_queues_first_offset(tmp_path: Path) -> None:
    """Guards: a queue whose first entry lies past its first file's start (a slave that began at
    the master's last commit-log file) was ended at its leading zeros by recovery, and
    --check-store called them a hole."""
    cq = ConsumeQueue(tmp_path, "T", 0, CQ_FILE)
    cq.load()
    for q in range(7, 10):
        assert cq.put(q, 1000 + q * 100, 100, q)
    cq.flush(0)
    cq.close()
    again = ConsumeQueue(tmp_path, "T", 0, CQ_FILE)
    again.load()
    again.recover()
    assert again.max_offset == 10
    assert again.get_entry(8) == (1800, 100, 8)
    assert again.max_physic_offset == 1000 + 9 * 100 + 100
    again.close()


def test_queue_files_hold_disk_blocks_only_as_entries_come(tmp_path: Path) -> None:
    """Guards: every queue file took its full 6 MB of disk at creation (posix_fallocate), so a
    broker with 1,024 queues of one benchmark topic held 6.8 GB of disk for 35 s of messages."""
    from fastmq.store.consume_queue import RESERVE_STEP

    size = MessageStoreConfig().mappedFileSizeConsumeQueue
    cq = ConsumeQueue(tmp_path, "T", 0, size)
    cq.load()
    assert cq.put(0, 0, 100, 0)
    path = tmp_path / "T" / "0" / f"{0:020d}"
    st = path.stat()
    assert st.st_size == size                        # full length, as RocketMQ names and reads it
    assert st.st_blocks * 512 <= RESERVE_STEP        # blocks: one step, not the whole file
    n = 5000
    offs = np.arange(1, n + 1, dtype=np.int64) * 100
    assert cq.put_run(1, offs, np.full(n, 100, np.int32), np.zeros(n, np.int64)) == n
    held = path.stat().st_blocks * 512
    assert (n + 1) * 20 <= held <= (n + 1) * 20 + RESERVE_STEP
    cq.close()
    # after a restart the file's blocks are not known: the next write reserves from the start again
    cq2 = ConsumeQueue(tmp_path, "T", 0, size)
    cq2.load()
    cq2.recover()
    assert cq2.max_offset == n + 1
    assert cq2.put(n + 1, (n + 1) * 100, 100, 0)
    assert cq2.get_entry(n + 1)[0] == (n + 1) * 100
    assert path.stat().st_blocks * 512 <= (n + 2) * 20 + RESERVE_STEP
    cq2.close()


def test_a_queue_flush_syncs_only_what_it_has_not_synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: every consume-queue flush msynced its whole 6 MB mapping, so the flush round over
    RocketMQ's 1,024-queue benchmark topic walked 6 GB of mappings for a few entries a queue."""
    from fastmq.store import mapped_file

    size = MessageStoreConfig().mappedFileSizeConsumeQueue
    synced: list[tuple[int, int | None]] = []
    real = mapped_file._FdlessMapping.sync

    def spy(self: mapped_file._FdlessMapping, start: int = 0, end: int | None = None) -> None:
        synced.append((start, end))
        real(self, start, end)  # the real msync of that range must succeed too

    monkeypatch.setattr(mapped_file._FdlessMapping, "sync", spy)
    cq = ConsumeQueue(tmp_path, "T", 0, size)
    cq.load()
    for q in range(300):
        assert cq.put(q, q * 100, 100, 0)
    cq.flush(0)
    cq.flush(0)  # nothing new: no sync at all
    for q in range(300, 310):
        assert cq.put(q, q * 100, 100, 0)
    cq.flush(0)
    assert synced == [(0, 300 * 20), (300 * 20, 310 * 20)]
    assert cq.mfq.files[0].flushed_position == 310 * 20
    cq.close()
    # what was synced is what a restart reads back
    again = ConsumeQueue(tmp_path, "T", 0, size)
    again.load()
    again.recover()
    assert again.max_offset == 310 and again.get_entry(309) == (30900, 100, 0)
    again.close()


def test_fdless_sync_rounds_its_range_out_to_pages(tmp_path: Path) -> None:
    """msync wants a page-aligned start: an unaligned one is rounded down, never refused."""
    from fastmq.store.mapped_file import MappedFile

    mf = MappedFile(tmp_path / f"{0:020d}", 64 * 1024, keep_fd=False)
    mf.reserve_to(64 * 1024)
    mf.buffer[5000:5004] = b"abcd"
    mf.wrote_position = 5004
    mf._sync(4999, 5004)           # unaligned start: rounded down to 4096
    mf._sync(60 * 1024, 10 ** 9)   # an end past the mapping: cut to it
    mf._sync()                     # the whole file
    mf.close()
    assert (tmp_path / f"{0:020d}").read_bytes()[5000:5004] == b"abcd"


def _sparse_supported(path: Path) -> bool:
    """Whether the file system under ``path`` reports holes (SEEK_HOLE short of a sparse file's end)."""
    import os
    p = path / "probe"
    with open(p, "wb") as f:
        f.truncate(1 << 20)
        f.write(b"x")
    fd = os.open(p, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE) < (1 << 20)
    except OSError:
        return False
    finally:
        os.close(fd)
        p.unlink()


def test_recovery_reads_only_data_and_gives_back_a_filled_tail(tmp_path: Path) -> None:
    """Recovery reads a sparse queue file's data extents only (on tmpfs a read of a hole
    allocates it), finds the same end, and punches out a tail an older restart filled with zeros."""
    import os
    if not _sparse_supported(tmp_path):
        pytest.skip("this file system does not report holes")
    size = 20 * 300_000  # RocketMQ's 6 MB queue file
    cq = ConsumeQueue(tmp_path, "T", 0, size)
    for i in range(500):
        cq.put(i, 1000 + 10 * i, 10, 7)
    cq.flush()
    cq.close()
    path = tmp_path / "T" / "0" / f"{0:020d}"
    blocks = os.stat(path).st_blocks
    assert blocks * 512 < 1 << 20  # sparse: a step reserved, not 6 MB

    again = ConsumeQueue(tmp_path, "T", 0, size)
    again.load()
    again.recover()
    assert again.max_offset == 500 and again.max_physic_offset == 1000 + 10 * 499 + 10
    assert os.stat(path).st_blocks <= blocks  # nothing past the data was read into being
    again.close()

    with open(path, "r+b") as f:  # what an older restart left on tmpfs: the whole file allocated
        os.posix_fallocate(f.fileno(), 0, size)
        f.seek(500 * 20)
        f.write(bytes(size - 500 * 20))
    assert os.stat(path).st_blocks * 512 >= size
    third = ConsumeQueue(tmp_path, "T", 0, size)
    third.load()
    third.recover()
    assert third.max_offset == 500
    assert os.stat(path).st_blocks * 512 < 1 << 20  # the zero tail given back
    third.put(500, 6000, 10, 7)  # and written again: room reserved anew
    assert third.get_entry(500) == (6000, 10, 7)
    third.close()


def test_recovery_finds_a_first_file_that_starts_past_a_hole(tmp_path: Path) -> None:
    """The queue's first file may start with zero entries below its first offset (a slave that
    began mid-queue): with those a hole, recovery still finds the entries after it."""
    size = 20 * 300_000
    cq = ConsumeQueue(tmp_path, "T", 1, size)
    for i in range(100_000, 100_010):
        cq.put(i, 50 * i, 10, 7)
    cq.flush()
    cq.close()
    again = ConsumeQueue(tmp_path, "T", 1, size)
    again.load()
    again.recover()
    assert again.max_offset == 100_010
    assert again.get_entry(100_009) == (50 * 100_009, 10, 7)
    again.close()
