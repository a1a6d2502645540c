"""Handing pulled messages to the listener (RocketMQ's ConsumeMessageConcurrentlyService and
ConsumeMessageOrderlyService).

A plain function listener runs on a thread pool of ``consume_thread_min``; an ``async def`` runs
on the loop. RECONSUME_LATER (or an exception) sends the messages back to the broker, which
re-delivers them through ``%RETRY%group`` after the next delay level and to ``%DLQ%group`` after
``max_reconsume_times``. Orderly: one queue, one batch at a time, under the broker's lock.
"""
from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Sequence

from ..errors import BrokerError, FastMQError
from ..protocol.message import MessageConst, MessageExt
from ..protocol.message_queue import MessageQueue
from ..remoting.loop import Resume
from .process_queue import ProcessQueue, _now_ms
from .pull_service import inflated

if TYPE_CHECKING:
    from .consume_pool import ConsumePool
    from .instance import ClientInstance
    from .offset_store import OffsetStore

__all__ = ["ConsumeStatus", "ConsumeService", "ConsumeConcurrentlyService", "ConsumeOrderlyService"]

log = logging.getLogger("fastmq.client")

#: A pull answer whose batches a plain listener is expected to finish within this many µs goes to
#: one consume thread as one hand-off (see PushConsumer._deliver).
QUICK_HANDOFF_US = 1000
#: How many batches of one queue an orderly consumer hands a consume thread at once.
ORDERLY_BATCHES_PER_HANDOFF = 32


class ConsumeStatus:
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


_BAD_STATUS_LOG_INTERVAL = 60.0
_bad_status = {"logged_at": -_BAD_STATUS_LOG_INTERVAL, "since": 0}


def _status(status: object) -> str:
    """A listener's answer; anything but the two statuses counts as RECONSUME_LATER.

    That is 4.9's rule for a null status, which it only warns about; here it is an error naming
    the fix, logged at most once a minute (with how many more there were), because a listener
    that forgot its ``return`` otherwise consumes every message again and again in silence.
    """
    if status in (ConsumeStatus.CONSUME_SUCCESS, ConsumeStatus.RECONSUME_LATER):
        return status
    now = time.monotonic()
    b = _bad_status  # (updated from consume threads without a lock: at worst one line more)
    b["since"] += 1
    if now - b["logged_at"] >= _BAD_STATUS_LOG_INTERVAL:
        log.error("the message listener returned %r, not a ConsumeStatus: the messages are consumed again "
                  "later (RECONSUME_LATER). Return ConsumeStatus.CONSUME_SUCCESS when they were consumed "
                  "(or ConsumeStatus.RECONSUME_LATER to retry) (%d such answers since the last report)",
                  status, b["since"])
        b["logged_at"], b["since"] = now, 0
    return ConsumeStatus.RECONSUME_LATER


