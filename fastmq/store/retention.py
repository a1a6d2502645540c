"""Retention: delete commit-log files past fileReservedTime, and the consume-queue files that
only point into deleted commit-log files (RocketMQ's CleanCommitLogService and
CleanConsumeQueueService).

Commit-log files older than ``fileReservedTime`` hours go when the hour is one of ``deleteWhen``
(``"04"`` or ``"04;05"``) or when the disk is over ``diskMaxUsedSpaceRatio`` percent used; over
85 % (RocketMQ's diskSpaceCleanForciblyRatio) files go whatever their age. The file being
written is never deleted, and at most 10 files go per round so one round never stalls the loop
for long. Consume queues then lose whole files whose last entry lies below the commit log's new
minimum; entries left below it in a queue's first file are reported by ``get_message`` as
MESSAGE_WAS_REMOVING and skipped, as in RocketMQ.

Rounds run on the event loop (see :meth:`RetentionService.run`), i.e. never in the middle of a
put or of a get that runs on the loop.
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from typing import TYPE_CHECKING, Callable, Protocol

from .config import CQ_STORE_UNIT_SIZE

if TYPE_CHECKING:
    from .commit_log import CommitLog
    from .config import MessageStoreConfig
    from .consume_queue import ConsumeQueueTable

__all__ = ["RetentionService", "RetainedStore", "DELETE_FILES_BATCH_MAX", "CLEAN_FORCIBLY_RATIO"]

log = logging.getLogger("fastmq.store")

DELETE_FILES_BATCH_MAX = 10
CLEAN_FORCIBLY_RATIO = 0.85
_ENTRY = struct.Struct(">qiq")


def _is_time_to_delete(delete_when: str, now: float) -> bool:
    hour = time.localtime(now).tm_hour
    for item in delete_when.split(";"):
        item = item.strip()
        if item.isdigit() and int(item) == hour:
            return True
    return False


class RetainedStore(Protocol):
    """The parts of a store that retention trims (MessageStore provides them); retention does not
    import the store that owns it."""

    config: MessageStoreConfig
    commit_log: CommitLog
    queues: ConsumeQueueTable
    disk_ratio_fn: Callable[[str], float]


class RetentionService:
    """Deletes expired store files; one :meth:`run_once` per ``interval`` seconds."""

    def __init__(self, store: RetainedStore, *, interval: float = 10.0,
                 disk_ratio_fn: Callable[[str], float] | None = None) -> None:
        self.store = store
        self.interval = interval
        self._disk_ratio_fn = disk_ratio_fn
        self.deleted_commit_log_files = 0
        self.deleted_queue_files = 0

    def _ratio(self) -> float:
        fn = self._disk_ratio_fn or self.store.disk_ratio_fn
        return fn(self.store.config.commit_log_dir)

    def run_once(self, now: float | None = None, *, manual: bool = False) -> tuple[int, int]:
        """One round; returns (commit-log files deleted, consume-queue files deleted)."""
        cfg = self.store.config
        now = time.time() if now is None else now
        ratio = self._ratio()
        time_up = _is_time_to_delete(cfg.deleteWhen, now)
        space_full = ratio < 0 or ratio > cfg.diskMaxUsedSpaceRatio / 100
        at_once = ratio > CLEAN_FORCIBLY_RATIO
        cl = 0
        if time_up or space_full or manual:
            cl = self.delete_expired_commit_log(now, cfg.fileReservedTime * 3600.0, at_once)
            if cl:
                log.info("retention: deleted %d commit-log files (disk %.0f%% used, time up %s)",
                         cl, ratio * 100, time_up)
        cq = self.delete_expired_queue_files()
        self.deleted_commit_log_files += cl
        self.deleted_queue_files += cq
        return cl, cq

    def delete_expired_commit_log(self, now: float, reserved_seconds: float, at_once: bool) -> int:
        mfq = self.store.commit_log.mfq
        n = 0
        while n < DELETE_FILES_BATCH_MAX and len(mfq.files) > 1:
            mf = mfq.files[0]
            try:
                mtime = os.path.getmtime(mf.path)
            except OSError:
                mtime = 0.0
            last_write = max(mtime, mf.store_timestamp / 1000)
            if not at_once and now < last_write + reserved_seconds:
                break
            mfq.files.pop(0)
            mf.destroy()
            n += 1
        return n

    def delete_expired_queue_files(self) -> int:
        min_phys = self.store.commit_log.min_offset
        n = 0
        for cq in list(self.store.queues.queues.values()):
            mfq = cq.mfq
            while len(mfq.files) > 1:
                mf = mfq.files[0]
                pos = mf.wrote_position - CQ_STORE_UNIT_SIZE
                if pos < 0:
                    break
                off, size, _ = _ENTRY.unpack_from(mf.buffer, pos)
                if off + size > min_phys:
                    break
                mfq.files.pop(0)
                mf.destroy()
                n += 1
        return n

    async def run(self) -> None:
        """Run rounds forever (cancel to stop); a failing round is logged, not fatal."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.run_once()
            except Exception:
                log.exception("retention round failed")
