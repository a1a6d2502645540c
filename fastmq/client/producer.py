"""Producer: RocketMQ's DefaultMQProducer on asyncio.

A send finds the topic's publish info (cache, then the NameServer, then TBW102 so the broker
auto-creates the topic), picks a queue with the compiled QueueTable (round robin from a counter
with a random start; on a retry away from the broker that just failed; with
``send_latency_fault_enable`` also away from brokers in their latency penalty; always away from
brokers it cannot connect to, see reachability.py), and sends SEND_MESSAGE_V2 through the
client API (api.py). A sync send tries ``retry_times_when_send_failed + 1`` times, all within
the caller's timeout, retrying the response codes RocketMQ retries on.

The first try of a send is the compiled fast path's (fastmq/_ext/produce_c.pyx) when it has
all it needs at hand; it sees the producer only through the :class:`ProduceContext` handed to
it, and writes frames only on connections the client API gives it (none while an RPC hook,
such as the ACL signer, must see every request).
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
import uuid
from typing import Any, Callable, Iterable, Iterator, Sequence

from .._ext._protocols import ProduceContextProto
from .._ext.fault import FaultTable
from .._ext.produce import AsyncSend, SendFastPath, SendRequestWriter, SendResult, encode_batch
from ..errors import (FAQ_SUFFIX, BrokerError, ClientError, ClientStateError, MessageValidationError,
                      NoRouteError, RemotingConnectError, RemotingError, RemotingTimeoutError,
                      RemotingTooMuchRequestError, RequestTimeoutError, SendFailedError, SendTimeoutError)
from .._ext.codec import RemotingCommand
from ..protocol.codes import ClientErrorCode, LanguageCode, ResponseCode
from ..protocol.bodies import TopicRouteData
from ..protocol.command import VERSION, next_opaque
from ..protocol.message import (Message, MessageConst, MessageExt, MessageFormatError, encode_batch_body,
                                encode_properties)
from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from ..protocol.message_queue import MessageQueue
from ..protocol.record_layout import BATCH_MIN_LEN
from ..protocol.topic import (AUTO_CREATE_TOPIC_KEY_TOPIC, REPLY_TOPIC_POSTFIX, is_not_allowed_send_topic,
                              is_topic_or_group_illegal, validate_group, validate_topic)
from ..remoting.loop import relay_outcome
from .api import SendStatus, send_request, send_result
from .instance import ClientConfig, ClientInstance
from .message_id import UNIQ_IDS, create_uniq_id, create_uniq_ids
from .produce_context import FastPathSetting, Permits, ProduceContext, int_of
from .publish_info import BrokerNumbers, TopicPublishInfo
from .queue_selector import MessageQueueSelector, hash_selector, java_hash_code
from .reachability import Reachability
from .request_reply import PendingRequest, RequestCallback, RequestTable
from .trace_dispatcher import TraceDispatcher
from .trace_hooks import now_ms, pub_context

__all__ = ["Producer", "ProduceContext", "SendResult", "SendStatus", "MessageQueueSelector", "hash_selector",
           "java_hash_code", "split_batch"]

log = logging.getLogger("fastmq.client")

_LANG = int(LanguageCode.PYTHON)
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_Permits = Permits  # its name before produce_context held it (tests/test_producer_fast.py imports it)


def _failure_code(exc: BaseException | None) -> int | None:
    """The code the Java producer puts on "Send [N] times, still failed": the broker's answer, else
    what kind of failure the last try was (sendDefaultImpl)."""
    if isinstance(exc, BrokerError):
        return exc.code
    if isinstance(exc, RemotingConnectError):
        return ClientErrorCode.CONNECT_BROKER_EXCEPTION
    if isinstance(exc, RemotingTimeoutError):
        return ClientErrorCode.ACCESS_BROKER_TIMEOUT
    if isinstance(exc, ClientError):
        return ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
    return None


# what the batch encoder adds to a message without a UNIQ_KEY
_UNIQ_KEY_BYTES = len(f"{_UNIQ_KEY}{NAME_VALUE_SEPARATOR}{PROPERTY_SEPARATOR}") + 32


def split_batch(msgs: Iterable[Message], limit: int = 4 * 1024 * 1024) -> Iterator[list[Message]]:
    """Cut ``msgs`` into consecutive lists whose SEND_BATCH_MESSAGE body stays within ``limit``
    bytes (the producer's ``max_message_size``, 4 MiB by default), in order: each list can go to
    :meth:`Producer.send_batch`. The ListSplitter of RocketMQ's batch example, counting each
    message's exact encoded size. A message too large on its own comes alone (its send then
    refuses it with the size error).

    Raises:
        MessageFormatError: a property holds a separator.
    """
    chunk: list[Message] = []
    size = 0
    for m in msgs:
        props = m.properties
        n = BATCH_MIN_LEN + len(m.body) + len(encode_properties(props))
        if _UNIQ_KEY not in props:
            n += _UNIQ_KEY_BYTES
        if chunk and size + n > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(m)
        size += n
    if chunk:
        yield chunk


class Producer:
    """An asyncio producer. ``await start()``, then ``await send(...)``; ``await shutdown()`` at the end."""

    send_msg_timeout = FastPathSetting(int_of(64))
    retry_times_when_send_failed = FastPathSetting(int_of(32))
    retry_times_when_send_async_failed = FastPathSetting(int_of(32))
    compress_over = FastPathSetting(int_of(64))
    max_message_size = FastPathSetting(int_of(64))
    send_latency_fault_enable = FastPathSetting(bool)
    # header field ``d`` (queues of a topic the broker creates on a first send): the compiled
    # writer holds the header's fixed pieces ready, so a new value gets a new writer
    default_topic_queue_nums = FastPathSetting(int_of(32), lambda p, n: p._new_writer(n))

    def __init__(self, group: str = "DEFAULT_PRODUCER", *, namesrv_addr: str | list[str] | None = None,
                 send_msg_timeout: int = 3000, retry_times_when_send_failed: int = 2,
                 retry_times_when_send_async_failed: int = 2, retry_another_broker_when_not_store_ok: bool = False,
                 compress_msg_body_over_howmuch: int = 4096, max_message_size: int = 4 * 1024 * 1024,
                 send_latency_fault_enable: bool = False, default_topic_queue_nums: int = 4,
                 max_in_flight: int = 65535, instance: ClientInstance | None = None,
                 client_config: ClientConfig | None = None, enable_trace: bool = False,
                 trace_topic: str | None = None) -> None:
        """A producer of ``group``; the blocking :class:`fastmq.Producer` takes the same arguments.

        Args:
            namesrv_addr: NameServers, ``"ns1:9876;ns2:9876"``; used when ``client_config`` is not given.
            send_msg_timeout: milliseconds a send waits for its answer, retries included.
            retry_times_when_send_failed: extra tries of a failed ``send``, each on another broker when there is one.
            retry_times_when_send_async_failed: the same for ``send_async``, whose callback runs once at the end.
            retry_another_broker_when_not_store_ok: also retry a send answered with a status other than SEND_OK.
            compress_msg_body_over_howmuch: bodies of this many bytes or more are sent zlib-compressed.
            max_message_size: largest body accepted, in bytes; a larger one raises MessageValidationError.
            send_latency_fault_enable: avoid for a while a broker that answered slowly.
            default_topic_queue_nums: queues asked for when a send creates its topic on the broker.
            max_in_flight: sends started and not over at once; one more waits for a permit (0: no bound).
            instance: a ClientInstance to share with other producers and consumers.
            client_config: the connection settings (ClientConfig); wins over ``namesrv_addr``.
            enable_trace: record a trace of every answered send (a ``Pub`` record) in the trace
                topic, as ``new DefaultMQProducer(group, true)`` does; see docs/trace.md.
            trace_topic: the trace topic; default ``RMQ_SYS_TRACE_TOPIC``.
        """
        if not group or len(group) > 255:
            raise MessageValidationError("the specified group is blank" if not group else
                                         "the specified group is longer than group max length 255.")
        if is_topic_or_group_illegal(group):  # (broadcast offsets live in a directory named after it)
            raise MessageValidationError(validate_group(group) or "")
        self.group = group
        self._own_instance = instance is None
        self.instance = instance or ClientInstance(client_config or ClientConfig(namesrv_addr=namesrv_addr))
        self._publish: dict[str, TopicPublishInfo] = {}
        self._numbers = BrokerNumbers()
        self._faults = FaultTable(8)
        self._in_flight = Permits(max_in_flight) if max_in_flight else None
        self._started = 0  # send_async calls, to yield to the loop every 256
        self._state = "CREATE_JUST"
        self._good_topics: set[str] = set()  # topic names that passed validate_topic
        context: ProduceContextProto = ProduceContext(
            self._good_topics, self._publish, self._in_flight, self.instance.api.connection_for_frames,
            self._select, self._update_fault, self._async_answer, self._async_failed)
        # no writer yet: assigning default_topic_queue_nums below makes it (the twins take None here)
        self._fast = SendFastPath(context, None, UNIQ_IDS, next_opaque)  # type: ignore[arg-type]
        self._reach = Reachability(self.instance, self._numbers, self._faults, self._publish, self._fast)
        #: ``passes(msg)``: True when ``msg`` passes :meth:`check_message` as far as the compiled
        #: first try tells at once (a C call); False: ask check_message (the blocking facade does
        #: so per send_async)
        self.passes: Callable[[Message], bool] = self._fast.passes
        self.default_topic_queue_nums = default_topic_queue_nums  # gives the fast path its writer
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.compress_over = compress_msg_body_over_howmuch
        self.max_message_size = max_message_size
        self.send_latency_fault_enable = send_latency_fault_enable
        #: the trace dispatcher when ``enable_trace`` (None: the sends are not traced)
        self.trace_dispatcher: TraceDispatcher | None = None
        if enable_trace:
            self._enable_trace(trace_topic)

    def _new_writer(self, default_topic_queue_nums: int) -> None:
        # with ACL credentials (the client's only hook) the writer signs each frame as the hook would
        self._fast.writer = SendRequestWriter(self.group, AUTO_CREATE_TOPIC_KEY_TOPIC, default_topic_queue_nums,
                                              _LANG, VERSION, signer=self.instance.api.frame_signer)

    # -------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self._state == "RUNNING":
            return
        if self._state == "SHUTDOWN_ALREADY":
            raise ClientStateError("The producer service state not OK, maybe started once, SHUTDOWN_ALREADY")
        self.instance.producers[self.group] = self
        await self.instance.start()
        self._state = "RUNNING"
        self._fast.loop = asyncio.get_running_loop()
        # the compiled first try writes frames already encoded: with a hook to apply (other than
        # the ACL signer alone, whose work the frame writer does) every send takes the client
        # API's general send
        self._fast.running = self.instance.api.writes_frames
        if self.trace_dispatcher is not None:
            await self.trace_dispatcher.start(_namesrv_text(self.instance.config.namesrv_addr))

    async def shutdown(self) -> None:
        if self._state != "RUNNING":
            self._state = "SHUTDOWN_ALREADY"
            return
        self._state = "SHUTDOWN_ALREADY"
        self._fast.running = False
        if self.trace_dispatcher is not None:
            await self.trace_dispatcher.shutdown()
        self.instance.producers.pop(self.group, None)
        await self._reach.close()
        await self.instance.unregister(producer_group=self.group)
        if self._own_instance:
            await self.instance.shutdown()

    async def __aenter__(self) -> "Producer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _check_running(self) -> None:
        if self._state != "RUNNING":
            raise ClientStateError(f"The producer service state not OK, {self._state}")

    # ------------------------------------------------------------ routes

    def topics(self) -> list[str]:
        return list(self._publish)

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:  # called by the instance
        if topic in self._publish:
            self._publish[topic] = TopicPublishInfo.from_route(topic, route, self._numbers)

    async def _publish_info(self, topic: str, writable: bool = True) -> TopicPublishInfo:
        """tryToFindTopicPublishInfo: cache, NameServer, then the default topic for auto-creation.

        ``writable=False`` (a send to a given queue) takes a route without writable queues, or none:
        the Java producer sends to that queue's broker all the same and lets the broker answer (a
        4.9.8 broker stores it even on a read-only topic)."""
        info = self._publish.get(topic)
        if info is not None and info.ok:
            return info
        route = await self.instance.update_route(topic)
        if route is None:
            default = await self.instance.fetch_route(AUTO_CREATE_TOPIC_KEY_TOPIC)
            if default is not None:
                for qd in default.queue_datas:  # the broker creates the topic with at most this many queues
                    qd.write_queue_nums = qd.read_queue_nums = min(self.default_topic_queue_nums, qd.read_queue_nums)
                route = default
        if route is None and not writable:
            return TopicPublishInfo.from_route(topic, TopicRouteData(), self._numbers)
        if route is None:
            raise NoRouteError(f"No route info of this topic: {topic}{FAQ_SUFFIX}",
                               ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION)
        info = TopicPublishInfo.from_route(topic, route, self._numbers)
        if not info.ok and not writable:
            return info
        if not info.ok:  # a route, but no writable queue in it (what Java reports the same way)
            raise NoRouteError(f"No route info of this topic: {topic}{FAQ_SUFFIX}",
                               ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION)
        # Cached even when it is TBW102's route standing in for a topic being auto-created, as the
        # Java producer does: the 30 s refresh swaps in the topic's own route once a broker has
        # registered it, and meanwhile the fault table keeps steering around dead brokers.
        self._publish[topic] = info
        return info

    def _select(self, info: TopicPublishInfo, last_broker: str | None = None) -> MessageQueue:
        """The queue for a try; ``last_broker``: the broker of the try that just failed.

        Every step passes over ``last_broker`` and the unreachable brokers while another broker
        has a queue, the fallbacks included: with every broker penalised, the one whose refusals
        are fastest (a dead one) must not win. In order: a queue of a broker out of its penalty
        (with ``send_latency_fault_enable``); of the reachable broker the fault table ranks best
        (pick_one_at_least); then round robin over the reachable brokers, preferring any other
        than ``last_broker``; and only when no reachable broker has a queue, an unreachable one.
        """
        assert info.table is not None
        counter = self._fast.next_counter()  # one round-robin counter for both paths
        last = self._numbers.number(last_broker) if last_broker else -1
        faults = self._faults
        if self.send_latency_fault_enable:
            now = int(time.time() * 1000)
            idx = info.table.select_fault(counter, last, faults, now)
            if idx >= 0:
                return info.queues[idx]
            broker = faults.pick_one_at_least(now, last)
            if broker >= 0:
                idx = info.table.select_of_broker(counter, broker)
                if idx >= 0:
                    return info.queues[idx]
                faults.remove(broker)  # no writable queue there any more
        idx = info.table.select_reachable(counter, last, faults)
        return info.queues[idx]

    def _update_fault(self, broker_name: str, latency_ms: int, isolation: bool) -> None:
        if self.send_latency_fault_enable:
            self._faults.update(self._numbers.number(broker_name), latency_ms, isolation, int(time.time() * 1000))
        if not isolation and self._reach.marked:
            self._reach.reached(broker_name)

    def unreachable_brokers(self) -> list[str]:
        """The names of the brokers this producer passes over because it could not connect to
        them, until a probe (about once a second) or a send reaches them again."""
        return self._reach.unreachable_names()

    # ------------------------------------------------------------ checks

    def _validate(self, msg: Message) -> None:
        if msg.topic not in self._good_topics:
            problem = validate_topic(msg.topic)
            if problem:
                raise MessageValidationError(problem, ResponseCode.MESSAGE_ILLEGAL)
            if is_not_allowed_send_topic(msg.topic):
                raise MessageValidationError(f"Sending message to topic[{msg.topic}] is forbidden.",
                                             ResponseCode.MESSAGE_ILLEGAL)
            # bounded: a producer of endless topic names stays small. A reply topic's sends keep
            # to the general path, which sends a reply with its own code (SEND_REPLY_MESSAGE_V2)
            if len(self._good_topics) < 10_000 and not msg.topic.endswith(REPLY_TOPIC_POSTFIX):
                self._good_topics.add(msg.topic)
        if not isinstance(msg.body, (bytes, bytearray, memoryview)):
            raise MessageValidationError(f"the message body must be bytes, not {type(msg.body).__name__}",
                                         ResponseCode.MESSAGE_ILLEGAL)
        if len(msg.body) == 0:
            raise MessageValidationError("the message body length is zero", ResponseCode.MESSAGE_ILLEGAL)
        limit = self._fast.max_message_size  # (the setting's value, without its descriptor's Python __get__)
        if len(msg.body) > limit:
            raise MessageValidationError(f"the message body size over max value, MAX: {limit}",
                                         ResponseCode.MESSAGE_ILLEGAL)

    # -------------------------------------------------------------- send

    def _request(self, msg: Message, mq: MessageQueue, batch: bool = False) -> RemotingCommand:
        return send_request(msg, mq, self.group, self.default_topic_queue_nums, self.compress_over, batch)

    async def _send_once(self, msg: Message, mq: MessageQueue, info: TopicPublishInfo, timeout: float,
                         uniq_id: str, batch: bool, oneway: bool) -> SendResult | None:
        addr = info.master_addr(mq.broker_name) or self.instance.master_addr(mq.broker_name)
        if addr is None:
            raise NoRouteError(f"The broker[{mq.broker_name}] not exist")  # no code, as in Java's sendKernelImpl
        req = self._request(msg, mq, batch)
        if oneway:
            await self.instance.api.send_message_oneway(addr, req, timeout)
            return None
        return await self.instance.api.send_message(addr, req, msg.topic, mq, uniq_id, timeout)

    async def _send(self, msg: Message, timeout_ms: int | None, *, mq: MessageQueue | None = None,
                    retries: int | None = None, batch: bool = False, oneway: bool = False,
                    prior: AsyncSend | None = None) -> SendResult | None:
        """``prior``: a first try already made by the send_async fast path; the retries go on from it
        (same clock, brokers list and last error) as if this loop had made it."""
        loop = asyncio.get_running_loop()
        if prior is None:
            self._check_running()
            self._validate(msg)
            begin = loop.time()
        else:
            begin = prior.begin
        timeout = (timeout_ms if timeout_ms is not None else self.send_msg_timeout) / 1000
        uniq: str | None
        if prior is not None:
            uniq = prior.uniq
        elif not batch:
            uniq = msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if not uniq:
                uniq = msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
        else:
            uniq = ""
        info = self._publish.get(msg.topic)
        if info is None or not info.ok:
            info = await self._publish_info(msg.topic, writable=mq is None)
        tries = 1 if (oneway or mq is not None) else 1 + (self.retry_times_when_send_failed if retries is None
                                                           else retries)
        brokers_sent: list[str] = []
        last_exc: BaseException | None = None
        chosen: MessageQueue | None = mq
        if prior is not None:
            brokers_sent.append(prior.mq.broker_name)
            last_exc, chosen = prior.error, prior.mq
            tries -= 1
        timed_out = False
        for _ in range(tries):
            remaining = timeout - (loop.time() - begin)
            if remaining <= 0:
                timed_out = True
                break
            if mq is None:
                chosen = self._select(info, chosen.broker_name if chosen else None)
            assert chosen is not None
            brokers_sent.append(chosen.broker_name)
            t0 = loop.time()
            try:
                result = await self._send_once(msg, chosen, info, remaining, uniq, batch, oneway)
            except (RemotingError, NoRouteError) as exc:
                self._update_fault(chosen.broker_name, int((loop.time() - t0) * 1000), True)
                log.warning("send %s to %s failed: %s", uniq, chosen, exc)
                self._reach.try_failed(chosen.broker_name, msg.topic, t0, exc)
                last_exc = exc
                continue
            except BrokerError as exc:
                self._update_fault(chosen.broker_name, int((loop.time() - t0) * 1000), True)
                last_exc = exc
                if exc.retriable:
                    continue
                raise
            self._update_fault(chosen.broker_name, int((loop.time() - t0) * 1000), False)
            if (result is not None and result.status != SendStatus.SEND_OK
                    and self.retry_another_broker_when_not_store_ok):
                last_exc = None
                continue
            return result
        if timed_out:
            raise SendTimeoutError("sendDefaultImpl call timeout") from last_exc
        cost = int((loop.time() - begin) * 1000)
        raise SendFailedError(f"Send [{len(brokers_sent)}] times, still failed, cost [{cost}]ms, Topic: {msg.topic}, "
                              f"BrokersSent: {brokers_sent}{FAQ_SUFFIX}", _failure_code(last_exc)) from last_exc

    async def send(self, msg: Message, timeout_ms: int | None = None) -> SendResult:
        """Send and wait for the broker's answer; retried per ``retry_times_when_send_failed``.

        Raises:
            MessageValidationError: a bad topic or body.
            NoRouteError: "No route info of this topic".
            BrokerError: a response code that is not retried.
            SendFailedError: every try failed ("Send [N] times, still failed ...").
        """
        permits = self._in_flight
        if permits is not None and not permits.try_acquire():
            await permits.acquire()
        try:
            fut = self._fast.start(msg, None, timeout_ms, True)
            r = await (fut if fut is not None else self._send(msg, timeout_ms))
        finally:
            if permits is not None:
                permits.release()
        assert r is not None
        return r

    async def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None]
                         | None = None, timeout_ms: int | None = None, *, wait: bool = True
                         ) -> "asyncio.Future[SendResult]":
        """Start a send; the returned future (and ``callback(result, error)``) completes with it.

        Retried per ``retry_times_when_send_async_failed``. With the topic's route cached and its
        broker connected, the first try costs no task and no timer: the compiled writer encodes
        the request frame, the connection queues it (the frames of one loop turn leave in one
        socket write) and the answer completes the future straight from the connection's read.

        The future keeps asyncio's Future protocol (await it, ``gather``, ``wait_for``,
        ``add_done_callback``, ``cancel``; ``asyncio.isfuture`` is true). On that first-try path
        it is the send's own record, the one object a send in flight costs, so with the compiled
        core it is not an ``asyncio.Future`` instance. Cancelling it stops the wait and any
        retry, not a request already written.

        With ``max_in_flight`` sends not over, the call waits for one to end (a burst of any size
        is safe: the sends beyond the window start as earlier ones are answered); ``wait=False``
        raises RemotingTooMuchRequestError at once instead (RocketMQ's "invokeAsyncImpl invoke
        too fast"). Once started, a send may still wait, unwritten, for its connection to drain
        (see :mod:`fastmq.remoting.connection`); its timeout runs from when it is written.
        """
        self._started += 1
        if not self._started & 255:
            # a caller starting tens of thousands in a row without ever waiting would keep the
            # loop from reading the answers (and they would time out unread): let it read
            await asyncio.sleep(0)
        permits = self._in_flight
        if permits is not None and not permits.try_acquire():
            if not wait:
                raise RemotingTooMuchRequestError("invokeAsyncImpl invoke too fast")
            await permits.acquire()
        # (_start_async's steps, inline: one call less per send)
        try:
            fut: asyncio.Future[SendResult] | None = self._fast.start(msg, callback, timeout_ms, False)
            if fut is None:
                fut = self._start_general(msg, callback, timeout_ms, permits)
        except BaseException:
            if permits is not None:
                permits.release()
            raise
        return fut

    def _start_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None] | None,
                     timeout_ms: int | None, permits: Permits | None, batch_ids: str | None = None
                     ) -> "asyncio.Future[SendResult]":
        """The first try of an asynchronous send that holds its in-flight permit: the fast path,
        else a task on the general one; the permit goes back when the send is over."""
        try:
            fut: asyncio.Future[SendResult] | None = self._fast.start(msg, callback, timeout_ms, False, batch_ids)
            if fut is None:
                fut = self._start_general(msg, callback, timeout_ms, permits, batch_ids)
        except BaseException:
            if permits is not None:
                permits.release()
            raise
        return fut

    def _start_general(self, msg: Message,
                       callback: Callable[[SendResult | None, BaseException | None], None] | None,
                       timeout_ms: int | None, permits: Permits | None, batch_ids: str | None = None
                       ) -> "asyncio.Future[SendResult]":
        """An asynchronous send the fast path did not take: a task on the general path, which
        gives the permit back when it is over (a traced producer's send traced by its callback)."""
        if self.trace_dispatcher is not None and batch_ids is None:
            callback = self._traced_callback(msg, now_ms(), callback)
        fut = asyncio.ensure_future(self._send_async_slow(msg, callback, timeout_ms, batch_ids))
        if permits is not None:
            fut.add_done_callback(self._release_in_flight)
        if callback is not None:
            fut.add_done_callback(_retrieved)
        return fut

    def start_send(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None],
                   timeout_ms: int | None = None, awaited: bool = True) -> None:
        """Start a send from the loop's thread without awaiting anything: ``callback(result,
        error)`` runs exactly once on the loop when the send is over, whether it failed at once
        or after its retries. ``awaited``: a caller is waiting for it, so it is retried as
        :meth:`send` is; otherwise as :meth:`send_async`.

        This is the blocking facade's path: its thread hands the call to the loop and waits for
        the callback, where a coroutine run with ``run_coroutine_threadsafe`` would cost a Task,
        two chained futures and a second loop turn per send.
        """
        permits = self._in_flight
        try:
            if permits is not None and not permits.try_acquire():
                # every permit is out: a task waits for one, as send / send_async would
                if awaited:
                    # Producer.send, not self.send: a traced producer's callback is traced already,
                    # and its traced send would write a second Pub record
                    asyncio.ensure_future(Producer.send(self, msg, timeout_ms)).add_done_callback(
                        functools.partial(relay_outcome, callback))
                else:
                    # (its task ends once the send has started; that send calls back itself)
                    asyncio.ensure_future(self.send_async(msg, callback, timeout_ms)).add_done_callback(
                        functools.partial(relay_outcome, callback, result=False))
                return
            try:
                # (_start_async's steps, inline: one call less per send of the blocking facade)
                if not awaited:
                    if self._fast.start(msg, callback, timeout_ms, False) is None:
                        self._start_general(msg, callback, timeout_ms, permits)
                # the fast path's entry gives the permit back as the send ends, before the callback
                elif self._fast.start(msg, callback, timeout_ms, True, None, permits) is None:
                    done = callback if permits is None else functools.partial(_release_then, permits, callback)
                    asyncio.ensure_future(self._send(msg, timeout_ms)).add_done_callback(functools.partial(relay_outcome, done))
            except BaseException:
                if permits is not None:
                    permits.release()
                raise
        except Exception as exc:  # refused before anything was sent (a bad message, a stopped producer)
            callback(None, exc)

    def start_sends(self, sends: list[tuple[Message, Callable[[SendResult | None, BaseException | None], None],
                                            int | None]]) -> None:
        """:meth:`start_send` (not awaited) of each ``(msg, callback, timeout_ms)`` of ``sends``, in
        order, from the loop's thread: the blocking facade's ``send_async`` hands the loop its
        sends a batch per turn (``DrivenLoop.post_batched``), one Python call per batch where a
        call per send was a frame more than the asyncio ``send_async`` has.

        A callback that raises as it is told of a refused send is reported to the loop's
        exception handler and the batch goes on. A BaseException (KeyboardInterrupt) ends the
        batch: ``sends`` then holds the sends not yet started, for the loop's driver to put back.
        """
        permits = self._in_flight
        fast = self._fast.start
        it = iter(sends)
        try:
            for msg, callback, timeout_ms in it:
                try:
                    # (Permits.try_acquire, inline: a Python call less per send)
                    if permits is not None:
                        if permits._value > 0 and not permits._waiters:
                            permits._value -= 1
                        else:
                            # every permit is out: a task waits for one, as send_async would
                            asyncio.ensure_future(self.send_async(msg, callback, timeout_ms)).add_done_callback(
                                functools.partial(relay_outcome, callback, result=False))
                            continue
                    try:
                        if fast(msg, callback, timeout_ms, False) is None:
                            self._start_general(msg, callback, timeout_ms, permits)
                    except BaseException:
                        if permits is not None:
                            permits.release()
                        raise
                except Exception as exc:  # refused before anything was sent (a bad message, a stopped producer)
                    self._refused(callback, exc)
        except BaseException:
            sends[:] = list(it)
            raise

    def _refused(self, callback: Callable[[SendResult | None, BaseException | None], None],
                 exc: Exception) -> None:
        try:
            callback(None, exc)
        except Exception as cb_exc:  # as the loop reports a failing callback; the batch goes on
            asyncio.get_running_loop().call_exception_handler(
                {"message": f"send callback {callback!r} failed", "exception": cb_exc})

    def check_message(self, msg: Message) -> None:
        """What a send refuses before sending anything, raised now: a producer not running, a bad
        topic or body (MessageValidationError). For callers on other threads (the blocking
        facade), so that they get the error rather than their callback."""
        if self._state != "RUNNING":  # (_check_running, inline: once per send_async of the blocking facade)
            raise ClientStateError(f"The producer service state not OK, {self._state}")
        body = msg.body
        # what _validate passes without a word, told here without its call (once per send_async
        # of the blocking facade): a topic checked before and a bytes body of an allowed size
        if (msg.topic in self._good_topics and type(body) is bytes
                and 0 < len(body) <= self._fast.max_message_size):
            return
        self._validate(msg)

    def _release_in_flight(self, _fut: object) -> None:
        assert self._in_flight is not None  # added as a callback only when there are permits
        self._in_flight.release()

    async def _send_async_slow(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None]
                               | None, timeout_ms: int | None, batch_ids: str | None = None) -> SendResult:
        try:
            r = await self._send(msg, timeout_ms, retries=self.retry_times_when_send_async_failed,
                                 batch=batch_ids is not None)
            assert r is not None
            if batch_ids is not None:
                r = _with_ids(r, batch_ids)
        except BaseException as exc:
            if callback is not None:
                callback(None, exc)
            raise
        if callback is not None:
            callback(r, None)
        return r

    # The compiled AsyncSend entry completes a plain SUCCESS itself; it asks back here for the rest.

    def _async_answer(self, entry: AsyncSend, resp: RemotingCommand) -> None:
        """An answer the entry did not take as a plain SUCCESS: RocketMQ's checks, retries, errors."""
        latency = int((entry.get_loop().time() - entry.begin) * 1000)
        assert entry.topic is not None  # the fast path makes entries of messages only
        try:
            result = send_result(resp, entry.topic, entry.mq, entry.uniq)
        except BrokerError as exc:
            self._update_fault(entry.mq.broker_name, latency, True)
            if exc.retriable:
                self._async_retry(entry, exc)
            else:
                entry.finish(None, exc)
            return
        except Exception as exc:  # a malformed answer fails this send only, not the connection's read
            entry.finish(None, exc)
            return
        self._update_fault(entry.mq.broker_name, latency, False)
        if result.status != SendStatus.SEND_OK and self.retry_another_broker_when_not_store_ok:
            self._async_retry(entry, None)
            return
        entry.finish(result, None)

    def _async_failed(self, entry: AsyncSend, exc: BaseException) -> None:
        """The entry's try failed before any answer (connection lost, timed out)."""
        assert entry.topic is not None  # the fast path makes entries of messages only
        self._update_fault(entry.mq.broker_name, int((entry.get_loop().time() - entry.begin) * 1000), True)
        log.warning("send %s to %s failed: %s", entry.uniq, entry.mq, exc)
        self._reach.try_failed(entry.mq.broker_name, entry.topic, entry.begin, exc)
        self._async_retry(entry, exc)

    def _async_retry(self, entry: AsyncSend, exc: BaseException | None) -> None:
        """The rest of the tries, on the general path, from where the entry's first try left off."""
        if entry.done():  # the caller cancelled it
            entry.release()
            return
        entry.error = exc
        # the fast path makes entries of messages only
        assert (entry.topic is not None and entry.body is not None and entry.flag is not None
                and entry.properties is not None)
        msg = Message(entry.topic, entry.body, entry.flag, entry.properties)
        task = asyncio.ensure_future(self._send(msg, entry.timeout_ms, retries=entry.retries,
                                                batch=entry.batch, prior=entry))

        def relay(t: "asyncio.Task[SendResult | None]") -> None:
            if t.cancelled():
                entry.release()
                entry.cancel()
            elif t.exception() is not None:
                entry.finish(None, t.exception())
            else:
                entry.finish(t.result(), None)
        task.add_done_callback(relay)
        entry.add_done_callback(lambda f: task.cancel() if f.cancelled() else None)

    async def send_oneway(self, msg: Message) -> None:
        """Send without waiting for any answer (one try)."""
        await self._send(msg, None, oneway=True)

    async def send_to_queue(self, msg: Message, mq: MessageQueue, timeout_ms: int | None = None) -> SendResult:
        """Send to this queue exactly (no retry elsewhere)."""
        r = await self._send(msg, timeout_ms, mq=mq)
        assert r is not None
        return r

    async def send_orderly(self, msg: Message, selector: MessageQueueSelector, arg: object,
                           timeout_ms: int | None = None) -> SendResult:
        """Send to the queue ``selector(queues, msg, arg)`` picks (same arg, same queue, same order)."""
        self._check_running()
        self._validate(msg)
        info = await self._publish_info(msg.topic)
        mq = selector(info.queues, msg, arg)
        if mq not in info.queues:
            raise MessageValidationError(f"select message queue return {mq}, not a queue of the topic")
        return await self.send_to_queue(msg, mq, timeout_ms)

    async def send_batch(self, msgs: Sequence[Message], timeout_ms: int | None = None) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE (each keeps its own UNIQ_KEY) and
        wait for the broker's answer; retried per ``retry_times_when_send_failed``.

        Raises:
            MessageValidationError: an empty batch, mixed topics, a delay level, a bad message,
                or an encoded batch over ``max_message_size``; and what :meth:`send` raises.
        """
        batch, msg_ids = self._batch_message(msgs)
        del msgs  # the caller's messages are encoded: they need not live as long as the send
        fut = self._fast.start(batch, None, timeout_ms, True, msg_ids)
        if fut is not None:
            sent: SendResult = await fut
            return sent
        r = await self._send(batch, timeout_ms, batch=True)
        assert r is not None
        return _with_ids(r, msg_ids)

    async def send_batch_async(self, msgs: Sequence[Message],
                               callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
                               timeout_ms: int | None = None) -> "asyncio.Future[SendResult]":
        """Start a batch send, as :meth:`send_async` starts one message's (the Java client's
        ``send(Collection<Message>, SendCallback)``); the returned future, and
        ``callback(result, error)``, complete with it. Retried per
        ``retry_times_when_send_async_failed``; takes one in-flight permit.

        The batch is checked and encoded before this returns, and the messages are not kept: a
        caller that pipelines batches holds none of them while they are in flight.

        Raises:
            MessageValidationError: as :meth:`send_batch`, at once (as the Java client's batch
                check does); failures of the send itself go to the future and the callback.
        """
        batch, msg_ids = self._batch_message(msgs)
        del msgs
        permits = self._in_flight
        if permits is not None and not permits.try_acquire():
            await permits.acquire()
        return self._start_async(batch, callback, timeout_ms, permits, msg_ids)

    # ------------------------------------------------------------ message trace

    def _enable_trace(self, trace_topic: str | None) -> None:
        """Trace the sends: the send methods of this producer become their traced twins (instance
        attributes), so that a producer without trace pays nothing on its send path."""
        self.trace_dispatcher = TraceDispatcher(self.group, "PRODUCER", trace_topic, self._make_trace_producer)
        self.trace_dispatcher.store_host = self.instance.master_addr
        self._fast.trace = True  # (its results keep the answers' TRACE_ON)
        # the fast path's asynchronous sends tell the dispatcher themselves as they end, and
        # _start_general wraps the callbacks of those it does not take: send_async needs no twin
        self._fast.tracer = self.trace_dispatcher
        self.send = self._send_traced  # type: ignore[method-assign]
        self.start_send = self._start_send_traced  # type: ignore[method-assign]
        self.send_to_queue = self._send_to_queue_traced  # type: ignore[method-assign]
        self.send_batch = self._send_batch_traced  # type: ignore[method-assign]
        self.send_batch_async = self._send_batch_async_traced  # type: ignore[method-assign]

    def _make_trace_producer(self, group: str, instance_name: str) -> "Producer":
        config = dataclasses.replace(self.instance.config, instance_name=instance_name)
        return Producer(group, client_config=config, send_msg_timeout=5000, max_message_size=128_000)

    def _trace_pub(self, msg: Message, r: SendResult, begin_ms: int) -> None:
        """SendMessageTraceHookImpl.sendMessageAfter for one answered send."""
        assert self.trace_dispatcher is not None
        self.trace_dispatcher.append_pub(msg, r, begin_ms)

    def _trace_batch(self, msgs: Sequence[Message], r: SendResult, begin_ms: int) -> None:
        """A Pub record per message of an answered batch (each by its own id, so each is found)."""
        d = self.trace_dispatcher
        assert d is not None
        if not msgs or d.skips(msgs[0].topic) or not r.trace_on:
            return
        ids = r.msg_id.split(",")
        offsets = (r.offset_msg_id or "").split(",")
        host = self.instance.master_addr(r.message_queue.broker_name)
        for i, m in enumerate(msgs):
            ctx = pub_context(self.group, m, ids[i] if i < len(ids) else r.msg_id,
                              offsets[i] if i < len(offsets) else r.offset_msg_id, r.status == SendStatus.SEND_OK,
                              r.region_id, host, begin_ms, len(msgs))
            if ctx is not None:
                d.append(ctx)

    def _traced_callback(self, msg: Message, begin_ms: int,
                         callback: Callable[[SendResult | None, BaseException | None], None] | None
                         ) -> Callable[[SendResult | None, BaseException | None], None]:
        assert self.trace_dispatcher is not None
        return _TracedSend(self.trace_dispatcher, msg, begin_ms, callback)

    async def _send_traced(self, msg: Message, timeout_ms: int | None = None) -> SendResult:
        begin = now_ms()
        r = await Producer.send(self, msg, timeout_ms)
        self._trace_pub(msg, r, begin)
        return r

    def _start_send_traced(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None],
                           timeout_ms: int | None = None, awaited: bool = True) -> None:
        # (an asynchronous one is traced as send_async's: by the fast path, else _start_general)
        Producer.start_send(self, msg, self._traced_callback(msg, now_ms(), callback) if awaited else callback,
                            timeout_ms, awaited)

    async def _send_to_queue_traced(self, msg: Message, mq: MessageQueue, timeout_ms: int | None = None) -> SendResult:
        begin = now_ms()
        r = await Producer.send_to_queue(self, msg, mq, timeout_ms)
        self._trace_pub(msg, r, begin)
        return r

    async def _send_batch_traced(self, msgs: Sequence[Message], timeout_ms: int | None = None) -> SendResult:
        begin, kept = now_ms(), list(msgs)
        r = await Producer.send_batch(self, kept, timeout_ms)
        self._trace_batch(kept, r, begin)
        return r

    async def _send_batch_async_traced(self, msgs: Sequence[Message],
                                       callback: Callable[[SendResult | None, BaseException | None], None]
                                       | None = None, timeout_ms: int | None = None) -> "asyncio.Future[SendResult]":
        begin, kept = now_ms(), list(msgs)

        def traced(r: SendResult | None, exc: BaseException | None) -> None:
            if r is not None:
                try:
                    self._trace_batch(kept, r, begin)
                except Exception:
                    log.exception("trace of batch %s failed", r.msg_id)
            if callback is not None:
                callback(r, exc)
        return await Producer.send_batch_async(self, kept, traced, timeout_ms)

    # ------------------------------------------------------------ request-reply

    async def request(self, msg: Message, timeout_ms: int | None = None, *, mq: MessageQueue | None = None,
                      selector: MessageQueueSelector | None = None, arg: object = None) -> MessageExt:
        """Send ``msg`` as a request and wait for its reply (RocketMQ's ``request(msg, timeout)``).

        The message gets ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL``; a responder answers
        it with :func:`fastmq.create_reply_message`, and the broker pushes the reply back to this
        client. ``timeout_ms`` (default ``send_msg_timeout``) covers the send and the wait.

        ``mq``: send the request to this queue, one try (RocketMQ's ``request(msg, mq,
        timeout)``); ``selector``: to the queue ``selector(queues, msg, arg)`` picks, as
        :meth:`send_orderly` (``request(msg, selector, arg, timeout)``). Otherwise the queue is
        chosen and the send retried as :meth:`send_async` does.

        Raises:
            MessageValidationError: as :meth:`send`, before anything is sent; also both ``mq``
                and ``selector`` given, a queue of another topic, or a selector's pick that is
                not a queue of the topic.
            NoRouteError: as :meth:`send`, before anything is sent.
            RequestSendError: the send failed (its error chained); no reply will come.
            RequestTimeoutError: no reply in time; its ``sent`` says whether the broker had taken
                the request.
        """
        req = await self._start_request(msg, None, timeout_ms, True, mq, selector, arg)
        assert req.future is not None
        try:
            return await req.future
        except asyncio.CancelledError:
            self.instance.requests.cancel(req.correlation_id)
            raise

    async def request_async(self, msg: Message, callback: RequestCallback, timeout_ms: int | None = None, *,
                            mq: MessageQueue | None = None, selector: MessageQueueSelector | None = None,
                            arg: object = None) -> None:
        """Send ``msg`` as a request; ``callback(reply, error)`` runs once on the loop with one of
        three outcomes: the reply (a MessageExt) and None; None and a RequestSendError (the send
        failed); None and a RequestTimeoutError (no reply in time, ``sent`` says whether the
        broker had taken the request). Returns once the request is sent off. ``mq``,
        ``selector`` and ``arg``: the queue, as :meth:`request` says.

        Raises:
            MessageValidationError, NoRouteError: as :meth:`request`, before anything is sent.
        """
        await self._start_request(msg, callback, timeout_ms, False, mq, selector, arg)

    async def _start_request(self, msg: Message, callback: RequestCallback | None, timeout_ms: int | None,
                             want_future: bool, mq: MessageQueue | None = None,
                             selector: MessageQueueSelector | None = None, arg: object = None) -> PendingRequest:
        """prepareSendRequest and the asynchronous send of a request, its PendingRequest registered
        (and timed) in the instance's RequestTable first, so that no reply can come before it."""
        self._check_running()
        self._validate(msg)
        if mq is not None and selector is not None:
            raise MessageValidationError("a request goes to the queue given or to the selector's, not both")
        if mq is not None and mq.topic != msg.topic:
            raise MessageValidationError("message's topic not equal mq's topic")
        loop = asyncio.get_running_loop()
        begin = loop.time()
        timeout = self.send_msg_timeout if timeout_ms is None else int(timeout_ms)
        if timeout <= 0:
            raise MessageValidationError(f"the request timeout must be positive, not {timeout} ms")
        inst = self.instance
        cid = str(uuid.uuid4())
        props = msg.properties
        props[MessageConst.CORRELATION_ID] = cid
        props[MessageConst.REPLY_TO_CLIENT] = inst.client_id
        props[MessageConst.MESSAGE_TTL] = str(timeout)
        info = self._publish.get(msg.topic)
        if info is None or not info.ok:
            info = await self._publish_info(msg.topic)
        if selector is not None:
            mq = selector(info.queues, msg, arg)
            if mq not in info.queues:
                raise MessageValidationError(f"select message queue return {mq}, not a queue of the topic")
        if not inst.producer_heartbeats.issuperset(info.masters.values()):
            # the broker finds this client's connection by its heartbeat: before a first request
            # to a broker that has none yet, one now (4.9.8's prepareSendRequest sends it for a
            # topic without a route; a producer that sent plain messages to the topic earlier
            # may still be unknown to its brokers until the 30 s heartbeat)
            await inst.send_heartbeat_to_all_brokers()
        left = timeout - int((loop.time() - begin) * 1000)
        if left <= 0:
            raise RequestTimeoutError(f"send request message to <{msg.topic}> not sent: the route and heartbeat took "
                                      f"the whole timeout, {timeout} ms.", False)
        table = inst.requests
        req = PendingRequest(cid, msg.topic, timeout, loop.create_future() if want_future else None, callback)
        table.add(req, loop, left)
        if mq is not None:  # (sendKernelImpl to that queue: one try, as 4.9.8's)
            sending = asyncio.ensure_future(self.send_to_queue(msg, mq, left))
            sending.add_done_callback(functools.partial(_request_sent, table, cid))
            return req
        try:
            await self.send_async(msg, lambda _r, e: table.sent(cid, e), left)
        except Exception as exc:  # refused before it was sent (permits, a shut-down producer...)
            table.sent(cid, exc)
        return req

    def _batch_message(self, msgs: Sequence[Message]) -> tuple[Message, str]:
        """The SEND_BATCH_MESSAGE message of ``msgs`` (checked, numbered, encoded) and their UNIQ_KEYs."""
        if not msgs:
            raise MessageValidationError("the batch is empty")
        topic = msgs[0].topic
        self._validate(msgs[0])  # the topic checks, once: every message must share the topic
        try:
            encoded = encode_batch(msgs, topic, self.max_message_size, UNIQ_IDS)
        except ValueError as exc:
            raise MessageFormatError(str(exc)) from None
        if encoded is None:  # a message the compiled check passes over: the exact checks and errors
            body, msg_ids = self._batch_body_checked(msgs, topic)
        else:
            body, msg_ids = encoded
        if len(body) > self.max_message_size:
            raise MessageValidationError(f"the message body size over max value, MAX: {self.max_message_size}")
        return Message(topic, body, 0, {MessageConst.WAIT_STORE_MSG_OK: "true"}), msg_ids

    def _batch_body_checked(self, msgs: Sequence[Message], topic: str) -> tuple[bytes, str]:
        """A batch's body the long way: each message checked with its exact error, UNIQ_KEYs given."""
        delay_key = MessageConst.DELAY_TIME_LEVEL
        need_id = []
        for m in msgs:
            if m.topic != topic:
                raise MessageValidationError("The topic of the messages in one batch should be the same")
            if delay_key in m.properties and m.delay_time_level > 0:
                raise MessageValidationError("TimeDelayLevel is not supported for batching")
            self._validate(m)  # raises with the exact reason (or accepts a bytearray/memoryview)
            if _UNIQ_KEY not in m.properties:
                need_id.append(m)
        for m, uniq in zip(need_id, create_uniq_ids(len(need_id))):
            m.properties[_UNIQ_KEY] = uniq
        return encode_batch_body(msgs), ",".join(m.properties[_UNIQ_KEY] for m in msgs)



