"""Disk space for the store: the used ratio, and the guard that refuses puts without room.

RocketMQ refuses sends while the commit log's disk is over diskSpaceWarningLevelRatio (its
runningFlags disk-full bit). fastmq also refuses a put when a store file it needs cannot get
its blocks (posix_fallocate, see mapped_file): every such file is created before the put
writes, so a full disk is an answer (SERVICE_NOT_AVAILABLE) rather than a SIGBUS in the middle
of a write through a mapping.
"""
from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Callable, Iterable

from . import DiskFullError

if TYPE_CHECKING:
    from .commit_log import CommitLog
    from .config import MessageStoreConfig
    from .consume_queue import ConsumeQueueTable
    from .index import IndexService

__all__ = ["DISK_CHECK_INTERVAL", "DISK_SPACE_WARNING_RATIO", "DiskSpaceGuard", "disk_used_ratio"]

log = logging.getLogger("fastmq.store")

DISK_SPACE_WARNING_RATIO = 0.90  # RocketMQ's diskSpaceWarningLevelRatio: sends refused above it
DISK_CHECK_INTERVAL = 1.0       # seconds between statvfs calls on the put path


def disk_used_ratio(path: str) -> float:
    """Used fraction of the filesystem holding ``path`` (-1 when it cannot be read)."""
    p = path
    while p and not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    try:
        st = os.statvfs(p or ".")
    except OSError:
        return -1.0
    # UtilAll.getDiskPartitionSpaceUsedPercent, which is df's Use%: blocks reserved for root count
    # as neither used nor available, and the percentage is rounded up. Counting them as used
    # (total - available over total) read a disk with 5% reserved and 62% used as 87% used on a
    # 252 GB test machine: past the 85% at which retention deletes files whatever their age.
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if st.f_blocks <= 0 or entire <= 0:
        return -1.0
    percent, rest = divmod(used * 100, entire)
    return (percent + (1 if rest else 0)) / 100


class DiskSpaceGuard:
    """The message store's side of disk space (a mixin of :class:`MessageStore`)."""

    config: "MessageStoreConfig"
    commit_log: "CommitLog"
    queues: "ConsumeQueueTable"
    index: "IndexService | None"

    def _init_disk_space(self) -> None:
        # disk-full check, cached (a statvfs per put would be a syscall per send)
        self.disk_ratio_fn: Callable[[str], float] = disk_used_ratio
        self._disk_checked_at = -1e9
        self._disk_ratio = 0.0
        # set when a store file could not get its disk space: sends are refused without a new
        # attempt until DISK_CHECK_INTERVAL has passed (one failed fallocate a second, not a send)
        self._space_failed_at: float | None = None
        self._refusing: str | None = None  # why sends are refused now (logged once per change)

    def _disk_full(self) -> float | None:
        """The disk ratio when sends must be refused for lack of space, else None: the commit
        log's disk over diskSpaceWarningLevelRatio (RocketMQ's runningFlags disk-full bit), or
        a store file that could not get its space less than a second ago."""
        now = time.monotonic()
        if (now - self._disk_checked_at < DISK_CHECK_INTERVAL and self._refusing is None
                and self._space_failed_at is None):
            return None  # (every send asks: nothing to re-read, nothing failed, nothing to log)
        if now - self._disk_checked_at >= DISK_CHECK_INTERVAL:
            self._disk_checked_at = now
            self._disk_ratio = self.disk_ratio_fn(self.config.commit_log_dir)
        r = self._disk_ratio
        failed = self._space_failed_at is not None and now - self._space_failed_at < DISK_CHECK_INTERVAL
        if r > DISK_SPACE_WARNING_RATIO or failed:
            self._set_refusing(f"the disk of {self.config.commit_log_dir} is {r * 100:.1f}% used"
                               + ("" if r > DISK_SPACE_WARNING_RATIO else ", and a store file could not get its space")
                               + f" (sends are refused above {DISK_SPACE_WARNING_RATIO * 100:.0f}%)")
            return r
        self._set_refusing(None)
        return None

    def _set_refusing(self, why: str | None) -> None:
        """Log the change between taking and refusing sends, once (not once a send)."""
        if (why is None) == (self._refusing is None):
            return
        self._refusing = why
        if why is None:
            log.warning("disk space is back: sends are taken again")
        else:
            log.error("disk full: refusing sends, reads and consumption go on: %s", why)

    def _reserve(self, keys: Iterable[tuple[str, int]], count: int, nbytes: int) -> float | None:
        """Create now every store file this put will need (the commit log's next file, each
        queue's, the index's), so a full disk refuses the put before a byte of it is written:
        half a put in the commit log with no queue entry would be a message no consumer sees.
        Returns None when there is room, else the disk ratio for the refusal."""
        try:
            mfq = self.commit_log.mfq
            last = mfq.files[-1] if mfq.files else None
            if last is None or last.wrote_position + nbytes + 8 > last.reserved_to:  # (reserved_to <= file size)
                mfq.ensure_room(nbytes + 8)  # (+ the BLANK end marker)
            table = self.commit_log.topic_queue_table
            for key in keys:
                mfq = self.queues.find_or_create(*key).mfq
                last = mfq.files[-1] if mfq.files else None
                if last is None or last.reserved_to < last.wrote_position + count * 20:
                    mfq.ensure_room(count * 20, table.get(key, 0) * 20)
            if self.index is not None:
                self.index.reserve()
        except DiskFullError as exc:
            self._space_failed_at = time.monotonic()
            self._disk_checked_at = -1e9  # the ratio is read afresh for the answer
            ratio = self._disk_full()
            log.error("no space for a store file: %s", exc)
            return ratio if ratio is not None else 1.0
        if self._space_failed_at is not None:
            self._space_failed_at = None
            self._disk_full()  # logs the way back
        return None
