"""PushConsumer and PullConsumer: RocketMQ's consumers on asyncio.

Both share the machinery RocketMQ's DefaultMQPushConsumerImpl has:

- rebalance every 20 s and at once on NOTIFY_CONSUMER_IDS_CHANGED: the topic's readable queues
  and the group's client ids, sorted, through an allocation strategy; queues taken away are
  dropped with their offsets persisted first, new ones start where the group left off
  (CONSUME_FROM_LAST_OFFSET / FIRST_OFFSET / TIMESTAMP when it never committed);
- one long-polling pull loop per queue (32 messages, held by the broker up to 15 s), paused while
  the queue holds more than ``pull_threshold_for_queue`` unconsumed messages;
- tag filtering again on the client (the broker filters by hash code only);
- the committed offset of a queue is the smallest offset still being processed, so a crash
  re-delivers, never skips.

The push consumer hands messages to a listener (a plain function runs on a thread pool of
``consume_thread_min``; an ``async def`` runs on the loop); RECONSUME_LATER (or an exception)
sends the messages back to the broker, which re-delivers them through ``%RETRY%group`` after the
next delay level and to ``%DLQ%group`` after ``max_reconsume_times``.
"""
from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import inspect
import itertools
import json
import logging
import operator
import time
import zlib
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Awaitable, Callable, Iterable, Self, Sequence

from ..errors import (FAQ_SUFFIX, ClientStateError, ConfigError, FastMQError, MessageValidationError, NoRouteError,
                      RemotingConnectError)
from ..protocol.bodies import MASTER_ID
from ..protocol.codes import LanguageCode, RequestCode, ResponseCode
from ..protocol.command import VERSION, RemotingCommand, create_request, ext_int, next_opaque
from ..protocol.consumer_running_info import (PROP_CONSUME_ORDERLY, PROP_CONSUMER_START_TIMESTAMP,
                                              PROP_THREADPOOL_CORE_SIZE, CMResult, ConsumeMessageDirectlyResult,
                                              ConsumerRunningInfo, ProcessQueueInfo)
from ..protocol.heartbeat import ConsumerData, SubscriptionData, build_subscription
from ..protocol.message import MessageConst, MessageExt, MessageSysFlag
from ..protocol.message_queue import MessageQueue
from ..protocol.topic import is_readable, is_topic_or_group_illegal, retry_topic, validate_group, validate_topic
from ..remoting.loop import Resume
from .allocate import AllocateMessageQueueAveragely, AllocateStrategy
from .consume_pool import ConsumePool
from .consumer_stats import QueueCounters
from .instance import ClientConfig, ClientInstance
from .offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from .pull_body import decode_pull_body

__all__ = ["ConsumeStatus", "PushConsumer", "PullConsumer", "ProcessQueue"]

log = logging.getLogger("fastmq.client")

PULL_SUSPEND_MS = 15_000          # brokerSuspendMaxTimeMillis
PULL_TIMEOUT_MS = 30_000          # consumerTimeoutMillisWhenSuspend
PULL_DELAY_ON_ERROR_S = 3.0       # pullTimeDelayMillsWhenException
PULL_DELAY_FLOW_CONTROL_S = 0.05
# While a queue reads a slave for want of its master: how often its route is asked for, and how
# long the slave may hold a pull, so the consumer is back on the master seconds after it returns
SLAVE_ROUTE_REFRESH_S = 2.0
SLAVE_SUSPEND_MS = 2_000
REBALANCE_INTERVAL_S = 20.0
#: A pull answer whose batches a plain listener is expected to finish within this many µs goes to
#: one consume thread as one hand-off (see PushConsumer._deliver).
QUICK_HANDOFF_US = 1000
#: How many batches of one queue an orderly consumer hands a consume thread at once.
ORDERLY_BATCHES_PER_HANDOFF = 32
MISSING_ROUTE_FIRST_RETRY_S = 0.05
_SYSFLAG_COMMIT, _SYSFLAG_SUSPEND, _SYSFLAG_SUBSCRIPTION = 1, 2, 4
_LANGUAGE = int(LanguageCode.PYTHON)


class ConsumeStatus:
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class _Pull:
    """A PULL_MESSAGE on its way: the future of its answer, where it went, and how to take it back."""

    __slots__ = ("answer", "addr", "suggested", "conn", "opaque", "started")

    def __init__(self, answer: "asyncio.Future[RemotingCommand]", addr: str, suggested: int,
                 conn: Any = None, opaque: int = 0) -> None:
        self.answer, self.addr, self.suggested, self.conn, self.opaque = answer, addr, suggested, conn, opaque
        self.started = time.monotonic()  # for the pull's response time (consumer stats)

    def cancel(self) -> None:
        """Forget the answer (opaques are unique: the pending entry is ours)."""
        if self.conn is not None:
            self.conn.pending.pop(self.opaque, None)
        self.answer.cancel()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _check_range(name: str, value: int, low: int, high: int) -> None:
    """DefaultMQPushConsumerImpl.checkConfig's range checks, with its texts."""
    if not low <= value <= high:
        raise ConfigError(f"{name} Out of range [{low}, {high}]{FAQ_SUFFIX}")


