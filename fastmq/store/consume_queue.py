"""Consume queues: per topic and queue id, a log of 20-byte pointers into the commit log.

Entry ``i`` of a queue is the message with queue offset ``i``: int64 commit-log offset, int32
size, int64 tag code (big-endian; RocketMQ's ``CQ_STORE_UNIT_SIZE``). Files hold
``mappedFileSizeConsumeQueue / 20`` entries and live at ``consumequeue/<topic>/<queueId>/``,
named by the byte offset of their first entry, as in RocketMQ.

Reads come back as numpy structured arrays viewing the mapping (:data:`CQ_DTYPE`), so the pull
path filters a batch of entries by tag code with one vectorised comparison instead of a Python
loop per entry.
"""
from __future__ import annotations

import logging
import struct
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import numpy as np

from . import StoreCorruptError, StoreError
from .config import CQ_STORE_UNIT_SIZE
from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue

if TYPE_CHECKING:
    from .commit_log import DispatchRequest

__all__ = ["CQ_DTYPE", "ConsumeQueue", "ConsumeQueueTable", "FlushConsumeQueueService"]

log = logging.getLogger("fastmq.store")

CQ_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert CQ_DTYPE.itemsize == CQ_STORE_UNIT_SIZE
_ENTRY = struct.Struct(">qiq")
_UNIT = CQ_STORE_UNIT_SIZE
#: disk blocks of a queue file are reserved this far at a time, as its entries come (64 KiB:
#: 3,276 entries, one posix_fallocate per step; an empty queue holds no block at all)
RESERVE_STEP = 64 * 1024
_RECOVER_CHUNK = 16384  # entries (320 KiB) read at a time by recovery


class _Dispatchable:  # the DispatchRequest fields a queue reads (duck-typed, no import upward)
    commit_log_offset: int
    size: int
    tags_code: int
    queue_offset: int


