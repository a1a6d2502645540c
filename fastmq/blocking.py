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

import functools
import threading
from typing import Any, Callable, Coroutine, Sequence, TypeVar

from . import _blocking, _driven
from .client import producer as _producer
from .client import push_consumer as _consumer
from .client import transaction_producer as _tx
from .errors import ClientStateError, RemotingTooMuchRequestError
from .protocol.message import Message, MessageExt
from .protocol.message_queue import MessageQueue

__all__ = ["Producer", "PushConsumer", "PullConsumer", "TransactionProducer"]

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
    the loop can go waits here instead of queueing calls without bound. A counter under one C
    lock: threading.BoundedSemaphore is Python code around a Condition, and its acquire and
    release stood out in send_async's profile; the Condition is used only while the window is full."""

    __slots__ = ("_free", "_lock", "_cond", "_waiting")

    def __init__(self, size: int) -> None:
        self._free = size
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0

    def acquire(self, timeout: float) -> bool:
        """Take a place, waiting at most ``timeout`` s for one (0: not at all)."""
        with self._lock:
            if self._free > 0:
                self._free -= 1
                return True
            if timeout <= 0:
                return False
            self._waiting += 1
            try:
                if not self._cond.wait_for(lambda: self._free > 0, timeout):
                    return False
            finally:
                self._waiting -= 1
            self._free -= 1
            return True

    def release(self, n: int = 1) -> None:
        """Give ``n`` places back."""
        with self._lock:
            self._free += n
            if self._waiting:
                self._cond.notify(n)


