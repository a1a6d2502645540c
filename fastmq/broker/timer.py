"""Timer messages: hold a message until the time it names, then deliver it to its topic.

RocketMQ 5's timer messages carry one of ``TIMER_DELIVER_MS`` (epoch ms), ``TIMER_DELAY_SEC`` or
``TIMER_DELAY_MS``. :func:`check_timer_message` is the send path's half (5.x's
``HookUtils.handleScheduleMessage``): it applies 5.x's precedence, refuses what 5.x refuses with
5.x's codes and texts, rounds the time down to ``timerPrecisionMs`` into ``TIMER_OUT_MS``, saves
the real topic and queue in ``REAL_TOPIC`` / ``REAL_QID`` and moves the message to
``rmq_sys_wheel_timer`` queue 0, whose consume-queue tag code is then the rounded slot (the store
reads it back from the record on recovery and on a slave, so the index never depends on memory).

:class:`TimerMessageService` is the delivering half, on a master only. Instead of 5.x's timer
wheel and timer log files it keeps the held messages as four numpy arrays -- slot, commit-log
offset, size and real topic id, 24 bytes a message, no Python object each -- sorted by (slot,
offset), fed from the timer topic's consume queue. A message of slot ``s`` is delivered once the
clock reaches ``s + timerPrecisionMs`` (5.x delivers a slot when its write time has passed it), so
never before the time the sender asked for. Due messages are re-put in batches as 5.x's
``convertMessage`` builds them: real topic and queue back, REAL_TOPIC / REAL_QID removed, TIMER_ENQUEUE_MS and
TIMER_DEQUEUE_MS added, WAIT=false.

Progress is checkpointed to ``<storePathRootDir>/config/timercheck.json`` every
``timerFlushIntervalMs`` and at stop: how far the consume queue was read, a watermark (every
message read whose (slot, offset) is at or below it was delivered, but the few listed as
pending), where the earliest held message is, and the commit log's end. After a crash the held set
is rebuilt from the consume queue with that checkpoint, and the deliveries written after it (found
in the commit log past the recorded end, by unique key, born time and slot) are not repeated --
so a kill -9 neither loses nor repeats an acknowledged timer message that carries a unique key
(every client sets one); what fell due while the broker was down is delivered at start.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import struct
import threading
import time
from typing import Any

import numpy as np

from ..common.json_file import load_json, write_json_atomic
from .._ext.timer_deliver import delivered_records, real_topic_ids
from ..protocol.codes import ResponseCode
from ..protocol.java_number import JavaNumberFormatError, parse_int, parse_long
from ..protocol.message import (BLANK_MAGIC, MAGIC_V1, MessageConst, MessageExt, MessageSysFlag, decode_record,
                                pack_host)
from ..protocol.topic import TIMER_TOPIC
from ..store.config import MessageStoreConfig
from ..store import StoreError
from ..store.message_store import MessageStore, PutStatus

__all__ = ["TIMER_TOPIC", "TimerMessageService", "check_timer_message", "timer_precision"]

log = logging.getLogger("fastmq.broker.timer")

_TX_MASK = MessageSysFlag.TRANSACTION_PREPARED_TYPE | MessageSysFlag.TRANSACTION_COMMIT_TYPE
_SENDER_KEYS = (MessageConst.TIMER_DELIVER_MS, MessageConst.TIMER_DELAY_SEC, MessageConst.TIMER_DELAY_MS)
_PRECISIONS = (100, 200, 500, 1000)
_POLL = 0.1                 # seconds between looks at the consume queue for new timer messages
_BATCH = 2048               # messages re-put by one store append
_INGEST = 65_536            # consume-queue entries read per look
_MAX_BELOW = 10_000         # late entries below the watermark the checkpoint may list
_RETRY_AFTER_FAILURE = 1.0  # seconds before a failed re-put is tried again
_NEVER_STORABLE = frozenset((PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED))
_SIZE_MAGIC = struct.Struct(">iI")
_TIMER_TOPIC_B = TIMER_TOPIC.encode()
_UNREAD = -2                # a held message's topic id before its REAL_TOPIC was read (-1: none usable)
#: upper bounds in seconds of RocketMQ 5's timer distribution snapshot (TimerMetrics.timerDist)
SNAPSHOT_BOUNDS_S = (5, 60, 300, 900, 3600, 14400, 28800, 86400)


def timer_precision(value: int) -> int:
    """``timerPrecisionMs`` as RocketMQ 5's setter snaps it: the largest of 100, 200, 500, 1000
    not above ``value`` (100 for anything smaller)."""
    best = _PRECISIONS[0]
    for p in _PRECISIONS:
        if value >= p:
            best = p
    return best


def illegal_remark(cfg: MessageStoreConfig) -> str:
    """5.x's MESSAGE_ILLEGAL text for a timer message it will not hold."""
    return ("timer message illegal, the delay time should not be bigger than the max delay "
            f"{cfg.timerMaxDelaySec * 1000}ms; or if set del msg, the delay time should be bigger than the "
            "current time")


