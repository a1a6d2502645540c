"""RemotingClient: requests to brokers and NameServers, one reused connection per address.

``invoke`` waits for the response with the request's opaque; ``invoke_async`` does the same under a
permit (65535 in flight by default, RocketMQ's clientAsyncSemaphoreValue) and may call a callback;
``invoke_oneway`` sends with the oneway flag under its own permit. Every pending request is also
checked by a once-a-second scan of the response tables, so a request whose caller went away still
fails with a timeout and leaves nothing behind.

NameServers: ``invoke_namesrv`` sends to the address that worked last and, when it cannot be
reached, fails over down the list.
"""
from __future__ import annotations

import asyncio
import ssl as _ssl
import logging
import time
from typing import Callable

from .._ext._protocols import DEFAULT_MAX_FRAME_SIZE
from .._ext.codec import RemotingCommand
from ..errors import (RemotingConnectError, RemotingError, RemotingSendRequestError, RemotingTimeoutError,
                      RemotingTooMuchRequestError)
from ..protocol.codes import ResponseCode
from ..protocol.command import response_for
from .connection import Connection, ConnectionListener, RequestHook
from .processor import Dispatcher, RequestProcessor
from .tls_protocol import open_tls_connection

__all__ = ["RemotingClient"]

log = logging.getLogger("fastmq.remoting")

#: How long past its deadline the once-a-second scan leaves a request (RocketMQ's
#: scanResponseTable adds the same second).
SCAN_GRACE_S = 1.0


class _Refuser(RequestProcessor):
    """Answers requests a server pushes when the client has no processor for them."""

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_for(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            f" request type {request.code} not supported")


