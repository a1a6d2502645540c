"""The message store facade: what the broker calls to put and get messages.

It owns a :class:`CommitLog`, the :class:`ConsumeQueueTable` and the checkpoint, and follows
RocketMQ 4.9's ``DefaultMessageStore``: ``load`` recovers (clean or after a crash, decided by
the abort file), ``start`` starts the flushers and creates the abort file, ``shutdown`` flushes
everything and removes it.

Dispatch to the consume queues happens right after each append, on the caller's thread and
before anything is awaited: the append and the queue entries of one batch are therefore never
interleaved with another batch, and a PULL sees a message as soon as its send returns (the
job RocketMQ's ReputMessageService does ~1 ms later, on another thread).

Puts of message objects are checked and encoded by :mod:`fastmq.store.put_message` (delay levels
included: a delayed message goes to ``SCHEDULE_TOPIC_XXXX``, and :mod:`fastmq.broker.schedule`
moves it back when due); a put's outcome is a :mod:`fastmq.store.put_result`.
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
import shutil
import threading
import time
from typing import Any, Callable, Coroutine, Iterable, Sequence

from .._ext.lone_put import LonePut
from .._ext.send_batch import COLUMNS as _SEND_COLUMNS, SendBatch
from .._ext.sql_filter import SqlProgram
from ..protocol.message import MessageConst, MessageExt, MessageSysFlag, pack_host
from . import FlushTimeoutError, MessageTooLargeError
from .checkpoint import RecoveryResult, StoreCheckpoint, check_store, create_abort_file, recover_store, remove_abort_file
from .commit_log import CommitLog, DispatchRequest, GroupCommitService
from ..protocol.topic import SCHEDULE_TOPIC as _SCHEDULE_TOPIC
from ..protocol.topic import TIMER_TOPIC, TRANS_OP_HALF_TOPIC
from .index import IndexService
from .lock import StoreLock
from .damaged import DAMAGED_DIR, load_damaged
from .disk_space import DISK_CHECK_INTERVAL, DISK_SPACE_WARNING_RATIO, DiskSpaceGuard, disk_used_ratio
from .config import SYNC_MASTER, MessageStoreConfig
from .consume_queue import ConsumeQueueTable, FlushConsumeQueueService
from .get_message import GetResult, GetStatus, MessageReader
from .put_message import DEFAULT_DELAY_LEVELS, MessageEncoder, Refused, parse_delay_levels
from .put_result import PUT_OK, PutResult, PutStatus
from .retention import RetentionService
from .stats_service import StoreStatsService

__all__ = [
    "PutStatus", "PUT_OK", "PutResult", "GetStatus", "GetResult", "MessageStore",
    "SCHEDULE_TOPIC", "DEFAULT_DELAY_LEVELS", "parse_delay_levels", "disk_used_ratio",
    "DISK_SPACE_WARNING_RATIO",
]

log = logging.getLogger("fastmq.store")

SCHEDULE_TOPIC = _SCHEDULE_TOPIC  # re-exported: the schedule service and its tests read it from here
_RELEASE_INTERVAL = 1.0          # seconds between releases of cold mapped pages (release_cold_pages)
# The commit log's pages this close behind its write position stay mapped: consumers that keep up
# read there, and faulting them back in would cost more than they weigh.
_RESIDENT_BEHIND_WRITER = 16 << 20
_SWEEP_EVERY = 30                # releases between two that visit idle queues too (pages read back in)
_TX_MASK = 0xC
_C_KEY, _C_TAGS, _C_QOFF, _C_PHYS, _C_SIZE = (_SEND_COLUMNS.index(c) for c in
                                              ("key", "tags", "queue_offset", "commit_log_offset", "size"))
#: put_batch writes a queue's entries with numpy from this many records a queue on average
_ROWS_PER_KEY_FOR_NUMPY = 4


#: StoreStatsService's put-time buckets with no samples (see runtime_info)
_NO_PUT_DISTRIBUTION = " ".join(f"{b}:0" for b in (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]", "[1~2s]",
    "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]"))


def human_readable_bytes(n: int) -> str:
    """MixAll.humanReadableByteCount(n, false): "123 B", "1.5 KiB", "251.9 GiB"."""
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def _parse_host(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep:
        raise ValueError(f"store host must be 'ip:port', got {addr!r}")
    return host.strip("[]"), int(port)


class MessageStore(DiskSpaceGuard):
    """RocketMQ's DefaultMessageStore over the fastmq commit log and consume queues.

    Args:
        config: the store keys.
        store_host: ``"ip:port"`` stamped into every record's STOREHOST (and message ids).
        on_arrival: called ``(topic, queue_id, new_max_offset, tags_code | None)`` for long
            polling, once per queue a put touched and tag code stored in it (None: unknown).
    """

    def __init__(self, config: MessageStoreConfig, store_host: str,
                 on_arrival: Callable[[str, int, int, int | None], None] | None = None) -> None:
        self.config = config
        self.store_host = _parse_host(store_host)
        self._store_host_packed = pack_host(*self.store_host)
        # offset msg id = hex(store ip + port) + hex(int64 offset): the prefix never changes
        self.msg_id_prefix = self._store_host_packed.hex().upper()
        self.on_arrival = on_arrival
        self.encoder = MessageEncoder(config, self._store_host_packed)  # put_messages' records
        self.delay_level_table = self.encoder.delay_level_table
        self.max_delay_level = self.encoder.max_delay_level
        self.commit_log = CommitLog(config)
        self.index = (IndexService(os.path.join(config.storePathRootDir, "index"), config.maxHashSlotNum,
                                   config.maxIndexNum) if config.messageIndexEnable else None)
        self.queues = ConsumeQueueTable(config.consume_queue_dir, config.mappedFileSizeConsumeQueue)
        self.checkpoint: StoreCheckpoint | None = None
        self.store_lock = StoreLock(config.storePathRootDir)
        self._damaged_sizes: dict[int, int] = {}
        self._cq_flusher: FlushConsumeQueueService | None = None
        self._loaded = False
        self._running = False
        self._shutdown = False
        self._ckpt_lock = threading.Lock()
        self._init_disk_space()
        self._read_role()
        self.boot_timestamp = int(time.time() * 1000)
        self.stats = {"putMessageTimesTotal": 0, "putMessageSizeTotal": 0, "putMessageFailedTimes": 0,
                      "getMessageTimesTotalFound": 0, "getMessageTimesTotalMiss": 0,
                      "getMessageTransferedMsgCount": 0, "putMessageEntireTimeMax": 0,
                      "getMessageEntireTimeMax": 0}
        self.stats_service = StoreStatsService(self.stats)  # sampled once a second by the broker
        # the lone put, and every put's end (stored, took); holds commit_log, queues, stats
        self._lone = LonePut(self, PutResult, PUT_OK, DISK_CHECK_INTERVAL)
        self.reader = MessageReader(config, self.commit_log, self.queues, self.stats)
        self.recovery: RecoveryResult | None = None  # set by load()
        self.retention = RetentionService(self)
        self._retention_task: asyncio.Task[None] | None = None
        self._released_at = time.monotonic()
        self._release_round = 0
        # the master's HA service (fastmq.store.ha), set by the broker: SYNC_MASTER puts wait on it
        self.ha_service: Any = None

    # ------------------------------------------------------------------ lifetime
    def load(self, *, repair: bool = False) -> None:
        """Recover the store from disk (abort file present: crash recovery from the checkpoint).

        ``repair``: scan the whole commit log and set every damaged record aside rather than
        cut the log at it (see :func:`recover_store`).

        Raises:
            StoreCorruptError: the files cannot make a store.
            StoreLockedError: another process owns the store.
        """
        if self._loaded:
            return
        self.store_lock.acquire()  # before any file is read or written: one owner per store
        self.checkpoint = StoreCheckpoint(self.config.checkpoint_path)
        self.recovery = recover_store(self.config, self.commit_log, self.queues, self.checkpoint, repair=repair)
        # every damaged range ever set aside, not only today's: pulls must skip them all
        self._damaged_sizes = load_damaged(self.config.storePathRootDir)
        self.reader.damaged_offsets = set(self._damaged_sizes)
        if self._damaged_sizes:
            log.error("the commit log holds %d damaged record(s), skipped by pulls; their bytes are in %s",
                      len(self._damaged_sizes), os.path.join(self.config.storePathRootDir, DAMAGED_DIR))
        if self.index is not None:
            # After a clean stop the index was flushed with everything: re-reading the commit log
            # is only owed after a crash, or when the index directory itself is gone.
            missing = not self.index.dir.exists()
            self.index.load()
            if missing or self.recovery.abnormal:
                self._index_catch_up()
            self.index.dir.mkdir(parents=True, exist_ok=True)
        self._loaded = True

    def start(self) -> None:
        """Start the flush threads and mark the store running (abort file)."""
        if not self._loaded:
            self.load()
        if self._running:
            return
        self._read_role()
        create_abort_file(self.config)
        self.commit_log.start()
        cfg = self.config
        self._cq_flusher = FlushConsumeQueueService(
            self.queues, interval_ms=cfg.flushIntervalConsumeQueue,
            least_pages=cfg.flushConsumeQueueLeastPages,
            thorough_interval_ms=cfg.flushConsumeQueueThoroughInterval,
            on_flushed=self._on_queues_flushed)
        self._cq_flusher.start()
        try:  # retention rounds run on the loop, between puts and gets (see retention.py)
            self._retention_task = asyncio.get_running_loop().create_task(
                self.retention.run(), name="fastmq-store-retention")
        except RuntimeError:  # started outside a loop (tools, tests): call retention.run_once()
            self._retention_task = None
        self._running = True
        self._shutdown = False

    def _read_role(self) -> None:
        # brokerRole and flushDiskType apply from a start on (the broker takes them only there),
        # and every put asks: read once, not through the config's properties per put
        cfg = self.config
        self._is_slave = cfg.is_slave
        self._sync_flush = cfg.sync_flush
        self._sync_master = cfg.role == SYNC_MASTER

    def _on_queues_flushed(self, logics_ts: int, thorough: bool) -> None:
        """Advance the checkpoint after a consume-queue flush (from the flusher thread)."""
        cp = self.checkpoint
        if cp is None:
            return
        with self._ckpt_lock:
            if logics_ts > cp.logics_msg_timestamp:
                cp.logics_msg_timestamp = logics_ts
            flushed = self.commit_log.flushed_offset  # read before the timestamp: never ahead of it
            phys = self.commit_log.flushed_store_timestamp
            if phys > cp.physic_msg_timestamp:
                cp.physic_msg_timestamp = phys
            cp.physic_flushed_offset = flushed
            try:
                cp.flush()  # one 4 KiB page a second: cheap, and crash recovery scans less
            except ValueError:  # closed by shutdown meanwhile
                pass
        now = time.monotonic()
        if now - self._released_at >= _RELEASE_INTERVAL:
            self._released_at = now
            self.release_cold_pages()

    def release_cold_pages(self) -> int:
        """Drop the resident pages of store data on disk that writers have left behind: the
        commit log but its last :data:`_RESIDENT_BEHIND_WRITER` bytes, the queues' entries, the
        index entries filled so far. Reads fault them back in from the page cache. Keeps the
        broker's RSS flat as the backlog and the number of queues grow; a queue's newest file is
        visited only when written since the last release, but every ``_SWEEP_EVERY`` rounds."""
        self._release_round += 1
        changed_only = self._release_round % _SWEEP_EVERY != 0
        n = self.commit_log.mfq.release_cold(_RESIDENT_BEHIND_WRITER)
        for cq in list(self.queues.queues.values()):
            n += cq.mfq.release_cold(0, changed_only)
        if self.index is not None:
            self.index.release_cold()
        return n

    def shutdown(self) -> None:
        """Flush the commit log and the queues, write the checkpoint, remove the abort file."""
        if self._shutdown:
            return
        self._shutdown = True
        if not self._loaded:  # a start refused before recovery: nothing to flush, nothing to mark
            self.store_lock.release()
            return
        was_running = self._running
        self._running = False
        if self._retention_task is not None:
            self._retention_task.cancel()
            self._retention_task = None
        if self._cq_flusher is not None:
            self._cq_flusher.stop()  # its last round is a thorough flush
            self._cq_flusher = None
        self.commit_log.shutdown()
        logics = self.queues.flush(0)
        cp = self.checkpoint
        if cp is not None:
            with self._ckpt_lock:
                cp.physic_msg_timestamp = max(cp.physic_msg_timestamp,
                                              self.commit_log.flushed_store_timestamp)
                cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, logics)
                cp.physic_flushed_offset = self.commit_log.flushed_offset
                cp.close()
            self.checkpoint = None
        self.queues.close()
        if self.index is not None:
            self.index.close()
        self.commit_log.close()
        if was_running:
            remove_abort_file(self.config)
        self.store_lock.release()

    @property
    def running(self) -> bool:
        return self._running

    # ------------------------------------------------------------------ put
    def compute_deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        """When a message stored at ``store_timestamp`` with delay ``level`` is due."""
        return self.encoder.deliver_timestamp(level, store_timestamp)

    def _fail(self, status: PutStatus, remark: str) -> PutResult:
        self.stats["putMessageFailedTimes"] += 1
        return PutResult(status, remark=remark)

    def _refuse_put(self, count: int) -> PutResult | None:
        """Why no put can be taken now (store stopped, disk full, nothing to put), or None."""
        if not self._running or self._shutdown:
            return self._fail(PutStatus.SERVICE_NOT_AVAILABLE,
                              "service not available now, the message store is not running")
        if self._is_slave:  # RocketMQ: "broke role is slave, so putMessage is forbidden"
            return self._unavailable(self.disk_ratio_fn(self.config.commit_log_dir))
        if not count:
            return self._fail(PutStatus.MESSAGE_ILLEGAL, "no message to put")
        ratio = self._disk_full()
        if ratio is not None:
            return self._unavailable(ratio)
        return None

    def _unavailable(self, ratio: float) -> PutResult:
        """SERVICE_NOT_AVAILABLE with the remark RocketMQ gives a full disk and a slave alike."""
        return self._fail(
            PutStatus.SERVICE_NOT_AVAILABLE,
            "service not available now. It may be caused by one of the following reasons: "
            f"the broker's disk is full [CL: {ratio:5.2f} CQ: {ratio:5.2f} INDEX: -1.00], "
            "messages are put to the slave, message store has been shut down, etc.")

    async def put_messages(self, msgs: Sequence[MessageExt]) -> PutResult:
        """Store one batch (a single send is a batch of one): all of it or none of it.

        Records are encoded with the message's born host/timestamp, flag, sys flag,
        reconsume times and properties, and this store's host. SYNC_FLUSH waits for the
        group commit unless every message says WAIT=false.

        Returns:
            A PutResult; bad input is a status with a remark, never an exception.
        """
        refused = self._refuse_put(len(msgs))
        if refused is not None:
            return refused
        now = int(time.time() * 1000)
        encoded = self.encoder.encode(msgs, now)
        if isinstance(encoded, Refused):
            return self._fail(encoded.status, encoded.remark)
        requests, wait = encoded
        ratio = self._reserve({(r.topic, r.queue_id) for r in requests}, len(requests),
                              sum(len(r.record) for r in requests))
        if ratio is not None:
            return self._unavailable(ratio)
        try:
            dispatched = self.commit_log.put_records(requests, store_timestamp=now)
        except MessageTooLargeError as exc:
            return self._fail(PutStatus.MESSAGE_ILLEGAL, str(exc))
        except Exception as exc:  # a disk error must answer the client, not kill the broker
            log.exception("commit log append failed")
            return self._fail(PutStatus.UNKNOWN_ERROR, f"append failed: {exc}")
        self._dispatch(dispatched)
        if self.index is not None:
            for m, d in zip(msgs, dispatched):
                self._index_keys(d.topic, m.properties, d.commit_log_offset, d.store_timestamp)
        first, last = dispatched[0], dispatched[-1]
        prefix = self.msg_id_prefix
        ids = ",".join([f"{prefix}{d.commit_log_offset:016X}" for d in dispatched])
        total = sum(d.size for d in dispatched)
        result = PutResult(PutStatus.PUT_OK, ids, first.queue_offset, first.commit_log_offset, total,
                           len(dispatched), None, now)
        st = self.stats
        st["putMessageTimesTotal"] += len(dispatched)
        st["putMessageSizeTotal"] += total
        return await self._finish_put(result, last.commit_log_offset + last.size, wait, now)

    async def put_batch(self, batch: SendBatch) -> PutResult:
        """Store the records of a compiled :class:`SendBatch` (the broker's send fast path).

        The same contract as :meth:`put_messages` for a whole socket read of sends at once:
        one store timestamp, the commit log, the consume queues and the index written with a
        few compiled calls, the arrival callbacks once per queue, and under SYNC_FLUSH one wait
        for the group commit covering every record that asked to wait. Where each record went
        is in ``batch.cols``. (:meth:`put_batch_now` is the same without a coroutine when
        nothing is waited for.)
        """
        res = self.put_batch_now(batch)
        return res if isinstance(res, PutResult) else await res

    def put_batch_now(self, batch: SendBatch) -> PutResult | Coroutine[Any, Any, PutResult]:
        """:meth:`put_batch`, done now: the PutResult when no wait is owed (ASYNC_FLUSH, a
        master that is not SYNC_MASTER, or records that said WAIT=false), else a coroutine
        that waits for the flush (or the slave) and then returns it. The records are stored
        and dispatched before this returns either way; a caller that wants the wait
        registered at once runs the coroutine's first step right away.
        """
        # one record (one send in flight): the whole usual put in one (compiled) call; None for
        # several records or anything unusual, and the general path does it with every check
        result = self._lone.put(batch)
        if result is None:
            return self._put_batch(batch)
        return result  # type: ignore[no-any-return]

    def _append_failed(self, exc: Exception) -> PutResult:
        """The answer to a commit-log append that raised (called in its ``except``): a record
        too large for a file is the message's fault, anything else (a disk error) is answered
        to the clients instead of killing the broker."""
        if isinstance(exc, MessageTooLargeError):
            return self._fail(PutStatus.MESSAGE_ILLEGAL, str(exc))
        log.exception("commit log append failed")
        return self._fail(PutStatus.UNKNOWN_ERROR, f"append failed: {exc}")

    def _put_batch(self, batch: SendBatch) -> PutResult | Coroutine[Any, Any, PutResult]:
        """:meth:`put_batch_now`'s general path: any number of records, with every check."""
        refused = self._refuse_put(batch.n)
        if refused is not None:
            return refused
        now = int(time.time() * 1000)
        ratio = self._reserve(batch.keys, batch.n, batch.total_size)
        if ratio is not None:
            return self._unavailable(ratio)
        try:
            self.commit_log.put_batch(batch, now)
        except Exception as exc:
            return self._append_failed(exc)
        cols = batch.cols
        keys = batch.keys
        cb = self.on_arrival
        if batch.n == 1:
            # one record (one send in flight): its row as Python ints once, where numpy would
            # cost a scalar conversion per field (~2 µs a send, measured)
            row = cols[0].tolist()
            qoff, phys, size, tag = row[_C_QOFF], row[_C_PHYS], row[_C_SIZE], row[_C_TAGS]
            (topic, qid), = keys
            self.queues.find_or_create(topic, qid).put(qoff, phys, size, tag)
            self._arrived(cb, topic, qid, qoff + 1, tag)
            first_qoff, first_phys, end = qoff, phys, phys + size
        elif len(keys) * _ROWS_PER_KEY_FOR_NUMPY > batch.n:
            # a few records a queue (sends gathered from many connections, each to its own queue):
            # the rows as Python ints, one entry at a time; numpy's per-queue mask and slices cost
            # more than that below a few records a queue
            rows = cols.tolist()
            queues = self.queues
            ends: dict[int, int] = {}  # key -> next queue offset
            tag_codes: dict[int, set[int]] = {}
            for row in rows:
                k, qoff, tag = row[_C_KEY], row[_C_QOFF], row[_C_TAGS]
                topic, qid = keys[k]
                queues.find_or_create(topic, qid).put(qoff, row[_C_PHYS], row[_C_SIZE], tag)
                ends[k] = qoff + 1
                codes = tag_codes.get(k)
                if codes is None:
                    tag_codes[k] = {tag}
                else:
                    codes.add(tag)
            for k, nxt in ends.items():
                topic, qid = keys[k]
                for tag in tag_codes[k]:  # once per distinct tag code, as below
                    self._arrived(cb, topic, qid, nxt, tag)
            first, last_row = rows[0], rows[-1]
            first_qoff, first_phys, end = first[_C_QOFF], first[_C_PHYS], last_row[_C_PHYS] + last_row[_C_SIZE]
        else:
            for k, (topic, qid) in enumerate(keys):
                rows = cols if len(keys) == 1 else cols[cols[:, _C_KEY] == k]
                if not len(rows):  # (the encoder leaves no empty keys; a guard, not a path)
                    continue
                cq = self.queues.find_or_create(topic, qid)
                cq.put_run(int(rows[0, _C_QOFF]), rows[:, _C_PHYS], rows[:, _C_SIZE], rows[:, _C_TAGS])
                top = int(rows[-1, _C_QOFF]) + 1
                # once per distinct tag code: a pull filtering on another tag stays held, as 4.9's
                # per-message notifyMessageArriving leaves it (the hold service merges the calls)
                for tag in set(rows[:, _C_TAGS].tolist()):
                    self._arrived(cb, topic, qid, top, tag)
            last = cols[-1]
            first_qoff, first_phys, end = int(cols[0, _C_QOFF]), int(cols[0, _C_PHYS]), int(last[_C_PHYS] + last[_C_SIZE])
        # the index, the statistics and the answer: the lone put's own end, so there is one copy
        return self._lone.stored(batch, now, first_qoff, first_phys, end)  # type: ignore[no-any-return]

    def _owed(self, result: PutResult, batch: SendBatch, now: int,
              end: int) -> PutResult | Coroutine[Any, Any, PutResult]:
        """The end of a put that owes its producers a wait (SYNC_FLUSH, or SYNC_MASTER with HA
        running): ``result`` at once when a lone sync ran right here, else the coroutine that
        waits for the flush (or the slave). ``end``: the put's last commit-log offset."""
        weight = len(batch.fast)
        if self._sync_flush and not (self._sync_master and self.ha_service is not None):
            svc = self.commit_log.flush_service
            # (the send fast path calls this at the end of its loop turn: a lone request's sync
            # may run right here, see GroupCommitService.sync_now)
            done = svc.sync_now(end, weight) if isinstance(svc, GroupCommitService) else None
            if done is not None:
                if done is not True:  # (logged by the service, once per run of failures)
                    result.status = PutStatus.FLUSH_DISK_TIMEOUT
                    result.remark = f"flush to offset {end} failed: {done}"
                return self._lone.took(result, now)  # type: ignore[no-any-return]
        return self._finish_put(result, end, True, now, weight)

    @staticmethod
    def _arrived(cb: Callable[[str, int, int, int | None], None] | None, topic: str, qid: int, max_offset: int,
                 tag: int | None) -> None:
        """Tell the arrival listener (long polling) that ``topic``/``qid`` now ends at ``max_offset``."""
        if cb is None:
            return
        try:
            cb(topic, qid, max_offset, tag)
        except Exception:  # a listener bug must not fail a stored send
            log.exception("on_arrival callback failed for %s/%d", topic, qid)

    async def _finish_put(self, result: PutResult, end_offset: int, wait: bool, began: int,
                          weight: int = 1) -> PutResult:
        """The end of every put: under SYNC_FLUSH, wait (if asked) until ``end_offset`` is on
        disk (``weight``: the requests it answers); then the latency statistic."""
        if self._sync_flush and wait:
            try:
                await self.commit_log.wait_flushed(end_offset, weight=weight)
            except FlushTimeoutError as exc:
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
                result.remark = str(exc)
            except Exception as exc:  # a failed fsync: stored, but not known durable
                log.exception("sync flush failed")
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
                result.remark = f"flush failed: {exc}"
        if (self.ha_service is not None and wait and result.status is PutStatus.PUT_OK
                and self._sync_master):
            await self._wait_slave(result, end_offset)
        return self._lone.took(result, began)  # type: ignore[no-any-return]

    async def _wait_slave(self, result: PutResult, end_offset: int) -> None:
        """SYNC_MASTER: answer only once a slave has the put (RocketMQ 4.9's CommitLog.handleHA)."""
        ha = self.ha_service
        if not ha.is_slave_ok(end_offset):
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            return
        if await ha.wait_for_slave(end_offset, self.config.syncFlushTimeout / 1000):
            return
        if ha.connection_count == 0:  # the slave left while we waited: stored here, not there
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            return
        log.error("do sync transfer other node, wait return, but failed, topic offset %d", end_offset)
        result.status = PutStatus.FLUSH_SLAVE_TIMEOUT

    def _dispatch(self, dispatched: list[DispatchRequest]) -> None:
        """Consume-queue entries for the appended records, then the arrival callbacks."""
        reqs = [d for d in dispatched
                if (d.sys_flag & _TX_MASK) not in (MessageSysFlag.TRANSACTION_PREPARED_TYPE,
                                                   MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)]
        if not reqs:
            return
        self.queues.dispatch(reqs)
        cb = self.on_arrival
        if cb is None:
            return
        touched: dict[tuple[str, int], tuple[int, set[int]]] = {}
        for d in reqs:
            key = (d.topic, d.queue_id)
            prev = touched.get(key)
            if prev is None:
                touched[key] = (d.queue_offset + 1, {d.tags_code})
            else:
                prev[1].add(d.tags_code)
                touched[key] = (d.queue_offset + 1, prev[1])
        for (topic, qid), (max_off, tags) in touched.items():
            for tag in tags:  # once per distinct tag code (see put_batch)
                self._arrived(cb, topic, qid, max_off, tag)

    # ------------------------------------------------------------------ get: the reader's
    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    tag_codes: set[int] | SqlProgram | None = None) -> GetResult:
        """A pull's records: :meth:`MessageReader.get_message`."""
        return self.reader.get_message(group, topic, queue_id, offset, max_msg_nums, tag_codes)

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.max_offset_in_queue(topic, queue_id)

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.min_offset_in_queue(topic, queue_id)

    def offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """:meth:`MessageReader.offset_in_queue_by_time`."""
        return self.reader.offset_in_queue_by_time(topic, queue_id, timestamp)

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the first message still in the queue; -1 when there is none."""
        return self.reader.earliest_message_time(topic, queue_id)

    def message_store_time_stamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at queue ``offset``; -1 when there is none."""
        return self.reader.message_store_time_stamp(topic, queue_id, offset)

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        """The stored record at a commit-log offset, as bytes (None when no record starts there)."""
        return self.reader.select_one_message_by_offset(commit_log_offset)

    def record_view(self, commit_log_offset: int) -> memoryview | None:
        """The record at a commit-log offset as a zero-copy view, unchecked (see
        :meth:`MessageReader.record_view`); None when no record can start there."""
        return self.reader.record_view(commit_log_offset)

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """Decode the record at a commit-log offset (None when there is no record there)."""
        return self.reader.look_message_by_offset(commit_log_offset)

    def earliest_message_time_in_log(self) -> int:
        """The store time of the oldest record the commit log holds; -1 when it holds none."""
        return self.reader.earliest_message_time_in_log()

    # ------------------------------------------------------------------ index
    @staticmethod
    def _keys_of(props: dict[str, str]) -> list[str]:
        """The index keys of a message: its KEYS and its unique id."""
        keys = [k for k in props.get(MessageConst.KEYS, "").split(MessageConst.KEY_SEPARATOR) if k]
        uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq:
            keys.append(uniq)
        return keys

    def _index_keys(self, topic: str, props: dict[str, str], phy: int, store_ts: int) -> None:
        assert self.index is not None
        keys = self._keys_of(props)
        if keys:
            self.index.put(topic, keys, phy, store_ts)

    def _index_catch_up(self) -> None:
        """Index what the commit log holds past the index's newest entry (after a crash)."""
        assert self.index is not None
        last = self.index.max_phy_offset
        pos = self.commit_log.min_offset if last < 0 else last
        end = self.commit_log.max_offset
        skip_first = last >= 0
        file_size = self.config.mappedFileSizeCommitLog
        n = 0
        while pos < end:
            try:
                msg = self.commit_log.get_message(pos)
            except Exception:  # the blank end of a file, or nothing there: next file
                if pos in self._damaged_sizes:  # set aside by recovery: the next record follows it
                    pos += self._damaged_sizes[pos]
                    skip_first = False
                    continue
                pos = (pos // file_size + 1) * file_size
                skip_first = False
                continue
            if not skip_first:
                self._index_keys(msg.topic, msg.properties, pos, msg.store_timestamp)
                n += 1
            skip_first = False
            pos += msg.store_size
        if n:
            log.info("index caught up with %d messages of the commit log", n)

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[bytes]:
        """The stored records of ``topic`` with ``key`` stored between ``begin`` and ``end`` (ms)."""
        if self.index is None:
            return []
        out = []
        for phy in self.index.query(topic, key, max_num, begin, end):
            rec = self.select_one_message_by_offset(phy)
            if rec is not None:
                out.append(rec)
        return out

    @property
    def commit_log_max_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def commit_log_min_offset(self) -> int:
        return self.commit_log.min_offset

    # ------------------------------------------------------------------ admin
    def delete_topics(self, topics: Iterable[str]) -> int:
        """Drop the consume queues (and their files) of ``topics``; returns queues deleted.

        The commit log keeps the records until retention removes their files, as in RocketMQ.
        """
        topics = set(topics)
        n = 0
        for key in [k for k in self.queues.queues if k[0] in topics]:
            self._drop_queue(key)
            n += 1
        for t in topics:
            self._remove_queue_files(t)
        return n

    def _remove_queue_files(self, topic: str, queue_id: int | None = None) -> None:
        """Delete a topic's (or one of its queues') consume-queue directory; a name that could
        leave the directory is left alone."""
        if not topic or "/" in topic or topic in (".", ".."):
            return
        parts = (topic,) if queue_id is None else (topic, str(queue_id))
        shutil.rmtree(os.path.join(self.config.consume_queue_dir, *parts), ignore_errors=True)

    def _drop_queue(self, key: tuple[str, int]) -> None:
        cq = self.queues.queues.pop(key)
        cq.close()
        self.commit_log.topic_queue_table.pop(key, None)
        self.reader.forget_queue(key)

    def clean_unused_topics(self, keep: Iterable[str]) -> list[str]:
        """cleanUnusedTopic (``mqadmin cleanUnusedTopic``): drop the consume queues of every
        topic not in ``keep`` (the broker's topic table), but the schedule, timer and transaction-op
        topics'. Returns the topics dropped."""
        keep = set(keep) | {SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC, TIMER_TOPIC}
        doomed = sorted({t for t, _ in self.queues.queues if t not in keep})
        self.delete_topics(doomed)
        for t in doomed:
            log.info("cleanUnusedTopic: %s, topic destroyed", t)
        return doomed

    def clean_expired_consume_queues(self) -> list[tuple[str, int]]:
        """cleanExpiredConsumerQueue (``mqadmin cleanExpiredCQ``): drop every consume queue, but
        the schedule topic's, whose entries all point before the commit log's first byte (their
        messages are gone with the files retention deleted). Returns the queues dropped."""
        min_phys = self.commit_log.min_offset
        dropped = []
        for key, cq in list(self.queues.queues.items()):
            if key[0] in (SCHEDULE_TOPIC, TIMER_TOPIC) or cq.max_physic_offset == -1 or cq.max_physic_offset >= min_phys:
                continue
            log.info("cleanExpiredConsumerQueue: %s %d consumer queue destroyed, minCommitLogOffset: %d "
                     "maxCLOffsetInConsumeQueue: %d", key[0], key[1], min_phys, cq.max_physic_offset)
            self._drop_queue(key)
            self._remove_queue_files(*key)
            dropped.append(key)
        for topic in {t for t, _ in dropped} - {t for t, _ in self.queues.queues}:
            self._remove_queue_files(topic)
        return dropped

    def runtime_info(self) -> dict[str, str]:
        """RocketMQ's getRuntimeInfo keys (the subset fastmq tracks), values as strings."""
        st = self.stats
        cl_ratio = self.disk_ratio_fn(self.config.commit_log_dir)
        cq_ratio = self.disk_ratio_fn(self.config.consume_queue_dir)
        puts = st["putMessageTimesTotal"]
        up = max(1, int(time.time() * 1000) - self.boot_timestamp)
        try:
            sv = os.statvfs(self.config.commit_log_dir)
            cap = (f"Total : {human_readable_bytes(sv.f_blocks * sv.f_frsize)}, "
                   f"Free : {human_readable_bytes(sv.f_bfree * sv.f_frsize)}.")
        except OSError:
            cap = "Total : 0, Free : 0."
        info = {
            "commitLogMinOffset": self.commit_log_min_offset,
            "commitLogMaxOffset": self.commit_log_max_offset,
            "commitLogDiskRatio": cl_ratio,
            "consumeQueueDiskRatio": cq_ratio,
            "commitLogDirCapacity": cap,
            "dispatchBehindBytes": 0,  # dispatch is synchronous with the append
            "dispatchMaxBuffer": 0,  # (nothing is buffered for dispatch, for the same reason)
            # 4.9.8's bytes appended but not flushed, human-readable as MixAll writes it
            "remainHowManyDataToFlush": human_readable_bytes(max(0, self.commit_log.max_offset
                                                                 - self.commit_log.flushed_offset)),
            # no transient store pool in fastmq: 4.9.8 answers Integer.MAX_VALUE with it off
            "remainTransientStoreBufferNumbs": 2147483647,
            # fastmq does not time each put into buckets (it would cost the send path): every
            # bucket reads 0. 4.9.8 answers "null" while its last minute holds no samples, which
            # rocketmq-exporter cannot parse; the buckets are 4.9.8's
            "putMessageDistributeTime": _NO_PUT_DISTRIBUTION,
            "putMessageAverageSize": (st["putMessageSizeTotal"] / puts) if puts else 0.0,
            "runtime": f"[ {up // 86_400_000} days, {up // 3_600_000 % 24} hours, "
                       f"{up // 60_000 % 60} minutes, {up // 1000 % 60} seconds ]",
            "bootTimestamp": self.boot_timestamp,
            "pageCacheLockTimeMills": 0,
            "earliestMessageTimeStamp": self.earliest_message_time_in_log(),
            # fastmq's own: commit-log syncs that wrote something, and the time they took (under
            # SYNC_FLUSH, putMessageTimesTotal / commitLogFlushTimesTotal is messages per flush)
            "commitLogFlushTimesTotal": self.commit_log.flush_times,
            "commitLogFlushMicrosTotal": self.commit_log.flush_micros,
        }
        info.update(st)
        info.update(self.stats_service.runtime_info())
        return {k: str(v) for k, v in info.items()}

    def check_consistency(self) -> list[str]:
        """Scan the commit log (magic, CRC, positions) and every consume-queue entry still in
        range: each must point at a record of its own topic, queue, queue offset and size."""
        return check_store(self.commit_log, self.queues, start_of=self.reader.queue_min)
