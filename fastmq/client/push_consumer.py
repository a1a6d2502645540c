"""PushConsumer and PullConsumer: RocketMQ's consumers on asyncio.

Both are assembled as DefaultMQPushConsumerImpl is, from parts in modules of their own:

- ``rebalance`` (RebalanceImpl): which queues this member consumes, every 20 s and at once on
  NOTIFY_CONSUMER_IDS_CHANGED;
- ``pull_service`` (PullMessageService): one long-polling pull loop per queue, paused while the
  queue holds too many unconsumed messages;
- ``process_queue`` (ProcessQueue): a queue's messages pulled but not yet consumed; the committed
  offset of a queue is the smallest offset still being processed, so a crash re-delivers, never
  skips;
- ``consume_service`` (ConsumeMessageConcurrentlyService, ConsumeMessageOrderlyService): the push
  consumer's hand-off to its listener, and sending back what it did not consume.

This module holds the consumers themselves: settings, start and shutdown, offsets, the admin
requests, and the lite pull consumer's poll/assign/seek.
"""
from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from typing import Any, Awaitable, Callable, Iterable, Self, Sequence

from ..errors import (FAQ_SUFFIX, BrokerError, ClientStateError, ConfigError, FastMQError, FilterRefusedError,
                      MessageValidationError, NoRouteError)
from ..protocol.consumer_running_info import (PROP_CONSUME_ORDERLY, PROP_CONSUMER_START_TIMESTAMP,
                                              PROP_THREADPOOL_CORE_SIZE, CMResult, ConsumeMessageDirectlyResult,
                                              ConsumerRunningInfo)
from ..protocol.heartbeat import ConsumerData, SubscriptionData, build_subscription, build_typed_subscription
from ..protocol.message import MessageExt
from ..protocol.message_queue import MessageQueue
from ..protocol.topic import is_readable, is_topic_or_group_illegal, retry_topic, validate_group, validate_topic
from .allocate import AllocateMessageQueueAveragely, AllocateStrategy
from .consume_pool import ConsumePool
# (ConsumeStatus, ProcessQueue, MAX_INFLATED_BODY and inflate_body are re-exported: users import them from here)
from .consume_service import QUICK_HANDOFF_US, ConsumeConcurrentlyService, ConsumeOrderlyService, ConsumeStatus
from .instance import ClientConfig, ClientInstance
from .message_selector import MessageSelector
from .offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from .process_queue import ProcessQueue, _now_ms
from .pull_service import MAX_INFLATED_BODY, PullService, _unwrap, inflate_body, inflated
from .producer import Producer
from .rebalance import MISSING_ROUTE_FIRST_RETRY_S, REBALANCE_INTERVAL_S, Rebalance
from .trace_data import ConsumeReturnType
from .trace_dispatcher import TraceDispatcher
from .trace_hooks import sub_after, sub_before, traced_listener

__all__ = ["ConsumeStatus", "MessageListener", "PushConsumer", "PullConsumer", "ProcessQueue", "MAX_INFLATED_BODY",
           "inflate_body"]

log = logging.getLogger("fastmq.client")

#: A push consumer's listener: ``listener(msgs)`` returns a :class:`ConsumeStatus` value; an ``async
#: def`` one runs on the event loop, a plain function on the consume threads (RocketMQ's
#: MessageListenerConcurrently, or MessageListenerOrderly with ``orderly=True``)
MessageListener = Callable[[list[MessageExt]], str | Awaitable[str]]


def _check_range(name: str, value: int, low: int, high: int) -> None:
    """DefaultMQPushConsumerImpl.checkConfig's range checks, with its texts."""
    if not low <= value <= high:
        raise ConfigError(f"{name} Out of range [{low}, {high}]{FAQ_SUFFIX}")


