"""Request processors and the dispatcher that runs them for a batch of requests.

A processor handles the request codes it is registered for (RocketMQ's NettyRequestProcessor).
``process_request`` may be a plain function — run inline on the loop, or on the executor it was
registered with — or a coroutine function, awaited on the loop. What the dispatcher guarantees,
whatever the processor does:

- an unknown code gets REQUEST_CODE_NOT_SUPPORTED (3) naming the code;
- ``reject_request()`` returning True gets SYSTEM_BUSY (2);
- an exception gets SYSTEM_ERROR (1) with its message, and the connection stays open; a
  malformed request (RemotingCommandError) is logged in one line, anything else with its traceback;
- a oneway request (flag bit 1) gets no response;
- every response carries its request's opaque and serialize type.

The responses of inline processors for one socket read are written together, with one write.

Gathering. Many peers with one request in flight each (RocketMQ's benchmark Producer: 16 or 64
threads, sync sends) make every socket read carry one frame, so whatever a processor pays per
call it pays per request. A processor whose ``gathers`` is True is handed the requests of every
connection read in one turn of the event loop together (:meth:`RequestProcessor.process_gathered`,
run by a ``call_soon`` after the reads of that turn): one store append for all of them, then
each connection's answers in one write. A read for any other processor first runs what was
gathered, so requests are still processed in the order they were read.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from concurrent.futures import Executor
from typing import Any, Awaitable, Callable

from .._ext.codec import RemotingCommand
from ..errors import RemotingCommandError
from ..protocol.codes import ResponseCode
from ..protocol.command import response_for
from .connection import Connection
from ..common.server_log import RepeatedLog

__all__ = ["RequestProcessor", "CodeDispatchProcessor", "Dispatcher", "Gathered", "failure_response"]

log = logging.getLogger("fastmq.remoting")
#: A client repeating one malformed request gets one line a minute for it, with a count.
_bad_requests = RepeatedLog(log)

_BUSY_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"

#: Each connection's items (see RequestProcessor.process_batch), and what is still to come.
Gathered = tuple[list[tuple[Connection, list[Any]]], Awaitable[list[tuple[Connection, list[Any]]]] | None]


class RequestProcessor:
    """Base class of request processors."""

    def process_request(self, conn: Connection, request: RemotingCommand
                        ) -> RemotingCommand | None | Awaitable[RemotingCommand | None]:
        raise NotImplementedError

    def reject_request(self) -> bool:
        """True to answer SYSTEM_BUSY instead of processing (flow control)."""
        return False

    #: True when the processor implements :meth:`process_batch`.
    batches = False

    def process_batch(self, conn: Connection, requests: list[RemotingCommand]) -> list[Any]:
        """Process a run of requests from one socket read at once (when ``batches`` is True).

        Returns a list whose items are pre-encoded response frames (``bytes``, written as
        they are), ``(request, result)`` pairs (a result as :meth:`process_request` returns
        it), or awaitables resolving to either of those (one task for all of them).
        """
        return [(req, self.process_request(conn, req)) for req in requests]

    #: True when the processor wants the requests of several connections at once
    #: (:meth:`process_gathered`); read at every socket read, so it may be a property.
    gathers = False

    def process_gathered(self, parts: list[tuple[Connection, list[RemotingCommand]]]) -> Gathered:
        """Process the requests several connections sent in one loop turn (when ``gathers``).

        Returns ``(ready, later)``: ``ready`` pairs each connection with items as
        :meth:`process_batch` returns them; ``later``, when not None, is one awaitable that
        resolves to more such pairs (a store that waits for its flush answers all of them at once).
        """
        return [(conn, self.process_batch(conn, reqs)) for conn, reqs in parts], None


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
            _bad_requests.warning((request.code, str(exc)), "bad request %d from %s: %s", request.code,
                                  conn.remote_addr, exc)
            return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failure_response(conn: Connection, req: RemotingCommand, exc: Exception) -> RemotingCommand:
    """A processor raised: log it and answer SYSTEM_ERROR with its text; the connection stays
    (call it in the ``except`` block, for the traceback).

    A malformed request (:class:`RemotingCommandError`: a missing field, a bad number) is the
    client's fault, not a bug: one warning line, no traceback, whichever path raised it."""
    if isinstance(exc, RemotingCommandError):
        _bad_requests.warning((req.code, str(exc)), "bad request %d from %s: %s", req.code, conn.remote_addr, exc)
        return response_for(req, ResponseCode.SYSTEM_ERROR, str(exc))
    log.exception("processing request %d from %s failed", req.code, conn.remote_addr)
    return response_for(req, ResponseCode.SYSTEM_ERROR, _error_text(exc))


