"""Message trace dispatch: RocketMQ 4.9.8's AsyncTraceDispatcher on asyncio.

Producers and consumers made with ``enable_trace=True`` hand each trace event (a
:class:`~fastmq.client.trace_data.TraceContext`) to their dispatcher with :meth:`append`, from
the loop or from a consume thread, which encodes it there. ``append`` never waits: a full queue
(1024 events, as 4.9.8's) drops the event and counts it in :attr:`discarded`, with a warning at
most every 10 s. A traced producer's answered sends are written straight into :attr:`pub_rows`
(a :class:`~fastmq._ext.trace_encode.PubRows`: each send's Pub record as UTF-8 text, no object
per send; the compiled send path writes it by a C call), with the same bound.

A task on the client's loop wakes every 100 ms (and at once when 256 records wait) and hands what
is held, a batch at a time, to the dispatcher's packer (a
:class:`~fastmq._ext.trace_encode.TracePacker`) on its own thread (``fastmq-trace-<group>``; at
most 16 batches wait for it, beyond which a batch is dropped and counted as above). The packer
cuts the records into trace messages, a message once its records reach 118 000 bytes, their keys
24 000 bytes (KEYS_FILL: beyond 4.9.8, whose broker refuses a trace message whose KEYS pass the
properties' limit) or its first record is 500 ms old, makes their KEYS (the traced messages' ids
and keys, each once, so that a broker's index finds them by message id), and zlib-compresses a
body from 4096 bytes (as 4.9.8's trace producer sends it, though at level 1, not 5: see
COMPRESS_LEVEL). The compiled packer's thread never takes the GIL, so it does not stop the loop
(a Python thread's every return to the interpreter makes the loop's thread give the lock up).
It tells the loop through a pipe the loop watches; the loop takes the messages made and sends
each as it is through an inner producer of its own (group
``_INNER_TRACE_PRODUCER-<group>-<type>-<n>``, instance ``PID_CLIENT_INNER_TRACE_PRODUCER_<namesrv>``),
without a task (``start_send``, 5 s, the compressed body on its compiled first try); a failed send
is logged, not retried by the host. :meth:`TraceDispatcher.flush` and the shutdown send everything
handed over.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import threading
import time
from typing import Any, Callable, Protocol

from .._ext.produce import SendResult
from .._ext.trace_encode import PubRows, TracePacker
from ..protocol.message import CompressedBody, Message, MessageConst
from .trace_data import DEFAULT_TRACE_TOPIC, SentMessage, TraceContext, encode_context, pub_row, trace_keys

__all__ = ["TraceDispatcher", "TraceProducer", "QUEUE_SIZE", "MAX_MSG_SIZE", "KEYS_FILL", "KEYS_MAX"]

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
#: a trace message is sent once its records reach this many bytes
_FILL = MAX_MSG_SIZE - 10_000
#: ... or once its records' keys (before each is kept once) reach this many: a broker refuses a
#: message whose properties pass 32,767 bytes (4.9.8's PROPERTIES_SIZE_EXCEEDED), and records
#: whose messages have long KEYS would pass it long before _FILL. (4.9.8's dispatcher cuts by
#: size only, and its broker refuses such a trace message: the traces are lost.)
KEYS_FILL = 24_000
#: a trace message's KEYS never pass this many UTF-8 bytes: the words after it are left out of
#: the index (only one record's very long keys can get there after KEYS_FILL)
KEYS_MAX = 30_000
#: batches waiting for the dispatcher's thread; one more is dropped (and its events counted)
JOBS_MAX = 16
#: a trace message's body of this many bytes or more is compressed (the inner producer's default
#: compressMsgBodyOverHowmuch)
COMPRESS_OVER = 4096
#: at zlib's fastest level, not 4.9.8's 5 (rocketmq.message.compressLevel): any level inflates
#: the same on every reader, and on trace text level 1 takes well under half the dispatcher
#: thread's instructions for a body about 10% larger (docs/trace.md); user messages keep 5
COMPRESS_LEVEL = 1
GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"
_WARN_INTERVAL_S = 10.0
_COUNTER = itertools.count(1)


class TraceProducer(Protocol):
    """What the dispatcher needs of its inner producer (a :class:`fastmq.aio.Producer`)."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    def start_send(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None],
                   timeout_ms: int | None = None, awaited: bool = True) -> None: ...


