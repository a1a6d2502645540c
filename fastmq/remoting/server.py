"""RemotingServer: accepts RocketMQ remoting connections and runs processors for their requests."""
from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import time
from concurrent.futures import Executor
from typing import Any

from .._ext._protocols import DEFAULT_MAX_FRAME_SIZE
from ..errors import ConfigError
from .connection import MAX_INFLIGHT, Connection, ConnectionListener, FrameBudget
from .processor import Dispatcher, RequestProcessor
from .tls import ReloadingContext, TlsConfig, TlsSniffer

__all__ = ["RemotingServer", "check_server_limits"]

log = logging.getLogger("fastmq.remoting")

#: Connections a server keeps open at once; more are closed as they are accepted.
DEFAULT_MAX_CONNECTIONS = 10_000
#: Bytes of partial frames all of a server's connections may buffer together.
DEFAULT_MAX_PARTIAL_FRAME_BYTES = 256 * 1024 * 1024
#: Bytes that may wait for a peer that does not read before its connection is aborted.
DEFAULT_MAX_UNSENT_BYTES = 64 * 1024 * 1024


def check_server_limits(cfg: Any) -> None:
    """The remoting server keys a broker or NameServer config shares. Raises ConfigError."""
    if cfg.serverChannelMaxIdleTimeSeconds < 0:
        raise ConfigError(f"serverChannelMaxIdleTimeSeconds={cfg.serverChannelMaxIdleTimeSeconds}: must be >= 0")
    if cfg.maxFrameSize < 64:
        raise ConfigError(f"maxFrameSize={cfg.maxFrameSize}: too small for any request")
    if cfg.serverMaxConnections < 1:
        raise ConfigError(f"serverMaxConnections={cfg.serverMaxConnections}: must be >= 1")
    if cfg.serverMaxPartialFrameBytes < cfg.maxFrameSize:
        raise ConfigError(f"serverMaxPartialFrameBytes={cfg.serverMaxPartialFrameBytes}: must be at least "
                          f"maxFrameSize ({cfg.maxFrameSize}), or no maximum-size frame could arrive")
    if cfg.serverMaxUnsentBytes < 0:
        raise ConfigError(f"serverMaxUnsentBytes={cfg.serverMaxUnsentBytes}: must be >= 0 (0: no limit)")


