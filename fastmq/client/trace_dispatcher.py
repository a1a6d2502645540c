"""Message trace dispatch: RocketMQ 4.9.8's AsyncTraceDispatcher on asyncio.

Producers and consumers made with ``enable_trace=True`` hand each trace event (a
:class:`~fastmq.client.trace_data.TraceContext`) to their dispatcher with :meth:`append`, from
the loop or from a consume thread. ``append`` never waits: a full queue (1024 contexts, as
4.9.8's) drops the event and counts it in :attr:`discarded`, with a warning at most every 10 s.
A traced producer hands each answered send to :meth:`append_pub` instead: only its fields, kept
flat in :attr:`pub_rows` (the same bound), made into Pub records a batch at a time.
A task on the client's loop wakes every 100 ms, encodes what is queued and sends it as trace
messages from an inner producer of its own (group ``_INNER_TRACE_PRODUCER-<group>-<type>-<n>``,
instance ``PID_CLIENT_INNER_TRACE_PRODUCER_<namesrv>``), a message once its records reach
118 000 bytes or its first record is 500 ms old; sends are asynchronous (``send_async``, 5 s)
and a failed one is logged, not retried by the host. Each trace message's keys are the traced
messages' ids and keys, so a broker's index finds them by message id.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
from typing import Any, Callable, Protocol

from .._ext.produce import SendResult
from ..protocol.message import Message, MessageConst
from .trace_data import DEFAULT_TRACE_TOPIC, PUB_ROW, SentMessage, TraceContext, encode_context, encode_pub_rows, pub_row, trace_keys

__all__ = ["TraceDispatcher", "TraceProducer", "QUEUE_SIZE", "MAX_MSG_SIZE"]

log = logging.getLogger("fastmq.client")

#: traceContextQueue's capacity in 4.9.8
QUEUE_SIZE = 1024
#: the inner producer's maxMessageSize; a message is sent once its records pass this less 10 000
MAX_MSG_SIZE = 128_000
#: pollingTimeMil and waitTimeThresholdMil
POLL_S = 0.1
#: queued events that make the worker drain at once rather than at its next tick
WAKE_AT = QUEUE_SIZE // 4
WAIT_S = 0.5
# the same bounds for answered sends, kept flat (PUB_ROW fields each)
_ROWS_MAX = QUEUE_SIZE * PUB_ROW
_ROWS_WAKE = WAKE_AT * PUB_ROW
GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"
_WARN_INTERVAL_S = 10.0
_COUNTER = itertools.count(1)


class TraceProducer(Protocol):
    """What the dispatcher needs of its inner producer (a :class:`fastmq.aio.Producer`)."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None]
                         | None = None, timeout_ms: int | None = None, *, wait: bool = True) -> Any: ...


