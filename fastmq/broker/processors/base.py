"""Shared plumbing of the broker processors: dispatch by request code, with the broker at hand."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ...protocol.command import RemotingCommand
from ...remoting import CodeDispatchProcessor as _CodeDispatch
from ...remoting import Connection

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["CodeDispatchProcessor", "Handler"]

Handler = Callable[[Connection, RemotingCommand], Any]


class CodeDispatchProcessor(_CodeDispatch):
    """A broker processor: ``handlers`` maps request codes to methods that use ``self.broker``."""

    def __init__(self, broker: "BrokerController") -> None:
        super().__init__()
        self.broker = broker
