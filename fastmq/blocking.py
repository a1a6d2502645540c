"""The blocking API: each class runs its asyncio core (:mod:`fastmq.aio`) on a background loop.

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
from typing import Any, Callable, Sequence

from . import _blocking
from .client import producer as _producer
from .client import push_consumer as _consumer
from .errors import RemotingTooMuchRequestError
from .protocol.message import Message, MessageExt
from .protocol.message_queue import MessageQueue

__all__ = ["Producer", "PushConsumer", "PullConsumer"]

SendResult = _producer.SendResult
ConsumeStatus = _consumer.ConsumeStatus
SendStatus = _producer.SendStatus
hash_selector = _producer.hash_selector
split_batch = _producer.split_batch
_GRACE = 5.0  # on top of a call's own timeout: the core enforces the timeout, this only bounds a hang


class Producer:
    """Blocking producer; every method runs the asyncio :class:`fastmq.aio.Producer` on a background loop.

    Takes the same keyword arguments as :class:`fastmq.aio.Producer`.
    """

    def __init__(self, group: str = "DEFAULT_PRODUCER", **kwargs: Any) -> None:
        self._timeout = kwargs.get("send_msg_timeout", 3000) / 1000
        self._core = _blocking.call(self._make(group, kwargs), 10)
        # sends handed to the loop and not yet over: a thread sending faster than the loop can
        # go waits here instead of queueing calls on the loop without bound
        self._window = threading.BoundedSemaphore(kwargs.get("max_in_flight", 65535) or 65535)

    @staticmethod
    async def _make(group: str, kwargs: dict[str, Any]) -> _producer.Producer:
        return _producer.Producer(group, **kwargs)  # built on the loop: it owns asyncio primitives

    def start(self) -> None:
        _blocking.call(self._core.start(), 30)

    def shutdown(self) -> None:
        _blocking.call(self._core.shutdown(), 30)

    def __enter__(self) -> "Producer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _t(self, timeout_ms: int | None) -> float:
        return (timeout_ms / 1000 if timeout_ms is not None else self._timeout) + _GRACE

    def send(self, msg: Message, timeout_ms: int | None = None) -> SendResult:
        """Send and wait for the broker; see :meth:`fastmq.aio.Producer.send` for what it raises."""
        outcome: _blocking.Outcome[SendResult] = _blocking.Outcome()
        _blocking.submit(self._core.start_send, msg, outcome, timeout_ms)
        return outcome.wait(self._t(timeout_ms))

    def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None],
                   timeout_ms: int | None = None, *, wait: bool = True) -> None:
        """Start a send; ``callback(result, error)`` runs on fastmq's loop thread when it completes.

        Returns once the send is handed to the loop. A stopped producer or a bad message raises
        here (ClientStateError, MessageValidationError); with ``max_in_flight`` sends not yet
        over, the call waits for one to end, and raises RemotingTooMuchRequestError if none
        does within the send's timeout (at once with ``wait=False``).
        """
        self._core.check_message(msg)
        timeout = self._t(timeout_ms) - _GRACE
        if not wait:
            if not self._window.acquire(blocking=False):
                raise RemotingTooMuchRequestError("send_async invoke too fast")
        elif not self._window.acquire(timeout=timeout):
            raise RemotingTooMuchRequestError(f"send_async tryAcquire semaphore timeout, {int(timeout * 1000)}ms")
        window = self._window

        def done(result: SendResult | None, error: BaseException | None) -> None:
            window.release()
            callback(result, error)
        try:
            _blocking.submit(self._core.start_send, msg, done, timeout_ms, False)
        except BaseException:
            window.release()
            raise

    def send_oneway(self, msg: Message) -> None:
        _blocking.call(self._core.send_oneway(msg), self._t(None))

    def send_orderly(self, msg: Message, selector: _producer.MessageQueueSelector, arg: object,
                     timeout_ms: int | None = None) -> SendResult:
        return _blocking.call(self._core.send_orderly(msg, selector, arg, timeout_ms), self._t(timeout_ms))

    def send_to_queue(self, msg: Message, mq: MessageQueue, timeout_ms: int | None = None) -> SendResult:
        return _blocking.call(self._core.send_to_queue(msg, mq, timeout_ms), self._t(timeout_ms))

    def send_batch(self, msgs: Sequence[Message], timeout_ms: int | None = None) -> SendResult:
        return _blocking.call(self._core.send_batch(msgs, timeout_ms), self._t(timeout_ms))

    def send_batch_async(self, msgs: Sequence[Message],
                         callback: Callable[[SendResult | None, BaseException | None], None],
                         timeout_ms: int | None = None) -> None:
        """Start a batch send; ``callback(result, error)`` runs on fastmq's loop thread when it
        completes. A bad batch raises here (see :meth:`fastmq.aio.Producer.send_batch_async`)."""
        _blocking.call(self._core.send_batch_async(msgs, callback, timeout_ms), self._t(timeout_ms))


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