class _Refused(asyncio.Protocol):
    """An accepted connection past ``max_connections``: closed at once, logged once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        log.warning("refusing connection from %s: %d connections open (serverMaxConnections)", peer, self.limit)
        transport.abort()  # type: ignore[attr-defined]  # a stream transport (uvloop's do not subclass Transport)


class RemotingServer:
    """A listening socket, its connections, and the processors for their requests.

    Args:
        host, port: where to listen; port 0 picks a free port (read :attr:`port` after start).
        idle_timeout: seconds without a read or write after which a connection is closed (120,
            RocketMQ's serverChannelMaxIdleTimeSeconds); the listener hears ``on_idle`` first.
            Idle means nothing read and nothing taken by the peer: writing to a peer that does
            not read is not activity. An idle connection with unsent data is aborted.
        max_frame_size: larger frames close the connection that sent them (checked on the
            length prefix, before any of the frame is buffered).
        listener: connection events (connect, close, idle, exception).
        max_connections: connections open at once; more are closed as they are accepted.
        max_partial_frame_bytes: partial frames all connections may buffer together.
        max_unsent_bytes: data that may wait for a peer that does not read before its
            connection is aborted (0: no limit).
        tls: the ``tls.*`` keys (see :mod:`fastmq.remoting.tls`); None takes plaintext only, with
            no sniffing (a TLS hello then fails as an oversized frame).
    """

    def __init__(self, host: str = "0.0.0.0", port: int = 0, *, idle_timeout: float = 120.0,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, listener: ConnectionListener | None = None,
                 max_inflight: int = MAX_INFLIGHT, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_partial_frame_bytes: int = DEFAULT_MAX_PARTIAL_FRAME_BYTES,
                 max_unsent_bytes: int = DEFAULT_MAX_UNSENT_BYTES, tls: TlsConfig | None = None) -> None:
        self.host = host
        self.port = port
        self.idle_timeout = idle_timeout
        self.max_frame_size = max_frame_size
        self.listener = listener
        self.max_inflight = max_inflight
        self.max_connections = max_connections
        self.frame_budget = FrameBudget(max_partial_frame_bytes)
        self.max_unsent_bytes = max_unsent_bytes
        self.dispatcher = Dispatcher()
        #: What each connection hands its requests to: the dispatcher, or a check in front of it
        #: (:meth:`guard`, the broker's ACL); read as connections are made.
        self.handler: Any = self.dispatcher.dispatch
        self.connections: set[Connection] = set()
        self._server: asyncio.AbstractServer | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self._serving = False
        self.tls = tls
        #: accepted connections whose first bytes or TLS handshake are awaited
        self._sniffing: set[TlsSniffer] = set()
        self._ssl = None if tls is None else ReloadingContext(tls.server_context, functools.partial(_cert_files, tls))

    def register_processor(self, code: int, processor: RequestProcessor, executor: Executor | None = None) -> None:
        """Route request ``code`` to ``processor`` (on ``executor`` when given, else on the loop)."""
        self.dispatcher.register(code, processor, executor)

    def register_default_processor(self, processor: RequestProcessor, executor: Executor | None = None) -> None:
        """The processor for every code with no processor of its own."""
        self.dispatcher.register_default(processor, executor)

    def guard(self, wrap: Any) -> None:
        """Put ``wrap(handler)`` in front of the dispatcher for connections made from now on
        (call before :meth:`start`): every request of every read passes through it first."""
        self.handler = wrap(self.handler)

    def _make_connection(self) -> asyncio.BaseProtocol:
        if len(self.connections) >= self.max_connections:
            return _Refused(self.max_connections)
        conn = Connection(self.handler, listener=self.listener, max_frame_size=self.max_frame_size,
                          max_inflight=self.max_inflight, on_lost=self.connections.discard,
                          max_unsent=self.max_unsent_bytes, frame_budget=self.frame_budget)
        self.connections.add(conn)
        return conn

    def _accept(self) -> asyncio.BaseProtocol:
        # the Connection is made (and counted against max_connections) at accept; the sniffer
        # hands it the connection once the first bytes say plaintext or TLS
        assert self.tls is not None
        conn = self._make_connection()
        if not isinstance(conn, Connection):
            return conn
        # (silent before its first byte: closed after the idle timeout, as any idle connection)
        sniffer = TlsSniffer(self.tls.server_mode, conn, self.ssl_context, self.tls.handshake_timeout,
                             done=self._sniffed, silence=self.idle_timeout)
        self._sniffing.add(sniffer)
        return sniffer

    def _sniffed(self, sniffer: TlsSniffer, ok: bool) -> None:
        self._sniffing.discard(sniffer)
        if not ok:  # its Connection never connected: nothing else would forget it
            self.connections.discard(sniffer.app)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server's SSLContext, reloaded when its certificate or key file changes (a file
        that fails to load keeps the last good context, with an error in the log)."""
        return self._ssl() if self._ssl is not None else None

    async def start(self, *, serve: bool = True) -> None:
        """Bind and start accepting; :attr:`port` then holds the real port.

        ``serve`` False binds only (a port clash fails now) and accepts nothing until
        :meth:`start_serving`: a broker reserves its port before it touches its store and
        answers connections only once it is ready.
        """
        loop = asyncio.get_running_loop()
        factory = self._make_connection
        if self.tls is not None:
            if self.tls.server_mode != "disabled" and self.tls.server_cert_path:
                self.ssl_context()  # unreadable certificate files fail the start
            factory = self._accept
        self._server = await loop.create_server(factory, self.host, self.port, reuse_address=True,
                                                backlog=1024, start_serving=serve)
        self.port = self._server.sockets[0].getsockname()[1]
        if serve:
            await self.start_serving()

    async def start_serving(self) -> None:
        """Accept connections on the port :meth:`start` bound (idempotent)."""
        assert self._server is not None, "start() first"
        if self._serving:
            return
        self._serving = True
        await self._server.start_serving()
        if self.idle_timeout > 0:
            self._idle_task = asyncio.ensure_future(self._scan_idle())
        log.info("remoting server listening on %s:%d", self.host, self.port)

    async def _scan_idle(self) -> None:
        interval = min(1.0, self.idle_timeout / 4)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(self.connections):
                t = conn.transport
                if conn.closed or t is None:
                    continue
                unsent = t.get_write_buffer_size()
                if unsent < conn.scanned_unsent:  # the peer took some of what waits for it
                    conn.last_activity = now
                conn.scanned_unsent = unsent
                if now - conn.last_activity > self.idle_timeout:
                    log.info("closing idle connection %s%s", conn.remote_addr,
                             f" ({unsent} bytes it did not read)" if unsent else "")
                    if self.listener is not None:
                        try:
                            self.listener.on_idle(conn)
                        except Exception:
                            log.exception("connection listener on_idle failed")
                    # a graceful close would wait for the peer to read what is buffered: for ever
                    if unsent:
                        conn.abort()
                    else:
                        conn.close()

    async def close(self, close_grace: float = 1.0) -> None:
        """Stop accepting, close every connection, cancel requests still being processed.

        Connections that cannot flush within ``close_grace`` seconds are aborted.
        """
        if self._idle_task is not None:
            self._idle_task.cancel()
            try:
                await self._idle_task
            except asyncio.CancelledError:
                pass
            self._idle_task = None
        if self._server is not None:
            self._server.close()
        for sniffer in list(self._sniffing):
            sniffer.abort()
        conns = list(self.connections)
        for conn in conns:
            conn.close()
        await self.dispatcher.cancel_all()
        # A graceful close waits for the peer to take our buffered writes; a peer that never
        # reads would hold us forever, so after a grace period such connections are aborted.
        if conns:
            done = await asyncio.gather(*(c.wait_closed(close_grace) for c in conns))
            for conn, ok in zip(conns, done):
                if not ok:
                    log.info("aborting %s: it did not take its last writes", conn.remote_addr)
                    conn.abort()
            await asyncio.gather(*(c.wait_closed(1.0) for c in conns))
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None


def _cert_files(tls: TlsConfig) -> tuple[str, ...]:
    # (the certificate is reloaded only when both files are named; else made once)
    if tls.server_cert_path and tls.server_key_path:
        return tls.server_cert_path, tls.server_key_path
    return ()
