"""The commit log: every message of every topic, appended in arrival order to mapped files.

Appends take records already in the store format (:func:`fastmq.protocol.message.encode_record`)
and patch the three fields only the store knows -- queue offset, physical offset, store
timestamp -- straight into the mapping, so a batch of N messages costs N memory copies and
3N ``pack_into`` calls under one lock, and a PULL response is later a slice of the same bytes.

Flushing follows RocketMQ: ASYNC_FLUSH runs :class:`FlushService` (a thread: every
``flushIntervalCommitLog`` ms when at least ``flushCommitLogLeastPages`` pages are dirty,
everything every ``flushCommitLogThoroughInterval`` ms); SYNC_FLUSH runs
:class:`GroupCommitService`, where every appender waits on a future and one ``fdatasync``
answers all the waiters it covers (group commit). Threads, because ``fdatasync`` blocks and
releases the GIL; asyncio callers bridge with :meth:`CommitLog.wait_flushed`. A lone
producer's sync, while syncs are fast, runs on the event loop instead (no thread hand-offs;
see :mod:`fastmq.store.group_commit`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import struct
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np

from .._ext.record_writer import place_records
from .._ext.send_batch import SendBatch
from ..protocol.message import (
    BLANK_MAGIC, MAGIC_V1, PHYS_OFFSET_POS, QUEUE_OFFSET_POS, MessageConst, MessageExt, MessageSysFlag,
    decode_record, store_timestamp_pos, tags_code,
)
from ..protocol.record_layout import END_FILE_MIN_BLANK_LENGTH, fixed_format
from ..protocol.topic import TIMER_TOPIC
from . import FlushTimeoutError, MessageTooLargeError, StoreError
from .config import MessageStoreConfig
from .group_commit import GroupCommitService, _expire
from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue

__all__ = ["AppendRequest", "DispatchRequest", "CommitLog", "timer_slot", "FlushService", "GroupCommitService"]

log = logging.getLogger("fastmq.store")

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_SIZE_MAGIC = struct.Struct(fixed_format(upto="BODYCRC"))  # TOTALSIZE, MAGICCODE
_TX_MASK = MessageSysFlag.TRANSACTION_PREPARED_TYPE | MessageSysFlag.TRANSACTION_COMMIT_TYPE
_MAGIC_V1_BYTES = struct.pack(">I", MAGIC_V1)
_BLANK_BYTES = struct.pack(">I", BLANK_MAGIC)


class AppendRequest(NamedTuple):
    """One encoded record to append and where its queue offset comes from."""

    record: bytes | bytearray | memoryview
    topic: str
    queue_id: int
    tags_code: int = 0


class DispatchRequest(NamedTuple):
    """What a consume queue (and later the index) needs about one appended record."""

    topic: str
    queue_id: int
    commit_log_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    sys_flag: int


def timer_slot(properties: dict[str, str]) -> int:
    """The consume-queue tag code of a record in the timer topic: its TIMER_OUT_MS (the rounded
    time slot the timer service delivers it after), 0 when absent or not a number (due at once).
    Delay levels get theirs at put time only; the timer's is read back so that recovery and a
    slave's dispatch index the same due time as the put did."""
    try:
        return int(properties.get(MessageConst.TIMER_OUT_MS, "0"))
    except ValueError:
        return 0


def _is_prepared_or_rollback(sys_flag: int) -> bool:
    t = sys_flag & _TX_MASK
    return t == MessageSysFlag.TRANSACTION_PREPARED_TYPE or t == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


