"""Delay levels: move messages from SCHEDULE_TOPIC_XXXX back to their topic when they are due.

The store parks a message with delay level L in ``SCHEDULE_TOPIC_XXXX`` queue ``L - 1`` (see
:mod:`fastmq.store.message_store`). Every message of one level waits the same time, so each
queue is in due order and one task per level only ever looks at its head: deliver everything
due, then sleep until the head is due (RocketMQ 4.9's ``ScheduleMessageService`` with one
timer per level). The next queue offset of each level is persisted to
``<storePathRootDir>/config/delayOffset.json`` (``{"offsetTable":{"1":n,...}}``, RocketMQ's
file) every ``flushDelayOffsetInterval`` ms and at stop, so after a restart delivery resumes
where it was -- at least once: a message re-put after the last persist is delivered again.

The due time is recomputed from the record's store timestamp plus the level's delay rather
than read from the consume-queue tag code, so entries rebuilt by crash recovery (which
computes tag codes from TAGS) are still delivered on time.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

from ..common.json_file import load_json, write_json_atomic
from ..protocol.bodies import loads_lenient
from ..protocol.java_number import parse_int
from ..protocol.message import MessageConst, MessageExt
from ..store.message_store import SCHEDULE_TOPIC, MessageStore, PutStatus

__all__ = ["ScheduleMessageService"]

log = logging.getLogger("fastmq.broker.schedule")

_RETRY_AFTER_FAILURE = 10.0  # RocketMQ's DELAY_FOR_A_PERIOD: a failed re-put is retried later
_MAX_PER_ROUND = 1000        # re-puts before yielding to the loop
#: What the store answers for a message it will never take, however often it is asked.
_NEVER_STORABLE = frozenset((PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED))


class ScheduleMessageService:
    """One asyncio task per delay level plus a periodic offset flush.

    Args:
        store: the message store (its ``delay_level_table`` comes from messageDelayLevel).
        poll_interval: seconds between looks at an empty level (RocketMQ: 100 ms).
        flush_interval: seconds between offset persists; default flushDelayOffsetInterval.
        path: the offsets file; default ``<storePathRootDir>/config/delayOffset.json``.
    """

    def __init__(self, store: MessageStore, *, poll_interval: float = 0.1,
                 flush_interval: float | None = None, path: str | None = None) -> None:
        self.store = store
        self.delay_table = dict(store.delay_level_table)
        self.poll_interval = poll_interval
        if flush_interval is None:
            flush_interval = getattr(store.config, "flushDelayOffsetInterval", 10_000) / 1000
        self.flush_interval = flush_interval
        self.path = path or os.path.join(store.config.storePathRootDir, "config", "delayOffset.json")
        self._persist_lock = threading.Lock()
        self.offset_table: dict[int, int] = {}
        self.delivered = 0
        self.skipped = 0  # due messages the store refused for good (logged, level moved on)
        self._tasks: list[asyncio.Task[None]] = []
        self._wake: dict[int, asyncio.Event] = {}
        self._dirty = False
        self._started = False

    # ------------------------------------------------------------------ offsets file
    def load(self) -> None:
        """Read delayOffset.json (fastjson's unquoted keys accepted; a damaged file is read from
        its ``.bak``) and clamp every offset to its queue's current range.

        Raises:
            ConfigError: the file and its ``.bak`` are both damaged.
        """
        table: dict[int, int] = load_json(self.path, self._parse, loads=loads_lenient) or {}
        for level in self.delay_table:
            lo = self.store.min_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            hi = self.store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            off = table.get(level, lo)
            if off < lo or off > hi:
                log.warning("delay level %d: stored offset %d outside [%d, %d], corrected", level, off, lo, hi)
                off = min(max(off, lo), hi)
            table[level] = off
        self.offset_table = table

    def _parse(self, data: Any) -> dict[int, int]:
        """The file's levels; the wrong shape raises, so the ``.bak`` is tried (a damaged file
        must not restart every level from its queue's start: that re-delivers)."""
        if not isinstance(data, dict) or not isinstance(data.get("offsetTable"), dict):
            raise ValueError("no offsetTable object")
        table: dict[int, int] = {}
        for k, v in data["offsetTable"].items():
            try:
                table[int(k)] = int(v)
            except (TypeError, ValueError):
                log.warning("%s: ignoring bad entry %r: %r", self.path, k, v)
        return table

    def persist(self, table: dict[int, int] | None = None) -> None:
        """Write the offsets (or the snapshot ``table``) atomically: temp file + rename."""
        if table is None:
            table = dict(self.offset_table)
            self._dirty = False
        # one writer at a time: stop() persists while a cancelled flush task's executor write may
        # still run, and two writers of one temp file lose the rename race
        with self._persist_lock:
            write_json_atomic(self.path, {"offsetTable": {str(k): v for k, v in sorted(table.items())}})

    def build_running_stats(self, stats: dict[str, str]) -> None:
        """RocketMQ's runtime-info keys ``scheduleMessageOffset_<level>`` = "offset,maxOffset"."""
        for level in sorted(self.delay_table):
            mx = self.store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            stats[f"scheduleMessageOffset_{level}"] = f"{self.offset_table.get(level, 0)},{mx}"

    # ------------------------------------------------------------------ lifetime
    async def start(self) -> None:
        """Load the offsets and start the level tasks and the flush task (idempotent)."""
        if self._started:
            return
        self.load()  # before _started: stop() must not write over a file that did not load
        self._started = True
        for level in sorted(self.delay_table):
            self._wake[level] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._run_level(level), name=f"fastmq-delay-{level}"))
        self._tasks.append(asyncio.create_task(self._run_flush(), name="fastmq-delay-offset-flush"))

    async def stop(self) -> None:
        """Stop every task and persist the offsets."""
        if not self._started:
            return
        self._started = False
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.persist()

    def wakeup(self, level: int | None = None) -> None:
        """Look at a level (all when None) now instead of at its next timer."""
        for lv, ev in self._wake.items():
            if level is None or lv == level:
                ev.set()

    async def _run_flush(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            if self._dirty:
                snapshot = dict(self.offset_table)  # taken on the loop: the tasks mutate it
                self._dirty = False
                try:
                    await asyncio.get_running_loop().run_in_executor(None, self.persist, snapshot)
                except Exception:  # keep delivering; the next round or stop() retries
                    self._dirty = True
                    log.exception("persisting %s failed", self.path)

    async def _run_level(self, level: int) -> None:
        ev = self._wake[level]
        while True:
            try:
                wait = await self.deliver_due(level)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("delay level %d: delivery round failed", level)
                wait = _RETRY_AFTER_FAILURE
            ev.clear()
            try:
                async with asyncio.timeout(wait):  # not wait_for: on 3.11 it can swallow a cancel
                    await ev.wait()
            except TimeoutError:
                pass

    # ------------------------------------------------------------------ delivery
    async def deliver_due(self, level: int) -> float:
        """Re-put every due message of ``level``; return seconds until the next look."""
        store = self.store
        qid = level - 1
        cq = store.queues.get(SCHEDULE_TOPIC, qid)
        if cq is None:
            return self.poll_interval
        delay_ms = self.delay_table[level]
        off = max(self.offset_table.get(level, 0), cq.min_offset)
        for _ in range(_MAX_PER_ROUND):
            if off >= cq.max_offset:
                break
            try:
                o, size, _tag = cq.get_entry(off)
                store_ts = store.commit_log.store_timestamp_at(o, size)
            except Exception:  # removed by retention: nothing to deliver
                log.warning("delay level %d: message at queue offset %d is gone, skipped", level, off)
                off += 1
                self._set_offset(level, off)
                continue
            now = int(time.time() * 1000)
            due = store_ts + delay_ms
            if due > now + delay_ms:  # a store clock in the future: deliver now (RocketMQ too)
                due = now
            if due > now:
                return min((due - now) / 1000, max(self.poll_interval, 1.0))
            status = await self._redeliver(level, o, size)
            if status in _NEVER_STORABLE:
                # Retrying cannot help (e.g. a real topic too long for the store, parked by an
                # older broker); blocking here would hold every later message of the level.
                log.error("delay level %d: message at queue offset %d (commit log %d) can never be re-put "
                          "(%s), skipped", level, off, o, status.name)
                self.skipped += 1
            elif status is not None and status not in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT):
                log.error("delay level %d: re-put of queue offset %d failed (%s); retrying later",
                          level, off, status.name)
                return _RETRY_AFTER_FAILURE
            off += 1
            self._set_offset(level, off)
        else:
            return 0.0  # more due work: come back at once, after letting the loop run
        return self.poll_interval

    def _set_offset(self, level: int, off: int) -> None:
        self.offset_table[level] = off
        self._dirty = True

    async def _redeliver(self, level: int, commit_log_offset: int, size: int) -> PutStatus | None:
        """Put the message back on its real topic/queue; None when it cannot be (skipped)."""
        try:
            m = self.store.commit_log.get_message(commit_log_offset, size)
        except Exception:
            log.warning("delay level %d: unreadable record at %d, skipped", level, commit_log_offset)
            return None
        inner = message_timeup(m)
        if inner is None:
            log.warning("delay level %d: record at %d has no REAL_TOPIC/REAL_QID, skipped",
                        level, commit_log_offset)
            return None
        res = await self.store.put_messages([inner])
        if res.ok:
            self.delivered += 1
        return res.status


def message_timeup(m: MessageExt) -> MessageExt | None:
    """The message to re-put for a due delayed one (RocketMQ ``messageTimeup``): real topic and
    queue back, DELAY cleared, WAIT=false, every other property and field kept."""
    props = dict(m.properties)
    topic = props.get(MessageConst.REAL_TOPIC)
    try:
        qid = parse_int(props.get(MessageConst.REAL_QUEUE_ID, ""))
    except ValueError:
        return None
    if not topic:
        return None
    props.pop(MessageConst.DELAY_TIME_LEVEL, None)
    props[MessageConst.WAIT_STORE_MSG_OK] = "false"
    return MessageExt(topic=topic, body=m.body, flag=m.flag, properties=props, queue_id=qid,
                      sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
                      reconsume_times=m.reconsume_times,
                      prepared_transaction_offset=m.prepared_transaction_offset)
