"""RemotingServer: accepts RocketMQ remoting connections and runs processors for their requests."""
from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor

from .._ext._protocols import DEFAULT_MAX_FRAME_SIZE
from .connection import MAX_INFLIGHT, Connection, ConnectionListener
from .processor import Dispatcher, RequestProcessor

__all__ = ["RemotingServer"]

log = logging.getLogger("fastmq.remoting")


class RemotingServer:
    """A listening socket, its connections, and the processors for their requests.

    Args:
        host, port: where to listen; port 0 picks a free port (read :attr:`port` after start).
        idle_timeout: seconds without a read or write after which a connection is closed (120,
            RocketMQ's serverChannelMaxIdleTimeSeconds); the listener hears ``on_idle`` first.
        max_frame_size: larger frames close the connection that sent them.
        listener: connection events (connect, close, idle, exception).
    """

    def __init__(self, host: str = "0.0.0.0", port: int = 0, *, idle_timeout: float = 120.0,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, listener: ConnectionListener | None = None,
                 max_inflight: int = MAX_INFLIGHT) -> None:
        self.host = host
        self.port = port
        self.idle_timeout = idle_timeout
        self.max_frame_size = max_frame_size
        self.listener = listener
        self.max_inflight = max_inflight
        self.dispatcher = Dispatcher()
        self.connections: set[Connection] = set()
        self._server: asyncio.AbstractServer | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self._serving = False

    def register_processor(self, code: int, processor: RequestProcessor, executor: Executor | None = None) -> None:
        """Route request ``code`` to ``processor`` (on ``executor`` when given, else on the loop)."""
        self.dispatcher.register(code, processor, executor)

    def register_default_processor(self, processor: RequestProcessor, executor: Executor | None = None) -> None:
        """The processor for every code with no processor of its own."""
        self.dispatcher.register_default(processor, executor)

    def _make_connection(self) -> Connection:
        conn = Connection(self.dispatcher.dispatch, listener=self.listener, max_frame_size=self.max_frame_size,
                          max_inflight=self.max_inflight, on_lost=self.connections.discard)
        self.connections.add(conn)
        return conn

    async def start(self, *, serve: bool = True) -> None:
        """Bind and start accepting; :attr:`port` then holds the real port.

        ``serve`` False binds only (a port clash fails now) and accepts nothing until
        :meth:`start_serving`: a broker reserves its port before it touches its store and
        answers connections only once it is ready.
        """
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._make_connection, self.host, self.port, reuse_address=True,
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
                if not conn.closed and now - conn.last_activity > self.idle_timeout:
                    log.info("closing idle connection %s", conn.remote_addr)
                    if self.listener is not None:
                        try:
                            self.listener.on_idle(conn)
                        except Exception:
                            log.exception("connection listener on_idle failed")
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