def check_timer_message(msg: MessageExt, cfg: MessageStoreConfig, now: int) -> tuple[int, str] | None:
    """Make a timer message one the timer topic holds, in place; ``(response code, remark)`` when
    it must be refused. Other messages are left alone.

    A delay level above 0 wins: the timer properties are dropped and the level applies. A time
    not in the future leaves the message as it is (delivered at once).
    """
    tran = msg.sys_flag & _TX_MASK
    if tran not in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
        return None
    props = msg.properties
    if msg.topic == TIMER_TOPIC:
        return None
    level = props.get(MessageConst.DELAY_TIME_LEVEL)
    if level:
        try:
            delayed = parse_int(level) > 0
        except JavaNumberFormatError:
            delayed = False  # the store refuses it with 4.9's text
        if delayed:
            for k in _SENDER_KEYS:
                props.pop(k, None)
            return None
    if MessageConst.TIMER_OUT_MS in props:  # already held once (a delivered one sent again)
        return None
    if not any(k in props for k in _SENDER_KEYS):
        return None
    if not cfg.timerWheelEnable:
        return (ResponseCode.SYSTEM_ERROR,
                f"accurate timer message is not enabled, timerWheelEnable is {str(cfg.timerWheelEnable).lower()}")
    try:
        if MessageConst.TIMER_DELAY_SEC in props:
            deliver = now + parse_long(props[MessageConst.TIMER_DELAY_SEC]) * 1000
        elif MessageConst.TIMER_DELAY_MS in props:
            deliver = now + parse_long(props[MessageConst.TIMER_DELAY_MS])
        else:
            deliver = parse_long(props[MessageConst.TIMER_DELIVER_MS])
    except JavaNumberFormatError:
        return ResponseCode.MESSAGE_ILLEGAL, illegal_remark(cfg)
    if deliver > now:
        if deliver - now > cfg.timerMaxDelaySec * 1000:
            return ResponseCode.MESSAGE_ILLEGAL, illegal_remark(cfg)
        prec = timer_precision(cfg.timerPrecisionMs)
        slot = deliver - prec if deliver % prec == 0 else deliver // prec * prec
        props[MessageConst.TIMER_OUT_MS] = str(slot)
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.topic = TIMER_TOPIC
        msg.queue_id = 0
    elif MessageConst.TIMER_DEL_UNIQKEY in props:
        return ResponseCode.MESSAGE_ILLEGAL, illegal_remark(cfg)
    return None


def delivered_message(m: MessageExt, enqueue_ms: int, now: int) -> MessageExt | None:
    """A held message as it is delivered (5.x's ``convert`` / ``convertMessage``); None when it
    has no real topic or queue to go back to."""
    props = dict(m.properties)
    topic = props.pop(MessageConst.REAL_TOPIC, None)
    try:
        qid = parse_int(props.pop(MessageConst.REAL_QUEUE_ID, None) or "")
    except JavaNumberFormatError:
        return None
    if not topic:
        return None
    props[MessageConst.TIMER_ENQUEUE_MS] = str(enqueue_ms)
    props[MessageConst.TIMER_DEQUEUE_MS] = str(now)
    props[MessageConst.WAIT_STORE_MSG_OK] = "false"
    return MessageExt(topic=topic, body=m.body, flag=m.flag, properties=props, queue_id=qid,
                      sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
                      reconsume_times=m.reconsume_times)