class TraceDispatcher:
    """Queues trace events and sends them, batched, to the trace topic."""

    #: below this many fields in :attr:`pub_rows` one more row needs neither a drop nor a wake:
    #: the compiled fast path appends an answered send's row itself (else it calls append_pub)
    ROWS_QUIET = _ROWS_WAKE - PUB_ROW

    def __init__(self, group: str, kind: str, trace_topic: str | None,
                 make_producer: Callable[[str, str], TraceProducer]) -> None:
        """``kind``: PRODUCER or CONSUMER (in the inner group's name); ``make_producer(group,
        instance_name)`` makes the inner producer when the dispatcher starts."""
        self.trace_topic = trace_topic or DEFAULT_TRACE_TOPIC
        self.group = group
        self.kind = kind
        self._make = make_producer
        self._queue: collections.deque[TraceContext] = collections.deque()
        #: trace events dropped because the queue was full (4.9.8's discardCount)
        self.discarded = 0
        self._warned_at = -_WARN_INTERVAL_S
        self._producer: TraceProducer | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: list[tuple[str, list[str]]] = []  # encoded records, their keys
        self._pending_size = 0
        self._first_at = 0.0
        self._sends: set[Any] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        #: answered sends not yet encoded, flat (:func:`~fastmq.client.trace_data.pub_row`), and
        #: what names a broker's address for their records (the producer sets it)
        self.pub_rows: list[Any] = []
        self.store_host: Callable[[str], str | None] = lambda _broker: None

    # ------------------------------------------------------------ the host's side

    def append_pub(self, msg: SentMessage, r: SendResult, begin_ms: int) -> None:
        """An answered send (SendMessageTraceHookImpl.sendMessageAfter) of ``msg`` (a Message, or
        the compiled fast path's entry of an asynchronous send as it ends): its fields only, as
        strings and numbers; the record is made later, a batch at a time. Counted as dropped
        beyond the queue's bound, as :meth:`append`."""
        rows = self.pub_rows
        n = len(rows)
        if n >= _ROWS_MAX:
            self._discard()
            return
        pub_row(rows, msg, r, begin_ms)
        if n < _ROWS_WAKE <= len(rows) and self._loop is not None:
            self._wake()

    def append(self, ctx: TraceContext) -> bool:
        """Queue an event; False (and counted) when the queue is full. Safe from any thread."""
        if len(self._queue) >= QUEUE_SIZE:  # (read across threads: at worst one over)
            self._discard()
            return False
        self._queue.append(ctx)
        if len(self._queue) == WAKE_AT and self._loop is not None:
            self._wake()
        return True

    def _discard(self) -> None:
        self.discarded += 1
        now = time.monotonic()
        if now - self._warned_at >= _WARN_INTERVAL_S:
            self._warned_at = now
            log.warning("trace queue of %s full: %d trace events dropped so far", self.group, self.discarded)

    def _wake(self) -> None:
        # a burst: drain now rather than at the next tick, or the queue fills within the
        # 100 ms (4.9.8's worker takes each event as it comes)
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._drain_now)
        except RuntimeError:  # the loop is closed: the shutdown drains what is left
            pass

    def _drain_now(self) -> None:
        try:
            self._drain(flush=False)
        except Exception:
            log.exception("trace dispatch failed")

    def skips(self, topic: str) -> bool:
        """Sends to the trace topic itself are not traced."""
        return topic.startswith(self.trace_topic)

    async def start(self, namesrv_addr: str) -> None:
        if self._task is not None:
            return
        group = f"{GROUP_NAME_PREFIX}-{self.group}-{self.kind}-{next(_COUNTER)}"
        self._producer = self._make(group, f"{TRACE_INSTANCE_NAME}_{namesrv_addr}")
        await self._producer.start()
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.ensure_future(self._run())

    async def shutdown(self) -> None:
        """Send what is queued (waiting at most about a second), then stop."""
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        self._drain(flush=True)
        if self._sends:
            await asyncio.wait([asyncio.ensure_future(s) for s in list(self._sends)], timeout=1.0)
        assert self._producer is not None
        await self._producer.shutdown()

    async def flush(self) -> None:
        """Send what is queued now (tests, and before a shutdown)."""
        self._drain(flush=True)
        if self._sends:
            await asyncio.wait([asyncio.ensure_future(s) for s in list(self._sends)], timeout=5.0)

    # ------------------------------------------------------------ the worker

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            try:
                self._drain(flush=False)
            except Exception:  # a trace must never stop its host
                log.exception("trace dispatch failed")

    def _drain(self, flush: bool) -> None:
        if self.pub_rows:
            rows, self.pub_rows = self.pub_rows, []
            try:
                for data, keys in encode_pub_rows(rows, self.trace_topic, self.group, self.store_host):
                    self._add(data, keys)
            except Exception:  # a bad row, not the dispatcher
                log.exception("trace events not encoded")
        q = self._queue
        while q:
            ctx = q.popleft()
            if ctx.beans:
                self._add(encode_context(ctx), trace_keys(ctx))
        if self._pending and (flush or time.monotonic() - self._first_at >= WAIT_S):
            self._send_pending()

    def _add(self, data: str, keys: list[str]) -> None:
        if not self._pending:
            self._first_at = time.monotonic()
        self._pending.append((data, keys))
        self._pending_size += len(data)
        if self._pending_size >= MAX_MSG_SIZE - 10_000:
            self._send_pending()

    def _send_pending(self) -> None:
        pending, self._pending, self._pending_size = self._pending, [], 0
        keys: dict[str, None] = {}
        for _, ks in pending:
            keys.update(dict.fromkeys(ks))
        body = "".join(d for d, _ in pending)
        msg = Message(self.trace_topic, body.encode("utf-8"),
                      properties={MessageConst.KEYS: MessageConst.KEY_SEPARATOR.join(keys)})
        assert self._producer is not None
        fut = asyncio.ensure_future(self._send(msg, body))
        self._sends.add(fut)
        fut.add_done_callback(self._sends.discard)

    async def _send(self, msg: Message, body: str) -> None:
        assert self._producer is not None

        def done(_r: SendResult | None, exc: BaseException | None) -> None:
            if exc is not None:
                log.error("send trace data failed, the traceData is %r: %s", body[:500], exc)
        try:
            sent = await self._producer.send_async(msg, done, 5000)
        except Exception as exc:  # refused before it was sent
            log.error("send trace data failed, the traceData is %r: %s", body[:500], exc)
            return
        try:
            await sent
        except Exception:
            pass  # (told to ``done`` above)