class _ConsumerBase(Rebalance, PullService):
    """What both consumers share: settings, subscriptions, start and shutdown, offsets,
    the admin requests; the rebalance and the pull loops are its parts."""

    def __init__(self, group: str, *, namesrv_addr: str | list[str] | None = None,
                 message_model: str = "CLUSTERING", consume_from_where: str = "CONSUME_FROM_LAST_OFFSET",
                 consume_timestamp_ms: int | None = None, allocate: AllocateStrategy | None = None,
                 pull_batch_size: int = 32, pull_threshold_for_queue: int = 1000,
                 pull_threshold_size_for_queue: int = 100 * 1024 * 1024, rebalance_interval_s: float = REBALANCE_INTERVAL_S,
                 instance: ClientInstance | None = None, client_config: ClientConfig | None = None,
                 enable_trace: bool = False, trace_topic: str | None = None) -> None:
        """Settings both consumers take (the blocking classes of :mod:`fastmq` take them too).

        Args:
            namesrv_addr: NameServers, ``"ns1:9876;ns2:9876"``; used when ``client_config`` is not given.
            message_model: CLUSTERING (the group shares the queues) or BROADCASTING (every member reads all).
            consume_from_where: where a group new to a queue starts: CONSUME_FROM_LAST_OFFSET,
                CONSUME_FROM_FIRST_OFFSET or CONSUME_FROM_TIMESTAMP.
            consume_timestamp_ms: the epoch milliseconds CONSUME_FROM_TIMESTAMP starts at.
            allocate: how the group's queues are shared out; default AllocateMessageQueueAveragely.
            pull_batch_size: messages asked for by one pull, 1..1024.
            pull_threshold_for_queue: messages held unconsumed per queue before its pulls pause, 1..65535.
            pull_threshold_size_for_queue: bytes held unconsumed per queue before its pulls pause, 1..1024 MiB.
            rebalance_interval_s: seconds between rebalances (one also runs when the group changes).
            instance: a ClientInstance to share with other producers and consumers.
            client_config: the connection settings (ClientConfig); wins over ``namesrv_addr``.
            enable_trace: record a trace of each consumption (``SubBefore`` and ``SubAfter``
                records) in the trace topic, as ``new DefaultMQPushConsumer(group, true)``; see docs/trace.md.
            trace_topic: the trace topic; default ``RMQ_SYS_TRACE_TOPIC``.
        """
        if not group or len(group) > 255:
            raise MessageValidationError("consumerGroup is null" if not group else
                                         "consumerGroup is longer than 255")
        if is_topic_or_group_illegal(group):  # (broadcast offsets live in a directory named after it)
            raise MessageValidationError(validate_group(group) or "")
        if message_model not in ("CLUSTERING", "BROADCASTING"):
            raise MessageValidationError(f"messageModel must be CLUSTERING or BROADCASTING, not {message_model}")
        self.group = group
        self._delivers_inline = False  # _deliver hands the messages on (see PullService._pull_loop)
        self._hands_off = False  # the pull loop calls _deliver, not _hand_off (see PullService._pull_loop)
        # plain strings, a MessageModel or ConsumeFromWhere passed or not: the pull and consume
        # paths compare them with str literals, fastest on an exact str
        self.message_model = str(message_model)
        self.consume_from_where = str(consume_from_where)
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
        # a client id of its own unless broadcasting (see ClientConfig.make_client_id)
        self.instance = instance or ClientInstance(client_config or ClientConfig(namesrv_addr=namesrv_addr),
                                                   keep_default_name=message_model == "BROADCASTING")
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
        #: the trace dispatcher when ``enable_trace`` (None: consumption is not traced)
        self.trace_dispatcher = (TraceDispatcher(group, "CONSUMER", trace_topic, self._make_trace_producer)
                                 if enable_trace else None)

    def _make_trace_producer(self, group: str, instance_name: str) -> Producer:
        config = dataclasses.replace(self.instance.config, instance_name=instance_name)
        return Producer(group, client_config=config, send_msg_timeout=5000, max_message_size=128_000)

    # ----------------------------------------------------------- set-up

    def subscribe(self, topic: str, expression: "str | MessageSelector" = "*") -> None:
        """Subscribe ``topic``: a TAG expression ("*" or "tagA || tagB"), or a
        :class:`MessageSelector` (``MessageSelector.by_sql("a > 1")`` filters on properties; the
        brokers check it when the consumer starts).

        Raises:
            MessageValidationError: a bad topic name, or an empty SQL92 expression.
        """
        if self._assigned is not None:
            raise ClientStateError("Subscribe and assign are mutually exclusive.")
        problem = validate_topic(topic)
        if problem:
            raise MessageValidationError(problem)
        now = int(time.time() * 1000)
        if isinstance(expression, MessageSelector):
            try:
                sub = build_typed_subscription(topic, expression.expression, expression.expression_type, now)
            except ValueError as exc:
                raise MessageValidationError(str(exc)) from None
        else:
            sub = build_subscription(topic, expression, now)
        self.subscriptions[topic] = sub

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
        self.instance.register_consumer(self.group, self)
        self._start_timestamp = _now_ms()
        try:
            await self.instance.start()
            for topic in self.subscriptions:
                try:
                    await self.instance.update_route(topic)
                except FastMQError as exc:
                    log.warning("route of %s not available yet: %s", topic, exc)
            await self._check_client_config()
        except BaseException:
            self.instance.unregister_consumer(self.group, self)
            raise
        if self.trace_dispatcher is not None:
            addr = self.instance.config.namesrv_addr
            await self.trace_dispatcher.start(";".join(addr) if isinstance(addr, list) else (addr or ""))
        self._running = True
        await self.instance.send_heartbeat_to_all_brokers()
        await self.rebalance()
        self._tasks = [asyncio.ensure_future(self._rebalance_loop()), asyncio.ensure_future(self._persist_loop())]

    async def _check_client_config(self) -> None:
        """MQClientInstance.checkClientInBroker: each non-TAG subscription is sent to one broker of
        its topic (CHECK_CLIENT_CONFIG); a refusal fails the start, as in the Java client.

        Raises:
            FilterRefusedError: a broker refused a subscription (its code and text).
        """
        for topic, sub in self.subscriptions.items():
            if not sub.expression_type or sub.expression_type == "TAG":
                continue
            route = self.instance.routes.get(topic)
            addr = None
            for bd in route.broker_datas if route is not None else ():
                addr = self.instance.any_broker_addr(bd.broker_name)
                if addr is not None:
                    break
            if addr is None:
                continue  # (no route yet: Java skips it too; the pulls will say)
            try:
                await self.instance.api.check_client_config(addr, self.group, self.instance.client_id, sub)
            except BrokerError as exc:
                raise FilterRefusedError(exc.code, exc.remark, topic=topic, expression=sub.sub_string) from exc

    async def shutdown(self) -> None:
        if not self._running:
            if self._own_instance and self.instance.started:
                await self.instance.shutdown()  # (a start that failed, a refused filter say, began it)
            return
        self._running = False
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for pq in list(self.process_queues.values()):
            await self._drop(pq)
        await self.offset_store.persist_all()
        if self.trace_dispatcher is not None:
            await self.trace_dispatcher.shutdown()
        self.instance.unregister_consumer(self.group, self)
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

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.instance.config.persist_consumer_offset_interval / 1000)
            await self.offset_store.persist_all(set(self.process_queues))

    def _commit(self, pq: ProcessQueue, msgs: Sequence[MessageExt]) -> None:
        pq.last_consume_time = time.time()
        off = pq.remove(msgs)
        if off >= 0 and not pq.dropped:
            self.offset_store.update(pq.mq, off, increase_only=True)

    async def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        raise NotImplementedError