class Dispatcher:
    """Processors by request code, and the batch dispatch loop."""

    def __init__(self) -> None:
        self._table: dict[int, tuple[RequestProcessor, Executor | None]] = {}
        self._default: tuple[RequestProcessor, Executor | None] | None = None
        self._tasks: set[asyncio.Future[Any]] = set()
        # reads held for a gathering processor until the loop's next turn (see the module doc)
        self._gathered: list[tuple[Connection, list[RemotingCommand]]] = []
        self._gather_proc: RequestProcessor | None = None
        self._gather_handle: asyncio.Handle | None = None

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
        """Process the requests of one read; write the inline responses with one write.

        A run of consecutive requests for a processor with ``process_batch`` (and no executor)
        is handed over in one call; what it returns is written with the rest (see
        :meth:`RequestProcessor.process_batch`). A read whose requests are all for a gathering
        processor waits for the other reads of this loop turn (see the module doc).
        """
        table, default = self._table, self._default
        entry = table.get(requests[0].code, default)
        if entry is not None and entry[1] is None and entry[0].gathers and (
                len(requests) == 1 or all(table.get(r.code, default) is entry for r in requests)):
            proc = entry[0]
            if self._gathered and self._gather_proc is not proc:
                self.run_gathered()
            self._gathered.append((conn, requests))
            self._gather_proc = proc
            if self._gather_handle is None:
                self._gather_handle = asyncio.get_running_loop().call_soon(self.run_gathered)
            return
        if self._gathered:  # what was read before this goes first
            self.run_gathered()
        out: list[RemotingCommand] = []
        raw: list[bytes] = []
        i, n = 0, len(requests)
        while i < n:
            req = requests[i]
            entry = table.get(req.code, default)
            if entry is not None and entry[1] is None and entry[0].batches:
                j = i + 1
                while j < n and table.get(requests[j].code, default) is entry:
                    j += 1
                self._dispatch_batch(conn, entry[0], requests[i:j], out, raw)
                i = j
                continue
            i += 1
            self._dispatch_one(conn, req, entry, out)
        if out:
            conn.send_many(out)
        if raw:
            self._write_raw(conn, raw[0] if len(raw) == 1 else b"".join(raw))

    @staticmethod
    def _write_raw(conn: Connection, data: bytes) -> None:
        """Write frames a processor encoded itself (on the loop thread; dropped once closed)."""
        if data and not conn.closed and conn.transport is not None and not conn.transport.is_closing():
            conn.wrote(data)

    def run_gathered(self) -> None:
        """Process the reads gathered so far (the loop calls it once the reads of its turn are in)."""
        parts, self._gathered = self._gathered, []
        proc, self._gather_proc = self._gather_proc, None
        if self._gather_handle is not None:
            self._gather_handle.cancel()
            self._gather_handle = None
        if not parts or proc is None:
            return
        try:
            if proc.reject_request():
                for conn, reqs in parts:
                    self._answer_all(conn, reqs, ResponseCode.SYSTEM_BUSY, _BUSY_REMARK)
                return
            ready, later = proc.process_gathered(parts)
        except Exception as exc:  # a processor bug: each request gets the error (the client may retry)
            first = self._failed(parts[0][0], parts[0][1][0], exc)  # logged once for them all
            for conn, reqs in parts:
                self._answer_all(conn, reqs, first.code, first.remark)
            return
        for conn, items in ready:
            self._deliver(conn, items)
        if later is not None:
            conns = [conn for conn, _ in parts]
            for conn in conns:
                conn.begin_request()
            task = asyncio.ensure_future(self._complete_stored(conns, later, self._deliver_all))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _answer_all(self, conn: Connection, reqs: list[RemotingCommand], code: int, remark: str | None) -> None:
        out = [f for f in (self._finish(req, response_for(req, code, remark)) for req in reqs) if f is not None]
        if out:
            conn.send_many(out)

    def _deliver(self, conn: Connection, items: list[Any]) -> None:
        """Write one connection's share of what a gathering processor returned; a failure costs
        that connection only (the others of the turn still get their answers)."""
        try:
            if len(items) == 1 and type(items[0]) is bytes:  # one buffer of frames (the usual send answer)
                self._write_raw(conn, items[0])
                return
            out: list[RemotingCommand] = []
            raw: list[bytes] = []
            self._take(conn, items, out, raw)
            if out:
                conn.send_many(out)
            if raw:
                self._write_raw(conn, raw[0] if len(raw) == 1 else b"".join(raw))
        except Exception:
            log.exception("answering %s failed; closing it", conn.remote_addr)
            conn.abort()

    async def _complete_stored(self, conns: list[Connection], aw: Awaitable[Any], answer: Callable[[Any], None]) -> None:
        """Requests that waited after they were stored (a SYNC_FLUSH group commit, a SYNC_MASTER
        slave): ``answer`` what ``aw`` gives. A processor answers its own failures there (the send
        processor turns a failed wait into SYSTEM_ERROR answers); what still raises here is a
        bug, logged, and its requests time out at their clients."""
        try:
            try:
                result = await aw
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("requests from %s failed after they were stored",
                              ", ".join(c.remote_addr for c in conns[:3]) + (" ..." if len(conns) > 3 else ""))
                return
            answer(result)
        finally:
            for conn in conns:
                conn.end_request()

    def _deliver_all(self, result: list[tuple[Connection, list[Any]]]) -> None:
        for conn, items in result:
            self._deliver(conn, items)

    def _answer_batch(self, conn: Connection, result: Any) -> None:
        """What a batch that waited gives: pre-encoded frames, or ``(request, response)`` pairs."""
        if type(result) is bytes:
            self._write_raw(conn, result)
            return
        out = [f for f in (self._finish(req, resp) for req, resp in result) if f is not None]
        if out:
            conn.send_many(out)

    def _dispatch_batch(self, conn: Connection, proc: RequestProcessor, reqs: list[RemotingCommand],
                        out: list[RemotingCommand], raw: list[bytes]) -> None:
        try:
            if proc.reject_request():
                for req in reqs:
                    final = self._finish(req, response_for(req, ResponseCode.SYSTEM_BUSY, _BUSY_REMARK))
                    if final is not None:
                        out.append(final)
                return
            items = proc.process_batch(conn, reqs)
        except Exception as exc:  # a processor bug: each request gets the error (the client may retry)
            first = self._failed(conn, reqs[0], exc)  # logged once for the run
            for req in reqs:
                final = self._finish(req, response_for(req, first.code, first.remark))
                if final is not None:
                    out.append(final)
            return
        self._take(conn, items, out, raw)

    def _take(self, conn: Connection, items: list[Any], out: list[RemotingCommand], raw: list[bytes]) -> None:
        """Sort a processor's items: frames to ``raw``, finished responses to ``out``, awaitables
        to tasks (see :meth:`RequestProcessor.process_batch`)."""
        for item in items:
            if type(item) is bytes:
                raw.append(item)
            elif type(item) is tuple:
                req, resp = item
                if inspect.isawaitable(resp):
                    self._spawn(conn, req, resp)
                    continue
                final = self._finish(req, resp)
                if final is not None:
                    out.append(final)
            else:
                self._spawn_batch(conn, item)

    def _dispatch_one(self, conn: Connection, req: RemotingCommand, entry: Any, out: list[RemotingCommand]) -> None:
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
                    return
                else:
                    resp = proc.process_request(conn, req)
                    if inspect.isawaitable(resp):
                        self._spawn(conn, req, resp)
                        return
            except Exception as exc:
                resp = self._failed(conn, req, exc)
        final = self._finish(req, resp)
        if final is not None:
            out.append(final)

    _failed = staticmethod(failure_response)

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

    def _spawn_batch(self, conn: Connection, aw: Awaitable[Any]) -> None:
        conn.begin_request()
        task = asyncio.ensure_future(self._complete_stored([conn], aw, functools.partial(self._answer_batch, conn)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def cancel_all(self) -> None:
        # gathered reads not yet processed are dropped: their peers are being disconnected and
        # nothing of them was stored or answered
        self._gathered = []
        self._gather_proc = None
        if self._gather_handle is not None:
            self._gather_handle.cancel()
            self._gather_handle = None
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
