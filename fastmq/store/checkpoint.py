"""The store checkpoint, the abort marker, and start-up recovery that uses them.

The checkpoint file is one 4 KiB page holding three int64 (RocketMQ's ``StoreCheckpoint``):
``physicMsgTimestamp`` (store time of the last message known flushed in the commit log),
``logicsMsgTimestamp`` (the same for the consume queues) and ``indexMsgTimestamp``. After a
crash, recovery rescans the commit log from the last file whose first message is older than
the smaller of the first two (minus 3 s), so every record the queues may have missed is
dispatched again. The ``abort`` file exists while a store runs: finding it at start-up means
the last stop was not clean.

Recovery lives here because the checkpoint decides where it starts; the store facade calls
:func:`recover_store` once at start-up.
"""
from __future__ import annotations

import logging
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import StoreCorruptError
from .commit_log import CommitLog
from .config import MessageStoreConfig
from .consume_queue import ConsumeQueue, ConsumeQueueTable
from .mapped_file import OS_PAGE_SIZE

__all__ = ["StoreCheckpoint", "RecoveryResult", "recover_store", "create_abort_file",
           "remove_abort_file", "is_abnormal_shutdown", "check_store"]

log = logging.getLogger("fastmq.store")

_THREE = struct.Struct(">qqq")
_SAFETY_MS = 3000  # RocketMQ's margin for clocks and in-flight flushes


class StoreCheckpoint:
    """The mapped checkpoint page. Setters change memory; :meth:`flush` makes them durable."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existed = self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(self._fd).st_size
            if existed and size not in (0, OS_PAGE_SIZE):
                raise StoreCorruptError(f"{self.path}: checkpoint is {size} bytes, expected {OS_PAGE_SIZE}")
            if size < OS_PAGE_SIZE:
                os.ftruncate(self._fd, OS_PAGE_SIZE)
            self._mm = mmap.mmap(self._fd, OS_PAGE_SIZE)
        except BaseException:
            os.close(self._fd)
            raise
        (self.physic_msg_timestamp, self.logics_msg_timestamp,
         self.index_msg_timestamp) = _THREE.unpack_from(self._mm, 0)

    @property
    def min_timestamp(self) -> int:
        """Where crash recovery may start: min of commit log and queues, minus 3 s."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - _SAFETY_MS)

    @property
    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp, self.index_msg_timestamp)

    def flush(self) -> None:
        _THREE.pack_into(self._mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                         self.index_msg_timestamp)
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Flush and unmap."""
        if self._mm.closed:
            return
        self.flush()
        self._mm.close()
        os.close(self._fd)


def create_abort_file(config: MessageStoreConfig) -> None:
    """Mark the store as running (crash detection)."""
    Path(config.storePathRootDir).mkdir(parents=True, exist_ok=True)
    Path(config.abort_path).touch()


def remove_abort_file(config: MessageStoreConfig) -> None:
    """Mark a clean stop: call after everything was flushed."""
    try:
        os.unlink(config.abort_path)
    except FileNotFoundError:
        pass


def is_abnormal_shutdown(config: MessageStoreConfig) -> bool:
    return os.path.exists(config.abort_path)


@dataclass
class RecoveryResult:
    abnormal: bool
    scan_start: int
    commit_log_end: int
    redispatched: int  # consume-queue entries written by the rescan


def recover_store(config: MessageStoreConfig, commit_log: CommitLog, queues: ConsumeQueueTable,
                  checkpoint: StoreCheckpoint) -> RecoveryResult:
    """Load and recover the commit log and every consume queue, in RocketMQ's order.

    1. Queues: map them, cut each after its last valid entry.
    2. Commit log: scan (3 last files after a clean stop, from the checkpoint after a crash),
       verifying magic, CRC and position; cut the torn tail; entries the queues lack are
       dispatched again as the scan finds them.
    3. Queues: drop entries pointing past the commit log's new end.
    4. The commit log's next queue offsets come from the queues.

    Raises:
        StoreCorruptError: the files cannot make a store (wrong sizes, gaps, stray files).
    """
    abnormal = is_abnormal_shutdown(config)
    queues.load()
    queues.recover()
    commit_log.load()
    counted = [0]

    def dispatch(reqs: list) -> None:  # type: ignore[type-arg]
        counted[0] += queues.dispatch(reqs)

    start, end = commit_log.recover(abnormal=abnormal, min_timestamp=checkpoint.min_timestamp,
                                    dispatch=dispatch)
    queues.truncate_dirty(end)
    commit_log.topic_queue_table = queues.max_offsets()
    queues.flush(0)
    if abnormal:
        log.warning("store recovered after an abnormal stop: scanned from %d, log ends at %d, "
                    "%d queue entries rebuilt", start, end, counted[0])
    return RecoveryResult(abnormal, start, end, counted[0])


def check_store(commit_log: CommitLog, queues: ConsumeQueueTable, *, max_problems: int = 100,
                start_of: Callable[[ConsumeQueue], int] | None = None) -> list[str]:
    """Consistency check of a recovered store; returns the problems found (empty: consistent).

    Every commit-log record must verify (magic, CRC, position), and every consume-queue entry
    must point at a record of its own topic and queue carrying its own queue offset.
    ``start_of`` gives the first entry of a queue to check (default: its min offset; a running
    store passes its retention-aware start).
    """
    problems = commit_log.check_consistency()
    for (topic, qid), cq in sorted(queues.queues.items()):
        q = start_of(cq) if start_of is not None else cq.min_offset
        while q < cq.max_offset:
            arr = cq.get_entries(q, 4096)
            if not len(arr):
                problems.append(f"{topic}/{qid}: cannot read entries at queue offset {q}")
                break
            entries = list(zip(arr["offset"].tolist(), arr["size"].tolist()))
            del arr  # a view of the mapping: do not keep it past the loop
            for i, (o, size) in enumerate(entries):
                try:
                    m = commit_log.get_message(o, size)
                except Exception as exc:  # any failure is a finding, not a crash of the check
                    problems.append(f"{topic}/{qid}@{q + i}: commit-log offset {o}: {exc}")
                    continue
                if (m.topic, m.queue_id, m.queue_offset, m.store_size) != (topic, qid, q + i, size):
                    problems.append(f"{topic}/{qid}@{q + i}: points at {m.topic}/{m.queue_id}"
                                    f"@{m.queue_offset} of {m.store_size} bytes (entry says {size})")
                if len(problems) >= max_problems:
                    return problems
            q += len(entries)
    return problems