def _delivery_key(m: MessageExt) -> tuple[str, int, str] | None:
    """What tells one delivery apart from another of the same message (a producer's retry keeps
    the unique key but not the born time); None without a unique key."""
    uniq = m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if not uniq:
        return None
    return uniq, m.born_timestamp, m.properties.get(MessageConst.TIMER_OUT_MS, "")


class TimerMessageService:
    """Holds the timer topic's messages in arrays and delivers them when due (master only).

    Args:
        store: the message store (its config's ``timerPrecisionMs`` and ``timerFlushIntervalMs``).
        path: the checkpoint file; default ``<storePathRootDir>/config/timercheck.json``.
    """

    def __init__(self, store: MessageStore, *, path: str | None = None) -> None:
        self.store = store
        self.path = path or os.path.join(store.config.storePathRootDir, "config", "timercheck.json")
        self.precision = timer_precision(store.config.timerPrecisionMs)
        self.flush_interval = max(store.config.timerFlushIntervalMs, 10) / 1000
        packed = pack_host(*store.store_host)
        self._store_host = packed if len(packed) == 8 else b""  # IPv6: the object path only
        # the held messages, sorted by (slot, commit-log offset); 24 bytes each with _topic
        self._slot = np.empty(0, np.int64)
        self._phys = np.empty(0, np.int64)
        self._size = np.empty(0, np.int32)
        # and each one's real topic, an id into _topic_ids (4 bytes more; see _topics_of)
        self._topic = np.empty(0, np.int32)
        self._topic_ids: dict[str, int] = {}
        self._unread_topics = 0  # held messages whose topic is still _UNREAD (rebuilt at start)
        #: per topic id: messages read into the held set / gone out of it since the start
        self.enqueued_by_topic = np.zeros(0, np.int64)
        self.dequeued_by_topic = np.zeros(0, np.int64)
        self._read = 0                        # next timer consume-queue offset to read
        self._mark = (-1, -1)                 # (slot, offset): delivered at and below, but _below
        self._done_before: collections.Counter[tuple[str, int, str]] = collections.Counter()
        self._dedupe_until = 0  # no slot above this went out before the last start
        self.delivered = 0
        self.skipped = 0
        self.enqueued = 0  # messages read into the held set since the start
        self._persist_lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._started = False
        self._stopping = False

    # ------------------------------------------------------------------ figures
    @property
    def held(self) -> int:
        """Messages held now."""
        return len(self._slot)

    @property
    def index_bytes(self) -> int:
        """Bytes the held messages' arrays take."""
        return int(self._slot.nbytes + self._phys.nbytes + self._size.nbytes + self._topic.nbytes)

    @property
    def running(self) -> bool:
        """Started and not stopped (a master's service)."""
        return self._started

    def topic_names(self) -> list[str]:
        """The topics the per-topic figures count, indexed by topic id."""
        names = [""] * len(self._topic_ids)
        for name, i in self._topic_ids.items():
            names[i] = name
        return names

    def timing_by_topic(self) -> np.ndarray:
        """Held messages per topic id (RocketMQ 5's timing count); one pass over the held set."""
        t = self._topic
        return np.bincount(t[t >= 0], minlength=len(self._topic_ids)) if len(t) else np.zeros(
            len(self._topic_ids), np.int64)

    def enqueue_behind(self) -> tuple[int, int]:
        """(timer consume-queue entries not yet read into the held set, ms since the first of them
        was stored; 0 when none)."""
        cq = self._queue()
        if cq is None or not self._started:
            return 0, 0
        behind = cq.max_offset - max(self._read, cq.min_offset)
        if behind <= 0:
            return 0, 0
        try:
            phys, size, _ = cq.get_entry(max(self._read, cq.min_offset))
            ts = self.store.commit_log.store_timestamp_at(phys, size)
        except Exception:  # removed by retention meanwhile
            return behind, 0
        return behind, max(0, int(time.time() * 1000) - ts) if ts > 0 else 0

    def dequeue_behind_ms(self, now: int) -> int:
        """How far delivery is behind the clock: ms since the earliest held message fell due (0
        when none is due)."""
        if not len(self._slot):
            return 0
        return max(0, now - (int(self._slot[0]) + self.precision))

    def distribution(self, now: int, bounds_s: tuple[int, ...] = SNAPSHOT_BOUNDS_S) -> list[int]:
        """Held messages per band of deliver time ahead of ``now``, as RocketMQ 5's snapshot bands
        them: [0, 5 s), [5 s, 60 s), ... of slot time from the current slot; due ones not counted."""
        if not len(self._slot):
            return [0] * len(bounds_s)
        cur = now // self.precision * self.precision
        edges = cur + np.array((0,) + tuple(bounds_s), np.int64) * 1000
        at = np.searchsorted(self._slot, edges, side="left")
        return [int(x) for x in np.diff(at)]

    def _topics_of(self, phys: np.ndarray, size: np.ndarray) -> np.ndarray:
        """The topic ids of held messages (-1: no usable REAL_TOPIC or unreadable), read from
        their stored records one commit-log file at a time by the compiled stage."""
        out = np.full(len(phys), -1, np.int32)
        if not len(phys):
            return out
        fsize = self.store.config.mappedFileSizeCommitLog
        files = phys // fsize
        for f in np.unique(files).tolist():
            sel = np.flatnonzero(files == f)
            p, n = phys[sel], size[sel].astype(np.int32)
            lo = int(p.min())
            try:
                view = self.store.commit_log.get_data(lo, int((p + n).max()) - lo)
                out[sel] = real_topic_ids(view, (p - lo).astype(np.int64), n, self._topic_ids)
            except StoreError:
                continue  # (gone with an expired file: counted nowhere)
            except Exception:  # a figure for the metrics must never stop delivery
                log.exception("timer: reading the topics of %d held messages failed", len(sel))
        return out

    def _count(self, acc: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """``acc`` plus the messages of each topic id in ``ids`` (grown to the known topics)."""
        if len(acc) < len(self._topic_ids):
            acc = np.concatenate((acc, np.zeros(len(self._topic_ids) - len(acc), np.int64)))
        known = ids[ids >= 0]
        if len(known):
            acc[:] += np.bincount(known, minlength=len(acc))
        return acc

    def _read_unread_topics(self) -> None:
        """Read the topics of up to a look's worth of the held messages rebuilt at start."""
        at = np.flatnonzero(self._topic == _UNREAD)[:_INGEST]
        self._topic[at] = self._topics_of(self._phys[at], self._size[at])
        self._unread_topics = int(np.count_nonzero(self._topic == _UNREAD)) if len(at) == _INGEST else 0

    # ------------------------------------------------------------------ checkpoint
    def _queue(self) -> Any:
        return self.store.queues.get(TIMER_TOPIC, 0)

    def _below_count(self) -> int:
        """Held messages at or below the watermark (read after it moved past them)."""
        s, p = self._mark
        n = int(np.searchsorted(self._slot, s, side="right"))
        if not n:
            return 0
        # among those of slot <= s, the ones of slot s above offset p are above the mark
        first_s = int(np.searchsorted(self._slot, s, side="left"))
        return first_s + int(np.count_nonzero(self._phys[first_s:n] <= p))

    def snapshot(self) -> dict[str, Any]:
        """The checkpoint of this moment (taken on the loop, between rounds)."""
        below = self._phys[:self._below_count()] if len(self._slot) else self._phys[:0]
        scan_from = int(self._phys.min()) if len(self._phys) else -1
        return {"readOffset": self._read, "markSlot": self._mark[0], "markOffset": self._mark[1],
                "pendingBelow": [int(x) for x in below], "scanFromPhys": scan_from,
                "commitLogOffset": self.store.commit_log.max_offset}

    def persist(self, snap: dict[str, Any] | None = None) -> None:
        """Write the checkpoint atomically (temp file, fsync, rename)."""
        if snap is None:
            snap = self.snapshot()
        # the deliveries the checkpoint counts as done go out with WAIT=false: on disk first, so a
        # power cut cannot leave a checkpoint that claims records the disk never got
        self.store.commit_log.flush()
        with self._persist_lock:
            write_json_atomic(self.path, snap)

    @staticmethod
    def _parse(data: Any) -> dict[str, Any]:
        if not isinstance(data, dict) or "readOffset" not in data:
            raise ValueError("no readOffset")
        return data

    def load(self) -> None:
        """Rebuild the held set from the timer consume queue and the checkpoint, and learn which
        deliveries were written after the checkpoint.

        Raises:
            ConfigError: the file and its ``.bak`` are both damaged.
        """
        ck = load_json(self.path, self._parse) or {}
        cq = self._queue()
        read = int(ck.get("readOffset", 0))
        mark_s, mark_p = int(ck.get("markSlot", -1)), int(ck.get("markOffset", -1))
        below = np.array(sorted(int(x) for x in ck.get("pendingBelow", [])), np.int64)
        scan_from = int(ck.get("scanFromPhys", -1))
        slots, physs, sizes = [], [], []
        hi = 0
        if cq is not None:
            lo, hi = cq.min_offset, cq.max_offset
            if read > hi:
                log.warning("timer checkpoint read offset %d beyond the queue's end %d, corrected", read, hi)
                read = hi
            start = lo
            for arr in cq.iter_entries(start, hi, chunk=_INGEST):
                n = len(arr)
                qoff = np.arange(start, start + n, dtype=np.int64)
                start += n
                phys = arr["offset"].astype(np.int64)
                slot = arr["tags_code"].astype(np.int64)
                held = qoff >= read  # read after the checkpoint: all held
                if scan_from >= 0:  # -1: nothing was held at the checkpoint
                    done = (slot < mark_s) | ((slot == mark_s) & (phys <= mark_p))
                    if len(below):
                        done &= ~np.isin(phys, below)
                    held |= (qoff < read) & ~done & (phys >= scan_from)
                if held.any():
                    slots.append(slot[held])
                    physs.append(phys[held])
                    sizes.append(arr["size"][held].astype(np.int32))
        if slots:
            slot = np.concatenate(slots)
            phys = np.concatenate(physs)
            order = np.lexsort((phys, slot))
            self._slot, self._phys = slot[order], phys[order]
            self._size = np.concatenate(sizes)[order]
            # their topics are read a look at a time by the loop (a large held set on a cold disk
            # would otherwise hold up the start)
            self._topic = np.full(len(slot), _UNREAD, np.int32)
            self._unread_topics = len(slot)
        self._read = hi if cq is not None else read
        self._mark = (mark_s, mark_p)
        after = ck.get("commitLogOffset")
        if isinstance(after, int) and after >= 0:
            self._done_before = self._deliveries_since(after)
        self._dedupe_until = int(time.time() * 1000)
        log.info("timer: %d messages held, %d deliveries after the checkpoint", self.held,
                 sum(self._done_before.values()))

    def _deliveries_since(self, offset: int) -> collections.Counter[tuple[str, int, str]]:
        """The delivery keys of the timer deliveries the commit log holds from ``offset`` on
        (records written after the checkpoint: at most a flush interval's worth)."""
        cl = self.store.commit_log
        fsize = self.store.config.mappedFileSizeCommitLog
        out: collections.Counter[tuple[str, int, str]] = collections.Counter()
        off = max(offset, cl.min_offset)
        end = cl.max_offset
        while off < end:
            view = cl.read_from(off, 1 << 22)  # never crosses a file
            pos, blank = 0, len(view) < 8
            while not blank and pos + 8 <= len(view):
                size, magic = _SIZE_MAGIC.unpack_from(view, pos)
                if magic == BLANK_MAGIC:
                    blank = True
                    break
                if magic != MAGIC_V1 or size <= 0:
                    return out  # the end of what was written
                if pos + size > len(view):
                    if pos == 0:  # one record larger than the window
                        view = cl.read_from(off, size)
                        if len(view) < size:
                            return out
                        continue
                    break
                try:
                    m = decode_record(view[pos:pos + size], verify_crc=False, with_body=False)
                except ValueError:
                    return out
                if m.topic != TIMER_TOPIC and MessageConst.TIMER_DEQUEUE_MS in m.properties:
                    key = _delivery_key(m)
                    if key is not None:
                        out[key] += 1
                pos += size
            off = ((off + pos) // fsize + 1) * fsize if blank else off + pos
        return out

    # ------------------------------------------------------------------ lifetime
    async def start(self) -> None:
        """Load the checkpoint and start delivering (idempotent)."""
        if self._started:
            return
        self.load()
        self._started = True
        self._stopping = False
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="fastmq-timer")

    async def stop(self) -> None:
        """Stop delivering and write the checkpoint."""
        if not self._started:
            return
        self._started = False
        self._stopping = True
        self.wakeup()
        task, self._task = self._task, None
        if task is not None:
            # let a round end by itself: a re-put cancelled after its append but before the mark
            # moved would be delivered again after the restart
            done, _ = await asyncio.wait([task], timeout=5.0)
            if not done:
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.persist()

    def wakeup(self) -> None:
        """Look at the timer queue now rather than at the next poll."""
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        last_persist = time.monotonic()
        persisting: asyncio.Future[None] | None = None
        while not self._stopping:
            try:
                self.ingest()
                wait = await self.deliver_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer: delivery round failed")
                wait = _RETRY_AFTER_FAILURE
            if time.monotonic() - last_persist >= self.flush_interval and (persisting is None or persisting.done()):
                last_persist = time.monotonic()
                persisting = loop.run_in_executor(None, self._persist_logged, self.snapshot())
            if self._stopping:
                break
            if wait <= 0:
                await asyncio.sleep(0)
                continue
            self._wake.clear()
            try:
                async with asyncio.timeout(min(wait, _POLL)):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _persist_logged(self, snap: dict[str, Any]) -> None:
        try:
            self.persist(snap)
        except Exception:
            log.exception("timer: writing %s failed", self.path)

    # ------------------------------------------------------------------ holding
    def ingest(self) -> int:
        """Add the timer queue's new entries to the held arrays; returns how many."""
        if self._unread_topics:
            self._read_unread_topics()
        cq = self._queue()
        if cq is None or self._read >= cq.max_offset:
            return 0
        if self._below_count() >= _MAX_BELOW:
            return 0  # the checkpoint lists these: deliver them first
        self._read = max(self._read, cq.min_offset)
        arr = cq.get_entries(self._read, _INGEST)
        n = len(arr)
        if not n:
            return 0
        self._read += n
        slot = arr["tags_code"].astype(np.int64)
        phys = arr["offset"].astype(np.int64)
        size = arr["size"].astype(np.int32)
        topic = self._topics_of(phys, size)
        self.enqueued_by_topic = self._count(self.enqueued_by_topic, topic)
        self.enqueued += n
        order = np.argsort(slot, kind="stable")  # offsets grow along the queue: ties stay in order
        slot, phys, size, topic = slot[order], phys[order], size[order], topic[order]
        # every new entry's offset is above every held one's: after its equals keeps the order
        at = np.searchsorted(self._slot, slot, side="right")
        self._slot = np.insert(self._slot, at, slot)
        self._phys = np.insert(self._phys, at, phys)
        self._size = np.insert(self._size, at, size)
        self._topic = np.insert(self._topic, at, topic)
        return n

    # ------------------------------------------------------------------ delivery
    async def deliver_due(self) -> float:
        """Deliver up to one batch of due messages; seconds until the next look (0: more due)."""
        if not len(self._slot):
            return _POLL
        now = int(time.time() * 1000)
        due = int(np.searchsorted(self._slot, now - self.precision, side="right"))
        if not due:
            return max(0.001, (int(self._slot[0]) + self.precision - now) / 1000)
        take = min(due, _BATCH)
        if self._done_before and int(self._slot[0]) > self._dedupe_until:
            self._done_before.clear()  # past every slot that could have gone out before the crash
        if not self._done_before:
            left = await self._deliver_records(take, now)
            if left is None:
                return _RETRY_AFTER_FAILURE
        else:
            left = list(range(take))  # after a crash: each checked against what went out before it
        if left and not await self._deliver_objects(left, now):
            return _RETRY_AFTER_FAILURE
        self._drop(take)
        if due > take:
            return 0.0
        if not len(self._slot):
            return _POLL
        return max(0.001, (int(self._slot[0]) + self.precision - now) / 1000)

    async def _deliver_records(self, take: int, now: int) -> list[int] | None:
        """The first ``take`` held messages built from their stored bytes by the compiled stage
        and stored in one append; returns the indexes left to :meth:`_deliver_objects` (None: the
        store refused the batch for now, nothing of it stored)."""
        cl = self.store.commit_log
        records: list[memoryview] = []
        get = cl.get_data
        for phys, size in zip(self._phys[:take].tolist(), self._size[:take].tolist()):
            try:
                records.append(get(phys, size))
            except Exception:
                records.append(memoryview(b""))  # the stage leaves it; the object path logs it
        cfg = self.store.config
        batch, left = delivered_records(records, _TIMER_TOPIC_B, now, self._store_host,
                                        min(cfg.maxMessageSize, cfg.mappedFileSizeCommitLog - 8))
        del records
        if batch.n:
            res = await self.store.put_batch(batch)
            if not res.ok:
                if res.status in _NEVER_STORABLE:
                    return list(range(take))  # one by one, each refusal logged
                log.error("timer: re-put of %d messages failed (%s); retrying later", batch.n, res.status.name)
                return None
            self.delivered += batch.n
        return left

    async def _deliver_objects(self, indexes: list[int], now: int) -> bool:
        """Deliver the held messages at ``indexes`` through message objects (the general put,
        with every check); False when a retriable failure stopped it (nothing is dropped then,
        so a later round retries -- the ones before it may then go out twice)."""
        msgs: list[MessageExt] = []
        for i in indexes:
            m = self._read_held(int(self._phys[i]), int(self._size[i]))
            if m is None:
                self.skipped += 1
                continue
            key = _delivery_key(m)
            if key is not None and self._done_before.get(key):
                # delivered after the last checkpoint, before a crash
                self._done_before[key] -= 1
                if not self._done_before[key]:
                    del self._done_before[key]
                continue
            out = delivered_message(m, m.store_timestamp, now)
            if out is None:
                log.warning("timer: held record at %d has no REAL_TOPIC/REAL_QID, skipped", int(self._phys[i]))
                self.skipped += 1
                continue
            msgs.append(out)
        done = await self._put(msgs)
        if done < len(msgs):
            log.error("timer: %d of %d deliveries stored before a failure; retrying later", done, len(msgs))
            return False
        return True

    def _drop(self, n: int) -> None:
        """The first ``n`` held messages are settled: move the mark, shrink the arrays."""
        if n <= 0:
            return
        last = (int(self._slot[n - 1]), int(self._phys[n - 1]))
        if last > self._mark:
            self._mark = last
        self.dequeued_by_topic = self._count(self.dequeued_by_topic, self._topic[:n])
        self._slot, self._phys, self._size = self._slot[n:], self._phys[n:], self._size[n:]
        self._topic = self._topic[n:]

    def _read_held(self, phys: int, size: int) -> MessageExt | None:
        try:
            m = self.store.commit_log.get_message(phys, size)
        except Exception:
            log.warning("timer: held record at %d is unreadable (gone with an expired file?), skipped", phys)
            return None
        if m.topic != TIMER_TOPIC:
            log.warning("timer: record at %d is not a timer message, skipped", phys)
            return None
        return m

    async def _put(self, msgs: list[MessageExt]) -> int:
        """Store ``msgs`` in order; returns how many are settled (stored, or refused for good)."""
        if not msgs:
            return 0
        res = await self.store.put_messages(msgs)
        if res.ok:
            self.delivered += len(msgs)
            return len(msgs)
        # one message the store will never take refuses the whole batch: go one by one
        done = 0
        for m in msgs:
            r = await self.store.put_messages([m])
            if r.ok:
                self.delivered += 1
            elif r.status in _NEVER_STORABLE:
                log.error("timer: message for %s can never be stored (%s), skipped", m.topic, r.remark)
                self.skipped += 1
            else:
                log.error("timer: re-put for %s failed (%s); retrying later", m.topic, r.status.name)
                return done
            done += 1
        return done
