"""Shared plumbing of the broker processors: dispatch by request code, typed errors to responses."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from ...errors import RemotingCommandError
from ...protocol.codes import ResponseCode
from ...protocol.command import RemotingCommand, response_for
from ...remoting import Connection, RequestProcessor

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["CodeDispatchProcessor", "Handler"]

log = logging.getLogger("fastmq.broker")

Handler = Callable[[Connection, RemotingCommand], Any]


class CodeDispatchProcessor(RequestProcessor):
    """A processor registered for several request codes; ``handlers`` maps code -> method.

    A malformed header (RemotingCommandError) is answered as RocketMQ answers a
    RemotingCommandException: SYSTEM_ERROR with the reason, and the connection stays open.
    """

    def __init__(self, broker: "BrokerController") -> None:
        self.broker = broker
        self.handlers: dict[int, Handler] = {}

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