@dataclass
class ProcessQueue:
    """The messages of one queue pulled but not yet consumed, by queue offset.

    RocketMQ keeps them in a TreeMap and commits its first key. Pull answers come in queue-offset
    order, so here the dict's insertion order is that order and its first key is the smallest
    offset (``min`` over up to 1,000 keys cost ~15 µs per commit); ``ordered`` turns False when
    an offset arrives below one already seen (an offset moved back), and ``min`` serves until
    the dict empties.
    """

    mq: MessageQueue
    next_offset: int = 0
    msgs: dict[int, MessageExt] = field(default_factory=dict)
    size_bytes: int = 0
    max_seen: int = -1
    dropped: bool = False
    task: asyncio.Task[None] | None = None
    locked: bool = False                       # orderly: the broker lock on this queue is ours
    consuming: asyncio.Task[None] | None = None  # orderly: the one task consuming this queue
    pulling_from: str | None = None            # the broker address of the last pull (master or slave)
    ordered: bool = True                       # msgs' insertion order is offset order
    counters: QueueCounters = field(default_factory=QueueCounters)  # consumer stats since the last fold
    # epoch ms, for GET_CONSUMER_RUNNING_INFO; from the queue's creation, as in RocketMQ (an admin
    # tool calls a queue with cached messages and no consumption for 60 s blocked)
    last_pull_timestamp: int = field(default_factory=_now_ms)
    last_consume_timestamp: int = field(default_factory=_now_ms)
    last_lock_timestamp: int = field(default_factory=_now_ms)

    def info(self, commit_offset: int) -> ProcessQueueInfo:
        """ProcessQueue.fillProcessQueueInfo: what GET_CONSUMER_RUNNING_INFO reports of this queue."""
        d = self.msgs
        pqi = ProcessQueueInfo(commit_offset=commit_offset, locked=self.locked, dropped=self.dropped,
                               last_lock_timestamp=self.last_lock_timestamp,
                               last_pull_timestamp=self.last_pull_timestamp,
                               last_consume_timestamp=self.last_consume_timestamp)
        if d:
            offsets = list(d)  # (a listener thread may not change it: removals run on the loop)
            pqi.cached_msg_min_offset, pqi.cached_msg_max_offset = min(offsets), max(offsets)
            pqi.cached_msg_count = len(offsets)
            pqi.cached_msg_size_in_mib = self.size_bytes // (1024 * 1024)
        return pqi

    def put(self, msgs: Sequence[MessageExt]) -> None:
        if not msgs:
            return
        d = self.msgs
        if msgs[0].queue_offset > self.max_seen:
            # the usual case: a pull answer past everything seen, its offsets ascending
            d.update(zip(map(_queue_offset, msgs), msgs))
            self.size_bytes += sum(map(len, map(_body, msgs)))
            self.max_seen = max(self.max_seen, msgs[-1].queue_offset)
            return
        for m in msgs:
            o = m.queue_offset
            if o not in d:
                if d and o < self.max_seen:
                    self.ordered = False
                d[o] = m
                self.size_bytes += len(m.body)
                if o > self.max_seen:
                    self.max_seen = o

    def remove(self, msgs: Sequence[MessageExt]) -> int:
        """Forget consumed messages; returns the offset safe to commit (-1: nothing new)."""
        d = self.msgs
        before = len(d)
        # the pops run in C (a Python loop over a batch was ~3 µs per commit)
        _drain(map(d.pop, map(_queue_offset, msgs), repeat(None, len(msgs))))
        if before - len(d) == len(msgs):
            self.size_bytes -= sum(map(len, map(_body, msgs)))
        else:  # some were not held (or came twice): count what is left
            self.size_bytes = sum(map(len, map(_body, d.values())))
        if d:
            return next(iter(d)) if self.ordered else min(d)
        self.ordered = True
        return self.max_seen + 1 if self.max_seen >= 0 else -1


_queue_offset = operator.attrgetter("queue_offset")
_body = operator.attrgetter("body")
_drain: Callable[[Iterable[Any]], None] = collections.deque(maxlen=0).extend  # runs an iterator to its end, keeping nothing


#: What a compressed message body may inflate to in a consumer: four times the largest body a
#: producer sends by default (4 MiB). A few KiB of zeros inflate to gigabytes; past this the
#: message is delivered as it came, with a warning.
MAX_INFLATED_BODY = 16 * 1024 * 1024


def inflate_body(body: bytes, limit: int = MAX_INFLATED_BODY) -> bytes:
    """``body`` inflated (zlib); ValueError when it inflates past ``limit`` bytes, zlib.error when
    it does not inflate."""
    d = zlib.decompressobj()
    out = d.decompress(body, limit + 1)
    if len(out) > limit:
        raise ValueError(f"inflates past {limit} bytes")
    if not d.eof:
        raise zlib.error("incomplete or truncated stream")
    return out


def _unwrap(m: MessageExt, group: str) -> MessageExt:
    """What a listener sees: the original topic of a retried message, an inflated body."""
    if m.sys_flag & MessageSysFlag.COMPRESSED:
        try:
            m.body = inflate_body(m.body)
        except zlib.error:
            log.warning("message %s says compressed but does not inflate; delivered as is", m.msg_id)
        except ValueError as exc:
            log.warning("message %s %s; delivered as is (compressed)", m.msg_id, exc)
    real = m.properties.get(MessageConst.RETRY_TOPIC)
    if real and m.topic == retry_topic(group):
        m.topic = real
    return m


def _unwrap_all(msgs: list[MessageExt], group: str, retry: bool) -> None:
    """``_unwrap`` of a pull answer's messages, in place; ``retry``: they come from the group's
    retry topic. Only a retry topic's messages carry RETRY_TOPIC to restore, and compressed ones
    are rare, so a plain answer costs one flag test per message."""
    if retry:
        for m in msgs:
            _unwrap(m, group)
        return
    for m in msgs:
        if m.sys_flag & _COMPRESSED:
            _unwrap(m, group)


_COMPRESSED = int(MessageSysFlag.COMPRESSED)


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


