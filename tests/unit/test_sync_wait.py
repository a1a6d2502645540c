"""The group commit's wait-then-sync (fastmq._ext.sync_wait), both twins: what wakes it, what it
syncs and reports, what it refuses, and that it waits without holding the GIL."""
from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Iterator

import numpy as np
import pytest


@pytest.fixture
def files(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """(an eventfd as the service makes it, a data file with bytes written to it)."""
    wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    data = os.open(tmp_path / "00000000000000000000", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(data, b"x" * 4096)
    try:
        yield wake, data
    finally:
        os.close(wake)
        os.close(data)


def _still_signalled(wake: int) -> bool:
    try:
        os.eventfd_read(wake)
        return True
    except BlockingIOError:
        return False


def test_nothing_asked_times_out(sync_wait: ModuleType, files: tuple[int, int]) -> None:
    wake, data = files
    target = np.zeros(1, np.int64)
    t0 = time.monotonic()
    assert sync_wait.wait_and_sync(wake, data, target, 1 << 20, 0, 50) == (sync_wait.TIMED_OUT, 0)
    assert time.monotonic() - t0 >= 0.04


def test_a_request_is_synced_and_its_wakes_taken(sync_wait: ModuleType, files: tuple[int, int]) -> None:
    wake, data = files
    target = np.zeros(1, np.int64)
    target[0] = 4096
    os.eventfd_write(wake, 1)
    os.eventfd_write(wake, 1)  # two requesters before the thread woke: one round for both
    covered, ns = sync_wait.wait_and_sync(wake, data, target, 1 << 20, 0, 1000)
    assert covered == 4096 and ns > 0
    assert not _still_signalled(wake)


def test_a_target_already_flushed_is_not_synced_again(sync_wait: ModuleType, files: tuple[int, int]) -> None:
    wake, data = files
    target = np.array([100], np.int64)
    os.eventfd_write(wake, 1)
    assert sync_wait.wait_and_sync(wake, data, target, 1 << 20, 100, 1000) == (100, 0)


def test_bytes_in_another_file_are_left_to_the_caller(sync_wait: ModuleType, files: tuple[int, int]) -> None:
    wake, data = files
    target = np.array([(1 << 20) + 1], np.int64)
    os.eventfd_write(wake, 1)
    assert sync_wait.wait_and_sync(wake, data, target, 1 << 20, 0, 1000) == (sync_wait.PAST_LIMIT, 0)
    assert not _still_signalled(wake)  # woken: the caller's own round follows at once


def test_a_failed_sync_raises_the_error(sync_wait: ModuleType, files: tuple[int, int], tmp_path: Path) -> None:
    wake, _ = files
    closed = os.open(tmp_path / "gone", os.O_RDWR | os.O_CREAT, 0o644)
    os.close(closed)
    target = np.array([10], np.int64)
    os.eventfd_write(wake, 1)
    with pytest.raises(OSError) as info:
        sync_wait.wait_and_sync(wake, closed, target, 1 << 20, 0, 1000)
    assert info.value.errno == errno.EBADF


def test_bad_target_is_refused(sync_wait: ModuleType, files: tuple[int, int]) -> None:
    wake, data = files
    with pytest.raises((ValueError, IndexError)):
        os.eventfd_write(wake, 1)
        sync_wait.wait_and_sync(wake, data, np.zeros(0, np.int64), 1 << 20, 0, 1000)


def test_waits_without_holding_the_gil(sync_wait: ModuleType, files: tuple[int, int]) -> None:
    """The waiting thread must leave the GIL to the others (the event loop appends meanwhile)."""
    wake, data = files
    target = np.zeros(1, np.int64)
    out: list[tuple[int, int]] = []
    t = threading.Thread(target=lambda: out.append(sync_wait.wait_and_sync(wake, data, target, 1 << 20, 0, 5000)))
    t.start()
    try:
        spins = 0
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:  # Python runs here while the other thread waits
            spins += 1
        assert spins > 1000 and not out
        target[0] = 2048
        os.eventfd_write(wake, 1)
    finally:
        t.join(10)
    assert out and out[0][0] == 2048
