"""The blocking API: each class runs its asyncio core (:mod:`fastmq.aio`) on an event loop of its
own (a Producer, :mod:`fastmq._driven`) or on the process's background loop (the consumers).

Import these from :mod:`fastmq`, which loads this module (and with it the client) on first use::

    from fastmq import Producer, Message

    producer = Producer("my_group", namesrv_addr="127.0.0.1:9876")
    producer.start()
    try:
        result = producer.send(Message("TopicTest", b"hello", properties={"TAGS": "tagA"}))
        print(result.msg_id, result.message_queue, result.queue_offset)
    finally:
        producer.shutdown()
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Coroutine, Sequence, TypeVar

from . import _blocking, _driven
from ._ext.produce import SendWindow
from .client import admin as _admin
from .client import producer as _producer
from .client import push_consumer as _consumer
from .client import trace_query as _trace_query
from .client import transaction_producer as _tx
from .client.allocate import AllocateStrategy
from .client.instance import ClientConfig, ClientInstance
from .client.message_selector import MessageSelector
from .client.rebalance import REBALANCE_INTERVAL_S
from .errors import ClientStateError, RemotingTooMuchRequestError
from .protocol.message import Message, MessageExt
from .protocol.message_queue import MessageQueue

__all__ = ["Producer", "PushConsumer", "PullConsumer", "TransactionProducer", "Admin"]

T = TypeVar("T")

SendResult = _producer.SendResult
ConsumeStatus = _consumer.ConsumeStatus
SendStatus = _producer.SendStatus
hash_selector = _producer.hash_selector
split_batch = _producer.split_batch
_GRACE = 5.0  # on top of a call's own timeout: the core enforces the timeout, this only bounds a hang
# a coroutine execute_local_transaction has no timeout in RocketMQ; the loop's call needs a bound
_LOCAL_TRANSACTION_BOUND = 86400.0


class _Window:
    """Sends handed to the loop and not yet over, at most ``size``: a thread sending faster than
    the loop can go waits here instead of queueing calls without bound. The places are counted by
    the loop's compiled :class:`~fastmq._ext.produce.SendWindow` (taken with the send's callback
    hand-back in one C call, given back a batch at a time); this is the waiting for one when
    none is free, under a Condition used only then."""

    __slots__ = ("_w", "_lock", "_cond", "_waiting")

    def __init__(self, w: SendWindow, size: int) -> None:
        w.open(size)
        self._w = w
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0

    @property
    def _free(self) -> int:
        return self._w.free

    def acquire(self, timeout: float) -> bool:
        """Take a place, waiting at most ``timeout`` s for one (0: not at all)."""
        w = self._w
        if w.try_take():
            return True
        if timeout <= 0:
            return False
        with self._lock:
            # (counted before the wait's first look: a release that finds nobody counted gave
            # its places back before that look, which then takes one)
            self._waiting += 1
            try:
                return self._cond.wait_for(w.try_take, timeout)
            finally:
                self._waiting -= 1

    def busy(self) -> bool:
        """Places are out: sends handed to the loop whose callbacks it has not yet passed on."""
        return self._w.busy()

    def release(self, n: int = 1) -> None:
        """Give ``n`` places back."""
        self._w.give(n)
        if self._waiting:
            with self._lock:
                self._cond.notify(n)


class Producer:
    """Blocking producer (RocketMQ's DefaultMQProducer) over the asyncio :class:`fastmq.aio.Producer`.

    Each producer has its own event loop, run by the thread waiting in a call (so a ``send`` is
    written, answered and returned without crossing to another thread) and by a background thread
    while no call is (see :mod:`fastmq._driven`). Callbacks of ``send_async`` / ``send_batch_async``
    run in order on the producer's callback thread, never inside a caller's own call. The keyword
    arguments are :class:`fastmq.aio.Producer`'s, with its defaults.

    Args:
        group: the producer group (RocketMQ's producerGroup).
        namesrv_addr: NameServer address(es), ``"host:port"``, ``"a:9876;b:9876"`` or a list;
            ignored when ``client_config`` is given (set it there).
        send_msg_timeout: ms a ``send`` may take, its retries included, unless the call says.
        retry_times_when_send_failed: retries of a ``send`` (and a batch) after its first try.
        retry_times_when_send_async_failed: the same for ``send_async`` / ``send_batch_async``.
        retry_another_broker_when_not_store_ok: retry an answer other than SEND_OK (a flush or
            slave timeout) on another broker.
        compress_msg_body_over_howmuch: bodies of this many bytes or more are zlib-compressed.
        max_message_size: the largest body (or encoded batch) a send takes, in bytes.
        send_latency_fault_enable: keep away from brokers in their latency penalty.
        default_topic_queue_nums: queues of a topic the broker creates on its first send.
        max_in_flight: sends started and not yet over, at most (0: no bound in the core; this
            producer's window still holds 65535).
        instance: a client instance to share with other producers and consumers.
        client_config: the ClientConfig (NameServer, instance name, credentials, RPC hooks...).
        enable_trace: record a ``Pub`` trace of every answered send in the trace topic (docs/trace.md).
        trace_topic: the trace topic (default ``RMQ_SYS_TRACE_TOPIC``).

    Raises:
        MessageValidationError: a blank or invalid group name.
        ConfigError: a setting that does not convert (a number out of its range).
    """

    def __init__(self, group: str = "DEFAULT_PRODUCER", *, namesrv_addr: str | list[str] | None = None,
                 send_msg_timeout: int = 3000, retry_times_when_send_failed: int = 2,
                 retry_times_when_send_async_failed: int = 2, retry_another_broker_when_not_store_ok: bool = False,
                 compress_msg_body_over_howmuch: int = 4096, max_message_size: int = 4 * 1024 * 1024,
                 send_latency_fault_enable: bool = False, default_topic_queue_nums: int = 4,
                 max_in_flight: int = 65535, instance: ClientInstance | None = None,
                 client_config: ClientConfig | None = None, enable_trace: bool = False,
                 trace_topic: str | None = None) -> None:
        # every option passed on by name: the core holds the rules (and raises for a bad value)
        options: dict[str, Any] = dict(
            namesrv_addr=namesrv_addr, send_msg_timeout=send_msg_timeout,
            retry_times_when_send_failed=retry_times_when_send_failed,
            retry_times_when_send_async_failed=retry_times_when_send_async_failed,
            retry_another_broker_when_not_store_ok=retry_another_broker_when_not_store_ok,
            compress_msg_body_over_howmuch=compress_msg_body_over_howmuch, max_message_size=max_message_size,
            send_latency_fault_enable=send_latency_fault_enable, default_topic_queue_nums=default_topic_queue_nums,
            max_in_flight=max_in_flight, instance=instance, client_config=client_config,
            enable_trace=enable_trace, trace_topic=trace_topic)
        self._timeout = send_msg_timeout / 1000
        self._driven = _driven.DrivenLoop(f"fastmq-producer-{group}")
        try:
            self._core = self._driven.run(self._make(group, options), 10)
        except BaseException:
            self._driven.close()
            raise
        callbacks = self._driven.callbacks
        self._window = _Window(callbacks.window, max_in_flight or 65535)
        callbacks.release = self._window.release
        self._driven.awaiting = callbacks.window.busy
        # bound once: send_async hands these to the loop per send (a bound method made per call
        # is an allocation and attribute walk per send)
        self._start_sends = self._core.start_sends  # (one object: post_batched batches by identity)
        self._passes = self._core.passes
        self._take = callbacks.window.take
        self._handback = callbacks.window.handback

    @staticmethod
    async def _make(group: str, kwargs: dict[str, Any]) -> _producer.Producer:
        return _producer.Producer(group, **kwargs)  # built on the loop: it owns asyncio primitives

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        try:
            return self._driven.run(coro, timeout)
        except _driven.Closed:
            raise ClientStateError("The producer service state not OK, SHUTDOWN_ALREADY") from None

    def start(self) -> None:
        """Connect to the NameServer and start the producer's timers (routes, heartbeats).

        Raises:
            ClientStateError: the producer was shut down (a producer starts once).
        """
        if self._driven.closed:
            raise ClientStateError("The producer service state not OK, maybe started once, SHUTDOWN_ALREADY")
        self._run(self._core.start(), 30)

    def shutdown(self) -> None:
        """Stop the producer: sends still in flight end with an error (their callbacks run before
        this returns), and the producer's threads end."""
        if self._driven.closed:
            return
        try:
            self._run(self._core.shutdown(), 30)
        finally:
            self._driven.close()

    def __enter__(self) -> "Producer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _t(self, timeout_ms: int | None) -> float:
        return (timeout_ms / 1000 if timeout_ms is not None else self._timeout) + _GRACE

    def send(self, msg: Message, timeout_ms: int | None = None) -> SendResult:
        """Send and wait for the broker's answer, retried per ``retry_times_when_send_failed``.

        Args:
            msg: the message; it gets a UNIQ_KEY (its ``msg_id``) if it has none.
            timeout_ms: for this call instead of ``send_msg_timeout``, retries included.

        Raises:
            ClientStateError: the producer is not started, or shut down.
            MessageValidationError: a bad topic or body.
            NoRouteError: no NameServer knows the topic (and the broker would not create it).
            BrokerError: a response code that is not retried.
            SendFailedError: every try failed ("Send [N] times, still failed ...").
        """
        core = self._core
        timeout = (self._timeout if timeout_ms is None else timeout_ms / 1000) + _GRACE  # (self._t, inline)
        try:
            return self._driven.call(lambda done: core.start_send(msg, done, timeout_ms), timeout)  # type: ignore[no-any-return]
        except _driven.Closed:
            core.check_message(msg)  # a producer shut down: its ClientStateError
            raise

    def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None],
                   timeout_ms: int | None = None, *, wait: bool = True) -> None:
        """Start a send; ``callback(result, error)`` runs on the producer's callback thread when
        it completes (callbacks run one at a time, in the order the sends ended).

        Returns once the send is handed to the loop, retried per
        ``retry_times_when_send_async_failed``; what fails later is the callback's ``error``.

        Args:
            msg: the message.
            callback: ``callback(result, error)``: a SendResult and None, or None and the error.
            timeout_ms: for this send instead of ``send_msg_timeout``.
            wait: with ``max_in_flight`` sends not yet over, wait for one to end (False: raise at once).

        Raises:
            ClientStateError: the producer is not started, or shut down.
            MessageValidationError: a bad topic or body.
            RemotingTooMuchRequestError: ``max_in_flight`` sends stayed in flight for the send's
                timeout (at once with ``wait=False``).
        """
        if not self._passes(msg):  # (a C call: check_message's Python call only when it must judge)
            self._core.check_message(msg)
        # a place of the window and the hand-back that tells the callback thread (the place goes
        # back with the batch the callback is handed over in): one C call
        done = self._take(callback)
        if done is None:  # no place free: wait for one
            window = self._window
            timeout = self._timeout if timeout_ms is None else timeout_ms / 1000
            if not wait:
                if not window.acquire(0):
                    raise RemotingTooMuchRequestError("send_async invoke too fast")
            elif not window.acquire(timeout):
                raise RemotingTooMuchRequestError(f"send_async tryAcquire semaphore timeout, {int(timeout * 1000)}ms")
            done = self._handback(callback)
        try:
            # a batch per turn: the loop starts the sends gathered since its last turn in one call
            self._driven.post_batched(self._start_sends, (msg, done, timeout_ms))
        except BaseException as exc:
            self._window.release()
            if isinstance(exc, _driven.Closed):
                self._core.check_message(msg)
            raise

    def send_oneway(self, msg: Message) -> None:
        """Send without waiting for any answer (one try, no result).

        Raises:
            ClientStateError: the producer is not started, or shut down.
            MessageValidationError: a bad topic or body.
            NoRouteError: no NameServer knows the topic.
        """
        self._run(self._core.send_oneway(msg), self._t(None))

    def send_orderly(self, msg: Message, selector: _producer.MessageQueueSelector, arg: object,
                     timeout_ms: int | None = None) -> SendResult:
        """Send to the queue ``selector(queues, msg, arg)`` picks, and wait (same ``arg``, same
        queue: RocketMQ's ordered messages). The selector runs inside this call.

        Args:
            msg: the message.
            selector: a :data:`fastmq.MessageQueueSelector`, e.g. :func:`fastmq.hash_selector`.
            arg: handed to the selector (an order id, say).
            timeout_ms: for this call instead of ``send_msg_timeout``.

        Raises:
            MessageValidationError: a bad message, or the selector returned no queue of the topic;
                and what :meth:`send` raises (the send is not retried on another queue).
        """
        return self._run(self._core.send_orderly(msg, selector, arg, timeout_ms), self._t(timeout_ms))

    def send_to_queue(self, msg: Message, mq: MessageQueue, timeout_ms: int | None = None) -> SendResult:
        """Send to ``mq`` exactly, and wait (no retry on another queue).

        Raises:
            What :meth:`send` raises.
        """
        return self._run(self._core.send_to_queue(msg, mq, timeout_ms), self._t(timeout_ms))

    def send_batch(self, msgs: Sequence[Message], timeout_ms: int | None = None) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE, and wait; the result's ``msg_id``
        lists their UNIQ_KEYs. :func:`fastmq.split_batch` cuts a long list to size.

        Raises:
            MessageValidationError: an empty batch, mixed topics, a delay level, a bad message,
                or an encoded batch over ``max_message_size``; and what :meth:`send` raises.
        """
        return self._run(self._core.send_batch(msgs, timeout_ms), self._t(timeout_ms))

    def send_batch_async(self, msgs: Sequence[Message],
                         callback: Callable[[SendResult | None, BaseException | None], None],
                         timeout_ms: int | None = None) -> None:
        """Start a batch send; ``callback(result, error)`` runs on the producer's callback thread
        when it completes.

        Raises:
            ClientStateError: the producer is not started, or shut down.
            MessageValidationError: a bad batch, as :meth:`send_batch` says.
        """
        put = self._driven.callbacks.put
        self._run(self._core.send_batch_async(msgs, lambda r, e: put(callback, r, e), timeout_ms),
                  self._t(timeout_ms))

    def request(self, msg: Message, timeout_ms: int | None = None, *, mq: MessageQueue | None = None,
                selector: _producer.MessageQueueSelector | None = None, arg: object = None) -> MessageExt:
        """Send ``msg`` as a request and wait for its reply (RocketMQ's ``request(msg, timeout)``);
        a responder answers it with :func:`fastmq.create_reply_message`.

        Args:
            msg: the request; it gets ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL``.
            timeout_ms: the send and the wait for the reply together (default ``send_msg_timeout``).
            mq: send it to this queue, one try (``request(msg, mq, timeout)``).
            selector, arg: send it to the queue ``selector(queues, msg, arg)`` picks
                (``request(msg, selector, arg, timeout)``).

        Raises:
            ClientStateError: the producer is not started, or shut down.
            MessageValidationError, NoRouteError: as :meth:`send`, before anything is sent (also
                both ``mq`` and ``selector``, a queue of another topic, or a selector's pick that
                is not a queue of the topic).
            RequestSendError: the send failed (its error chained); no reply will come.
            RequestTimeoutError: no reply in time; its ``sent`` says whether the broker had taken
                the request.
        """
        return self._run(self._core.request(msg, timeout_ms, mq=mq, selector=selector, arg=arg), self._t(timeout_ms))

    def request_async(self, msg: Message, callback: Callable[[MessageExt | None, BaseException | None], None],
                      timeout_ms: int | None = None, *, mq: MessageQueue | None = None,
                      selector: _producer.MessageQueueSelector | None = None, arg: object = None) -> None:
        """Send ``msg`` as a request; ``callback(reply, error)`` runs once on the producer's
        callback thread with one of three outcomes: the reply and None; None and a
        RequestSendError (the send failed); None and a RequestTimeoutError (no reply in time,
        ``sent`` says whether the broker had taken the request). ``mq``, ``selector`` and ``arg``:
        the queue, as :meth:`request` says.

        Raises:
            ClientStateError: the producer is not started, or shut down.
            MessageValidationError, NoRouteError: as :meth:`request`, before anything is sent.
        """
        put = self._driven.callbacks.put
        self._run(self._core.request_async(msg, lambda r, e: put(callback, r, e), timeout_ms, mq=mq,
                                           selector=selector, arg=arg), self._t(timeout_ms))


class TransactionProducer(Producer):
    """Blocking transactional producer over the asyncio :class:`fastmq.aio.TransactionProducer`
    (RocketMQ's TransactionMQProducer), with its arguments: ``listener=`` and those of
    :class:`Producer`. Sends ordinary messages too, as :class:`Producer` does.

    ``execute_local_transaction`` runs in the thread that called
    :meth:`send_message_in_transaction`, as in the Java client; plain-function checks run on the
    producer's check thread, coroutine ones (either method may be ``async def``) on its loop.
    """

    def __init__(self, group: str, *, listener: _tx.TransactionListener | None = None,
                 check_thread_pool_max_size: int = 1, check_request_hold_max: int = 2000, **kwargs: Any) -> None:
        """A transactional producer of ``group``.

        Args:
            group: the producer group; the broker's checks find this producer by it.
            listener: runs and checks the local transactions (may be set later as ``listener``).
            check_thread_pool_max_size: threads running plain-function checks (4.9: 1).
            check_request_hold_max: checks waiting or running at once; more are dropped (4.9: 2000).
            kwargs: :class:`Producer`'s keyword arguments.

        Raises:
            MessageValidationError: a blank or invalid group name.
            ConfigError: a setting that does not convert, or a pool size or hold limit below 1.
        """
        self._tx_options: dict[str, Any] = dict(
            listener=listener, check_thread_pool_max_size=check_thread_pool_max_size,
            check_request_hold_max=check_request_hold_max)
        super().__init__(group, **kwargs)

    async def _make(self, group: str, kwargs: dict[str, Any]) -> _tx.TransactionProducer:  # type: ignore[override]
        # (an instance method, unlike Producer's: the core also takes the options kept above)
        return _tx.TransactionProducer(group, **self._tx_options, **kwargs)

    @property
    def _tx_core(self) -> _tx.TransactionProducer:
        core = self._core
        assert isinstance(core, _tx.TransactionProducer)
        return core

    @property
    def listener(self) -> _tx.TransactionListener | None:
        """The TransactionListener; may be set before the first transactional send."""
        return self._tx_core.listener

    @listener.setter
    def listener(self, value: _tx.TransactionListener | None) -> None:
        self._tx_core.listener = value

    def send_message_in_transaction(self, msg: Message, arg: Any = None,
                                    timeout_ms: int | None = None) -> _tx.TransactionSendResult:
        """Send ``msg``'s half, run the listener's ``execute_local_transaction(msg, arg)`` in
        this thread, then end the transaction with the state it returned.

        Args:
            msg: the message (it gets ``TRAN_MSG``, ``PGROUP`` and ``UNIQ_KEY``; loses a delay level).
            arg: passed to the listener.
            timeout_ms: for the half's send (default ``send_msg_timeout``).

        Returns:
            TransactionSendResult (see :meth:`fastmq.aio.TransactionProducer.send_message_in_transaction`).

        Raises:
            ClientError: no listener. MessageValidationError, NoRouteError, BrokerError,
                SendFailedError: the half was not sent; nothing was executed.
        """
        core = self._tx_core
        listener, sent = self._run(core.send_half(msg, timeout_ms), self._t(timeout_ms))
        outcome, error = _tx.decide_local(sent, listener, msg, arg)
        if isinstance(outcome, _tx.LocalTransactionState):
            state = outcome
        else:  # a coroutine listener: awaited on the producer's loop (a local transaction has no timeout)
            state, error = self._run(_tx.settle_local(outcome, msg), _LOCAL_TRANSACTION_BOUND)
        return self._run(core.finish_transaction(msg, sent, state, error), self._t(None))


class PushConsumer:
    """Blocking push consumer (RocketMQ's DefaultMQPushConsumer): ``subscribe``,
    ``register_message_listener``, ``start``.

    The listener is a plain function ``listener(msgs) -> ConsumeStatus``; it runs on the consumer's
    thread pool. The consumer's own work runs on the process's background event loop. The keyword
    arguments are :class:`fastmq.aio.PushConsumer`'s, with its defaults.

    Args:
        group: the consumer group.
        namesrv_addr: NameServer address(es); ignored when ``client_config`` is given.
        message_model: :class:`fastmq.MessageModel` (or its name): CLUSTERING shares the queues
            among the group, BROADCASTING gives every member every message.
        consume_from_where: :class:`fastmq.ConsumeFromWhere` (or its name): where a group new to
            a queue starts.
        consume_timestamp_ms: the start for CONSUME_FROM_TIMESTAMP (epoch ms; None: the queue's end).
        allocate: the rebalance strategy (default :class:`fastmq.AllocateMessageQueueAveragely`).
        pull_batch_size: messages a pull asks for (1..1024).
        pull_threshold_for_queue: unconsumed messages a queue may hold before its pulls pause.
        pull_threshold_size_for_queue: the same in bytes.
        rebalance_interval_s: seconds between two rebalances (and at once on a group change).
        instance: a client instance to share.
        client_config: the ClientConfig (NameServer, instance name, credentials, RPC hooks...).
        consume_thread_min: threads plain listeners run on.
        consume_thread_max: batches of an ``async def`` listener in progress at once.
        consume_message_batch_max_size: messages per listener call, at most.
        max_reconsume_times: RECONSUME_LATER deliveries before a message goes to the DLQ.
        enable_trace: record ``SubBefore``/``SubAfter`` traces of each listener call (docs/trace.md).
        trace_topic: the trace topic (default ``RMQ_SYS_TRACE_TOPIC``).
        orderly: one queue's messages in order, one batch at a time (MessageListenerOrderly).

    Raises:
        MessageValidationError: a blank or invalid group, or an unknown message model.
        ConfigError: a setting out of the range RocketMQ allows.
    """

    def __init__(self, group: str, *, namesrv_addr: str | list[str] | None = None,
                 message_model: str = "CLUSTERING", consume_from_where: str = "CONSUME_FROM_LAST_OFFSET",
                 consume_timestamp_ms: int | None = None, allocate: AllocateStrategy | None = None,
                 pull_batch_size: int = 32, pull_threshold_for_queue: int = 1000,
                 pull_threshold_size_for_queue: int = 100 * 1024 * 1024,
                 rebalance_interval_s: float = REBALANCE_INTERVAL_S, instance: ClientInstance | None = None,
                 client_config: ClientConfig | None = None, consume_thread_min: int = 20,
                 consume_thread_max: int = 20, consume_message_batch_max_size: int = 1,
                 max_reconsume_times: int = 16, orderly: bool = False, enable_trace: bool = False,
                 trace_topic: str | None = None) -> None:
        options: dict[str, Any] = dict(
            namesrv_addr=namesrv_addr, message_model=message_model, consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms, allocate=allocate, pull_batch_size=pull_batch_size,
            pull_threshold_for_queue=pull_threshold_for_queue,
            pull_threshold_size_for_queue=pull_threshold_size_for_queue, rebalance_interval_s=rebalance_interval_s,
            instance=instance, client_config=client_config, consume_thread_min=consume_thread_min,
            consume_thread_max=consume_thread_max, consume_message_batch_max_size=consume_message_batch_max_size,
            max_reconsume_times=max_reconsume_times, orderly=orderly, enable_trace=enable_trace,
            trace_topic=trace_topic)
        self._core = _blocking.call(self._make(group, options), 10)

    @staticmethod
    async def _make(group: str, kwargs: dict[str, Any]) -> _consumer.PushConsumer:
        return _consumer.PushConsumer(group, **kwargs)

    def subscribe(self, topic: str, expression: "str | MessageSelector" = "*") -> None:
        """Consume ``topic``'s messages whose tag the expression takes ("*", or "tagA || tagB"), or
        those a :class:`~fastmq.MessageSelector` takes (``MessageSelector.by_sql(...)``: a SQL92
        filter on properties, checked by the brokers at :meth:`start`).

        Raises:
            MessageValidationError: an invalid topic name, or an empty SQL92 expression.
        """
        _blocking.call(self._sync(self._core.subscribe, topic, expression), 10)

    def register_message_listener(self, listener: Callable[[list[MessageExt]], str]) -> None:
        """Set the listener: ``listener(msgs)`` returns ``ConsumeStatus.CONSUME_SUCCESS`` or
        ``RECONSUME_LATER`` (anything else counts as the latter, and is logged)."""
        self._core.register_message_listener(listener)

    @staticmethod
    async def _sync(fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def start(self) -> None:
        """Join the group, take a share of the queues and start pulling.

        Raises:
            ClientStateError: no subscription, or another consumer of the group is registered
                under this client id.
            FilterRefusedError: a broker refused a SQL92 subscription (CHECK_CLIENT_CONFIG).
        """
        _blocking.call(self._core.start(), 60)

    def shutdown(self) -> None:
        """Stop pulling, persist the offsets and leave the group."""
        _blocking.call(self._core.shutdown(), 60)

    def __enter__(self) -> "PushConsumer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class PullConsumer:
    """Blocking lite pull consumer (RocketMQ's DefaultLitePullConsumer): ``subscribe`` (or
    ``assign``), ``start``, then ``poll(timeout_s)``.

    Offsets commit when the next ``poll`` starts (``auto_commit``) or on ``commit()``. The keyword
    arguments are :class:`fastmq.aio.PullConsumer`'s, with its defaults.

    Args:
        group: the consumer group.
        auto_commit: commit what was polled when the next poll starts.
        namesrv_addr, message_model, consume_from_where, consume_timestamp_ms, allocate,
        pull_batch_size, pull_threshold_for_queue, pull_threshold_size_for_queue,
        rebalance_interval_s, instance, client_config, enable_trace, trace_topic: as
        :class:`PushConsumer` says (a poll's messages are traced as consumed).

    Raises:
        MessageValidationError: a blank or invalid group, or an unknown message model.
        ConfigError: a setting out of the range RocketMQ allows.
    """

    def __init__(self, group: str, *, auto_commit: bool = True, namesrv_addr: str | list[str] | None = None,
                 message_model: str = "CLUSTERING", consume_from_where: str = "CONSUME_FROM_LAST_OFFSET",
                 consume_timestamp_ms: int | None = None, allocate: AllocateStrategy | None = None,
                 pull_batch_size: int = 32, pull_threshold_for_queue: int = 1000,
                 pull_threshold_size_for_queue: int = 100 * 1024 * 1024,
                 rebalance_interval_s: float = REBALANCE_INTERVAL_S, instance: ClientInstance | None = None,
                 client_config: ClientConfig | None = None, enable_trace: bool = False,
                 trace_topic: str | None = None) -> None:
        options: dict[str, Any] = dict(
            auto_commit=auto_commit, namesrv_addr=namesrv_addr, message_model=message_model,
            consume_from_where=consume_from_where, consume_timestamp_ms=consume_timestamp_ms, allocate=allocate,
            pull_batch_size=pull_batch_size, pull_threshold_for_queue=pull_threshold_for_queue,
            pull_threshold_size_for_queue=pull_threshold_size_for_queue, rebalance_interval_s=rebalance_interval_s,
            instance=instance, client_config=client_config, enable_trace=enable_trace, trace_topic=trace_topic)
        self._core = _blocking.call(self._make(group, options), 10)

    @staticmethod
    async def _make(group: str, kwargs: dict[str, Any]) -> _consumer.PullConsumer:
        return _consumer.PullConsumer(group, **kwargs)

    def subscribe(self, topic: str, expression: "str | MessageSelector" = "*") -> None:
        """Consume ``topic``'s messages whose tag the expression takes ("*", or "tagA || tagB"), or
        those a :class:`~fastmq.MessageSelector` takes (``MessageSelector.by_sql(...)``: a SQL92
        filter on properties, checked by the brokers at :meth:`start`).

        Raises:
            ClientStateError: the consumer was given queues with :meth:`assign`.
            MessageValidationError: an invalid topic name, or an empty SQL92 expression.
        """
        _blocking.call(PushConsumer._sync(self._core.subscribe, topic, expression), 10)

    def start(self) -> None:
        """Join the group (or take the assigned queues) and start pulling.

        Raises:
            ClientStateError: neither a subscription nor assigned queues.
            FilterRefusedError: a broker refused a SQL92 subscription (CHECK_CLIENT_CONFIG).
        """
        _blocking.call(self._core.start(), 60)

    def poll(self, timeout_s: float = 5.0) -> list[MessageExt]:
        """The next batch of messages; empty when none came within ``timeout_s`` seconds.

        Raises:
            ClientStateError: the consumer is not started.
        """
        return _blocking.call(self._core.poll(timeout_s), timeout_s + _GRACE)

    def commit(self) -> None:
        """Mark everything polled so far as consumed (persisted with the next offset flush)."""
        _blocking.call(PushConsumer._sync(self._core.commit), 10)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from ``offset``.

        Raises:
            MessageValidationError: ``mq`` is not one of this consumer's queues.
        """
        _blocking.call(self._core.seek(mq, offset), 10)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, for :meth:`assign`.

        Raises:
            NoRouteError: no NameServer knows the topic.
        """
        return _blocking.call(self._core.fetch_message_queues(topic), 10)

    def assign(self, mqs: Sequence[MessageQueue]) -> None:
        """Consume exactly these queues, with no rebalance (instead of :meth:`subscribe`).

        Raises:
            ClientStateError: the consumer subscribed (the two are mutually exclusive).
            MessageValidationError: a queue's topic name is not valid.
        """
        _blocking.call(self._core.assign(mqs), 30)

    def shutdown(self) -> None:
        """Stop pulling, persist the offsets and leave the group."""
        _blocking.call(self._core.shutdown(), 60)

    def __enter__(self) -> "PullConsumer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def query_trace(msg_id: str, *, namesrv_addr: str | list[str] | None = None,
                client_config: ClientConfig | None = None, trace_topic: str | None = None,
                max_num: int = _trace_query.MAX_NUM, timeout_ms: int = 3000) -> list[_trace_query.TraceRecord]:
    """The trace of message ``msg_id``: its Pub, SubBefore, SubAfter and EndTransaction records,
    oldest first (:func:`fastmq.aio.query_trace`, on the background loop).

    Raises:
        NoRouteError: no NameServer knows the trace topic.
        FastMQError: a broker of the trace topic could not be asked.
    """
    # (the brokers are asked one after another, each within timeout_ms; the NameServer too)
    return _blocking.call(_trace_query.query_trace(msg_id, namesrv_addr=namesrv_addr, client_config=client_config,
                                                   trace_topic=trace_topic, max_num=max_num,
                                                   timeout_ms=timeout_ms), None)


class Admin:
    """Blocking admin (RocketMQ's DefaultMQAdminExt) over the asyncio :class:`fastmq.client.admin.Admin`:
    the same methods and arguments, each waiting for its answer; see that class for what each
    does and raises. Use ``with Admin("127.0.0.1:9876") as admin`` or call :meth:`close`."""

    def __init__(self, namesrv_addr: str | Sequence[str], *, timeout: float = 5.0, **options: Any) -> None:
        self._core = _admin.Admin(namesrv_addr, timeout=timeout, **options)
        # one call may make a request per broker: bounded by a generous multiple of one request's
        self._wait = timeout * 20

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return _blocking.call(coro, self._wait)

    def cluster_info(self) -> Any:
        return self._call(self._core.cluster_info())

    def topic_list(self) -> list[str]:
        return self._call(self._core.topic_list())

    def topic_route(self, topic: str) -> Any:
        return self._call(self._core.topic_route(topic))

    def topic_status(self, topic: str) -> list[_admin.QueueOffsets]:
        return self._call(self._core.topic_status(topic))

    def update_topic(self, topic: str, **kw: Any) -> list[str]:
        return self._call(self._core.update_topic(topic, **kw))

    def delete_topic(self, topic: str, cluster: str) -> list[str]:
        return self._call(self._core.delete_topic(topic, cluster))

    def update_sub_group(self, group: _admin.SubscriptionGroupConfig, **kw: Any) -> list[str]:
        return self._call(self._core.update_sub_group(group, **kw))

    def delete_sub_group(self, group: str, **kw: Any) -> list[str]:
        return self._call(self._core.delete_sub_group(group, **kw))

    def consumer_progress(self, group: str, topic: str | None = None) -> list[_admin.QueueProgress]:
        return self._call(self._core.consumer_progress(group, topic))

    def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int,
                             force: bool = True) -> list[tuple[MessageQueue, int]]:
        return self._call(self._core.reset_offset_by_time(group, topic, timestamp_ms, force))

    def consumer_groups(self) -> list[dict[str, Any]]:
        return self._call(self._core.consumer_groups())

    def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        return self._call(self._core.broker_runtime_info(broker_addr))

    def broker_config(self, broker_addr: str) -> dict[str, str]:
        return self._call(self._core.broker_config(broker_addr))

    def query_msg_trace(self, msg_id: str, trace_topic: str | None = None) -> list[Any]:
        return self._call(self._core.query_msg_trace(msg_id, trace_topic))

    def update_acl_config(self, access_key: str, secret_key: str, **kw: Any) -> list[str]:
        return self._call(self._core.update_acl_config(access_key, secret_key, **kw))

    def delete_acl_config(self, access_key: str, **kw: Any) -> list[str]:
        return self._call(self._core.delete_acl_config(access_key, **kw))

    def update_global_white_addrs(self, addresses: str, **kw: Any) -> list[str]:
        return self._call(self._core.update_global_white_addrs(addresses, **kw))

    def acl_config_versions(self, **kw: Any) -> list[dict[str, Any]]:
        return self._call(self._core.acl_config_versions(**kw))

    def master_addrs(self, **kw: Any) -> list[str]:
        return self._call(self._core.master_addrs(**kw))

    def consumer_connection(self, group: str) -> dict[str, Any]:
        return self._call(self._core.consumer_connection(group))

    def producer_connection(self, group: str, topic: str) -> list[dict[str, Any]]:
        return self._call(self._core.producer_connection(group, topic))

    def update_broker_config(self, key: str, value: str, **kw: Any) -> list[str]:
        return self._call(self._core.update_broker_config(key, value, **kw))

    def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        return self._call(self._core.wipe_write_perm(broker_name))

    def add_write_perm(self, broker_name: str) -> dict[str, int]:
        return self._call(self._core.add_write_perm(broker_name))

    def query_message_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt:
        return self._call(self._core.query_message_by_offset(topic, broker_name, queue_id, offset))

    def queue_messages(self, topic: str, broker_name: str, queue_id: int, offset: int,
                       count: int) -> list[MessageExt]:
        return self._call(self._core.queue_messages(topic, broker_name, queue_id, offset, count))

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        return self._call(self._core.subscribe_queues(topic))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._call(self._core.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._call(self._core.max_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._call(self._core.search_offset(mq, timestamp_ms))

    def pull(self, mq: MessageQueue, offset: int, max_nums: int, **kw: Any) -> _admin.PullAnswer:
        return self._call(self._core.pull(mq, offset, max_nums, **kw))

    def messages_by_time(self, topic: str, begin_ms: int, end_ms: int, max_num: int = _admin.MESSAGES_BY_TIME_MAX
                         ) -> list[MessageExt]:
        return self._call(self._core.messages_by_time(topic, begin_ms, end_ms, max_num))

    def namesrv_config(self, namesrv_addrs: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        return self._call(self._core.namesrv_config(namesrv_addrs))

    def update_namesrv_config(self, props: dict[str, str], namesrv_addrs: Sequence[str] | None = None) -> list[str]:
        return self._call(self._core.update_namesrv_config(props, namesrv_addrs))

    def put_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        return self._call(self._core.put_kv_config(namespace, key, value))

    def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        return self._call(self._core.delete_kv_config(namespace, key))

    def kv_config(self, namespace: str, key: str) -> str | None:
        return self._call(self._core.kv_config(namespace, key))

    def dlq_messages(self, group: str, max_num: int = 32) -> list[MessageExt]:
        return self._call(self._core.dlq_messages(group, max_num))

    def send_message(self, msg: Message, **kw: Any) -> Any:
        return self._call(self._core.send_message(msg, **kw))

    def consume_message_directly(self, msg_id: str, group: str, client_id: str) -> dict[str, Any]:
        return self._call(self._core.consume_message_directly(msg_id, group, client_id))

    def view_message(self, msg_id: str) -> MessageExt:
        return self._call(self._core.view_message(msg_id))

    def query_message_by_key(self, topic: str, key: str, **kw: Any) -> list[MessageExt]:
        return self._call(self._core.query_message_by_key(topic, key, **kw))

    def close(self) -> None:
        self._call(self._core.close())

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