class _ConsumerBase:
    def __init__(self, group: str, *, namesrv_addr: str | list[str] | None = None,
                 message_model: str = "CLUSTERING", consume_from_where: str = "CONSUME_FROM_LAST_OFFSET",
                 consume_timestamp_ms: int | None = None, allocate: AllocateStrategy | None = None,
                 pull_batch_size: int = 32, pull_threshold_for_queue: int = 1000,
                 pull_threshold_size_for_queue: int = 100 * 1024 * 1024, rebalance_interval_s: float = REBALANCE_INTERVAL_S,
                 instance: ClientInstance | None = None, client_config: ClientConfig | None = None) -> None:
        if not group or len(group) > 255:
            raise MessageValidationError("consumerGroup is null" if not group else
                                         "consumerGroup is longer than 255")
        if is_topic_or_group_illegal(group):  # (broadcast offsets live in a directory named after it)
            raise MessageValidationError(validate_group(group) or "")
        if message_model not in ("CLUSTERING", "BROADCASTING"):
            raise MessageValidationError(f"messageModel must be CLUSTERING or BROADCASTING, not {message_model}")
        self.group = group
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.allocate = allocate or AllocateMessageQueueAveragely()
        _check_range("pullBatchSize", pull_batch_size, 1, 1024)
        _check_range("pullThresholdForQueue", pull_threshold_for_queue, 1, 65535)
        _check_range("pullThresholdSizeForQueue", pull_threshold_size_for_queue // (1024 * 1024), 1, 1024)
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.rebalance_interval_s = rebalance_interval_s
        self._own_instance = instance is None
        self.instance = instance or ClientInstance(client_config or ClientConfig(namesrv_addr=namesrv_addr))
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._rebalance_lock = asyncio.Lock()
        self.offset_store: OffsetStore = (LocalFileOffsetStore(self.instance, group) if message_model == "BROADCASTING"
                                          else RemoteBrokerOffsetStore(self.instance, group))
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        self._missing_routes = False
        self._missing_wait = MISSING_ROUTE_FIRST_RETRY_S
        #: queue -> the broker id its last pull answer suggested (suggestWhichBrokerId)
        self.pull_from_which: dict[MessageQueue, int] = {}
        self._start_timestamp = 0  # epoch ms of start(), for GET_CONSUMER_RUNNING_INFO
        #: the queues given to assign() (lite pull consumer), or None: subscribe and rebalance
        self._assigned: set[MessageQueue] | None = None

    # ----------------------------------------------------------- set-up

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Subscribe ``topic`` with a TAG expression ("*" or "tagA || tagB")."""
        if self._assigned is not None:
            raise ClientStateError("Subscribe and assign are mutually exclusive.")
        problem = validate_topic(topic)
        if problem:
            raise MessageValidationError(problem)
        self.subscriptions[topic] = build_subscription(topic, expression, int(time.time() * 1000))

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, self.consume_type, self.message_model, self.consume_from_where,
                            list(self.subscriptions.values()))

    #: ConsumeType: how the broker and admin tools see this consumer (pushed to, or pulling itself)
    consume_type = "CONSUME_PASSIVELY"

    async def start(self) -> None:
        if self._running:
            return
        if not self.subscriptions and self._assigned is None:
            raise ClientStateError("subscribe a topic before starting the consumer")
        if self.message_model == "CLUSTERING" and self._assigned is None:
            rt = retry_topic(self.group)
            self.subscriptions.setdefault(rt, build_subscription(rt, "*"))
        self.instance.consumers[self.group] = self
        self._start_timestamp = _now_ms()
        await self.instance.start()
        for topic in self.subscriptions:
            try:
                await self.instance.update_route(topic)
            except FastMQError as exc:
                log.warning("route of %s not available yet: %s", topic, exc)
        self._running = True
        await self.instance.send_heartbeat_to_all_brokers()
        await self.rebalance()
        self._tasks = [asyncio.ensure_future(self._rebalance_loop()), asyncio.ensure_future(self._persist_loop())]

    async def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for pq in list(self.process_queues.values()):
            await self._drop(pq)
        await self.offset_store.persist_all()
        self.instance.consumers.pop(self.group, None)
        await self.instance.unregister(consumer_group=self.group)
        if self._own_instance:
            await self.instance.shutdown()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------- admin requests

    def fold_stats(self) -> None:
        """Move each held queue's counters into the instance's consumer stats (before a snapshot)."""
        stats = self.instance.consumer_stats
        for pq in list(self.process_queues.values()):
            stats.fold(self.group, pq.mq.topic, pq.counters)

    def _running_properties(self) -> dict[str, str]:
        """Our settings under DefaultMQPushConsumer's field names: only those fastmq honours."""
        props = {"consumerGroup": self.group, "messageModel": self.message_model,
                 "consumeFromWhere": self.consume_from_where,
                 "allocateMessageQueueStrategy": type(self.allocate).__name__,
                 "pullBatchSize": str(self.pull_batch_size),
                 "pullThresholdForQueue": str(self.pull_threshold_for_queue),
                 "pullThresholdSizeForQueue": str(self.pull_threshold_size_for_queue // (1024 * 1024)),  # MiB
                 PROP_CONSUMER_START_TIMESTAMP: str(self._start_timestamp)}
        if self.consume_timestamp_ms is not None:
            props["consumeTimestamp"] = time.strftime("%Y%m%d%H%M%S", time.localtime(self.consume_timestamp_ms / 1000))
        return props

    async def running_info(self, jstack: str | None = None) -> ConsumerRunningInfo:
        """What GET_CONSUMER_RUNNING_INFO reports of this consumer: its settings, subscriptions,
        each held queue's state and committed offset, and each topic's rates (the instance adds
        the NameServer list, the consume type and the client version)."""
        info = ConsumerRunningInfo(self._running_properties(), list(self.subscriptions.values()), jstack=jstack)
        for mq, pq in sorted(self.process_queues.items()):
            try:
                committed = await self.offset_store.read(mq)
            except FastMQError:
                committed = -1
            info.mq_table[mq] = pq.info(committed)
        stats = self.instance.consumer_stats
        for topic in self.subscriptions:
            info.status_table[topic] = stats.consume_status(self.group, topic)
        return info

    # -------------------------------------------------------- rebalance

    async def _rebalance_loop(self) -> None:
        ev = self.instance._rebalance_event
        while True:
            try:
                # A topic without a route yet (just auto-created by a producer; the broker
                # registers it within moments) is retried soon: after 50 ms, then doubling to 1 s.
                if self._missing_routes:
                    wait = self._missing_wait
                    self._missing_wait = min(1.0, wait * 2)
                else:
                    wait = self.rebalance_interval_s
                    self._missing_wait = MISSING_ROUTE_FIRST_RETRY_S
                if ev is not None:
                    try:
                        async with asyncio.timeout(wait):
                            await ev.wait()
                    except TimeoutError:
                        pass
                    ev.clear()
                else:
                    await asyncio.sleep(wait)
                await self.rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("rebalance of %s failed", self.group)

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.instance.config.persist_consumer_offset_interval / 1000)
            await self.offset_store.persist_all(set(self.process_queues))

    async def _consumer_ids(self, topic: str) -> list[str] | None:
        """The group's client ids as a broker of ``topic`` knows them; None when no broker answered."""
        route = self.instance.routes.get(topic)
        # every address, the master first: with the master gone a slave still knows the group
        addrs = [a for bd in (route.broker_datas if route else []) for _, a in sorted(bd.broker_addrs.items())]
        for addr in addrs:
            try:
                resp = await self.instance.remoting.invoke(addr, create_request(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group}), self.instance.timeout)
            except FastMQError as exc:
                log.warning("getConsumerIdListByGroup from %s failed: %s", addr, exc)
                continue
            if resp.code == ResponseCode.SUCCESS and resp.body:
                return sorted(json.loads(resp.body).get("consumerIdList") or [])
        return None

    async def rebalance(self) -> None:
        """Recompute this member's queues and start or stop pulling accordingly."""
        async with self._rebalance_lock:  # one at a time, and never beside an offset reset
            await self._rebalance()

    async def _rebalance(self) -> None:
        self._missing_routes = False
        wanted = await (self._allocated() if self._assigned is None else self._assigned_with_routes())
        for mq in [mq for mq in self.process_queues if mq not in wanted]:
            pq = self.process_queues.pop(mq)
            await self._drop(pq)
            log.info("rebalance: %s no longer consumes %s", self.group, mq)
        new = sorted(wanted - set(self.process_queues))
        if self._orderly and self.message_model == "CLUSTERING":
            new = sorted(await self._lock(new))
        for mq in new:
            try:
                offset = await self._initial_offset(mq)
            except FastMQError as exc:
                log.warning("cannot compute where to pull %s from: %s", mq, exc)
                continue
            pq = ProcessQueue(mq, next_offset=offset, locked=self._orderly)
            self.process_queues[mq] = pq
            pq.task = asyncio.ensure_future(self._pull_loop(pq))
            log.info("rebalance: %s consumes %s from offset %d", self.group, mq, offset)

    async def _allocated(self) -> set[MessageQueue]:
        """This member's share of every subscribed topic's readable queues (all of them when
        broadcasting), by the allocation strategy over the group's sorted client ids."""
        wanted: set[MessageQueue] = set()
        for topic in list(self.subscriptions):
            route = self.instance.routes.get(topic)
            if route is None:
                try:
                    route = await self.instance.update_route(topic)
                except FastMQError:
                    route = None
            if route is None:
                self._missing_routes = True
                continue
            mqs = sorted(MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas
                         if is_readable(qd.perm) for i in range(qd.read_queue_nums))
            if not mqs:
                continue
            if self.message_model == "BROADCASTING":
                wanted.update(mqs)
                continue
            cids = await self._consumer_ids(topic)
            if cids is None:
                # As RebalanceImpl: without the group's member list (every broker of the topic
                # unreachable just now) the topic's queues stay as they are, rather than all
                # being dropped and their offsets read back from a broker later.
                log.warning("doRebalance, %s %s, get consumer id list failed", self.group, topic)
                wanted.update(mq for mq in self.process_queues if mq.topic == topic)
                continue
            if self.instance.client_id not in cids:
                continue
            wanted.update(self.allocate.allocate(self.group, self.instance.client_id, mqs, cids))
        return wanted

    async def _assigned_with_routes(self) -> set[MessageQueue]:
        """The queues given to assign(), their topics' routes fetched (the pulls need brokers)."""
        assigned = set(self._assigned or ())
        for topic in {mq.topic for mq in assigned} - set(self.instance.routes):
            try:
                route = await self.instance.update_route(topic)
            except FastMQError as exc:
                log.warning("route of %s not available yet: %s", topic, exc)
                route = None
            if route is None:
                self._missing_routes = True  # the rebalance loop asks again soon
        return assigned

    _orderly = False

    async def _lock(self, mqs: list[MessageQueue], unlock: bool = False) -> set[MessageQueue]:
        """LOCK_BATCH_MQ (or UNLOCK_BATCH_MQ) per broker; returns the queues we now hold."""
        held: set[MessageQueue] = set()
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, group_mqs in by_broker.items():
            addr = self.instance.master_addr(broker)
            if addr is None:
                continue
            body = json.dumps({"consumerGroup": self.group, "clientId": self.instance.client_id,
                               "mqSet": [mq.to_obj() for mq in group_mqs]}).encode()
            code = RequestCode.UNLOCK_BATCH_MQ if unlock else RequestCode.LOCK_BATCH_MQ
            try:
                resp = await self.instance.remoting.invoke(addr, create_request(code, body=body), self.instance.timeout)
            except FastMQError as exc:
                log.warning("%s of %d queues on %s failed: %s", "unlock" if unlock else "lock", len(group_mqs),
                            broker, exc)
                continue
            if not unlock and resp.code == ResponseCode.SUCCESS and resp.body:
                held.update(MessageQueue.from_obj(o) for o in json.loads(resp.body).get("lockOKMQSet") or [])
        return held

    async def _drop(self, pq: ProcessQueue) -> None:
        pq.dropped = True
        self.instance.consumer_stats.fold(self.group, pq.mq.topic, pq.counters)
        if pq.task is not None:
            pq.task.cancel()
            await asyncio.gather(pq.task, return_exceptions=True)
        if pq.consuming is not None:
            await asyncio.gather(pq.consuming, return_exceptions=True)  # an orderly batch runs to its end
        if pq.locked and self.message_model == "CLUSTERING":
            await self._lock([pq.mq], unlock=True)
        if isinstance(self.offset_store, RemoteBrokerOffsetStore):
            try:
                await self.offset_store.persist(pq.mq)
            except FastMQError as exc:
                log.warning("persist offset of %s failed: %s", pq.mq, exc)
        self.offset_store.remove(pq.mq)

    async def _queue_offset(self, code: int, mq: MessageQueue, extra: dict[str, Any] | None = None) -> int:
        addr = self.instance.any_broker_addr(mq.broker_name)
        if addr is None:
            raise FastMQError(f"The broker[{mq.broker_name}] not exist")
        resp = await self.instance.remoting.invoke(addr, create_request(code, {"topic": mq.topic, "queueId": mq.queue_id,
                                                                                 **(extra or {})}),
                                                   self.instance.timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise FastMQError(f"offset query failed: {resp.code} {resp.remark}")
        return ext_int(resp, "offset", 0) or 0

    async def _initial_offset(self, mq: MessageQueue) -> int:
        """computePullFromWhere: the committed offset, else as consume_from_where says."""
        last = await self.offset_store.read(mq, from_store=True)
        if last >= 0:
            return last
        if mq.topic.startswith("%RETRY%") or self.consume_from_where == "CONSUME_FROM_FIRST_OFFSET":
            return 0
        if self.consume_from_where == "CONSUME_FROM_TIMESTAMP" and self.consume_timestamp_ms is not None:
            return await self._queue_offset(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq,
                                            {"timestamp": self.consume_timestamp_ms})
        return await self._queue_offset(RequestCode.GET_MAX_OFFSET, mq)

    # -------------------------------------------------------------- pull

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        mq = pq.mq
        sub = self.subscriptions.get(mq.topic)
        wanted = None if sub is None or sub.subscribes_all else set(sub.tags_set)
        from_retry = mq.topic == retry_topic(self.group)
        # the header fields no pull of this queue changes, stringified once (as create_request would)
        template = {"consumerGroup": self.group, "topic": mq.topic, "queueId": str(mq.queue_id), "queueOffset": "",
                    "maxMsgNums": str(self.pull_batch_size), "sysFlag": "", "commitOffset": "",
                    "suspendTimeoutMillis": str(PULL_SUSPEND_MS), "subscription": sub.sub_string if sub else "*",
                    "subVersion": str(sub.sub_version if sub else 0), "expressionType": "TAG"}
        pull: _Pull | float | None = None
        try:
            while not pq.dropped and self._running:
                if pull is None:
                    pull = self._start_pull(pq, template)
                if isinstance(pull, float):
                    await asyncio.sleep(pull)
                    pull = None
                    continue
                started, pull = pull, None
                try:
                    resp = await started.answer
                except asyncio.CancelledError:
                    started.cancel()
                    raise
                except RemotingConnectError as exc:
                    log.warning("pull %s from %s failed: %s", mq, started.addr, exc)
                    self.instance.mark_unreachable(started.addr)
                    self.instance.refresh_route_soon(mq.topic)  # a master back, a broker gone: learn it now
                    other, _ = self.instance.find_broker_addr_in_subscribe(mq.broker_name, started.suggested)
                    if other is None or other == started.addr:
                        await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                    continue  # another broker of the name (a slave) takes the next pull at once
                except FastMQError as exc:
                    log.warning("pull %s failed: %s", mq, exc)
                    await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                    continue
                suggest = ext_int(resp, "suggestWhichBrokerId", MASTER_ID)
                self.pull_from_which[mq] = MASTER_ID if suggest is None else suggest
                next_offset = ext_int(resp, "nextBeginOffset", pq.next_offset)
                if resp.code == ResponseCode.SUCCESS:
                    msgs = decode_pull_body(resp.body or b"")
                    _unwrap_all(msgs, self.group, from_retry)
                    if wanted is not None:
                        msgs = [m for m in msgs if m.tags in wanted]
                    c = pq.counters
                    c.pulls += 1
                    c.pull_rt_ms += int((time.monotonic() - started.started) * 1000)
                    c.pulled += len(msgs)
                    if msgs:
                        pq.put(msgs)
                        if next_offset is not None:
                            pq.next_offset = next_offset
                        # RocketMQ's order: the batch is in the process queue, the next pull leaves
                        # now, then the batch goes to the listener; pulling only after the listener
                        # had run left the broker without this queue's pull meanwhile.
                        nxt = self._start_pull(pq, template)
                        pull = None if isinstance(nxt, float) else nxt  # flow control: checked again after
                        await self._deliver(pq, msgs)
                        continue
                    if next_offset is not None and next_offset > pq.next_offset:
                        # the whole batch was filtered out here: move the committed offset past it
                        self._commit(pq, [])
                        if not pq.msgs:
                            pq.max_seen = max(pq.max_seen, next_offset - 1)
                            self.offset_store.update(mq, next_offset, increase_only=True)
                elif resp.code == ResponseCode.PULL_OFFSET_MOVED:
                    log.warning("the pull request offset illegal, %s offset %d -> %s", mq, pq.next_offset, next_offset)
                    if next_offset is not None:
                        self.offset_store.update(mq, next_offset)
                elif resp.code not in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
                    log.warning("pull %s answered %d %s", mq, resp.code, resp.remark)
                    await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                    continue
                if next_offset is not None:
                    pq.next_offset = next_offset
        finally:
            if isinstance(pull, _Pull):  # a pull already written for a queue now dropped or stopped
                pull.cancel()

    def _start_pull(self, pq: ProcessQueue, template: dict[str, str]) -> _Pull | float:
        """The queue's next PULL_MESSAGE, written now; or how long to wait first (flow control, or
        no broker address for the queue)."""
        mq = pq.mq
        if len(pq.msgs) > self.pull_threshold_for_queue or pq.size_bytes > self.pull_threshold_size_for_queue:
            return PULL_DELAY_FLOW_CONTROL_S
        # the broker id the last answer suggested (RocketMQ's pullFromWhichNodeTable), else a
        # slave of the name when the master is gone from the route or unreachable
        suggested = self.pull_from_which.get(mq, MASTER_ID)
        addr, is_slave = self.instance.find_broker_addr_in_subscribe(mq.broker_name, suggested)
        if addr is None:
            return PULL_DELAY_ON_ERROR_S
        slave_for_master = is_slave and suggested == MASTER_ID
        if slave_for_master:
            # reading a slave only because the master is gone: learn of its return within a few
            # seconds rather than at the 30 s route poll (one NameServer request per topic at most)
            self.instance.refresh_route_soon(mq.topic, SLAVE_ROUTE_REFRESH_S)
        pq.pulling_from = addr
        pq.last_pull_timestamp = _now_ms()
        commit = self.offset_store.table.get(mq, -1) if self.message_model == "CLUSTERING" else -1
        fields = template.copy()
        fields["queueOffset"] = str(pq.next_offset)
        if slave_for_master:
            fields["suspendTimeoutMillis"] = str(SLAVE_SUSPEND_MS)  # a held pull would pin us there
        fields["sysFlag"] = str(_SYSFLAG_SUSPEND | _SYSFLAG_SUBSCRIPTION | (_SYSFLAG_COMMIT if commit > 0 else 0))
        fields["commitOffset"] = str(max(commit, 0))
        req = RemotingCommand(RequestCode.PULL_MESSAGE, language=_LANGUAGE, version=VERSION, opaque=next_opaque(),
                              flag=0, ext_fields=fields, serialize_type=0, body=None)
        remoting = self.instance.remoting
        conn = remoting.open_connection(addr)
        if conn is None:  # not connected yet: invoke connects (a task, so it starts now too)
            return _Pull(asyncio.ensure_future(remoting.invoke(addr, req, PULL_TIMEOUT_MS / 1000)), addr, suggested)
        # Written at once, with no timer of its own (``asyncio.timeout`` costs ~3 µs): the remoting
        # client's once-a-second scan of the pending table fails it after PULL_TIMEOUT_MS, as
        # RocketMQ's scanResponseTable does for its async pulls. Not left for the loop's next turn
        # as start_request would: pulls of several queues leaving in one write come back as one
        # write of several answers, and the client and the broker then take turns instead of
        # working side by side (measured with 4 queues: ~290,000 msgs/s against ~600,000).
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        conn.start_request(req, fut, loop.time() + PULL_TIMEOUT_MS / 1000, PULL_TIMEOUT_MS)
        conn.flush()
        return _Pull(fut, addr, suggested, conn, req.opaque)

    def _commit(self, pq: ProcessQueue, msgs: Sequence[MessageExt]) -> None:
        pq.last_consume_timestamp = _now_ms()
        off = pq.remove(msgs)
        if off >= 0 and not pq.dropped:
            self.offset_store.update(pq.mq, off, increase_only=True)

    async def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        raise NotImplementedError


class PushConsumer(_ConsumerBase):
    """Messages are pushed to a listener: ``listener(msgs) -> ConsumeStatus`` (plain or async)."""

    def __init__(self, group: str, *, consume_thread_min: int = 20, consume_thread_max: int = 20,
                 consume_message_batch_max_size: int = 1, max_reconsume_times: int = 16, orderly: bool = False,
                 **kwargs: Any) -> None:
        """``consume_thread_min`` threads run plain listeners: RocketMQ's consume pool has an
        unbounded queue, so it never grows past consumeThreadMin; ``consume_thread_max`` bounds
        the batches of an ``async def`` listener in progress at once.

        Raises:
            ConfigError: a setting out of the range DefaultMQPushConsumerImpl.checkConfig allows.
        """
        _check_range("consumeThreadMin", consume_thread_min, 1, 1000)
        _check_range("consumeThreadMax", consume_thread_max, 1, 1000)
        if consume_thread_min > consume_thread_max:
            raise ConfigError(f"consumeThreadMin ({consume_thread_min}) is larger than consumeThreadMax "
                              f"({consume_thread_max})")
        _check_range("consumeMessageBatchMaxSize", consume_message_batch_max_size, 1, 1024)
        super().__init__(group, **kwargs)
        self._orderly = orderly
        self.consume_thread_min = consume_thread_min
        self.consume_thread_max = consume_thread_max
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.max_reconsume_times = max_reconsume_times
        self._listener: Callable[[list[MessageExt]], Any] | None = None
        self._listener_is_async = False
        self._workers = ConsumePool(consume_thread_min, f"Consume_{group}")  # plain listeners run here
        self._listen_us = float(QUICK_HANDOFF_US)  # a plain listener's mean µs per call; slow until seen
        self._slots = asyncio.Semaphore(consume_thread_max)  # async listeners' batches at once

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker's RESET_CONSUMER_CLIENT_OFFSET (mqadmin resetOffsetByTime): stop the named
        queues of ``topic``, commit the given offsets, and let a rebalance start them again
        from there (MQClientInstance.resetOffset, which 4.9 applies to push consumers only)."""
        async with self._rebalance_lock:
            for mq, offset in offsets.items():
                if mq.topic != topic:
                    continue
                pq = self.process_queues.pop(mq, None)
                if pq is not None:
                    await self._drop(pq)
                self.offset_store.update(mq, offset)
                try:
                    await self.offset_store.persist_all({mq})
                except FastMQError as exc:
                    log.warning("reset offset of %s to %d: commit failed: %s", mq, offset, exc)
                self.offset_store.remove(mq)
                log.info("reset offset of %s in %s to %d", mq, self.group, offset)
        self.instance.rebalance_soon()  # (through the rebalance loop: never two rebalances at once)

    def _running_properties(self) -> dict[str, str]:
        props = super()._running_properties()
        listener = self._listener
        props.update({"consumeThreadMin": str(self.consume_thread_min), "consumeThreadMax": str(self.consume_thread_max),
                      "consumeMessageBatchMaxSize": str(self.consume_message_batch_max_size),
                      "maxReconsumeTimes": str(self.max_reconsume_times),
                      "suspendCurrentQueueTimeMillis": "1000",
                      "messageListener": getattr(listener, "__qualname__", type(listener).__name__),
                      PROP_CONSUME_ORDERLY: "true" if self._orderly else "false",
                      PROP_THREADPOOL_CORE_SIZE: str(self.consume_thread_min)})
        return props

    async def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (``mqadmin queryMsgById -g -d``): hand one stored message to
        the listener now, outside any queue, and say how it went. Nothing is committed, sent
        back or counted in the stats, as in RocketMQ's consumeMessageDirectly."""
        assert self._listener is not None
        result = ConsumeMessageDirectlyResult(order=self._orderly, auto_commit=True)
        _unwrap(msg, self.group)
        log.info("consumeMessageDirectly receive new message from %s: %s", broker_name, msg.msg_id)
        t0 = time.monotonic()
        try:
            if self._listener_is_async:
                status = await self._listener([msg])
            else:
                status = await self._workers.run(self._listener, [msg])
        except Exception as exc:
            log.warning("consumeMessageDirectly exception, group %s", self.group, exc_info=True)
            result.consume_result = CMResult.CR_THROW_EXCEPTION
            result.remark = f"{type(exc).__name__}: {exc}"
        else:
            result.consume_result = (CMResult.CR_RETURN_NULL if status is None
                                     else CMResult.CR_SUCCESS if status == ConsumeStatus.CONSUME_SUCCESS
                                     else CMResult.CR_LATER if status == ConsumeStatus.RECONSUME_LATER
                                     else None)  # (Java leaves any other status unnamed too)
        result.spent_time_mills = int((time.monotonic() - t0) * 1000)
        return result

    def register_message_listener(self, listener: Callable[[list[MessageExt]], str | Awaitable[str]]) -> None:
        """Set the listener: ``listener(msgs)`` returns a ConsumeStatus; an ``async def`` runs on
        the loop, a plain function on the consume thread pool."""
        self._listener = listener
        self._listener_is_async = inspect.iscoroutinefunction(listener)

    async def start(self) -> None:
        if self._listener is None:
            raise ClientStateError("messageListener is null")
        await super().start()
        if self._orderly and self.message_model == "CLUSTERING":
            self._tasks.append(asyncio.ensure_future(self._relock_loop()))

    async def shutdown(self) -> None:
        await super().shutdown()
        self._workers.shutdown()

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

    async def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self._orderly:
            if pq.consuming is None or pq.consuming.done():
                pq.consuming = asyncio.ensure_future(self._consume_orderly(pq))
            return
        n = self.consume_message_batch_max_size
        if not self._listener_is_async:
            batches = [msgs[i:i + n] for i in range(0, len(msgs), n)] if n < len(msgs) else [msgs]
            # To the consume threads. A listener that answers within microseconds gets the whole
            # pull answer as one hand-off (a hand-off costs more than such a call); a slower one
            # gets a hand-off per batch, so that the threads share the answer as RocketMQ's
            # consumeExecutor would. What waits for the threads is bounded by the process queue's
            # thresholds, which pause this queue's pulls.
            if self._listen_us * len(batches) < QUICK_HANDOFF_US:
                self._workers.submit(self._listen, (batches,), functools.partial(self._listened, pq, batches))
            else:
                for b in batches:
                    self._workers.submit(self._listen, ([b],), functools.partial(self._listened, pq, [b]))
            return
        for i in range(0, len(msgs), n):
            batch = msgs[i:i + n] if i or n < len(msgs) else msgs
            await self._slots.acquire()
            self._consume_now(pq, batch)

    def _listen(self, batches: list[list[MessageExt]], orderly: ProcessQueue | None = None) -> list[tuple[str, int]]:
        """On a consume thread: a plain listener's status and milliseconds for each batch. For
        an ``orderly`` queue, only up to the first failure, and not once the queue is dropped or
        its lock lost (read across threads: at worst one batch more)."""
        out: list[tuple[str, int]] = []
        listener = self._listener
        for batch in batches:
            if orderly is not None and (orderly.dropped or not orderly.locked or
                                        (out and out[-1][0] != ConsumeStatus.CONSUME_SUCCESS)):
                break
            t0 = time.monotonic()
            try:
                status = _status(listener(batch))  # type: ignore[misc]
            except Exception:
                log.exception("consumeMessage exception, group %s", self.group)
                status = ConsumeStatus.RECONSUME_LATER
            spent = time.monotonic() - t0
            out.append((status, int(spent * 1000)))
            # (written from several threads without a lock: a lost update only blurs the average)
            self._listen_us = 0.8 * self._listen_us + 0.2 * spent * 1e6
        return out

    def _listened(self, pq: ProcessQueue, batches: list[list[MessageExt]], outcomes: list[tuple[str, int]] | None,
                  error: BaseException | None) -> None:
        """Back on the loop from a consume thread: count, commit what was consumed, send back
        the rest."""
        if outcomes is None or error is not None:
            outcomes = [(ConsumeStatus.RECONSUME_LATER, 0)] * len(batches)
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
            coro = self._listener(batch)  # type: ignore[misc]
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

    async def _consume_retry(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        await self._slots.acquire()
        await self._consume(pq, msgs)

    async def _call_listener(self, pq: ProcessQueue, batch: list[MessageExt], running: Awaitable[Any] | None = None,
                             started: float | None = None) -> str:
        """The listener's status for ``batch`` (``running``: its call, already started at
        ``started``), counted in the queue's consumer stats."""
        assert self._listener is not None
        if not self._listener_is_async and running is None:
            outcomes: list[tuple[str, int]] = await self._workers.run(self._listen, [batch])
            (status, rt_ms), = outcomes
            self._count(pq, len(batch), status, rt_ms)
            return status
        t0 = time.monotonic() if started is None else started
        try:
            if running is not None:
                status = _status(await running)
            else:
                status = _status(await self._listener(batch))
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
            resp = await self.instance.remoting.invoke(addr, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
                "offset": m.commit_log_offset, "group": self.group, "delayLevel": 0, "originMsgId": origin_id,
                "originTopic": m.topic, "unitMode": False, "maxReconsumeTimes": self.max_reconsume_times}),
                self.instance.timeout)
        except FastMQError as exc:
            log.warning("send message back to %s failed: %s", addr, exc)
            return False
        if resp.code != ResponseCode.SUCCESS:
            log.warning("send message back refused: %d %s", resp.code, resp.remark)
            return False
        return True


