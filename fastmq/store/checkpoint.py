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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import StoreCorruptError
from .commit_log import CommitLog, DispatchRequest
from .config import MessageStoreConfig
from .consume_queue import ConsumeQueue, ConsumeQueueTable
from .damaged import keep_aside
from .mapped_file import OS_PAGE_SIZE, MappedFile

__all__ = ["StoreCheckpoint", "RecoveryResult", "recover_store", "create_abort_file",
           "remove_abort_file", "is_abnormal_shutdown", "check_store"]

log = logging.getLogger("fastmq.store")

_THREE = struct.Struct(">qqq")
_FLUSHED_AT = 24  # fastmq's fourth int64 (see StoreCheckpoint); RocketMQ reads only the first three
_I64 = struct.Struct(">q")
_SAFETY_MS = 3000
_MAX_GAP_FILL = 1024  # queue entries one damaged range may stand for (one record each, normally one)  # RocketMQ's margin for clocks and in-flight flushes


class StoreCheckpoint:
    """The mapped checkpoint page. Setters change memory; :meth:`flush` makes them durable.

    Besides RocketMQ's three timestamps, fastmq keeps ``physic_flushed_offset`` at byte 24: the
    commit-log offset known on disk when the page was last written. Recovery uses it to tell
    a torn tail (past it: cut, as RocketMQ does) from damage inside flushed data (before it:
    only the damaged record is lost). A store written by RocketMQ reads 0 there, which means
    RocketMQ's behaviour: every bad record is taken for the end of the log.
    """

    # RocketMQ's three timestamps (ms), read from the page
    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int

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
        self.physic_flushed_offset: int = _I64.unpack_from(self._mm, _FLUSHED_AT)[0]

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
        _I64.pack_into(self._mm, _FLUSHED_AT, self.physic_flushed_offset)
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
    damaged: dict[int, int] = field(default_factory=dict)  # {log offset: length} set aside now


def recover_store(config: MessageStoreConfig, commit_log: CommitLog, queues: ConsumeQueueTable,
                  checkpoint: StoreCheckpoint, *, repair: bool = False) -> RecoveryResult:
    """Load and recover the commit log and every consume queue, in RocketMQ's order.

    1. Queues: map them, cut each after its last valid entry.
    2. Commit log: scan (3 last files after a clean stop, from the checkpoint after a crash),
       verifying magic, CRC and position; cut the torn tail; entries the queues lack are
       dispatched again as the scan finds them.
    3. Queues: drop entries pointing past the commit log's new end.
    4. The commit log's next queue offsets come from the queues.

    ``repair`` (``--check-store --repair``, an operator's explicit request): scan the whole log
    and take every byte of it for flushed, so that damage anywhere is set aside record by
    record and nothing after it is cut.

    Raises:
        StoreCorruptError: the files cannot make a store (wrong sizes, gaps, stray files).
    """
    abnormal = is_abnormal_shutdown(config)
    queues.load()
    queues.recover()
    commit_log.load()
    counted = [0]
    damaged: dict[int, int] = {}

    def on_damage(mf: MappedFile, start: int, end: int) -> None:
        at = mf.file_from_offset + start
        path = keep_aside(config.storePathRootDir, at, mf.buffer[start:end])
        damaged[at] = end - start
        log.error("commit log: the damaged bytes [%d, %d) of %s are kept in %s", start, end, mf.path, path)

    def dispatch(reqs: list[DispatchRequest]) -> None:
        reqs = _drop_impossible(queues, reqs, commit_log, config, damaged)
        if damaged:
            _fill_gaps(queues, reqs, damaged)
        counted[0] += queues.dispatch(reqs)

    flushed = checkpoint.physic_flushed_offset
    if repair:
        flushed = max(flushed, commit_log.max_offset)  # (load marks every file full)
    start, end = commit_log.recover(abnormal=abnormal or repair,
                                    min_timestamp=0 if repair else checkpoint.min_timestamp,
                                    dispatch=dispatch, flushed_offset=flushed, on_damage=on_damage)
    queues.truncate_dirty(end)
    commit_log.topic_queue_table = queues.max_offsets()
    queues.flush(0)
    if abnormal:
        log.warning("store recovered after an abnormal stop: scanned from %d, log ends at %d, "
                    "%d queue entries rebuilt", start, end, counted[0])
    return RecoveryResult(abnormal, start, end, counted[0], damaged)


def _drop_impossible(queues: ConsumeQueueTable, reqs: list[DispatchRequest], commit_log: CommitLog,
                     config: MessageStoreConfig, damaged: dict[int, int]) -> list[DispatchRequest]:
    """The records whose queue offset can follow their queue's end; the others are set aside.

    The body CRC does not cover the header: a flipped bit in a record's queue offset leaves a
    record that verifies but claims to be, say, entry 2^55 of its queue. Dispatching it would
    fill the gap with zero entries (a queue file per 6 MB of gap). A jump of more than
    :data:`_MAX_GAP_FILL` past what the queue (and the records before it) reached is damage.
    """
    nxt: dict[tuple[str, int], int] = {}
    out = []
    for r in reqs:
        key = (r.topic, r.queue_id)
        base = nxt.get(key)
        if base is None:
            cq = queues.get(*key)
            base = cq.max_offset if cq is not None and cq.max_offset > 0 else -1
        if base >= 0 and r.queue_offset > base + _MAX_GAP_FILL:
            at = r.commit_log_offset
            path = keep_aside(config.storePathRootDir, at, commit_log.get_data(at, r.size))
            damaged[at] = r.size
            log.error("commit log: the record at offset %d says queue offset %d of %s/%d, whose queue ends at %d: "
                      "a damaged header; its %d bytes are kept in %s", at, r.queue_offset, r.topic, r.queue_id,
                      base, r.size, path)
            continue
        nxt[key] = max(base, r.queue_offset + 1)
        out.append(r)
    return out


def _fill_gaps(queues: ConsumeQueueTable, reqs: list[DispatchRequest], damaged: dict[int, int]) -> None:
    """Point the queue entries a damaged record leaves missing at that record.

    A record after the damage carries its queue offset; when its queue lacks the entries
    before it (the damaged record's, not yet flushed to the queue), zero entries would be
    left there, and the next start would take the first zero entry for the queue's end.
    Entries pointing at the damaged range are valid for recovery and skipped by pulls.
    """
    last_at = max(damaged)
    for r in reqs:
        cq = queues.get(r.topic, r.queue_id)
        if cq is None or r.commit_log_offset < last_at:
            continue  # (an empty queue starts where its first entry says: no gap)
        have = cq.max_offset
        if have == 0 or not have < r.queue_offset <= have + _MAX_GAP_FILL:
            continue
        for q in range(have, r.queue_offset):
            cq.put(q, last_at, damaged[last_at], 0)


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