class ConsumeService:
    """What both consume services share: the listener call, the consumer stats, sending a
    message back. A part of the push consumer (a mixin), which provides the attributes declared
    here."""

    group: str
    instance: ClientInstance
    message_model: str
    max_reconsume_times: int
    consume_message_batch_max_size: int
    _listener: Callable[[list[MessageExt]], Any] | None
    _listener_is_async: bool
    _workers: ConsumePool
    _listen_us: float
    _slots: asyncio.Semaphore
    _commit: Callable[[ProcessQueue, Sequence[MessageExt]], None]

    def _listen(self, batches: list[list[MessageExt]], orderly: ProcessQueue | None = None,
                inflate: bool = False) -> list[tuple[str, int]]:
        """On a consume thread: a plain listener's status and milliseconds for each batch. For
        an ``orderly`` queue, only up to the first failure, and not once the queue is dropped or
        its lock lost (read across threads: at worst one batch more). ``inflate``: the batches
        may hold compressed bodies, inflated here one batch at a time (``inflated``), so that
        what is inflated at once is bounded by the threads and the batch size."""
        out: list[tuple[str, int]] = []
        listener = self._listener
        inflate = inflate or (orderly is not None and orderly.has_compressed)
        for batch in batches:
            if orderly is not None and (orderly.dropped or not orderly.locked or
                                        (out and out[-1][0] != ConsumeStatus.CONSUME_SUCCESS)):
                break
            t0 = time.monotonic()
            try:
                status = _status(listener(inflated(batch) if inflate else batch))  # type: ignore[misc]
            except Exception:
                log.exception("consumeMessage exception, group %s", self.group)
                status = ConsumeStatus.RECONSUME_LATER
            spent = time.monotonic() - t0
            out.append((status, int(spent * 1000)))
            # (written from several threads without a lock: a lost update only blurs the average)
            self._listen_us = 0.8 * self._listen_us + 0.2 * spent * 1e6
        return out

    async def _call_listener(self, pq: ProcessQueue, batch: list[MessageExt], running: Awaitable[Any] | None = None,
                             started: float | None = None) -> str:
        """The listener's status for ``batch`` (``running``: its call, already started at
        ``started``), counted in the queue's consumer stats."""
        assert self._listener is not None
        if not self._listener_is_async and running is None:
            outcomes: list[tuple[str, int]] = await self._workers.run(self._listen, [batch], None,
                                                                      pq.has_compressed)
            (status, rt_ms), = outcomes
            self._count(pq, len(batch), status, rt_ms)
            return status
        t0 = time.monotonic() if started is None else started
        try:
            if running is not None:
                status = _status(await running)
            else:
                status = _status(await self._listener(inflated(batch) if pq.has_compressed else batch))
        except Exception:
            log.exception("consumeMessage exception, group %s", self.group)
            status = ConsumeStatus.RECONSUME_LATER
        self._count(pq, len(batch), status, int((time.monotonic() - t0) * 1000))
        return status

    @staticmethod
    def _count(pq: ProcessQueue, n: int, status: str, rt_ms: int) -> None:
        c = pq.counters
        c.consumes += 1
        c.consume_rt_ms += rt_ms
        if status == ConsumeStatus.CONSUME_SUCCESS:
            c.consumed_ok += n
        else:
            c.consumed_failed += n

    async def _send_back(self, m: MessageExt) -> bool:
        addr = f"{m.store_host[0]}:{m.store_host[1]}"
        origin_id = m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or m.msg_id
        try:
            await self.instance.api.consumer_send_message_back(
                addr, group=self.group, commit_log_offset=m.commit_log_offset, delay_level=0,
                origin_msg_id=origin_id, origin_topic=m.topic, max_reconsume_times=self.max_reconsume_times)
        except BrokerError as exc:
            log.warning("send message back refused: %d %s", exc.code, exc.remark)
            return False
        except FastMQError as exc:
            log.warning("send message back to %s failed: %s", addr, exc)
            return False
        return True