class _TracedSend:
    """A traced send's callback: its Pub fields to the dispatcher, then the caller's callback.
    One object per send in flight (a closure would be five for the cycle collector to count)."""

    __slots__ = ("dispatcher", "msg", "begin_ms", "callback")

    def __init__(self, dispatcher: TraceDispatcher, msg: Message, begin_ms: int,
                 callback: Callable[[SendResult | None, BaseException | None], None] | None) -> None:
        self.dispatcher, self.msg, self.begin_ms, self.callback = dispatcher, msg, begin_ms, callback

    def __call__(self, r: SendResult | None, exc: BaseException | None) -> None:
        if r is not None:  # (the record is made later, on the dispatcher's worker)
            self.dispatcher.append_pub(self.msg, r, self.begin_ms)
        if self.callback is not None:
            self.callback(r, exc)


def _request_sent(table: RequestTable, cid: str, sending: "asyncio.Future[SendResult]") -> None:
    """A request's send to a chosen queue is over: tell its PendingRequest how it went."""
    table.sent(cid, asyncio.CancelledError() if sending.cancelled() else sending.exception())


def _namesrv_text(addr: str | list[str] | None) -> str:
    return ";".join(addr) if isinstance(addr, list) else (addr or "")


def _retrieved(fut: "asyncio.Future[SendResult]") -> None:
    """A failure the send's callback was given counts as retrieved: asyncio must not log it as
    "never retrieved" when the caller, in the Java client's SendCallback style, keeps no future."""
    if not fut.cancelled():
        fut.exception()


def _release_then(permits: "Permits", callback: Callable[[SendResult | None, BaseException | None], None],
                  result: SendResult | None, error: BaseException | None) -> None:
    permits.release()
    callback(result, error)


def _with_ids(r: SendResult, msg_ids: str) -> SendResult:
    """A batch's result from the general path, its msg_id the messages' UNIQ_KEYs (as the Java client reports)."""
    return SendResult(r.status, msg_ids, r.offset_msg_id, r.message_queue, r.queue_offset, r.region_id, r.trace_on)