class CommitLog:
    """Mapped files under ``config.commit_log_dir`` plus the next queue offset of each queue."""

    def __init__(self, config: MessageStoreConfig) -> None:
        self.config = config
        self.mfq = MappedFileQueue(Path(config.commit_log_dir), config.mappedFileSizeCommitLog,
                                   preload=config.preloadMappedFile)
        # (topic, queue id) -> next queue offset; rebuilt from the consume queues at recovery.
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._one_key_offset = np.zeros(1, np.int64)  # put_batch's next queue offset for a one-queue batch
        self.last_store_timestamp = 0
        self.flushed_store_timestamp = 0
        self.flush_service: FlushService | GroupCommitService | None = None
        # syncs that wrote something, and their time: the store's commitLogFlushTimesTotal and
        # commitLogFlushMicrosTotal (messages per flush under group commit is puts / this)
        self.flush_times = 0
        self.flush_micros = 0

    # -- lifetime ------------------------------------------------------------------------
    def load(self) -> None:
        """Map the existing files (each marked full until :meth:`recover` sets the end)."""
        self.mfq.load()

    def start(self) -> None:
        """Start the flush thread the configured flushDiskType asks for."""
        if self.flush_service is None:
            self.flush_service = (GroupCommitService(self) if self.config.sync_flush
                                  else FlushService(self))
            self.flush_service.start()

    def shutdown(self) -> None:
        """Stop the flush thread and flush everything."""
        if self.flush_service is not None:
            self.flush_service.stop()
            self.flush_service = None
        self.flush(0)

    def close(self) -> None:
        self.mfq.close()

    # -- offsets -------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.mfq.min_offset

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.mfq.flushed_where

    # -- append --------------------------------------------------------------------------
    def put_records(self, requests: Sequence[AppendRequest],
                    store_timestamp: int | None = None) -> list[DispatchRequest]:
        """Append every record, in order; return one DispatchRequest per record.

        The whole batch gets one store timestamp (a clock read per message would cost more
        than the copy of a small record). Prepared and rolled-back transactional records get
        queue offset 0 and do not advance their queue, as in RocketMQ.

        Raises:
            MessageTooLargeError: a record over maxMessageSize or that cannot fit in one file.
            StoreError: a record that is not an encoded v1 message. Both are checked for the
                whole batch before anything is written.
        """
        limit = min(self.config.maxMessageSize + 512,  # a maxMessageSize body plus its header fields
                    self.config.mappedFileSizeCommitLog - END_FILE_MIN_BLANK_LENGTH)
        for r in requests:
            n = len(r.record)
            if n > limit:
                raise MessageTooLargeError(f"message of {n} bytes exceeds the limit of {limit} bytes")
            if n < 8 or _SIZE_MAGIC.unpack_from(r.record, 0) != (n, MAGIC_V1):
                raise StoreError(f"record of {n} bytes is not an encoded v1 message")
        ts = int(time.time() * 1000) if store_timestamp is None else store_timestamp
        out: list[DispatchRequest] = []
        table = self.topic_queue_table
        with self._lock:
            mf = self.mfq.get_last_mapped_file()
            buf = mf.buffer
            for r in requests:
                rec = r.record
                n = len(rec)
                if n + END_FILE_MIN_BLANK_LENGTH > mf.remaining:
                    self._seal(mf)
                    mf = self.mfq.get_last_mapped_file()
                    buf = mf.buffer
                pos = mf.wrote_position
                end = pos + n
                buf[pos:end] = rec
                sys_flag = _I32.unpack_from(buf, pos + 36)[0]
                key = (r.topic, r.queue_id)
                if _is_prepared_or_rollback(sys_flag):
                    qoff = 0
                else:
                    qoff = table.get(key, 0)
                    table[key] = qoff + 1
                phys = mf.file_from_offset + pos
                _I64.pack_into(buf, pos + QUEUE_OFFSET_POS, qoff)
                _I64.pack_into(buf, pos + PHYS_OFFSET_POS, phys)
                _I64.pack_into(buf, pos + store_timestamp_pos(sys_flag), ts)
                mf.wrote_position = end
                out.append(DispatchRequest(r.topic, r.queue_id, phys, n, r.tags_code, ts, qoff, sys_flag))
            mf.store_timestamp = ts
            self.last_store_timestamp = ts
            self.mfq.after_append(mf)
        return out

    def put_batch(self, batch: SendBatch, store_timestamp: int) -> None:
        """Append the records of a compiled :class:`SendBatch` (the send fast path), in order.

        One compiled call copies every record that fits the current file and patches its
        queue offset, physical offset and store timestamp; the batch's ``cols`` then say
        where each went. The encoder already refused records over the size limit.
        """
        table = self.topic_queue_table
        with self._lock:
            if len(batch.keys) == 1:  # (one send in flight: no new array per call)
                next_offsets = self._one_key_offset
                next_offsets[0] = table.get(batch.keys[0], 0)
            else:
                next_offsets = np.fromiter((table.get(k, 0) for k in batch.keys), np.int64, len(batch.keys))
            files = self.mfq.files
            mf = files[-1] if files else None
            if mf is None or mf.wrote_position >= mf.file_size:  # (MappedFile.is_full, without the call)
                mf = self.mfq.get_last_mapped_file()
            i = 0
            try:
                while i < batch.n:
                    start_pos = mf.wrote_position
                    i2, pos = place_records(batch, mf.buffer, start_pos, mf.file_size, mf.file_from_offset, i,
                                            next_offsets, store_timestamp)
                    mf.wrote_position = pos
                    if i2 < batch.n:
                        if i2 == i and start_pos == 0:
                            raise MessageTooLargeError("a record does not fit in an empty commit-log file")
                        self._seal(mf)
                        mf = self.mfq.get_last_mapped_file()
                    i = i2
            finally:  # records already placed keep their queue offsets, whatever stopped the rest
                if len(batch.keys) == 1:
                    table[batch.keys[0]] = int(next_offsets[0])
                else:
                    for key, nxt in zip(batch.keys, next_offsets.tolist()):
                        table[key] = nxt
            mf.store_timestamp = store_timestamp
            self.last_store_timestamp = store_timestamp
            self.mfq.after_append(mf)

    def _seal(self, mf: MappedFile) -> None:
        """Fill the end of a file with the BLANK marker so readers skip to the next file."""
        remaining = mf.remaining
        _SIZE_MAGIC.pack_into(mf.buffer, mf.wrote_position, remaining, BLANK_MAGIC)
        mf.wrote_position = mf.file_size

    def append_raw(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """Append commit-log bytes copied from a master (HA), as they are, at ``offset``.

        An empty log starts at ``offset`` (the master sends from the start of a file); otherwise
        ``offset`` must be the log's end. The bytes may end inside a record: the reput step reads
        only whole records. Returns the new end.

        Raises:
            StoreError: ``offset`` is not where this log ends.
            DiskFullError: no room for the file the bytes go to; nothing of them is written.
        """
        mv = memoryview(data).cast("B")
        with self._lock:
            if self.mfq.files and offset != self.max_offset:
                raise StoreError(f"replicated data at {offset}, but the commit log ends at {self.max_offset}")
            if not self.mfq.files and offset % self.config.mappedFileSizeCommitLog:
                raise StoreError(f"replicated data at {offset} does not start a commit-log file")
            # the file these bytes roll into gets its blocks before a byte is copied: a copy into
            # a mapping the disk cannot back is a SIGBUS, on a slave as on a master
            self.mfq.ensure_room(len(mv), offset)
            while len(mv):
                mf = self.mfq.get_last_mapped_file(offset)
                n = min(len(mv), mf.remaining)
                pos = mf.wrote_position
                mf.buffer[pos:pos + n] = mv[:n]
                mf.wrote_position = pos + n
                self.mfq.after_append(mf)
                mv = mv[n:]
            end = self.max_offset
        return end

    # -- read ----------------------------------------------------------------------------
    def get_data(self, offset: int, size: int) -> memoryview:
        """Zero-copy view of ``size`` bytes at physical ``offset`` (one record or a run of
        records; never crosses a file).

        Raises:
            StoreError: the range is not in the log.
        """
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            raise StoreError(f"offset {offset} is outside the commit log [{self.min_offset}, {self.max_offset})")
        return mf.select(offset - mf.file_from_offset, size)

    def read_from(self, offset: int, max_bytes: int) -> memoryview:
        """View from ``offset`` to the end of what its file holds, at most ``max_bytes``."""
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            raise StoreError(f"offset {offset} is outside the commit log [{self.min_offset}, {self.max_offset})")
        pos = offset - mf.file_from_offset
        return mf.select(pos, max(0, min(max_bytes, mf.wrote_position - pos)))

    def get_message(self, offset: int, size: int | None = None) -> MessageExt:
        """Decode the record at ``offset`` (its size is read from the record if not given)."""
        if size is None:
            size = _I32.unpack(self.get_data(offset, 4))[0]
        return decode_record(self.get_data(offset, size), verify_crc=False)

    def store_timestamp_at(self, offset: int, size: int) -> int:
        """STORETS of the record at ``offset`` (consume-queue lookup by time)."""
        mv = self.get_data(offset, size)
        sys_flag = _I32.unpack_from(mv, 36)[0]
        return int(_I64.unpack_from(mv, store_timestamp_pos(sys_flag))[0])

    # -- flush ---------------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> int:
        """Flush and return the flushed offset; records the flushed store timestamp."""
        ts = self.last_store_timestamp  # read before the sync: it then covers only flushed data
        t0 = time.perf_counter()
        if self.mfq.flush(least_pages):
            self.flush_times += 1
            self.flush_micros += int((time.perf_counter() - t0) * 1e6)
        if self.mfq.flushed_where >= self.max_offset and ts:
            self.flushed_store_timestamp = ts
        return self.mfq.flushed_where

    def flush_waiter(self, offset: int) -> concurrent.futures.Future[bool]:
        """A future set to True once the log is on disk up to ``offset`` (SYNC_FLUSH), for
        callers on other threads; event-loop code awaits :meth:`wait_flushed`."""
        svc = self.flush_service
        if isinstance(svc, GroupCommitService):
            return svc.request(offset)
        fut: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self.flush(0)
        fut.set_result(self.flushed_offset >= offset)
        return fut

    async def wait_flushed(self, offset: int, timeout: float | None = None, weight: int = 1) -> None:
        """Wait until ``offset`` is on disk (``weight``: the requests waiting, see
        :meth:`GroupCommitService.wait`).

        Raises:
            FlushTimeoutError: not flushed within ``timeout`` seconds (syncFlushTimeout by
                default), or the sync failed; the broker answers FLUSH_DISK_TIMEOUT.
        """
        if self.flushed_offset >= offset:
            return
        t = self.config.syncFlushTimeout / 1000 if timeout is None else timeout
        svc = self.flush_service
        if isinstance(svc, GroupCommitService):
            # a loop future the flush thread settles with one call_soon_threadsafe per sync (not
            # one per waiter), and a plain timer for the timeout: asyncio.wait_for over a
            # wrapped concurrent future cost a hand-off per waiter and a Task-like wrapper
            loop = asyncio.get_running_loop()
            fut = svc.wait(offset, loop, weight)
            timer = loop.call_later(t, _expire, fut, offset, t)
            try:
                ok = await fut
            except FlushTimeoutError:
                raise
            except Exception as exc:  # the sync failed (EIO, ENOSPC, ...): stored, not known durable
                raise FlushTimeoutError(f"flush to offset {offset} failed: {exc}") from exc
            finally:
                timer.cancel()
        else:
            try:
                ok = await asyncio.wait_for(asyncio.wrap_future(self.flush_waiter(offset)), t)
            except asyncio.TimeoutError:
                raise FlushTimeoutError(f"flush to offset {offset} not done within {t:.3f}s") from None
        if not ok:
            raise FlushTimeoutError(f"flush to offset {offset} failed")

    # -- recovery ------------------------------------------------------------------------
    def check_record(self, buf: memoryview, pos: int, check_crc: bool,
                     file_from: int) -> tuple[int, DispatchRequest | None]:
        """Validate the record at ``buf[pos]`` of one file.

        Returns ``(size, request)``: size > 0 and a request for a good message; size > 0 and
        None for the BLANK end-of-file marker; size 0 for the end of the data; size -1 for a
        torn or corrupt record.
        """
        n = len(buf)
        if pos + 8 > n:
            return 0, None
        size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
        if magic == BLANK_MAGIC:
            return (size, None) if size == n - pos else (-1, None)
        if size == 0 and magic == 0:
            return 0, None
        if magic != MAGIC_V1 or size <= 0 or pos + size > n:
            return -1, None
        rec = buf[pos:pos + size]
        try:
            msg = decode_record(rec, verify_crc=check_crc, with_body=False)
        except ValueError:
            return -1, None
        if msg.commit_log_offset != file_from + pos:
            return -1, None  # a well-formed record that was not written here: stale bytes
        if msg.topic == TIMER_TOPIC:
            code = timer_slot(msg.properties)
        else:
            tags = msg.properties.get(MessageConst.TAGS)
            code = tags_code(tags)
        return size, DispatchRequest(msg.topic, msg.queue_id, msg.commit_log_offset, size,
                                     code, msg.store_timestamp, msg.queue_offset,
                                     msg.sys_flag)

    def _first_store_timestamp(self, mf: MappedFile) -> int:
        buf = mf.buffer
        size, magic = _SIZE_MAGIC.unpack_from(buf, 0)
        if magic != MAGIC_V1 or size <= 0:
            return 0
        sys_flag = _I32.unpack_from(buf, 36)[0]
        return int(_I64.unpack_from(buf, store_timestamp_pos(sys_flag))[0])

    def find_next_record(self, view: memoryview, finder: Callable[..., int], start: int,
                         file_from: int) -> int | None:
        """Position (>= ``start``) in one file of the next record that validates in full (magic,
        size, CRC, its own physical offset) or of the BLANK end-of-file marker; None if none.

        ``finder`` is the mapping's ``find`` (C speed): candidates are the places the magic
        numbers occur, so a damaged size field, which leaves no way to step over the record,
        costs a search rather than the rest of the file. A record's physical offset must
        match where it lies, so bytes inside a body that happen to look like a header are
        not taken for one.
        """
        i = start + 4
        n = len(view)
        while i + 4 <= n:
            hits = [h for h in (finder(_MAGIC_V1_BYTES, i), finder(_BLANK_BYTES, i)) if h >= 0]
            if not hits:
                return None
            h = min(hits)
            size, _ = self.check_record(view, h - 4, True, file_from)
            if size > 0:
                return h - 4
            i = h + 1
        return None

    def recover(self, *, abnormal: bool, min_timestamp: int = 0,
                dispatch: Callable[[list[DispatchRequest]], None] | None = None,
                flushed_offset: int = 0,
                on_damage: Callable[[MappedFile, int, int], None] | None = None) -> tuple[int, int]:
        """Find the real end of the log, cut everything after it, redispatch what was scanned.

        A clean stop scans the last 3 files (RocketMQ's normal recovery). After a crash the
        scan starts at the last file whose first message is older than ``min_timestamp``
        (the checkpoint's, minus a safety margin), so every record that may be missing from
        the consume queues is seen again. ``dispatch`` gets the good records one file at a
        time (bounded memory for 1 GiB files).

        A bad record past ``flushed_offset`` is a torn tail: the log is cut there, as RocketMQ
        does. One before it lies in data that was on disk, so cutting would destroy every
        later record: ``on_damage(file, start, end)`` gets the damaged range of the file and
        the scan goes on at the next valid record (see :meth:`find_next_record`).
        Each scanned file's pages are released once scanned: recovery of many 1 GiB files
        must not leave them all resident.

        Returns:
            ``(scan_start_offset, end_offset)``.
        """
        files = self.mfq.files
        if not files:
            return 0, 0
        check_crc = self.config.checkCRCOnRecover
        if abnormal:
            start_idx = 0
            for i in range(len(files) - 1, -1, -1):
                ts = self._first_store_timestamp(files[i])
                if ts and ts <= min_timestamp:
                    start_idx = i
                    break
        else:
            start_idx = max(0, len(files) - 3)
        scan_start = files[start_idx].file_from_offset
        end = scan_start
        for mf in files[start_idx:]:
            buf = mf.buffer
            pos = 0
            batch: list[DispatchRequest] = []
            stop = False
            while pos < mf.file_size:
                size, req = self.check_record(buf, pos, check_crc, mf.file_from_offset)
                if size > 0 and req is None:  # BLANK: the file is complete
                    pos = mf.file_size
                    break
                if size <= 0:
                    at = mf.file_from_offset + pos
                    if size < 0 and at < flushed_offset:
                        nxt = self.find_next_record(buf, mf.find, pos + 1, mf.file_from_offset)
                        last_file = mf is files[-1]
                        # nothing valid after it: the rest of the file, or in the last file what was
                        # flushed of it, at most one record's worth (the zero tail is no data)
                        upto = nxt if nxt is not None else (
                            min(mf.file_size, flushed_offset - mf.file_from_offset,
                                pos + self.config.maxMessageSize + 512) if last_file else mf.file_size)
                        log.error("commit log: damaged record in flushed data at offset %d (file %s, position "
                                  "%d), %d bytes set aside; %s", at, mf.path.name, pos, upto - pos,
                                  "going on with the next valid record" if nxt is not None
                                  else "no valid record after it in this file")
                        if on_damage is not None:
                            on_damage(mf, pos, upto)
                        if nxt is not None:
                            pos = nxt
                            continue
                        if not last_file:
                            pos = mf.file_size
                            break
                    stop = True
                    if size < 0:
                        log.warning("commit log: torn or corrupt record at %d (file %s, position %d) past the "
                                    "flushed offset %d, cutting the log there", at, mf.path.name, pos,
                                    flushed_offset)
                    break
                assert req is not None
                if not _is_prepared_or_rollback(req.sys_flag):
                    batch.append(req)
                pos += size
            end = mf.file_from_offset + pos
            if batch and dispatch is not None:
                dispatch(batch)
            if batch:
                self.last_store_timestamp = batch[-1].store_timestamp
                mf.store_timestamp = batch[-1].store_timestamp
            if stop:
                break
            if mf is not files[-1]:
                mf.release_pages()  # (the last one is released after the truncation below)
        self.mfq.truncate_dirty_files(end)
        if self.mfq.files:
            self.mfq.files[-1].release_pages()
        self.flushed_store_timestamp = self.last_store_timestamp
        return scan_start, end

    def check_consistency(self) -> list[str]:
        """Scan the whole log (magic, CRC, offsets); return the problems found."""
        problems: list[str] = []
        for mf in self.mfq.files:
            pos = 0
            view = mf.buffer[:mf.wrote_position]
            while pos < mf.wrote_position:
                size, req = self.check_record(view, pos, True, mf.file_from_offset)
                if size > 0 and req is None:
                    break
                if size <= 0:
                    if size < 0 or mf is not self.mfq.last:
                        problems.append(f"bad record at {mf.file_from_offset + pos}")
                    break
                pos += size
            view.release()
        return problems


class FlushService(threading.Thread):
    """ASYNC_FLUSH: flush every interval when enough pages are dirty, everything now and then."""

    def __init__(self, commit_log: CommitLog) -> None:
        super().__init__(name="fastmq-commitlog-flush", daemon=True)
        self.commit_log = commit_log
        self._stop_event = threading.Event()

    def run(self) -> None:
        cfg = self.commit_log.config
        last_thorough = time.monotonic()
        while not self._stop_event.wait(cfg.flushIntervalCommitLog / 1000):
            least = cfg.flushCommitLogLeastPages
            now = time.monotonic()
            if (now - last_thorough) * 1000 >= cfg.flushCommitLogThoroughInterval:
                last_thorough = now
                least = 0
            try:
                self.commit_log.flush(least)
            except Exception:  # pragma: no cover - disk errors must not kill the flusher
                log.exception("commit log flush failed")

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)


def requests_from_messages(msgs: Iterable[MessageExt], encode: Callable[..., bytearray]) -> list[AppendRequest]:
    """Helper for tests and tools: AppendRequests from MessageExt objects via ``encode``."""
    out = []
    for m in msgs:
        rec = encode(topic=m.topic, body=m.body, properties=m.properties, queue_id=m.queue_id,
                     flag=m.flag, sys_flag=m.sys_flag, born_timestamp=m.born_timestamp,
                     born_host=m.born_host, store_host=m.store_host,
                     reconsume_times=m.reconsume_times)
        out.append(AppendRequest(rec, m.topic, m.queue_id, tags_code(m.tags)))
    return out


__all__ += ["requests_from_messages", "END_FILE_MIN_BLANK_LENGTH"]