class TraceDispatcher:
    """Queues trace events and sends them, batched, to the trace topic."""

    def __init__(self, group: str, kind: str, trace_topic: str | None,
                 make_producer: Callable[[str, str], TraceProducer]) -> None:
        """``kind``: PRODUCER or CONSUMER (in the inner group's name); ``make_producer(group,
        instance_name)`` makes the inner producer when the dispatcher starts."""
        self.trace_topic = trace_topic or DEFAULT_TRACE_TOPIC
        self.group = group
        self.kind = kind
        self._make = make_producer
        # events encoded by the thread that appended them (text, keys), moved into pub_rows on
        # the loop (a deque: appended to from any thread)
        self._queue: collections.deque[tuple[bytes, bytes]] = collections.deque()
        #: trace events dropped because the queue was full (4.9.8's discardCount)
        self.discarded = 0
        self._warned_at = -_WARN_INTERVAL_S
        self._producer: TraceProducer | None = None
        self._task: asyncio.Task[None] | None = None
        self._packer = TracePacker(_FILL, KEYS_FILL, KEYS_MAX, COMPRESS_OVER, COMPRESS_LEVEL, WAIT_S, JOBS_MAX)
        self._notify: tuple[int, int] | None = None  # the pipe the packer tells the loop through
        self._thread: threading.Thread | None = None
        # the loop's side: trace messages handed to the inner producer and not answered, the
        # flushes waiting for none to be left, and what to call when a flush's token comes back
        self._sending = 0
        self._idle: list[asyncio.Future[None]] = []
        self._tokens: dict[int, Callable[[], Any]] = {}
        self._token_ids = itertools.count(1)
        self._lost_seen = 0  # the packer's records lost for want of memory, counted as dropped
        self._loop: asyncio.AbstractEventLoop | None = None
        #: answered sends as Pub records (:func:`~fastmq.client.trace_data.pub_row`); never
        #: rebound (the producer's compiled send path holds it), emptied by each drain
        self.pub_rows = PubRows(self.trace_topic, group, lambda _broker: None, QUEUE_SIZE, WAKE_AT)

    @property
    def store_host(self) -> Callable[[Any], str | None]:
        """What names a broker's address (``null`` when None) for the Pub records; the producer
        sets it. Asked once per broker name per batch."""
        return self.pub_rows.store_host

    @store_host.setter
    def store_host(self, store_host: Callable[[Any], str | None]) -> None:
        self.pub_rows.store_host = store_host

    # ------------------------------------------------------------ the host's side

    def append_pub(self, msg: SentMessage, r: SendResult, begin_ms: int) -> None:
        """An answered send (SendMessageTraceHookImpl.sendMessageAfter) of ``msg`` (a Message, or
        the compiled fast path's entry of an asynchronous send as it ends): its Pub record
        written into :attr:`pub_rows`. Counted as dropped beyond the queue's bound, as
        :meth:`append`; a record that cannot be made is logged and counted so too (the send
        is never failed for its trace)."""
        try:
            code = pub_row(self.pub_rows, msg, r, begin_ms)
        except Exception:
            log.exception("trace record of %s not made", getattr(r, "msg_id", None))
            code = -1
        if code:
            self.pub_added(code)

    def pub_added(self, code: int) -> None:
        """What :meth:`PubRows.add <fastmq._ext.trace_encode.PubRows.add>` said of a record:
        1, the rows reached the wake band (drain now); -1, they were full (the record dropped)."""
        if code < 0:
            self._discard()
        elif self._loop is not None:
            self._wake()

    def append(self, ctx: TraceContext) -> bool:
        """Queue an event, encoded here; False (and counted) when the queue is full or the event
        cannot be encoded (logged). Safe from any thread."""
        if len(self._queue) >= QUEUE_SIZE:  # (read across threads: at worst one over)
            self._discard()
            return False
        if not ctx.beans:
            return True
        try:
            event = (encode_context(ctx).encode("utf-8", "replace"),
                     b"".join(k.encode("utf-8", "replace") + b" " for k in trace_keys(ctx)))
        except Exception:  # a bad event, not the host's
            log.exception("trace event not encoded")
            self._discard()
            return False
        self._queue.append(event)
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
            self._drain()
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
        self._loop = loop = asyncio.get_running_loop()
        fd = -1
        try:
            r, w = os.pipe()
        except OSError:
            log.warning("trace dispatcher of %s: no pipe; its messages are sent at its ticks", self.group)
        else:
            os.set_blocking(r, False)
            os.set_blocking(w, False)
            try:
                loop.add_reader(r, self._on_ready)
            except NotImplementedError:  # (a loop that watches no file: the ticks take them)
                os.close(r)
                os.close(w)
            else:
                self._notify, fd = (r, w), w
        self._packer.notify_fd = fd  # (before its thread runs, which reads it)
        self._thread = threading.Thread(target=self._packer.run, name=f"fastmq-trace-{self.group}", daemon=True)
        self._thread.start()
        self._task = asyncio.ensure_future(self._run())

    async def shutdown(self) -> None:
        """Send what is held and what the packer holds (waiting at most about a second for the
        sends), then stop the packer's thread and the inner producer."""
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        await self._flush(1.0)
        assert self._thread is not None and self._loop is not None
        self._packer.submit(self.pub_rows, -1)  # (the thread holds nothing now: it ends at once)
        self._thread.join(1.0)
        self._thread = None
        self._take_ready()  # (what was appended since the flush: its sends are not waited for)
        if self._notify is not None:
            self._loop.remove_reader(self._notify[0])
            for fd in self._notify:
                os.close(fd)
            self._notify = None
        assert self._producer is not None
        await self._producer.shutdown()

    async def flush(self) -> None:
        """Send what is held and what the packer holds now (tests, and before a shutdown)."""
        await self._flush(5.0)

    async def _flush(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def finished() -> None:
            # (on the loop, once the packer has made all it held and those sends are started):
            # done when no trace send is left unanswered
            if self._sending:
                self._idle.append(done)
            elif not done.done():
                done.set_result(None)

        def late() -> None:
            if not done.done():
                log.warning("trace dispatcher of %s: not all sent within %.1f s", self.group, timeout)
                done.set_result(None)
        # (one future and one timer: a flush costs the loop few turns of its own)
        timer = loop.call_later(timeout, late)
        try:
            self._drain(finished)
            await done
        finally:
            timer.cancel()

    # ------------------------------------------------------------ the worker

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            try:
                self._drain()
                if self._notify is None:
                    self._take_ready()
            except Exception:  # a trace must never stop its host
                log.exception("trace dispatch failed")

    def _drain(self, done: Callable[[], Any] | None = None) -> None:
        """Hand what is held to the packer. ``done`` (a flush): hand even nothing, and call it on
        the loop once the packer has made everything it holds and those sends are started."""
        rows, q = self.pub_rows, self._queue
        while q:
            text, keys = q.popleft()
            if rows.add_text(text, keys) < 0:
                self._discard()
        if not len(rows) and done is None:
            return
        if done is not None:
            token = next(self._token_ids)
            self._tokens[token] = done
            # (a flush, asked for by the host, is handed on even beyond the bound: it never waits)
            self._packer.submit(rows, token)
        elif not self._packer.submit(rows):  # the thread is behind: drop the batch, not the host's time
            self._discard(len(rows.take()))
        lost = self._packer.lost
        if lost > self._lost_seen:
            self._discard(lost - self._lost_seen)
            self._lost_seen = lost

    # ------------------------------------------------------------ the loop's sends

    def _on_ready(self) -> None:
        assert self._notify is not None
        try:
            while os.read(self._notify[0], 4096):
                pass
        except BlockingIOError:
            pass
        self._take_ready()

    def _take_ready(self) -> None:
        """Send the messages the packer has made; call what waited for a token that is back."""
        for item in self._packer.take_ready():
            if isinstance(item, int):
                done = self._tokens.pop(item, None)
                if done is not None:
                    done()
                continue
            body, compressed, keys, head = item
            msg = Message(self.trace_topic, CompressedBody(body) if compressed else body,
                          properties={MessageConst.KEYS: keys})
            self._send(msg, head)

    def _send(self, msg: Message, head: bytes) -> None:
        """Start the send of ``msg`` (``head``: the start of its text, for the log)."""
        assert self._producer is not None
        self._sending += 1

        def sent(_r: SendResult | None, exc: BaseException | None) -> None:
            if exc is not None:
                log.error("send trace data failed, the traceData is %r: %s", head.decode("utf-8", "replace"), exc)
            self._sending -= 1
            if not self._sending and self._idle:
                idle, self._idle = self._idle, []
                for f in idle:
                    if not f.done():
                        f.set_result(None)
        try:
            self._producer.start_send(msg, sent, 5000, False)
        except Exception as exc:  # (start_send tells its callback of a refusal; this is anything else)
            sent(None, exc)