class PullConsumer(_ConsumerBase):
    """The lite pull consumer: ``subscribe``, ``start``, then ``poll()`` batches; offsets commit
    automatically when the next poll starts (``auto_commit``) or on ``commit()``."""

    consume_type = "CONSUME_ACTIVELY"

    def __init__(self, group: str, *, auto_commit: bool = True, **kwargs: Any) -> None:
        super().__init__(group, **kwargs)
        self.auto_commit = auto_commit
        self._ready: asyncio.Queue[tuple[ProcessQueue, list[MessageExt]]] = asyncio.Queue()
        self._polled: list[tuple[ProcessQueue, list[MessageExt]]] = []

    async def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        await self._ready.put((pq, msgs))

    async def poll(self, timeout_s: float = 5.0) -> list[MessageExt]:
        """The next batch of messages (empty after ``timeout_s`` with nothing new)."""
        if not self._running:
            raise ClientStateError("The consumer service state not OK: call start() first")
        if self.auto_commit:
            self.commit()
        try:
            async with asyncio.timeout(timeout_s):
                pq, msgs = await self._ready.get()
        except TimeoutError:
            return []
        if pq.dropped:
            return []
        self._polled.append((pq, msgs))
        return msgs

    def commit(self) -> None:
        """Mark everything polled so far as consumed (persisted with the next offset flush)."""
        polled, self._polled = self._polled, []
        for pq, msgs in polled:
            self._commit(pq, msgs)

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, from its route (DefaultLitePullConsumer.fetchMessageQueues),
        for :meth:`assign`.

        Raises:
            NoRouteError: no NameServer knows the topic.
        """
        route = await self.instance.update_route(topic)
        mqs = [] if route is None else sorted(MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas
                                              if is_readable(qd.perm) for i in range(qd.read_queue_nums))
        if not mqs:
            raise NoRouteError(f"Can not find Message Queue for this topic, {topic}")
        return mqs

    async def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly ``mqs``, with no rebalance (DefaultLitePullConsumer.assign); a later call
        replaces the set. Each queue starts where the group's committed offset is (else as
        ``consume_from_where`` says), and offsets are committed for the group as with subscribe.

        Raises:
            ClientStateError: the consumer subscribed (the two are mutually exclusive).
            MessageValidationError: a queue's topic name is not valid.
        """
        if self._assigned is None and self.subscriptions:
            raise ClientStateError("Subscribe and assign are mutually exclusive.")
        mqs = set(mqs)
        for topic in {mq.topic for mq in mqs}:
            problem = validate_topic(topic)
            if problem:
                raise MessageValidationError(problem)
        self._assigned = mqs
        topics = {mq.topic for mq in mqs}
        for topic in list(self.subscriptions):
            if topic not in topics:
                del self.subscriptions[topic]
        for topic in topics:
            self.subscriptions.setdefault(topic, build_subscription(topic, "*", _now_ms()))
        if self._running:
            await self.rebalance()

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from ``offset``."""
        pq = self.process_queues.get(mq)
        if pq is None:
            raise MessageValidationError(f"{mq} is not assigned to this consumer")
        pq.msgs.clear()
        pq.ordered = True
        pq.size_bytes = 0
        pq.max_seen = offset - 1
        pq.next_offset = offset
        self.offset_store.update(mq, offset)