class ConsumeQueue:
    """One topic/queue's entries.

    Offsets in the public API are queue offsets (entry numbers), not bytes.
    """

    __slots__ = ("topic", "queue_id", "mfq", "max_physic_offset")  # one per queue, thousands of them

    def __init__(self, root: str | Path, topic: str, queue_id: int, file_size: int) -> None:
        if file_size <= 0 or file_size % _UNIT:
            raise StoreError(f"consume queue file size {file_size} is not a positive multiple of {_UNIT}")
        self.topic = topic
        self.queue_id = queue_id
        # no descriptor per file: a broker has thousands of queues (see MappedFile keep_fd)
        self.mfq = MappedFileQueue(Path(root) / topic / str(queue_id), file_size, keep_fd=False,
                                   reserve_step=RESERVE_STEP)
        self.max_physic_offset = -1  # commit-log end of the last entry; -1 when empty

    # -- lifetime ------------------------------------------------------------------------
    def load(self) -> None:
        self.mfq.load()

    def recover(self) -> None:
        """Find the last valid entry (offset >= 0 and size > 0) and cut after it.

        Entries are written in order, so the first invalid one in a file is the end; like
        RocketMQ we look at the last three files only.
        """
        files = self.mfq.files
        if not files:
            return
        end = files[max(0, len(files) - 3)].file_from_offset
        for mf in files[max(0, len(files) - 3):]:
            n_valid = self._valid_prefix(mf, leading_gap=mf is files[0])
            end = mf.file_from_offset + n_valid * _UNIT
            if n_valid * _UNIT < mf.file_size:
                break
        self.mfq.truncate_dirty_files(end)
        for mf in self.mfq.files:
            mf.release_pages()  # scanned pages need not stay resident: a broker has thousands of queues

    def _valid_prefix(self, mf: MappedFile, leading_gap: bool = False) -> int:
        """How many entries at the start of ``mf`` are valid, read a chunk at a time so a file
        whose data ends early is not read (and made resident) to its end.

        Only the file's data extents are read (SEEK_DATA/SEEK_HOLE): a hole holds no entry, and
        reading one through the mapping allocates it on tmpfs (a full tmpfs: SIGBUS). Entries
        are written whole and in order, so the valid ones end at the latest where the data
        extent they are in ends.

        ``leading_gap``: ``mf`` is the queue's first file, which may start with zero entries
        below the queue's first offset (a slave that began at the master's last commit-log
        file, a queue whose first file was created for an offset past its start): they are
        passed over, not taken for the queue's end."""
        # the entries lying wholly inside each extent (an extent is block-aligned, an entry not)
        spans = [(a, b) for a, b in ((-(-lo // _UNIT), hi // _UNIT) for lo, hi in mf.data_extents()) if a < b]
        if not spans:
            return 0
        if leading_gap:
            for a, b in spans:
                done = self._first_used(mf, a, b)
                if done < b:
                    limit = b
                    break
            else:  # nothing but zeros: an empty queue
                return 0
        elif spans[0][0] == 0:
            done, limit = 0, spans[0][1]
        else:  # its first entry lies in a hole: never written
            return 0
        while done < limit:
            count = min(_RECOVER_CHUNK, limit - done)
            arr = np.frombuffer(mf.buffer, dtype=CQ_DTYPE, count=count, offset=done * _UNIT)
            valid = (arr["offset"] >= 0) & (arr["size"] > 0)
            n = count if valid.all() else int(np.argmin(valid))
            if n:
                last = arr[n - 1]
                self.max_physic_offset = int(last["offset"]) + int(last["size"])
            del arr, valid
            done += n
            if n < count:
                break
        return done

    @staticmethod
    def _first_used(mf: MappedFile, start: int, limit: int) -> int:
        """The first entry in ``[start, limit)`` of ``mf`` that is not all zeros; ``limit`` when none is."""
        done = start
        while done < limit:
            count = min(_RECOVER_CHUNK, limit - done)
            arr = np.frombuffer(mf.buffer, dtype=CQ_DTYPE, count=count, offset=done * _UNIT)
            used = (arr["offset"] != 0) | (arr["size"] != 0)
            first = int(np.argmax(used)) if used.any() else count
            del arr, used
            done += first
            if first < count:
                break
        return done

    def flush(self, least_pages: int = 0) -> bool:
        return self.mfq.flush(least_pages)

    def close(self) -> None:
        self.mfq.close()

    # -- offsets -------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        """First queue offset still stored."""
        return self.mfq.min_offset // _UNIT

    @property
    def max_offset(self) -> int:
        """Queue offset the next message will get."""
        return self.mfq.max_offset // _UNIT

    def bounds(self) -> tuple[int, int]:
        """``(min_offset, max_offset)`` in one call (a pull needs both; each property is a chain of two)."""
        files = self.mfq.files
        if not files:
            return 0, 0
        last = files[-1]
        return files[0].file_from_offset // _UNIT, (last.file_from_offset + last.wrote_position) // _UNIT

    # -- write ---------------------------------------------------------------------------
    def put(self, queue_offset: int, commit_log_offset: int, size: int, tags_code: int) -> bool:
        """Write the entry for ``queue_offset``. Returns False when it is already there
        (recovery redispatches records the queue may already hold).

        A queue offset past the end leaves zero entries in between (logged): it means the
        commit log holds messages this queue never saw, which only a bug or lost files cause.
        """
        target = queue_offset * _UNIT
        files = self.mfq.files
        if files:
            mf = files[-1]
            pos = mf.next_unit_pos(target, _UNIT)
            if pos >= 0:  # the usual entry (the lone put, _ext.lone_put, asks the same to write it with its record)
                _ENTRY.pack_into(mf.buffer, pos, commit_log_offset, size, tags_code)
                mf.wrote_position = pos + _UNIT
                self.max_physic_offset = commit_log_offset + size
                return True
        cur = self.mfq.max_offset
        if target < cur:
            return False
        if not self.mfq.files:
            self.mfq.get_last_mapped_file(target)
            cur = self.mfq.max_offset
        if target > cur:
            log.warning("consume queue %s/%d: gap from %d to %d", self.topic, self.queue_id,
                        cur // _UNIT, queue_offset)
        mf = self._file_for_write(target)
        pos = target - mf.file_from_offset
        mf.reserve_to(pos + _UNIT)
        _ENTRY.pack_into(mf.buffer, pos, commit_log_offset, size, tags_code)
        mf.wrote_position = pos + _UNIT
        self.max_physic_offset = commit_log_offset + size
        return True

    def put_run(self, first_queue_offset: int, offsets: np.ndarray, sizes: np.ndarray, tags: np.ndarray) -> int:
        """Write consecutive entries from ``first_queue_offset`` (the send fast path: one
        numpy assignment per file instead of a Python round per entry). Entries already
        there are skipped, as :meth:`put` skips them. Returns how many were new."""
        n = len(offsets)
        if n == 0:
            return 0
        cur = self.mfq.max_offset
        target = first_queue_offset * _UNIT
        skip = 0
        if target < cur:
            skip = min(n, (cur - target) // _UNIT)
            target += skip * _UNIT
        if skip == n:
            return 0
        if not self.mfq.files:
            self.mfq.get_last_mapped_file(target)
            cur = self.mfq.max_offset
        if target > cur:
            log.warning("consume queue %s/%d: gap from %d to %d", self.topic, self.queue_id,
                        cur // _UNIT, target // _UNIT)
        i = skip
        while i < n:
            mf = self._file_for_write(target)
            pos = target - mf.file_from_offset
            k = min(n - i, (mf.file_size - pos) // _UNIT)
            mf.reserve_to(pos + k * _UNIT)  # (a put reserved it before; recovery's redispatch did not)
            if k == 1:  # one send in flight: a view and three field copies cost ~4x a pack
                _ENTRY.pack_into(mf.buffer, pos, int(offsets[i]), int(sizes[i]), int(tags[i]))
            else:
                view = np.frombuffer(mf.buffer, CQ_DTYPE, count=k, offset=pos)
                view["offset"] = offsets[i:i + k]
                view["size"] = sizes[i:i + k]
                view["tags_code"] = tags[i:i + k]
            mf.wrote_position = pos + k * _UNIT
            target += k * _UNIT
            i += k
        self.max_physic_offset = int(offsets[-1] + sizes[-1])
        return n - skip

    def _file_for_write(self, target: int) -> MappedFile:
        mf = self.mfq.get_last_mapped_file()
        while target >= mf.file_from_offset + mf.file_size:  # only on a gap: skip whole files
            mf.wrote_position = mf.file_size
            mf = self.mfq.get_last_mapped_file()
        return mf

    def put_requests(self, requests: Iterable[_Dispatchable]) -> int:
        """Write many entries; returns how many were new."""
        return sum(self.put(r.queue_offset, r.commit_log_offset, r.size, r.tags_code) for r in requests)

    # -- read ----------------------------------------------------------------------------
    def get_entries(self, start: int, max_count: int) -> np.ndarray:
        """Up to ``max_count`` entries from queue offset ``start``, as a CQ_DTYPE array viewing
        the mapping (no copy). Stops at the end of the file holding ``start``; call again for
        more. Empty when ``start`` is outside [min_offset, max_offset).
        """
        byte_off = start * _UNIT
        mf = self.mfq.find_mapped_file_by_offset(byte_off)
        if mf is None or start < 0 or start >= self.max_offset or max_count <= 0:
            return np.empty(0, dtype=CQ_DTYPE)
        pos = byte_off - mf.file_from_offset
        count = min(max_count, (mf.wrote_position - pos) // _UNIT)
        return np.frombuffer(mf.buffer, dtype=CQ_DTYPE, count=count, offset=pos)

    def get_entry_lists(self, start: int, max_count: int,
                        max_offset: int | None = None) -> tuple[list[int], list[int], list[int]]:
        """:meth:`get_entries` as three lists (commit-log offsets, sizes, tag codes), for a few
        entries: a pull of up to 32 unpacks them faster than it views and converts an array.
        ``max_offset``: :attr:`max_offset`, when the caller has just read it."""
        byte_off = start * _UNIT
        mf = self.mfq.find_mapped_file_by_offset(byte_off)
        if max_offset is None:
            max_offset = self.max_offset
        if mf is None or start < 0 or start >= max_offset or max_count <= 0:
            return [], [], []
        pos = byte_off - mf.file_from_offset
        count = (mf.wrote_position - pos) // _UNIT
        if max_count < count:
            count = max_count
        if count <= 0:
            return [], [], []
        if count == 1:
            o, sz, t = _ENTRY.unpack_from(mf.buffer, pos)
            return [o], [sz], [t]
        offs, sizes, tags = zip(*_ENTRY.iter_unpack(memoryview(mf.buffer)[pos:pos + count * _UNIT]))
        return list(offs), list(sizes), list(tags)

    def iter_entries(self, start: int, end: int | None = None, chunk: int = 4096) -> Iterator[np.ndarray]:
        """Arrays covering ``[start, end)`` file by file."""
        end = self.max_offset if end is None else min(end, self.max_offset)
        i = max(start, self.min_offset)
        while i < end:
            arr = self.get_entries(i, min(chunk, end - i))
            if not len(arr):
                return
            yield arr
            i += len(arr)

    def get_entry(self, queue_offset: int) -> tuple[int, int, int]:
        """``(commit_log_offset, size, tags_code)`` at ``queue_offset``.

        Raises:
            StoreError: outside [min_offset, max_offset).
        """
        byte_off = queue_offset * _UNIT
        mf = self.mfq.find_mapped_file_by_offset(byte_off)
        if mf is None or not self.min_offset <= queue_offset < self.max_offset:
            raise StoreError(f"queue offset {queue_offset} outside [{self.min_offset}, {self.max_offset})"
                             f" of {self.topic}/{self.queue_id}")
        o, s, t = _ENTRY.unpack_from(mf.buffer, byte_off - mf.file_from_offset)
        return int(o), int(s), int(t)

    def search_offset_by_timestamp(self, timestamp: int, store_ts_of: Callable[[int, int], int],
                                   boundary: str = "lower") -> int:
        """Queue offset for a store timestamp, by binary search over the entries.

        ``store_ts_of(commit_log_offset, size)`` reads a record's STORETS (the queue does not
        store it). ``boundary="lower"``: the first message stored at or after ``timestamp``
        (max_offset if none); ``"upper"``: the last one stored at or before it (min_offset if
        none) -- RocketMQ 5's BoundaryType.
        """
        lo, hi = self.min_offset, self.max_offset
        if lo >= hi:
            return lo
        if boundary == "lower":
            while lo < hi:
                mid = (lo + hi) // 2
                o, s, _ = self.get_entry(mid)
                if store_ts_of(o, s) < timestamp:
                    lo = mid + 1
                else:
                    hi = mid
            return lo
        if boundary != "upper":
            raise ValueError(f"boundary must be 'lower' or 'upper', not {boundary!r}")
        first = lo
        while lo < hi:
            mid = (lo + hi) // 2
            o, s, _ = self.get_entry(mid)
            if store_ts_of(o, s) <= timestamp:
                lo = mid + 1
            else:
                hi = mid
        return max(first, lo - 1)

    # -- recovery ------------------------------------------------------------------------
    def truncate_dirty(self, phys_offset: int) -> None:
        """Drop the entries that point at or past commit-log offset ``phys_offset``."""
        files = self.mfq.files
        for i in range(len(files) - 1, -1, -1):
            mf = files[i]
            n = mf.wrote_position // _UNIT
            if not n:
                continue
            arr = np.frombuffer(mf.buffer, dtype=CQ_DTYPE, count=n)
            # entries are ordered by commit-log offset: the first bad one is the cut
            cut = int(np.searchsorted(arr["offset"].astype(np.int64), phys_offset, side="left"))
            last_ok = arr[cut - 1] if cut else None
            last_info = (int(last_ok["offset"]), int(last_ok["size"])) if last_ok is not None else None
            del arr, last_ok
            if cut < n:
                self.mfq.truncate_dirty_files(mf.file_from_offset + cut * _UNIT)
            if last_info is not None:
                self.max_physic_offset = last_info[0] + last_info[1]
                return
        self.max_physic_offset = -1


class ConsumeQueueTable:
    """Every consume queue of a store, created on first use."""

    def __init__(self, root: str | Path, file_size: int) -> None:
        self.root = Path(root)
        self.file_size = file_size
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.last_dispatched_store_timestamp = 0  # becomes the checkpoint's logicsMsgTimestamp

    def load(self) -> None:
        """Map every ``<topic>/<queueId>`` directory under the root.

        Raises:
            StoreCorruptError: a queue directory whose name is not a queue id.
        """
        if not self.root.exists():
            return
        for tdir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for qdir in sorted(p for p in tdir.iterdir() if p.is_dir()):
                if not qdir.name.isdigit():
                    raise StoreCorruptError(f"{qdir}: not a queue id directory")
                cq = ConsumeQueue(self.root, tdir.name, int(qdir.name), self.file_size)
                cq.load()
                self.queues[(tdir.name, int(qdir.name))] = cq

    def recover(self) -> None:
        for cq in self.queues.values():
            cq.recover()

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.queues.get(key)
        if cq is None:
            cq = self.queues[key] = ConsumeQueue(self.root, topic, queue_id, self.file_size)
        return cq

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def dispatch(self, requests: Iterable[DispatchRequest]) -> int:
        """Write the entries of DispatchRequests. Returns how many were new."""
        n = 0
        cq: ConsumeQueue | None = None
        r: DispatchRequest | None = None
        for r in requests:
            topic, qid = r.topic, r.queue_id
            if cq is None or cq.topic != topic or cq.queue_id != qid:
                cq = self.find_or_create(topic, qid)
            n += cq.put(r.queue_offset, r.commit_log_offset, r.size, r.tags_code)
        if r is not None:
            self.last_dispatched_store_timestamp = r.store_timestamp
        return n

    def truncate_dirty(self, phys_offset: int) -> None:
        for cq in self.queues.values():
            cq.truncate_dirty(phys_offset)

    def max_offsets(self) -> dict[tuple[str, int], int]:
        """Next queue offset of every queue (rebuilds the commit log's topic-queue table)."""
        return {k: cq.max_offset for k, cq in self.queues.items() if cq.max_offset > 0}

    def max_physic_offset(self) -> int:
        return max((cq.max_physic_offset for cq in self.queues.values()), default=-1)

    def flush(self, least_pages: int = 0) -> int:
        """Flush every queue; returns the store timestamp everything up to is now on disk."""
        ts = self.last_dispatched_store_timestamp  # read first: it then covers flushed entries
        for cq in list(self.queues.values()):  # the dispatcher may add queues meanwhile
            cq.flush(least_pages)
        return ts

    def close(self) -> None:
        for cq in list(self.queues.values()):
            cq.close()


class FlushConsumeQueueService(threading.Thread):
    """Flush the queues every ``flushIntervalConsumeQueue`` ms when ``flushConsumeQueueLeastPages``
    pages are dirty, all of them every ``flushConsumeQueueThoroughInterval`` ms. After each
    flush ``on_flushed(store_timestamp)`` is called (the facade stores it as the checkpoint's
    logicsMsgTimestamp and, on thorough rounds, flushes the checkpoint, as RocketMQ does)."""

    def __init__(self, table: ConsumeQueueTable, *, interval_ms: int = 1000, least_pages: int = 2,
                 thorough_interval_ms: int = 60_000,
                 on_flushed: Callable[[int, bool], None] | None = None) -> None:
        super().__init__(name="fastmq-cq-flush", daemon=True)
        self.table = table
        self.interval_ms = interval_ms
        self.least_pages = least_pages
        self.thorough_interval_ms = thorough_interval_ms
        self.on_flushed = on_flushed
        self._stop_event = threading.Event()

    def _round(self, thorough: bool) -> None:
        ts = self.table.flush(0 if thorough else self.least_pages)
        if self.on_flushed is not None:
            self.on_flushed(ts, thorough)

    def run(self) -> None:
        last = time.monotonic()
        while not self._stop_event.wait(self.interval_ms / 1000):
            now = time.monotonic()
            thorough = (now - last) * 1000 >= self.thorough_interval_ms
            if thorough:
                last = now
            try:
                self._round(thorough)
            except Exception:  # pragma: no cover - a disk error must not stop the flusher
                log.exception("consume queue flush failed")

    def stop(self) -> None:
        """Stop and do a last thorough flush."""
        self._stop_event.set()
        self.join(timeout=10)
        self._round(True)