class Producer:
    """Blocking producer over the asyncio :class:`fastmq.aio.Producer`.

    Takes the same keyword arguments as :class:`fastmq.aio.Producer`. Each producer has its own
    event loop, run by the thread waiting in a call (so a ``send`` is written, answered and
    returned without crossing to another thread) and by a background thread while no call is
    (see :mod:`fastmq._driven`). Callbacks of ``send_async`` / ``send_batch_async`` run in order
    on the producer's callback thread, never inside a caller's own call.
    """

    def __init__(self, group: str = "DEFAULT_PRODUCER", **kwargs: Any) -> None:
        self._timeout = kwargs.get("send_msg_timeout", 3000) / 1000
        self._driven = _driven.DrivenLoop(f"fastmq-producer-{group}")
        try:
            self._core = self._driven.run(self._make(group, kwargs), 10)
        except BaseException:
            self._driven.close()
            raise
        self._window = _Window(kwargs.get("max_in_flight", 65535) or 65535)
        self._driven.callbacks.release = self._window.release

    @staticmethod
    async def _make(group: str, kwargs: dict[str, Any]) -> _producer.Producer:
        return _producer.Producer(group, **kwargs)  # built on the loop: it owns asyncio primitives

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        try:
            return self._driven.run(coro, timeout)
        except _driven.Closed:
            raise ClientStateError("The producer service state not OK, SHUTDOWN_ALREADY") from None

    def start(self) -> None:
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
        """Send and wait for the broker; see :meth:`fastmq.aio.Producer.send` for what it raises."""
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

        Returns once the send is handed to the loop. A stopped producer or a bad message raises
        here (ClientStateError, MessageValidationError); with ``max_in_flight`` sends not yet
        over, the call waits for one to end, and raises RemotingTooMuchRequestError if none
        does within the send's timeout (at once with ``wait=False``).
        """
        self._core.check_message(msg)
        window = self._window
        timeout = self._timeout if timeout_ms is None else timeout_ms / 1000
        if not wait:
            if not window.acquire(0):
                raise RemotingTooMuchRequestError("send_async invoke too fast")
        elif not window.acquire(timeout):
            raise RemotingTooMuchRequestError(f"send_async tryAcquire semaphore timeout, {int(timeout * 1000)}ms")
        # the callback thread is told, and the window's place given back with the batch's others
        # (callbacks.put_releasing): one locked release per hand-over rather than per send
        done = functools.partial(self._driven.callbacks.put_releasing, callback)
        try:
            self._driven.post(self._core.start_send, msg, done, timeout_ms, False)
        except BaseException as exc:
            window.release()
            if isinstance(exc, _driven.Closed):
                self._core.check_message(msg)
            raise

    def send_oneway(self, msg: Message) -> None:
        self._run(self._core.send_oneway(msg), self._t(None))

    def send_orderly(self, msg: Message, selector: _producer.MessageQueueSelector, arg: object,
                     timeout_ms: int | None = None) -> SendResult:
        """Send to the queue ``selector(queues, msg, arg)`` picks, and wait; the selector runs in
        the calling thread, inside this call."""
        return self._run(self._core.send_orderly(msg, selector, arg, timeout_ms), self._t(timeout_ms))

    def send_to_queue(self, msg: Message, mq: MessageQueue, timeout_ms: int | None = None) -> SendResult:
        return self._run(self._core.send_to_queue(msg, mq, timeout_ms), self._t(timeout_ms))

    def send_batch(self, msgs: Sequence[Message], timeout_ms: int | None = None) -> SendResult:
        return self._run(self._core.send_batch(msgs, timeout_ms), self._t(timeout_ms))

    def send_batch_async(self, msgs: Sequence[Message],
                         callback: Callable[[SendResult | None, BaseException | None], None],
                         timeout_ms: int | None = None) -> None:
        """Start a batch send; ``callback(result, error)`` runs on the producer's callback thread
        when it completes. A bad batch raises here (see :meth:`fastmq.aio.Producer.send_batch_async`)."""
        put = self._driven.callbacks.put
        self._run(self._core.send_batch_async(msgs, lambda r, e: put(callback, r, e), timeout_ms),
                  self._t(timeout_ms))


class TransactionProducer(Producer):
    """Blocking transactional producer over the asyncio :class:`fastmq.aio.TransactionProducer`
    (RocketMQ's TransactionMQProducer), with its arguments: ``listener=`` and those of
    :class:`Producer`. Sends ordinary messages too, as :class:`Producer` does.

    ``execute_local_transaction`` runs in the thread that called
    :meth:`send_message_in_transaction`, as in the Java client; plain-function checks run on the
    producer's check thread, coroutine ones (either method may be ``async def``) on its loop.
    """

    def __init__(self, group: str, **kwargs: Any) -> None:
        super().__init__(group, **kwargs)

    @staticmethod
    async def _make(group: str, kwargs: dict[str, Any]) -> _tx.TransactionProducer:
        return _tx.TransactionProducer(group, **kwargs)

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
    """Blocking-API push consumer: ``subscribe``, ``register_message_listener``, ``start``.

    The listener is a plain function ``listener(msgs) -> ConsumeStatus``; it runs on the consumer's
    thread pool. Takes the keyword arguments of :class:`fastmq.client.push_consumer.PushConsumer`.
    """

    def __init__(self, group: str, **kwargs: Any) -> None:
        self._core = _blocking.call(self._make(group, kwargs), 10)

    @staticmethod
    async def _make(group: str, kwargs: dict[str, Any]) -> _consumer.PushConsumer:
        return _consumer.PushConsumer(group, **kwargs)

    def subscribe(self, topic: str, expression: str = "*") -> None:
        _blocking.call(self._sync(self._core.subscribe, topic, expression), 10)

    def register_message_listener(self, listener: Callable[[list[MessageExt]], str]) -> None:
        self._core.register_message_listener(listener)

    @staticmethod
    async def _sync(fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def start(self) -> None:
        _blocking.call(self._core.start(), 60)

    def shutdown(self) -> None:
        _blocking.call(self._core.shutdown(), 60)

    def __enter__(self) -> "PushConsumer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class PullConsumer:
    """Blocking-API lite pull consumer: ``subscribe`` (or ``assign``), ``start``, then ``poll(timeout_s)``."""

    def __init__(self, group: str, **kwargs: Any) -> None:
        self._core = _blocking.call(self._make(group, kwargs), 10)

    @staticmethod
    async def _make(group: str, kwargs: dict[str, Any]) -> _consumer.PullConsumer:
        return _consumer.PullConsumer(group, **kwargs)

    def subscribe(self, topic: str, expression: str = "*") -> None:
        _blocking.call(PushConsumer._sync(self._core.subscribe, topic, expression), 10)

    def start(self) -> None:
        _blocking.call(self._core.start(), 60)

    def poll(self, timeout_s: float = 5.0) -> list[MessageExt]:
        return _blocking.call(self._core.poll(timeout_s), timeout_s + _GRACE)

    def commit(self) -> None:
        _blocking.call(PushConsumer._sync(self._core.commit), 10)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        _blocking.call(self._core.seek(mq, offset), 10)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, for :meth:`assign`."""
        return _blocking.call(self._core.fetch_message_queues(topic), 10)

    def assign(self, mqs: Sequence[MessageQueue]) -> None:
        """Consume exactly these queues, with no rebalance (instead of :meth:`subscribe`)."""
        _blocking.call(self._core.assign(mqs), 30)

    def shutdown(self) -> None:
        _blocking.call(self._core.shutdown(), 60)

    def __enter__(self) -> "PullConsumer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
