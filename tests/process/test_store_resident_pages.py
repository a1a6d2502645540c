"""Pages of a log's file still being written leave resident memory once on disk and behind the
writer (MappedFile.release_behind, MappedFileQueue.release_cold): a 1 GiB commit-log file filling
up, or thousands of queue files each holding a page, must not keep the broker's RSS growing with
the backlog or the number of queues. Data stays readable and nothing unflushed is dropped."""
from __future__ import annotations

import os
from pathlib import Path

from fastmq.store.mapped_file_queue import MappedFileQueue
from tests.support import msg, open_store, queue_bodies
from tests.support import rss_kib_by_file as _rss_kib_by_file

MiB = 1 << 20


def _fill(mfq: MappedFileQueue, nbytes: int) -> bytes:
    data = os.urandom(nbytes)
    mf = mfq.get_last_mapped_file()
    mf.reserve_to(mf.wrote_position + len(data))
    mf.append(data)
    return data


def test_the_file_being_written_keeps_only_its_tail_resident(tmp_path: Path) -> None:
    mfq = MappedFileQueue(tmp_path / "log", 16 * MiB)
    try:
        data = _fill(mfq, 8 * MiB)
        path = str(mfq.files[0].path)
        assert _rss_kib_by_file(tmp_path)[path] >= 8 * 1024 - 4  # written through the mapping: resident
        assert mfq.release_cold(2 * MiB) == 0  # nothing flushed yet: nothing may go
        assert _rss_kib_by_file(tmp_path)[path] >= 8 * 1024 - 4
        mfq.flush(0)
        assert mfq.release_cold(2 * MiB) == 1
        kib = _rss_kib_by_file(tmp_path).get(path, 0)
        assert 2 * 1024 - 4 <= kib <= 2 * 1024 + 4, kib  # the last 2 MiB behind the writer stay
        assert bytes(mfq.files[0].select(0)) == data  # released pages read back from the page cache
        more = _fill(mfq, 1 * MiB)
        assert mfq.release_cold(0) == 1  # flushed part only: the new MiB is not on disk yet
        assert _rss_kib_by_file(tmp_path).get(path, 0) >= 1024 - 4
        mfq.flush(0)
        assert bytes(mfq.files[0].select(8 * MiB)) == more
    finally:
        mfq.close()


def test_an_idle_queue_file_gives_back_its_last_page(tmp_path: Path) -> None:
    """Fd-less queue files: the page holding the write position goes once all is flushed, and
    an unchanged file is passed over when asked for changed files only."""
    mfq = MappedFileQueue(tmp_path / "cq", 600_000, keep_fd=False, reserve_step=64 * 1024)
    try:
        mf = mfq.get_last_mapped_file()
        mf.reserve_to(40)
        mf.append(b"\x01" * 40)
        path = str(mf.path)
        assert _rss_kib_by_file(tmp_path)[path] == 4
        mfq.flush(0)
        assert mfq.release_cold(0, changed_only=True) == 1
        assert _rss_kib_by_file(tmp_path).get(path, 0) == 0
        assert bytes(mf.select(0)) == b"\x01" * 40
        assert mfq.release_cold(0, changed_only=True) == 0  # not written since: not visited
        assert mfq.release_cold(0) == 1  # (a sweep visits it anyway)
        mf.reserve_to(60)
        mf.append(b"\x02" * 20)
        mfq.flush(0)
        assert mfq.release_cold(0, changed_only=True) == 1
        assert bytes(mf.select(0)) == b"\x01" * 40 + b"\x02" * 20
    finally:
        mfq.close()


async def test_store_release_keeps_a_window_behind_the_commit_log_writer(tmp_path: Path) -> None:
    """MessageStore.release_cold_pages on one 64 MiB commit-log file that is still being written:
    what lies more than the resident window behind the writer leaves RSS, messages stay readable."""
    s = open_store(tmp_path, mappedFileSizeCommitLog=64 * MiB)
    try:
        want = []
        for i in range(40):  # 40 x 500 x ~1.1 KiB: ~22 MiB in the first file
            batch = [msg(body=bytes([i % 251]) * 1000) for _ in range(500)]
            want += [m.body for m in batch]
            assert (await s.put_messages(batch)).ok
        s.commit_log.flush(0)
        for cq in s.queues.queues.values():
            cq.flush(0)
        s.release_cold_pages()
        log_dir = tmp_path / "commitlog"
        first = str(sorted(log_dir.iterdir())[0])
        kib = _rss_kib_by_file(log_dir).get(first, 0)
        # the window behind the writer (16 MiB), not the 22 MiB written; the kernel maps up to
        # 64 KiB of cached pages around a read fault, some past the write position
        assert kib <= 16 * 1024 + 128, kib
        queue_kib = sum(_rss_kib_by_file(tmp_path / "consumequeue").values())
        assert queue_kib == 0, queue_kib  # every queue flushed and idle: no page held
        assert queue_bodies(s, 0, 5000) == want  # (a pull of 1 KiB messages from memory takes 8 at a time)
        assert s.check_consistency() == []
    finally:
        s.shutdown()
