"""One TCP connection speaking RocketMQ remoting: the asyncio Protocol both ends share.

Reads go through the push FrameDecoder: one ``feed`` per socket read returns every command that
read completed, and the owner (server or client) handles them as one batch, so the responses of a
read leave in one ``transport.write``. Responses to our own requests are matched by opaque in
``pending`` (RocketMQ's responseTable), never by order.

Backpressure: when the transport's write buffer passes its high-water mark (the peer is not
reading), we stop reading from that peer until it drains; a peer that only sends can therefore
never make us buffer its answers without bound. Requests still being processed count too: past
``max_inflight`` we stop reading until some finish.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
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
#: Bytes of requests queued by start_request/start_frame that are written at once rather than
#: at the loop's next turn: a producer issuing thousands of sends in one turn keeps the broker
#: busy with the first ones while it encodes the rest, instead of handing it everything at the end.
OUTQ_FLUSH_BYTES = 64 * 1024


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
    holds (``produce_py.AsyncSend``), and its answer is not its result."""

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


def _addr(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "")


class Connection(asyncio.Protocol):
    """A remoting connection: the asyncio Protocol and the handle processors are given."""

    def __init__(self, handler: RequestHandler, *, listener: ConnectionListener | None = None,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, max_inflight: int = MAX_INFLIGHT,
                 on_lost: Callable[["Connection"], None] | None = None, rpc_hook: RequestHook | None = None) -> None:
        self._handler = handler
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
        # Frames queued by start_request/start_frame: written together when the loop next turns
        # (or once OUTQ_FLUSH_BYTES have gathered).
        self._outq: list[bytes] = []
        self._outq_bytes = 0
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        # Set once connection_lost has run; close()/owners wait on it so no transport outlives its loop.
        self._lost = asyncio.Event()

    # ------------------------------------------------------ Protocol API

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the Transport interface without subclassing it.
        self.transport = transport  # type: ignore[assignment]
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)
        self.remote_addr = _addr(transport.get_extra_info("peername"))
        self.local_addr = _addr(transport.get_extra_info("sockname"))
        self.last_activity = time.monotonic()
        self._emit("on_connect")

    def data_received(self, data: bytes) -> None:
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
        if not cmds:
            return
        requests, unmatched = settle_responses(cmds, self.pending)
        if unmatched:  # one line per read, however many: a burst of late answers must not flood the log
            log.warning("%d response(s) with unknown opaque from %s (timed out?), first %s", len(unmatched),
                        self.remote_addr, unmatched[:5])
        if requests:
            self._handler(self, requests)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        pending, self.pending = self.pending, {}
        for entry in pending.values():
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
        should_pause = self._write_paused or self.inflight >= self.max_inflight
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
        if self._loop_thread and threading.get_ident() != self._loop_thread:
            # An executor processor answering by itself: transports are not thread-safe.
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
        self.last_activity = time.monotonic()
        self.transport.write(data)

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
        """
        if self.closed:
            raise RemotingSendRequestError(self.remote_addr, "connection closed")
        self.pending[opaque] = entry
        self._outq.append(frame)
        self._outq_bytes += len(frame)
        if self._outq_bytes >= OUTQ_FLUSH_BYTES:
            self.send_many([])
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

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

    def expire(self, opaque: int) -> None:
        """Fail our request ``opaque`` with RemotingTimeoutError now, if it still awaits its answer
        (a caller's own timer at its deadline)."""
        entry = self.pending.pop(opaque, None)
        if entry is not None and not entry.answered():
            entry.on_failure(RemotingTimeoutError(self.remote_addr, entry.timeout_ms))

    def expire_pending(self, now: float) -> int:
        """Fail the requests past their deadline (the once-a-second scan); returns how many."""
        expired = [op for op, entry in self.pending.items() if entry.deadline <= now]
        for op in expired:
            self.expire(op)
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