def _split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RemotingConnectError(addr, "address is not host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    """Connections to remoting servers, made on first use and reused.

    Args:
        connect_timeout: seconds to wait for a TCP connect.
        max_async, max_oneway: permits for requests in flight without a waiting caller.
        namesrv_addrs: the NameServer list for :meth:`invoke_namesrv`.
        processor: handles requests servers push (NOTIFY_CONSUMER_IDS_CHANGED...).
        idle_timeout: close connections unused this long (0 keeps them).
        rpc_hook: called with every request before it is sent (ACL signing).
        ssl: when set, every connection is TLS with this context (see :func:`fastmq.remoting.tls.client_context`).
    """

    def __init__(self, *, connect_timeout: float = 3.0, max_async: int = 65535, max_oneway: int = 65535,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, namesrv_addrs: list[str] | None = None,
                 processor: RequestProcessor | None = None, listener: ConnectionListener | None = None,
                 idle_timeout: float = 120.0, rpc_hook: RequestHook | None = None,
                 ssl: "_ssl.SSLContext | None" = None) -> None:
        self.connect_timeout = connect_timeout
        self.ssl = ssl
        #: applied to every request sent through this client (ACL signing); see Connection.rpc_hook
        self.rpc_hook = rpc_hook
        self.max_frame_size = max_frame_size
        self.listener = listener
        self.idle_timeout = idle_timeout
        self._async_permits = asyncio.Semaphore(max_async)
        self._oneway_permits = asyncio.Semaphore(max_oneway)
        self._conns: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Future[Connection]] = {}
        self._dispatcher = Dispatcher()
        self._dispatcher.register_default(processor or _Refuser())
        self._namesrv_addrs: list[str] = list(namesrv_addrs or [])
        self._namesrv_chosen: str | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self._closed = False
        self._drain_tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------ connections

    async def _connection(self, addr: str, timeout: float) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise RemotingConnectError(addr, "client is closed")
        self._ensure_scan()
        fut = self._connecting.get(addr)
        if fut is None:
            fut = asyncio.ensure_future(self._connect(addr))
            self._connecting[addr] = fut
            fut.add_done_callback(lambda _f: self._connecting.pop(addr, None))
        try:
            async with asyncio.timeout(min(timeout, self.connect_timeout)):  # not wait_for: see Connection.invoke
                return await asyncio.shield(fut)
        except TimeoutError:
            raise RemotingConnectError(addr, "connect timeout") from None

    async def _connect(self, addr: str) -> Connection:
        host, port = _split_addr(addr)
        loop = asyncio.get_running_loop()

        def factory() -> Connection:
            return Connection(self._dispatcher.dispatch, listener=self.listener, max_frame_size=self.max_frame_size,
                              on_lost=lambda c: self._forget(addr, c), rpc_hook=self.rpc_hook,
                              keep_reading=True)
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.ssl is None:
                    _, conn = await loop.create_connection(factory, host, port)
                else:  # (the TLS handshake counts against the connect timeout; fastmq's lean TLS
                    # layer, not asyncio's: see fastmq.remoting.tls_protocol)
                    _, conn = await open_tls_connection(factory, host, port, self.ssl, server_hostname=host,
                                                        handshake_timeout=self.connect_timeout)
        except TimeoutError:
            raise RemotingConnectError(addr, "connect timeout") from None
        except OSError as exc:
            raise RemotingConnectError(addr, exc.strerror or str(exc)) from exc
        if self._closed:  # close() ran while we were connecting
            conn.abort()
            raise RemotingConnectError(addr, "client is closed")
        self._conns[addr] = conn
        log.debug("connected to %s", addr)
        return conn

    def open_connection(self, addr: str) -> Connection | None:
        """The open connection to ``addr``, or None (no connect is attempted)."""
        conn = self._conns.get(addr)
        if conn is None or conn.closed or self._closed:
            return None
        return conn

    def _forget(self, addr: str, conn: Connection) -> None:
        if self._conns.get(addr) is conn:
            del self._conns[addr]

    def close_connection(self, addr: str) -> None:
        """Drop the connection to ``addr`` (the next request reconnects)."""
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    def _ensure_scan(self) -> None:
        if self._scan_task is None or self._scan_task.done():
            self._scan_task = asyncio.ensure_future(self._scan())

    async def _scan(self) -> None:
        """Once a second: fail requests past their deadline, close idle connections."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(1.0)
            now = loop.time()
            mono = time.monotonic()
            for addr, conn in list(self._conns.items()):
                # a second's grace, as RocketMQ's scanResponseTable: an answer already in the
                # socket while the loop was busy must not be failed before it is read
                n = conn.expire_pending(now - SCAN_GRACE_S)
                if n:
                    log.warning("removed %d timed-out request(s) of %s", n, addr)
                if (self.idle_timeout > 0 and not conn.pending and not conn.held
                        and mono - conn.last_activity > self.idle_timeout):
                    log.info("closing idle connection to %s", addr)
                    self.close_connection(addr)

    # ---------------------------------------------------------- invoke

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return its response (the whole exchange within ``timeout`` s).

        Raises:
            RemotingConnectError: ``addr`` could not be reached.
            RemotingTimeoutError: no response in time.
            RemotingSendRequestError: the connection closed before the response came.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        conn = await self._connection(addr, timeout)
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise RemotingTimeoutError(addr, timeout * 1000)
        return await conn.invoke(request, remaining, timeout * 1000)

    async def invoke_async(self, addr: str, request: RemotingCommand, timeout: float,
                           callback: Callable[[RemotingCommand], None] | None = None) -> RemotingCommand:
        """Like :meth:`invoke`, under the async permit; ``callback`` gets the response too.

        Raises RemotingTooMuchRequestError when no permit frees up within ``timeout``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self._acquire(self._async_permits, timeout, "invokeAsyncImpl", "semaphoreAsyncValue")
        try:
            resp = await self.invoke(addr, request, max(0.0, deadline - loop.time()))
        finally:
            self._async_permits.release()
        if callback is not None:
            callback(resp)
        return resp

    async def invoke_oneway(self, addr: str, request: RemotingCommand, timeout: float) -> None:
        """Send without waiting for any response (the oneway flag is set)."""
        await self._acquire(self._oneway_permits, timeout, "invokeOnewayImpl", "semaphoreOnewayValue")
        try:
            conn = await self._connection(addr, timeout)
            conn.send_oneway(request)
        except BaseException:
            self._oneway_permits.release()
            raise
        if conn.write_paused:
            # Like Netty's write listener: the permit comes back once the bytes have left, so a
            # peer that stops reading throttles oneway senders instead of growing our buffer.
            task = asyncio.ensure_future(self._release_after_drain(conn))
            self._drain_tasks.add(task)
            task.add_done_callback(self._drain_tasks.discard)
        else:
            self._oneway_permits.release()

    async def _release_after_drain(self, conn: Connection) -> None:
        try:
            await conn.drain()
        finally:
            self._oneway_permits.release()

    @staticmethod
    async def _acquire(sem: asyncio.Semaphore, timeout: float, what: str, value_name: str) -> None:
        """Take a permit within ``timeout`` or raise RemotingTooMuchRequestError (RocketMQ's texts)."""
        if not sem.locked():
            await sem.acquire()
            return
        if timeout <= 0:
            raise RemotingTooMuchRequestError(f"{what} invoke too fast")
        try:
            async with asyncio.timeout(timeout):
                await sem.acquire()
        except TimeoutError:
            waiting = len(getattr(sem, "_waiters", None) or ())  # asyncio keeps no public queue length
            raise RemotingTooMuchRequestError(
                f"{what} tryAcquire semaphore timeout, {int(timeout * 1000)}ms, waiting thread nums: "
                f"{waiting} {value_name}: 0") from None

    # -------------------------------------------------------- namesrv

    @property
    def namesrv_addrs(self) -> list[str]:
        return list(self._namesrv_addrs)

    def set_namesrv_addrs(self, addrs: list[str]) -> None:
        """Replace the NameServer list; the remembered choice is kept only if still listed."""
        self._namesrv_addrs = list(addrs)
        if self._namesrv_chosen not in self._namesrv_addrs:
            self._namesrv_chosen = None

    async def invoke_namesrv(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send to a NameServer, failing over down the list when one cannot be reached or answer.

        Raises RemotingConnectError("No name server address") with no list, else the last error.
        """
        if not self._namesrv_addrs:
            raise RemotingConnectError("", "No name server address, please set it")
        order = list(self._namesrv_addrs)
        if self._namesrv_chosen in order:
            order.remove(self._namesrv_chosen)
            order.insert(0, self._namesrv_chosen)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: RemotingError | None = None
        for addr in order:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                resp = await self.invoke(addr, request, remaining)
            except (RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError) as exc:
                log.warning("name server %s failed: %s; trying the next one", addr, exc)
                last = exc
                continue
            self._namesrv_chosen = addr
            return resp
        if last is None:
            last = RemotingTimeoutError(order[0], timeout * 1000)
        raise last

    async def close(self) -> None:
        """Close every connection and stop the scan; pending requests fail."""
        self._closed = True
        if self._scan_task is not None:
            self._scan_task.cancel()
            try:
                await self._scan_task
            except asyncio.CancelledError:
                pass
        connecting = list(self._connecting.values())
        for fut in connecting:
            fut.cancel()
        if connecting:
            await asyncio.gather(*connecting, return_exceptions=True)
        conns = list(self._conns.values())
        for addr in list(self._conns):
            self.close_connection(addr)
        await self._dispatcher.cancel_all()
        # Wait (bounded) for connection_lost, aborting peers that will not take our last bytes,
        # so no transport outlives the loop and leaks a ResourceWarning.
        for conn, ok in zip(conns, await asyncio.gather(*(c.wait_closed(1.0) for c in conns))):
            if not ok:
                conn.abort()
        if conns:
            await asyncio.gather(*(c.wait_closed(1.0) for c in conns))
        for task in list(self._drain_tasks):
            task.cancel()
        if self._drain_tasks:
            await asyncio.gather(*self._drain_tasks, return_exceptions=True)