class ConsumeConcurrentlyService(ConsumeService):
    """Batches of a queue consumed side by side; the committed offset is the smallest still in
    progress (ConsumeMessageConcurrentlyService)."""

    async def _deliver_concurrently(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if not self._listener_is_async:
            self._hand_off(pq, msgs)
            return
        n = self.consume_message_batch_max_size
        for i in range(0, len(msgs), n):
            batch = msgs[i:i + n] if i or n < len(msgs) else msgs
            await self._slots.acquire()
            self._consume_now(pq, batch)

    def _hand_off(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """A pull answer's messages to the consume threads (a plain listener's): returns at once.
        The pull loop calls it directly, with no coroutine of its own (``_hands_off``).

        A listener that answers within microseconds gets the whole pull answer as one hand-off
        (a hand-off costs more than such a call); a slower one gets a hand-off per batch, so
        that the threads share the answer as RocketMQ's consumeExecutor would. What waits for
        the threads is bounded by the process queue's thresholds, which pause this queue's
        pulls."""
        n = self.consume_message_batch_max_size
        z = pq.has_compressed
        if n >= len(msgs):  # one batch (one message an answer, at a steady rate, is the usual)
            batch = [msgs]
            self._workers.submit(self._listen, (batch, None, z), self._listened, (pq, batch))
            return
        batches = [msgs[i:i + n] for i in range(0, len(msgs), n)]
        if self._listen_us * len(batches) < QUICK_HANDOFF_US:
            self._workers.submit(self._listen, (batches, None, z), self._listened, (pq, batches))
        else:
            for b in batches:
                self._workers.submit(self._listen, ([b], None, z), self._listened, (pq, [b]))

    def _listened(self, handed: tuple[ProcessQueue, list[list[MessageExt]]], outcomes: list[tuple[str, int]] | None,
                  error: BaseException | None) -> None:
        """Back on the loop from a consume thread (``handed``: the queue and the batches handed
        over): count, commit what was consumed, send back the rest."""
        pq, batches = handed
        if outcomes is None or error is not None:
            outcomes = [(ConsumeStatus.RECONSUME_LATER, 0)] * len(batches)
        elif len(outcomes) == 1:  # one batch, the usual hand-off: no list of what to commit
            batch = batches[0]
            (status, rt_ms), = outcomes
            c = pq.counters
            c.consumes += 1
            c.consume_rt_ms += rt_ms
            if status == ConsumeStatus.CONSUME_SUCCESS:
                c.consumed_ok += len(batch)
                if not pq.dropped:
                    self._commit(pq, batch)
                return
            c.consumed_failed += len(batch)
            if pq.dropped:
                return
            if self.message_model != "CLUSTERING":
                self._commit(pq, batch)
            else:  # sending back awaits the broker
                asyncio.ensure_future(self._settle(pq, batch, status))
            return
        done: list[MessageExt] = []
        for batch, (status, rt_ms) in zip(batches, outcomes):
            self._count(pq, len(batch), status, rt_ms)
            if pq.dropped:
                continue
            if status == ConsumeStatus.CONSUME_SUCCESS or self.message_model != "CLUSTERING":
                done += batch
            else:  # sending back awaits the broker
                asyncio.ensure_future(self._settle(pq, batch, status))
        if done:
            self._commit(pq, done)

    def _consume_now(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        """An ``async def`` listener's batch, started here rather than in a task of its own.

        A task per batch (create, schedule, two steps) was a fifth of the consumer's time with a
        listener that never waits. So the coroutine's first step runs now: when it returns at
        once, the batch is committed here; when it waits on something, a task takes over the
        suspended coroutine (``Resume``; Python 3.12's eager tasks do the same). Like a task of
        its own, it runs in a copy of the pull loop's context: context variables the listener sets
        stay with its batch.
        """
        ctx = contextvars.copy_context()
        t0 = time.monotonic()
        try:
            coro = self._listener(inflated(batch) if pq.has_compressed else batch)  # type: ignore[misc]
            waiting = ctx.run(coro.send, None)
        except StopIteration as stop:
            status = _status(stop.value)
        except (Exception, asyncio.CancelledError):
            log.exception("consumeMessage exception, group %s", self.group)
            status = ConsumeStatus.RECONSUME_LATER
        else:
            asyncio.get_running_loop().create_task(
                self._consume(pq, batch, running=Resume(coro, waiting), started=t0), context=ctx)
            return
        self._count(pq, len(batch), status, int((time.monotonic() - t0) * 1000))
        if pq.dropped or status == ConsumeStatus.CONSUME_SUCCESS or self.message_model != "CLUSTERING":
            self._slots.release()
            if not pq.dropped:
                self._commit(pq, batch)
        else:  # sending back awaits the broker
            asyncio.ensure_future(self._consume(pq, batch, status=status))

    async def _consume(self, pq: ProcessQueue, batch: list[MessageExt], *, status: str | None = None,
                       running: Awaitable[Any] | None = None, started: float | None = None) -> None:
        try:
            if status is None:
                status = await self._call_listener(pq, batch, running, started)
            await self._settle(pq, batch, status)
        finally:
            self._slots.release()

    async def _settle(self, pq: ProcessQueue, batch: list[MessageExt], status: str) -> None:
        """After the listener: commit the batch, sending back first what it did not consume."""
        if pq.dropped:
            return
        if status != ConsumeStatus.CONSUME_SUCCESS and self.message_model == "CLUSTERING":
            failed = [m for m in batch if not await self._send_back(m)]
            if failed:  # the broker would not take them back: consume them again here, later
                await asyncio.sleep(5)
                if not pq.dropped:
                    await self._consume_retry(pq, failed)
                batch = [m for m in batch if m not in failed]
        self._commit(pq, batch)

    async def _consume_retry(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        await self._slots.acquire()
        await self._consume(pq, msgs)


class ConsumeOrderlyService(ConsumeService):
    """One queue, one batch at a time, under the broker's lock on it (ConsumeMessageOrderlyService)."""

    process_queues: dict[MessageQueue, ProcessQueue]
    offset_store: OffsetStore
    _lock: Callable[..., Coroutine[Any, Any, set[MessageQueue]]]

    async def _consume_orderly(self, pq: ProcessQueue) -> None:
        """One queue, one message batch at a time, in queue-offset order; a failure suspends the
        queue for a second and retries the same batch (ConsumeMessageOrderlyService).

        A plain listener is handed up to ORDERLY_BATCHES_PER_HANDOFF batches at once, which its
        thread consumes in order until one fails or the queue is dropped or unlocked, as a Java
        ConsumeRequest keeps consuming its queue: a hand-off per batch cost a round trip between
        threads for each message."""
        tries: dict[int, int] = {}
        n = self.consume_message_batch_max_size
        while not pq.dropped and pq.msgs:
            if not pq.locked:
                await asyncio.sleep(1)  # lock lost: wait for the relock instead of consuming out of turn
                continue
            d = pq.msgs
            take = n if self._listener_is_async else n * ORDERLY_BATCHES_PER_HANDOFF
            offsets = list(itertools.islice(d, take)) if pq.ordered else sorted(d)[:take]
            batches = [[d[o] for o in offsets[i:i + n]] for i in range(0, len(offsets), n)]
            async with self._slots:
                if self._listener_is_async:
                    outcomes = [(await self._call_listener(pq, batches[0]), 0)]
                else:
                    outcomes = await self._workers.run(self._listen, batches, pq)
                    for batch, (status, rt_ms) in zip(batches, outcomes):
                        self._count(pq, len(batch), status, rt_ms)
            if pq.dropped:
                self._commit_handed_over(pq, batches, outcomes)
                return
            consumed: list[MessageExt] = []
            for batch, (status, _) in zip(batches, outcomes):
                if status == ConsumeStatus.CONSUME_SUCCESS:
                    consumed += batch
                    continue
                if consumed:
                    self._commit(pq, consumed)
                    consumed = []
                first = batch[0].queue_offset
                tries[first] = tries.get(first, 0) + 1
                if tries[first] > self.max_reconsume_times:
                    # give up on it: to the broker (and its DLQ), then carry on with the queue
                    for m in batch:
                        m.reconsume_times = max(m.reconsume_times, self.max_reconsume_times)
                        await self._send_back(m)
                    self._commit(pq, batch)
                    break
                await asyncio.sleep(1)  # suspendCurrentQueueTimeMillis
                break
            if consumed:
                self._commit(pq, consumed)

    def _commit_handed_over(self, pq: ProcessQueue, batches: list[list[MessageExt]],
                            outcomes: list[tuple[str, int]]) -> None:
        """The queue was dropped (a rebalance is handing it to another member) while its batches
        ran: commit those that succeeded, up to the first failure. The dropping rebalance waits
        for this task, then persists the offset and unlocks the queue, so the next owner starts
        after them and re-delivers at most the batch in flight, not the whole hand-off."""
        done: list[MessageExt] = []
        for batch, (status, _) in zip(batches, outcomes):
            if status != ConsumeStatus.CONSUME_SUCCESS:
                break
            done += batch
        if done:
            pq.last_consume_time = time.time()
            off = pq.remove(done)
            if off >= 0:  # (_commit leaves a dropped queue's offset alone)
                self.offset_store.update(pq.mq, off, increase_only=True)

    async def _relock_loop(self) -> None:
        """Orderly: renew our queue locks every 20 s (the broker lets an unrenewed lock lapse at 60 s)."""
        while True:
            await asyncio.sleep(20)
            held = await self._lock(list(self.process_queues))
            now = _now_ms()
            for mq, pq in list(self.process_queues.items()):
                pq.locked = mq in held
                if pq.locked:
                    pq.last_lock_timestamp = now
