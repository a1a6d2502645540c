"""One TCP connection speaking RocketMQ remoting: the asyncio Protocol both ends share.

Reads go through the push FrameDecoder: one ``feed`` per socket read returns every command that
read completed, and the owner (server or client) handles them as one batch, so the responses of a
read leave in one ``transport.write``. Responses to our own requests are matched by opaque in
``pending`` (RocketMQ's responseTable), never by order.

Flow control, and why it cannot deadlock. A connection where both ends stop reading while their
own write buffer is full wedges for ever: each waits for the other to read first (seen with
100,000 ``send_async`` at once). So only the answering end pauses:

- a server (``keep_reading`` False) stops reading a peer while its write buffer is over the
  high-water mark, i.e. while the peer does not take its answers, and while ``max_inflight`` of
  the peer's requests are still being processed; a peer that only sends can never make it buffer
  answers without bound;
- a client (``keep_reading`` True) always reads, so the answers it is owed always leave the
  server. Its own requests wait instead: a request started with :meth:`start_frame` while the
  write buffer is over the mark, or while ``window`` requests already await their answers, is
  held back (not yet written, its clock not yet running) and goes out as answers come back and
  the socket drains. The window follows the peer's answer rate (about TARGET_QUEUE_S of work
  written ahead, at most ``max_window``). ``invoke`` (heartbeats, route lookups, unregister)
  is never held back.

Bounds (a server's connections): ``max_unsent`` caps what may wait in the write buffer for a peer
that does not read (past it the connection is aborted), and a shared :class:`FrameBudget` caps
the bytes of partial frames all connections buffer together (the connection whose read would
pass it is aborted). Both log one line per connection closed.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import time
import weakref
from itertools import islice
from typing import Any, Callable, Protocol

from .._ext.codec import FrameDecoder, RemotingCommand, encode_frame, encode_frames, settle_responses
from .._ext._protocols import DEFAULT_MAX_FRAME_SIZE, FLAG_ONEWAY
from ..errors import FrameError, RemotingCommandError, RemotingSendRequestError, RemotingTimeoutError

__all__ = ["Connection", "ConnectionListener", "ConnectionGoneListener", "RequestHandler", "RequestHook"]

log = logging.getLogger("fastmq.remoting")

#: What a connection hands the requests of one read to: ``handler(conn, requests)``.
RequestHandler = Callable[["Connection", list[RemotingCommand]], None]
#: Called with each request this end sends, just before it is encoded (RocketMQ's
#: RPCHook.doBeforeRequest: ACL signing). Frames handed over already encoded bypass it.
RequestHook = Callable[[RemotingCommand], None]

#: Write-buffer marks: past HIGH we pause reading the peer, below LOW we resume.
WRITE_HIGH_WATER = 4 * 1024 * 1024
WRITE_LOW_WATER = 1024 * 1024
#: Requests of one connection being processed at once before we stop reading it.
MAX_INFLIGHT = 65536
# late answers to cancelled requests remembered per connection (see Connection._abandoned)
_MAX_ABANDONED = 1024
#: Bytes of requests queued by start_request/start_frame that are written at once rather than
#: at the loop's next turn: a producer issuing thousands of sends in one turn keeps the broker
#: busy with the first ones while it encodes the rest, instead of handing it everything at the end.
OUTQ_FLUSH_BYTES = 64 * 1024
#: The most requests started with start_frame that may await their answers at once on one client
#: connection; more wait, unwritten, for a slot (a request's clock starts when it is written).
DEFAULT_WINDOW = 8192
#: The window a connection starts with, and the least it shrinks to.
MIN_WINDOW = 256
_START_WINDOW = 1024
#: While requests wait, the window follows the peer's answer rate so that what is written is
#: answered within about this long: a slow broker (a loaded machine, the pure twins) is never
#: handed more than it can answer well inside a 3 s send timeout, a fast one gets the full window.
TARGET_QUEUE_S = 0.5
_SAMPLE_S = 0.25
#: Requests released from the wait at a time, so a write that fills the buffer stops the release.
_RELEASE_CHUNK = 512


class FrameBudget:
    """The bytes of partial frames a server's connections may buffer together.

    Each connection reports its decoder's buffered bytes after every read; a read that would take
    the total past ``limit`` is refused (the connection is closed), so N peers each sending most
    of a maximum-size frame and stalling cannot hold N x 16 MiB.
    """

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, delta: int) -> bool:
        """Add ``delta`` bytes (negative: give back); False, and nothing taken, past the limit."""
        if delta > 0 and self.used + delta > self.limit:
            return False
        self.used += delta
        return True


class ConnectionListener:
    """Connection events; override what you need (every method is a no-op here)."""

    def on_connect(self, conn: "Connection") -> None:
        pass

    def on_close(self, conn: "Connection") -> None:
        pass

    def on_idle(self, conn: "Connection") -> None:
        pass

    def on_exception(self, conn: "Connection", exc: BaseException) -> None:
        pass


class ConnectionGoneListener(ConnectionListener):
    """For servers that forget a peer the moment its connection ends, however it ends (closed,
    failed, idle): override :meth:`connection_gone`."""

    def connection_gone(self, conn: "Connection") -> None:
        pass

    def on_close(self, conn: "Connection") -> None:
        self.connection_gone(conn)

    def on_exception(self, conn: "Connection", exc: BaseException) -> None:
        self.connection_gone(conn)

    def on_idle(self, conn: "Connection") -> None:
        self.connection_gone(conn)


class PendingEntry(Protocol):
    """What ``Connection.pending`` holds per opaque: the response goes to ``on_response``, a
    failure (connection lost, past ``deadline`` on the loop clock) to ``on_failure``; neither once
    ``answered()``. The names are not a future's: a send's entry is also the future its caller
    holds (``produce_py.AsyncSend``), and its answer is not its result. The connection moves
    ``deadline`` on when flow control held the request back: its clock starts when it is written."""

    deadline: float
    timeout_ms: float

    def answered(self) -> bool: ...
    def on_response(self, cmd: RemotingCommand) -> None: ...
    def on_failure(self, exc: BaseException) -> None: ...


class _Waiter:
    """The pending entry of a plain future and its deadline."""

    __slots__ = ("fut", "deadline", "timeout_ms")

    def __init__(self, fut: "asyncio.Future[RemotingCommand]", deadline: float, timeout_ms: float) -> None:
        self.fut = fut
        self.deadline = deadline
        self.timeout_ms = timeout_ms

    def answered(self) -> bool:
        return self.fut.done()

    def on_response(self, cmd: RemotingCommand) -> None:
        self.fut.set_result(cmd)

    def on_failure(self, exc: BaseException) -> None:
        self.fut.set_exception(exc)


#: Bytes one socket read may deliver (the shared read buffer of a loop's connections).
READ_BUFFER_SIZE = 64 * 1024
_read_buffers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, memoryview]" = weakref.WeakKeyDictionary()

#: A weak reference to the connection whose request :meth:`Connection.start_frame` last wrote
#: straight to its socket with nothing else in flight: a blocking caller that drives the loop
#: itself may then wait on that one socket for the answer (fastmq._driven). A hint only, shared
#: by every thread: whoever reads it checks that the connection is of its own loop (a list item,
#: not a thread-local: a store per send costs ~10x less, and a hint lost to another thread's
#: store costs only the general wait). Weak, so that it keeps no abandoned connection alive.
LONE_WRITE: list["weakref.ref[Connection] | None"] = [None]


def _read_buffer(loop: asyncio.AbstractEventLoop) -> memoryview:
    """The buffer every connection of ``loop`` reads into.

    asyncio's selector transport hands a plain Protocol a new ``recv(256 KiB)`` bytes per read:
    an allocation above glibc's mmap threshold, so each read of a 100-byte answer cost an mmap,
    an mremap to shrink it and an munmap (17% of a client's CPU for one send in flight, perf).
    One loop runs one read at a time and the decoder copies what it keeps, so its connections
    can share one buffer; loops in other threads get their own.
    """
    buf = _read_buffers.get(loop)
    if buf is None:
        buf = memoryview(bytearray(READ_BUFFER_SIZE))
        try:
            _read_buffers[loop] = buf
        except TypeError:  # a loop without weak references: the connection keeps its own
            pass
    return buf


def _addr(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "")


class Connection(asyncio.BufferedProtocol):
    """A remoting connection: the asyncio Protocol and the handle processors are given.

    Reads land in the loop's shared buffer (:func:`_read_buffer`) and go to :meth:`data_received`
    as a view of it, valid only during that call."""

    def __init__(self, handler: RequestHandler, *, listener: ConnectionListener | None = None,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, max_inflight: int = MAX_INFLIGHT,
                 on_lost: Callable[["Connection"], None] | None = None, rpc_hook: RequestHook | None = None,
                 keep_reading: bool = False, window: int = DEFAULT_WINDOW, max_unsent: int = 0,
                 frame_budget: FrameBudget | None = None) -> None:
        self._handler = handler
        #: Never stop reading because our own writes are backed up (the requesting end: see the
        #: module docstring for why one end must keep reading).
        self.keep_reading = keep_reading
        self.rpc_hook = rpc_hook
        self._listener = listener
        self._on_lost = on_lost
        self._decoder = FrameDecoder(max_frame_size)
        self.transport: asyncio.Transport | None = None
        self.remote_addr = ""
        self.local_addr = ""
        #: Free-form per-connection state for processors.
        self.attrs: dict[str, Any] = {}
        self.closed = False
        #: opaque -> the entry of our request awaiting an answer (RocketMQ's responseTable).
        self.pending: dict[int, PendingEntry] = {}
        self.last_activity = time.monotonic()
        self.inflight = 0
        self.max_inflight = max_inflight
        self._write_paused = False
        self._read_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        #: start_frame requests this end may have awaiting answers before new ones wait unwritten:
        #: adapts between MIN_WINDOW and ``max_window`` to the peer's answer rate
        self.max_window = max(1, window)
        self.window = min(self.max_window, _START_WINDOW)
        self._answers = 0        # answers read since _sample_t0, while requests were held back
        self._sample_t0 = 0.0
        # opaque -> (frame, entry, time budget in s): requests waiting for the socket or a slot,
        # in start order
        self._held: dict[int, tuple[bytes, PendingEntry, float]] = {}
        #: bytes that may wait in the write buffer before the connection is aborted (0: no limit)
        self.max_unsent = max_unsent
        self._budget = frame_budget
        self._buffered = 0  # partial-frame bytes reported to the budget
        #: the write buffer's size at the last idle scan (a shrinking buffer is a peer reading)
        self.scanned_unsent = 0
        # Frames queued by start_request/start_frame: written together when the loop next turns
        # (or once OUTQ_FLUSH_BYTES have gathered).
        self._outq: list[bytes] = []
        self._outq_bytes = 0
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        #: the socket's descriptor (-1 before connection_made, or when the transport has none)
        self.fileno = -1
        self._self_ref = weakref.ref(self)  # (LONE_WRITE's hint, made once)
        self._rbuf: memoryview | None = None
        # (deadline, opaque) of the requests given a deadline by expire_at, and the one loop timer
        # armed for the earliest of them (see expire_at)
        self._deadlines: list[tuple[float, int]] = []
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._deadline_at = 0.0
        # opaques of requests their caller gave up on (cancelled, e.g. a rebalance stopped at a
        # shutdown): their late answers are expected, unlike a timed-out request's, so they are
        # dropped without the "unknown opaque" warning. Bounded: oldest forgotten first.
        self._abandoned: dict[int, None] = {}
        # Set once connection_lost has run; close()/owners wait on it so no transport outlives its loop.
        self._lost = asyncio.Event()

    # ------------------------------------------------------ Protocol API

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the Transport interface without subclassing it.
        t: asyncio.Transport = transport  # type: ignore[assignment]
        self.transport = t
        self._loop = asyncio.get_running_loop()
        self._rbuf = _read_buffer(self._loop)
        t.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)
        self.remote_addr = _addr(transport.get_extra_info("peername"))
        self.local_addr = _addr(transport.get_extra_info("sockname"))
        fileno = getattr(transport.get_extra_info("socket"), "fileno", None)  # (a stand-in transport may have none)
        self.fileno = fileno() if callable(fileno) else -1
        self.last_activity = time.monotonic()
        self._emit("on_connect")

    def get_buffer(self, sizehint: int) -> memoryview:
        buf = self._rbuf
        if buf is None:  # (a read before connection_made: not done by asyncio, kept safe)
            buf = self._rbuf = memoryview(bytearray(READ_BUFFER_SIZE))
        return buf

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._rbuf[:nbytes])  # type: ignore[index]  # set by get_buffer

    def data_received(self, data: bytes | memoryview) -> None:
        """The bytes of one read (a view valid only during this call: whatever outlives it is copied)."""
        self.last_activity = time.monotonic()
        try:
            cmds = self._decoder.feed(data)
        except FrameError as exc:
            # The stream can no longer be framed: drop this peer only.
            log.warning("closing %s: %s", self.remote_addr, exc)
            self._emit("on_exception", exc)
            self.abort()
            return
        except Exception as exc:  # a codec bug must still cost only this connection
            log.exception("closing %s: decoder failed", self.remote_addr)
            err = FrameError(f"decoder failed: {exc!r}")
            err.__cause__ = exc
            self._emit("on_exception", err)
            self.abort()
            return
        budget = self._budget
        if budget is not None:
            n = self._decoder.buffered()
            if n != self._buffered:
                if not budget.take(n - self._buffered):
                    log.warning("closing %s: partial frames of all connections would hold more than %d bytes "
                                "(this one %d)", self.remote_addr, budget.limit, n)
                    self._emit("on_exception", FrameError("partial-frame memory limit reached"))
                    self.abort()
                    return
                self._buffered = n
        if not cmds:
            return
        requests, unmatched = settle_responses(cmds, self.pending)
        if self._held:
            self._answers += len(cmds) - (len(requests) if requests else 0)
            self._adapt_window()
            self._release_held()
        if unmatched and self._abandoned:
            unmatched = [op for op in unmatched if self._abandoned.pop(op, 0) is not None]
        if unmatched:  # one line per read, however many: a burst of late answers must not flood the log
            log.warning("%d response(s) with unknown opaque from %s (timed out?), first %s", len(unmatched),
                        self.remote_addr, unmatched[:5])
        if requests:
            self._handler(self, requests)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._budget is not None and self._buffered:
            self._budget.take(-self._buffered)
            self._buffered = 0
        self._decoder = FrameDecoder(self._decoder.max_frame_size)  # its partial frame goes now, not with us
        pending, self.pending = self.pending, {}
        held, self._held = self._held, {}
        self._deadlines = []
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        for entry in [*pending.values(), *(e for _, e, _ in held.values())]:
            if not entry.answered():
                # One error object per future: a shared one would collect every caller's traceback.
                err = RemotingSendRequestError(self.remote_addr,
                                               f"connection closed{': ' + str(exc) if exc else ''}")
                err.__cause__ = exc
                entry.on_failure(err)
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)
        self._drain_waiters.clear()
        if exc is not None and not isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            self._emit("on_exception", exc)
        self._emit("on_close")
        if self._on_lost is not None:
            self._on_lost(self)
        self._lost.set()

    def pause_writing(self) -> None:
        """The write buffer passed its high-water mark: stop reading this peer until it drains."""
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        """The write buffer fell below its low-water mark: read again, wake drain() waiters."""
        self._write_paused = False
        self._update_reading()
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)
        if self._held:
            self._release_held()

    # ----------------------------------------------------------- helpers

    def _emit(self, event: str, *args: Any) -> None:
        if self._listener is None:
            return
        try:
            getattr(self._listener, event)(self, *args)
        except Exception:  # a listener bug must not take the connection down with it
            log.exception("connection listener %s failed", event)

    def _update_reading(self) -> None:
        t = self.transport
        if t is None or self.closed:
            return
        should_pause = (self._write_paused and not self.keep_reading) or self.inflight >= self.max_inflight
        if should_pause and not self._read_paused:
            t.pause_reading()
            self._read_paused = True
        elif not should_pause and self._read_paused:
            t.resume_reading()
            self._read_paused = False

    def begin_request(self) -> None:
        """A request of this peer goes off to be processed asynchronously."""
        self.inflight += 1
        if self.inflight >= self.max_inflight:
            self._update_reading()

    def end_request(self) -> None:
        """An asynchronously processed request finished (its response, if any, is written)."""
        self.inflight -= 1
        if self._read_paused:
            self._update_reading()

    @property
    def reading_paused(self) -> bool:
        """True while we are not reading this peer (backpressure or too many requests in flight)."""
        return self._read_paused

    # ------------------------------------------------------- public API

    def send(self, cmd: RemotingCommand) -> None:
        """Write one command (a late response, or a oneway push); dropped if the connection closed."""
        self.send_many([cmd])

    def send_many(self, cmds: list[RemotingCommand]) -> None:
        """Write several commands with one socket write (callable from any thread)."""
        if self._loop is not None and asyncio._get_running_loop() is not self._loop:
            # An executor processor answering by itself: transports are not thread-safe. (Not
            # "the thread that connected": a blocking producer's loop runs in whichever thread
            # waits on it, see fastmq._driven.)
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self.send_many, cmds)
            return
        queued, self._outq = self._outq, []
        self._outq_bytes = 0
        if self.closed or self.transport is None or self.transport.is_closing():
            log.debug("dropping %d command(s) for closed connection %s", len(cmds) + len(queued), self.remote_addr)
            return
        if cmds:
            try:
                data = encode_frames(cmds)
            except RemotingCommandError:
                data = b"".join(self._encode_each(cmds))
            if queued:  # queued requests go first, so frames leave in the order they were made
                queued.append(data)
                data = b"".join(queued)
        else:
            data = b"".join(queued)
        self.wrote(data)

    def wrote(self, data: bytes) -> None:
        """Write ``data`` (encoded frames) to the open transport, under the unsent-data limit.

        A write counts as activity only when nothing was waiting before it: a peer that does not
        read must not look alive because we keep writing to it."""
        t = self.transport
        assert t is not None
        if not self._write_paused and not t.get_write_buffer_size():
            self.last_activity = time.monotonic()
        t.write(data)
        if self._write_paused and self.max_unsent and t.get_write_buffer_size() > self.max_unsent:
            log.warning("closing %s: it does not read, and %d bytes wait for it (limit %d)", self.remote_addr,
                        t.get_write_buffer_size(), self.max_unsent)
            self.abort()

    def _encode_each(self, cmds: list[RemotingCommand]) -> list[bytes]:
        from ..protocol.command import response_for  # local: protocol sits above this floor's codec use
        out = []
        for cmd in cmds:
            try:
                out.append(encode_frame(cmd))
            except RemotingCommandError as exc:
                log.error("cannot encode command %r: %s", cmd, exc)
                if cmd.flag & 1:
                    out.append(encode_frame(response_for(cmd, 1, f"response could not be encoded: {exc}")))
        return out

    async def drain(self) -> None:
        """Wait until the write buffer is below its low-water mark."""
        if self._write_paused and not self.closed:
            fut = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(fut)
            await fut

    async def invoke(self, request: RemotingCommand, timeout: float,
                     timeout_ms: float | None = None) -> RemotingCommand:
        """Send ``request`` and wait for the response with its opaque.

        Raises RemotingTimeoutError after ``timeout`` seconds (reported as ``timeout_ms``, the
        caller's whole budget, when given), RemotingSendRequestError when the connection closes
        first.
        """
        report_ms = timeout * 1000 if timeout_ms is None else timeout_ms
        if self.closed:
            raise RemotingSendRequestError(self.remote_addr, "connection closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        opaque = request.opaque
        waiter = _Waiter(fut, loop.time() + timeout, report_ms)
        self.pending[opaque] = waiter
        try:
            if self.rpc_hook is not None:
                self.rpc_hook(request)
            self.send(request)
            try:
                # asyncio.timeout rather than wait_for: on 3.11, wait_for returns the result and
                # drops a cancel that lands as the response arrives, and the cancelled caller
                # then runs on (a shutdown that never finishes).
                async with asyncio.timeout(timeout):
                    return await fut
            except TimeoutError:
                raise RemotingTimeoutError(self.remote_addr, report_ms) from None
        except asyncio.CancelledError:
            self._remember_abandoned(opaque)
            raise
        finally:
            if self.pending.get(opaque) is waiter:
                del self.pending[opaque]

    def start_request(self, request: RemotingCommand, entry: Any, deadline: float | None = None,
                      timeout_ms: float | None = None) -> None:
        """Send ``request`` without waiting: its response goes to ``entry.on_response``, called from
        ``data_received`` (see :meth:`start_frame`). ``entry`` is a :class:`PendingEntry`, or a
        future with its ``deadline`` and ``timeout_ms``."""
        if deadline is not None:
            entry = _Waiter(entry, deadline, timeout_ms if timeout_ms is not None else 0.0)
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        self.start_frame(request.opaque, encode_frame(request), entry)

    def start_frame(self, opaque: int, frame: bytes, entry: PendingEntry) -> None:
        """Send a request already encoded as ``frame`` (its opaque is ``opaque``) without waiting:
        its response goes to ``entry.on_response``, called from ``data_received``.

        Must be called on the loop thread. Frames started in one turn of the loop leave in one
        socket write when the loop next turns, or as soon as OUTQ_FLUSH_BYTES have gathered. No
        timer per request: past ``entry.deadline`` (loop clock) the once-a-second
        ``expire_pending`` scan fails it with RemotingTimeoutError, as RocketMQ's
        scanResponseTable does for async requests.

        Flow control: while the write buffer is over its high-water mark, or ``window`` requests
        await answers, the request is held back unwritten (see the module docstring) and its
        deadline moves on by the time it waited.
        """
        if self.closed:
            raise RemotingSendRequestError(self.remote_addr, "connection closed")
        if self._held or self._write_paused or len(self.pending) >= self.window:
            assert self._loop is not None
            now = self._loop.time()
            if not self._held:  # saturated from now on: measure how fast answers come
                self._answers, self._sample_t0 = 0, now
            self._held[opaque] = (frame, entry, entry.deadline - now)
            return
        if not self.pending and not self._outq and self.transport is not None:
            # nothing else in flight (one send at a time): write it now rather than a loop turn
            # later; a burst still leaves together after its first frame
            self.pending[opaque] = entry
            self.wrote(frame)
            LONE_WRITE[0] = self._self_ref
            return
        self.pending[opaque] = entry
        self._outq.append(frame)
        self._outq_bytes += len(frame)
        if self._outq_bytes >= OUTQ_FLUSH_BYTES:
            self.send_many([])
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _release_held(self) -> None:
        """Write held-back requests while the socket takes them and the window has room; each
        one's deadline starts now, with the budget it had when it was started."""
        held, pending = self._held, self.pending
        if self.closed or self._loop is None:
            return
        now = self._loop.time()
        while held and not self._write_paused:
            room = min(self.window - len(pending), _RELEASE_CHUNK)
            if room <= 0:
                return
            for opaque in list(islice(held, room)):
                frame, entry, budget = held.pop(opaque)
                if entry.answered():  # its caller gave up (a cancelled future): nothing to send
                    continue
                entry.deadline = now + budget
                pending[opaque] = entry
                self._outq.append(frame)
                self._outq_bytes += len(frame)
            self.send_many([])  # may pause writing: the loop then stops until resume_writing

    def _adapt_window(self) -> None:
        """Every _SAMPLE_S while requests are held back: window = answers per second x
        TARGET_QUEUE_S, within MIN_WINDOW..max_window."""
        assert self._loop is not None
        now = self._loop.time()
        elapsed = now - self._sample_t0
        if elapsed < _SAMPLE_S:
            return
        rate = self._answers / elapsed
        self.window = int(min(self.max_window, max(min(MIN_WINDOW, self.max_window), rate * TARGET_QUEUE_S)))
        self._answers, self._sample_t0 = 0, now

    def entries(self) -> list[PendingEntry]:
        """Every entry of ours in flight: awaiting its answer, or held back unwritten.

        Safe from any thread: the producer's collector hook calls it from whichever thread starts
        a full collection, while the loop's thread may be changing both tables. Each table is
        copied by one C call (no bytecode boundary, so no thread switch, inside it) before any
        Python-level iteration.
        """
        pending = list(self.pending.values())
        held = list(self._held.values())
        return [*pending, *(e for _, e, _ in held)]

    @property
    def held(self) -> int:
        """Requests started but held back, unwritten, by flow control."""
        return len(self._held)

    def _flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        """Write the frames start_request/start_frame queued now, not at the loop's next turn."""
        if self._outq:
            self.send_many([])

    def send_oneway(self, request: RemotingCommand) -> None:
        """Push ``request`` with the oneway flag set: the peer will not answer it."""
        request.flag |= FLAG_ONEWAY
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        self.send(request)

    def abandon(self, opaque: int) -> None:
        """Forget our request ``opaque`` on purpose (its caller no longer wants the answer: a
        suspended pull of a queue a rebalance dropped, a shutdown): its answer, when it comes,
        is dropped without the "unknown opaque" warning kept for late answers to timeouts."""
        self._remember_abandoned(opaque)
        self.pending.pop(opaque, None)

    def _remember_abandoned(self, opaque: int) -> None:
        if opaque in self.pending and not self.closed:
            self._abandoned[opaque] = None
            if len(self._abandoned) > _MAX_ABANDONED:
                del self._abandoned[next(iter(self._abandoned))]

    def expire(self, opaque: int) -> None:
        """Fail our request ``opaque`` with RemotingTimeoutError now, if it still awaits its answer
        (a caller's own timer at its deadline)."""
        entry = self.pending.pop(opaque, None)
        if entry is None and opaque in self._held:
            # a caller's own timer (a sync send) covers the time its request waited unwritten
            entry = self._held.pop(opaque)[1]
        if entry is not None and not entry.answered():
            entry.on_failure(RemotingTimeoutError(self.remote_addr, entry.timeout_ms))

    def expire_at(self, opaque: int, deadline: float) -> None:
        """Fail our request ``opaque`` with RemotingTimeoutError at ``deadline`` (loop clock) if it
        still awaits its answer then, as a timer calling :meth:`expire` would (a sync send's own
        timeout, on the dot rather than at the once-a-second scan).

        One loop timer per connection, armed for the earliest deadline, rather than one per
        request: a TimerHandle made, pushed on the loop's heap (compared by a Python ``__lt__``)
        and cancelled for every send that is answered in time was a tenth of a blocking send's
        instructions. The deadlines of requests answered are dropped as the timer passes them,
        or all at once when they outnumber the ones still waiting."""
        heap = self._deadlines
        heapq.heappush(heap, (deadline, opaque))
        timer = self._deadline_timer
        if timer is None or deadline < self._deadline_at:
            if timer is not None:
                timer.cancel()
            assert self._loop is not None
            self._deadline_at = deadline
            self._deadline_timer = self._loop.call_at(deadline, self._deadlines_due)
        elif len(heap) > 64 and len(heap) > 2 * (len(self.pending) + len(self._held)):
            self._deadlines = heap = [d for d in heap if d[1] in self.pending or d[1] in self._held]
            heapq.heapify(heap)

    def _deadlines_due(self) -> None:
        """The timer of expire_at: fail what is due, drop what was answered, arm for the next."""
        self._deadline_timer = None
        assert self._loop is not None
        # the loop runs a timer up to its clock's resolution early: what the timer was armed
        # for is due
        now = max(self._loop.time(), self._deadline_at)
        # (self._deadlines read afresh each time: a failure's callback may start a send, whose
        # expire_at may push to it, or replace it)
        while self._deadlines:
            deadline, opaque = self._deadlines[0]
            if deadline <= now:
                heapq.heappop(self._deadlines)
                self.expire(opaque)
            elif opaque not in self.pending and opaque not in self._held:
                heapq.heappop(self._deadlines)  # answered in time
            else:
                break
        if self._deadlines and not self.closed:
            head = self._deadlines[0][0]
            # (a send started meanwhile may have armed the timer for its own, later, deadline)
            if self._deadline_timer is None or head < self._deadline_at:
                if self._deadline_timer is not None:
                    self._deadline_timer.cancel()
                self._deadline_at = head
                self._deadline_timer = self._loop.call_at(head, self._deadlines_due)

    def expire_pending(self, now: float) -> int:
        """Fail the requests past their deadline (the once-a-second scan); returns how many."""
        expired = [op for op, entry in self.pending.items() if entry.deadline <= now]
        for op in expired:
            self.expire(op)
        if self._held:
            self._release_held()
        return len(expired)

    def close(self) -> None:
        """Close after the buffered writes are flushed."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        """Close now, discarding buffered writes (a peer we no longer trust)."""
        if self.transport is not None:
            self.transport.abort()

    @property
    def write_paused(self) -> bool:
        """True while the transport's buffer is over its high-water mark."""
        return self._write_paused

    async def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until ``connection_lost`` has run; False if ``timeout`` passed first."""
        if self.transport is None:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._lost.wait()
        except TimeoutError:
            return False
        return True

    def __repr__(self) -> str:
        return f"<Connection {self.local_addr} -> {self.remote_addr}{' closed' if self.closed else ''}>"
