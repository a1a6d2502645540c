"""Request processors and the dispatcher that runs them for a batch of requests.

A processor handles the request codes it is registered for (RocketMQ's NettyRequestProcessor).
``process_request`` may be a plain function — run inline on the loop, or on the executor it was
registered with — or a coroutine function, awaited on the loop. What the dispatcher guarantees,
whatever the processor does:

- an unknown code gets REQUEST_CODE_NOT_SUPPORTED (3) naming the code;
- ``reject_request()`` returning True gets SYSTEM_BUSY (2);
- an exception gets SYSTEM_ERROR (1) with its message, and the connection stays open;
- a oneway request (flag bit 1) gets no response;
- every response carries its request's opaque and serialize type.

The responses of inline processors for one socket read are written together, with one write.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from concurrent.futures import Executor
from typing import Any, Awaitable

from .._ext.codec import RemotingCommand
from ..errors import RemotingCommandError
from ..protocol.codes import ResponseCode
from ..protocol.command import response_for
from .connection import Connection

__all__ = ["RequestProcessor", "CodeDispatchProcessor", "Dispatcher"]

log = logging.getLogger("fastmq.remoting")

_BUSY_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"


class RequestProcessor:
    """Base class of request processors."""

    def process_request(self, conn: Connection, request: RemotingCommand
                        ) -> RemotingCommand | None | Awaitable[RemotingCommand | None]:
        raise NotImplementedError

    def reject_request(self) -> bool:
        """True to answer SYSTEM_BUSY instead of processing (flow control)."""
        return False


class CodeDispatchProcessor(RequestProcessor):
    """A processor for several request codes: ``handlers`` maps each code to a method.

    A malformed header (:class:`RemotingCommandError`) is answered as RocketMQ answers a
    RemotingCommandException: SYSTEM_ERROR with the reason; the connection stays open.
    """

    def __init__(self) -> None:
        self.handlers: dict[int, Any] = {}

    @property
    def codes(self) -> list[int]:
        return list(self.handlers)

    def process_request(self, conn: Connection, request: RemotingCommand) -> Any:
        handler = self.handlers.get(request.code)
        if handler is None:
            return response_for(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f" request type {request.code} not supported")
        try:
            return handler(conn, request)
        except RemotingCommandError as exc:
            log.warning("bad request %d from %s: %s", request.code, conn.remote_addr, exc)
            return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Dispatcher:
    """Processors by request code, and the batch dispatch loop."""

    def __init__(self) -> None:
        self._table: dict[int, tuple[RequestProcessor, Executor | None]] = {}
        self._default: tuple[RequestProcessor, Executor | None] | None = None
        self._tasks: set[asyncio.Future[Any]] = set()

    def register(self, code: int, processor: RequestProcessor, executor: Executor | None = None) -> None:
        self._table[int(code)] = (processor, executor)

    def register_default(self, processor: RequestProcessor, executor: Executor | None = None) -> None:
        self._default = (processor, executor)

    @staticmethod
    def _finish(request: RemotingCommand, response: Any) -> RemotingCommand | None:
        if request.flag & 2 or response is None:
            return None
        if not isinstance(response, RemotingCommand):
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"processor returned {type(response).__name__}, not a RemotingCommand")
        response.opaque = request.opaque
        response.flag |= 1
        response.serialize_type = request.serialize_type
        return response

    def dispatch(self, conn: Connection, requests: list[RemotingCommand]) -> None:
        """Process the requests of one read; write the inline responses with one write."""
        out: list[RemotingCommand] = []
        for req in requests:
            entry = self._table.get(req.code, self._default)
            if entry is None:
                resp: Any = response_for(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                         f" request type {req.code} not supported")
            else:
                proc, executor = entry
                try:
                    if proc.reject_request():
                        resp = response_for(req, ResponseCode.SYSTEM_BUSY, _BUSY_REMARK)
                    elif executor is not None:
                        self._spawn(conn, req, self._run_in_executor(executor, proc, conn, req))
                        continue
                    else:
                        resp = proc.process_request(conn, req)
                        if inspect.isawaitable(resp):
                            self._spawn(conn, req, resp)
                            continue
                except Exception as exc:
                    resp = self._failed(conn, req, exc)
            final = self._finish(req, resp)
            if final is not None:
                out.append(final)
        if out:
            conn.send_many(out)

    @staticmethod
    def _failed(conn: Connection, req: RemotingCommand, exc: Exception) -> RemotingCommand:
        """A processor raised: log it and answer SYSTEM_ERROR with its text; the connection stays."""
        log.exception("processing request %d from %s failed", req.code, conn.remote_addr)
        return response_for(req, ResponseCode.SYSTEM_ERROR, _error_text(exc))

    @staticmethod
    async def _run_in_executor(executor: Executor, proc: RequestProcessor, conn: Connection,
                               req: RemotingCommand) -> Any:
        resp = await asyncio.get_running_loop().run_in_executor(executor, proc.process_request, conn, req)
        if inspect.isawaitable(resp):  # an async processor registered with an executor
            resp = await resp
        return resp

    def _spawn(self, conn: Connection, req: RemotingCommand, aw: Awaitable[Any]) -> None:
        conn.begin_request()
        task = asyncio.ensure_future(self._complete(conn, req, aw))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(self, conn: Connection, req: RemotingCommand, aw: Awaitable[Any]) -> None:
        try:
            try:
                resp = await aw
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                resp = self._failed(conn, req, exc)
            final = self._finish(req, resp)
            if final is not None:
                conn.send(final)
        finally:
            conn.end_request()

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
