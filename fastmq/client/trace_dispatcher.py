"""Message trace dispatch: RocketMQ 4.9.8's AsyncTraceDispatcher on asyncio.

Producers and consumers made with ``enable_trace=True`` hand each trace event (a
:class:`~fastmq.client.trace_data.TraceContext`) to their dispatcher with :meth:`append`, from
the loop or from a consume thread. ``append`` never waits: a full queue (1024 contexts, as
4.9.8's) drops the event and counts it in :attr:`discarded`, with a warning at most every 10 s.
A traced producer hands each answered send to :meth:`append_pub` instead: only its fields, kept
flat in :attr:`pub_rows` (the same bound), made into Pub records a batch at a time.
A task on the client's loop wakes every 100 ms and hands what is queued, a batch at a time, to
the dispatcher's thread (``fastmq-trace-<group>``; at most 16 batches wait for it, beyond which a
batch is dropped and counted as above). The thread encodes the records and makes trace messages
of them, a message once its records reach 118 000 bytes or its first record is 500 ms old, its
body zlib-compressed at level 5 from 4096 bytes (as 4.9.8's trace producer sends it; the
compression releases the GIL, so it runs beside the loop), and hands each finished body back to
the loop, where an inner producer of its own (group ``_INNER_TRACE_PRODUCER-<group>-<type>-<n>``,
instance ``PID_CLIENT_INNER_TRACE_PRODUCER_<namesrv>``) sends it as it is; sends are asynchronous
(``send_async``, 5 s) and a failed one is logged, not retried by the host. Each trace message's
keys are the traced messages' ids and keys, so a broker's index finds them by message id.
:meth:`TraceDispatcher.flush` and the shutdown send everything handed to the thread.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import queue
import threading
import time
import zlib
from typing import Any, Callable, Protocol

from .._ext.produce import SendResult
from ..protocol.message import Message, MessageConst
from .api import CompressedBody
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
#: batches waiting for the dispatcher's thread; one more is dropped (and its events counted)
JOBS_MAX = 16
#: a trace message's body of this many bytes or more is compressed (the inner producer's default
#: compressMsgBodyOverHowmuch), at tryToCompressMessage's level
COMPRESS_OVER = 4096
COMPRESS_LEVEL = 5
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
        # the thread's side: batches handed to it; its records not yet sent, their size, the age
        # of the first (only the thread touches these three)
        self._jobs: queue.Queue[_Job | None] = queue.Queue(JOBS_MAX)
        self._thread: threading.Thread | None = None
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

    def _discard(self, n: int = 1) -> None:
        self.discarded += n
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
        self._thread = threading.Thread(target=self._work, name=f"fastmq-trace-{self.group}", daemon=True)
        self._thread.start()
        self._task = asyncio.ensure_future(self._run())

    async def shutdown(self) -> None:
        """Send what is queued and what the thread holds (waiting at most about a second for the
        sends), then stop the thread and the inner producer."""
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        await self._flush(1.0)
        assert self._thread is not None
        try:
            self._jobs.put(None, True, 1.0)  # (the thread holds nothing now: it ends at once)
        except queue.Full:
            pass
        self._thread.join(1.0)
        self._thread = None
        assert self._producer is not None
        await self._producer.shutdown()

    async def flush(self) -> None:
        """Send what is queued and what the thread holds now (tests, and before a shutdown)."""
        await self._flush(5.0)

    async def _flush(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def finished() -> None:  # (on the loop, after the bodies the thread handed back before it)
            if not done.done():
                done.set_result(None)
        self._drain(flush=True, done=lambda: loop.call_soon_threadsafe(finished))
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout)
        except asyncio.TimeoutError:
            log.warning("trace dispatcher of %s: its thread did not finish within %.1f s", self.group, timeout)
        if self._sends:
            await asyncio.wait([asyncio.ensure_future(s) for s in list(self._sends)], timeout=timeout)

    # ------------------------------------------------------------ the worker

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            try:
                self._drain(flush=False)
            except Exception:  # a trace must never stop its host
                log.exception("trace dispatch failed")

    def _drain(self, flush: bool, done: Callable[[], Any] | None = None) -> None:
        """Hand what is queued to the thread (``done``: to call on the thread once it has sent
        everything it holds, after it; ``flush``: hand even nothing, so that it does)."""
        rows: list[Any] = []
        ctxs: list[TraceContext] = []
        if self.pub_rows:
            rows, self.pub_rows = self.pub_rows, []
        q = self._queue
        while q:
            ctxs.append(q.popleft())
        if not (rows or ctxs or flush):
            return
        try:
            # (a flush, asked for by the host, may wait a moment for the thread to take it)
            self._jobs.put(_Job(rows, ctxs, done), done is not None, 1.0)
        except queue.Full:  # the thread is behind: drop the batch, not the host's time
            self._discard(len(rows) // PUB_ROW + len(ctxs))

    # ------------------------------------------------------------ the thread

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            wait = None if not self._pending else max(0.0, self._first_at + WAIT_S - time.monotonic())
            try:
                job = jobs.get(timeout=wait)
            except queue.Empty:  # the first record waited long enough
                self._pack_safely()
                continue
            if job is None:
                self._pack_safely()
                return
            try:
                self._encode(job)
            except Exception:  # a bad event, not the dispatcher: the thread goes on
                log.exception("trace events not encoded")
            if job.done is not None:
                try:
                    self._pack()
                    job.done()
                except RuntimeError:  # the loop is closed
                    pass

    def _encode(self, job: _Job) -> None:
        if job.rows:
            for data, keys in encode_pub_rows(job.rows, self.trace_topic, self.group, self.store_host):
                self._add(data, keys)
        for ctx in job.contexts:
            if ctx.beans:
                self._add(encode_context(ctx), trace_keys(ctx))

    def _add(self, data: str, keys: list[str]) -> None:
        if not self._pending:
            self._first_at = time.monotonic()
        self._pending.append((data, keys))
        self._pending_size += len(data)
        if self._pending_size >= MAX_MSG_SIZE - 10_000:
            self._pack()

    def _pack_safely(self) -> None:
        try:
            self._pack()
        except Exception:  # a trace must never stop its host
            log.exception("trace dispatch failed")

    def _pack(self) -> None:
        """A trace message of the records held, handed to the loop to send."""
        if not self._pending:
            return
        pending, self._pending, self._pending_size = self._pending, [], 0
        keys: dict[str, None] = {}
        for _, ks in pending:
            keys.update(dict.fromkeys(ks))
        text = "".join(d for d, _ in pending)
        data = text.encode("utf-8")
        body = CompressedBody(zlib.compress(data, COMPRESS_LEVEL)) if len(data) >= COMPRESS_OVER else data
        msg = Message(self.trace_topic, body, properties={MessageConst.KEYS: MessageConst.KEY_SEPARATOR.join(keys)})
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._send_soon, msg, text[:500])
        except RuntimeError:  # the loop is closed: nothing can send it any more
            log.error("send trace data failed, the traceData is %r: the client's loop is closed", text[:500])

    def _send_soon(self, msg: Message, text: str) -> None:
        fut = asyncio.ensure_future(self._send(msg, text))
        self._sends.add(fut)
        fut.add_done_callback(self._sends.discard)

    async def _send(self, msg: Message, body: str) -> None:
        """Sends ``msg`` (``body``: the start of its text, for the log)."""
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


class _Job:
    """A batch handed to the dispatcher's thread: Pub rows, trace events, what to call when sent."""

    __slots__ = ("rows", "contexts", "done")

    def __init__(self, rows: list[Any], contexts: list[TraceContext], done: Callable[[], Any] | None) -> None:
        self.rows = rows
        self.contexts = contexts
        self.done = done