class PushConsumer(ConsumeConcurrentlyService, ConsumeOrderlyService, _ConsumerBase):
    """Messages are pushed to a listener: ``listener(msgs) -> ConsumeStatus`` (plain or async)."""

    def __init__(self, group: str, *, consume_thread_min: int = 20, consume_thread_max: int = 20,
                 consume_message_batch_max_size: int = 1, max_reconsume_times: int = 16, orderly: bool = False,
                 **kwargs: Any) -> None:
        """``consume_thread_min`` threads run plain listeners: RocketMQ's consume pool has an
        unbounded queue, so it never grows past consumeThreadMin; ``consume_thread_max`` bounds
        the batches of an ``async def`` listener in progress at once.

        Args:
            consume_thread_min: threads that run a plain listener, 1..1000.
            consume_thread_max: batches of an ``async def`` listener in progress at once, 1..1000.
            consume_message_batch_max_size: messages handed to one listener call, 1..1024.
            max_reconsume_times: redeliveries of a message before it goes to the group's DLQ.
            orderly: consume each queue in order, one batch at a time, under the broker's queue lock.
            kwargs: the settings of both consumers (namesrv_addr, message_model, ...).

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

    def register_message_listener(self, listener: MessageListener) -> None:
        """Set the listener: ``listener(msgs)`` returns a ConsumeStatus; an ``async def`` runs on
        the loop, a plain function on the consume thread pool."""
        if self.trace_dispatcher is not None:
            listener = traced_listener(listener, self.group, self.trace_dispatcher)
        self._listener = listener
        self._listener_is_async = inspect.iscoroutinefunction(listener)
        # an async def's first step runs inside _deliver (ConsumeConcurrentlyService._consume_now)
        self._delivers_inline = self._listener_is_async and not self._orderly
        # a plain one's answers go to the consume threads by _hand_off, a call and no coroutine
        self._hands_off = not self._listener_is_async and not self._orderly

    async def start(self) -> None:
        if self._listener is None:
            raise ClientStateError("messageListener is null")
        await super().start()
        if not self._listener_is_async:
            # all of them now, not one by one under the first messages (see consume_pool)
            self._workers.prestart()
        if self._orderly and self.message_model == "CLUSTERING":
            self._tasks.append(asyncio.ensure_future(self._relock_loop()))

    async def shutdown(self) -> None:
        await super().shutdown()
        self._workers.shutdown()

    async def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self._orderly:
            if pq.consuming is None or pq.consuming.done():
                pq.consuming = asyncio.ensure_future(self._consume_orderly(pq))
            return
        await self._deliver_concurrently(pq, msgs)


class PullConsumer(_ConsumerBase):
    """The lite pull consumer: ``subscribe``, ``start``, then ``poll()`` batches; offsets commit
    automatically when the next poll starts (``auto_commit``) or on ``commit()``."""

    consume_type = "CONSUME_ACTIVELY"

    def __init__(self, group: str, *, auto_commit: bool = True, **kwargs: Any) -> None:
        """A lite pull consumer of ``group``.

        Args:
            auto_commit: commit what the last ``poll`` returned when the next one starts.
            kwargs: the settings of both consumers (namesrv_addr, message_model, ...).
        """
        super().__init__(group, **kwargs)
        self.auto_commit = auto_commit
        self._ready: asyncio.Queue[tuple[ProcessQueue, list[MessageExt]]] = asyncio.Queue()
        self._polled: list[tuple[ProcessQueue, list[MessageExt]]] = []
        #: the rest of a pull answer a poll left for the next one (see poll: inflated bytes)
        self._carry: tuple[ProcessQueue, list[MessageExt]] | None = None

    async def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        await self._ready.put((pq, msgs))

    async def poll(self, timeout_s: float = 5.0) -> list[MessageExt]:
        """The next batch of messages (empty after ``timeout_s`` with nothing new).

        A batch is what one pull brought, up to ``pull_batch_size`` messages; compressed bodies
        are inflated here, and a batch stops once its inflated bodies pass
        ``pull_threshold_size_for_queue`` bytes (the rest comes with the next poll), so one poll
        never holds more than that plus one body (16 MiB at most)."""
        if not self._running:
            raise ClientStateError("The consumer service state not OK: call start() first")
        if self.auto_commit:
            self.commit()
        if self._carry is not None:
            (pq, msgs), self._carry = self._carry, None
        else:
            try:
                async with asyncio.timeout(timeout_s):
                    pq, msgs = await self._ready.get()
            except TimeoutError:
                return []
        if pq.dropped:
            return []
        if not pq.has_compressed:
            self._polled.append((pq, msgs))
            if self.trace_dispatcher is not None:
                self._trace_poll(msgs)
            return msgs
        out: list[MessageExt] = []
        size = 0
        for i, m in enumerate(msgs):
            if size >= self.pull_threshold_size_for_queue:
                self._carry = (pq, msgs[i:])
                msgs = msgs[:i]
                break
            (m,) = inflated([m])
            out.append(m)
            size += len(m.body)
        self._polled.append((pq, msgs))  # (the messages as the queue holds them: commit takes those off)
        if self.trace_dispatcher is not None:
            self._trace_poll(out)
        return out

    def _trace_poll(self, msgs: list[MessageExt]) -> None:
        """A poll's messages as consumed, with success: 4.9.8's lite pull consumer registers the
        trace hook but never calls it; RocketMQ 5 records this pair in poll()."""
        d = self.trace_dispatcher
        assert d is not None
        before = sub_before(self.group, msgs)
        if before.beans:
            d.append(before)
            d.append(sub_after(before, len(msgs), True, ConsumeReturnType.SUCCESS))

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
        if self._carry is not None and self._carry[0] is pq:
            self._carry = None  # (messages from before the seek)
        pq.msgs.clear()
        pq.ordered = True
        pq.size_bytes = 0
        pq.max_seen = offset - 1
        pq.next_offset = offset
        self.offset_store.update(mq, offset)
