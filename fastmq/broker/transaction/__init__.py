"""Transactional messages on the broker: half and op records, END_TRANSACTION's work, the checks.

:class:`TransactionService` is what the broker holds (``broker.transactions``): the
:class:`~.bridge.TransactionalMessageBridge` the send and END_TRANSACTION processors store
through, and the :class:`~.check.TransactionalMessageCheckService` the controller starts on a
master only.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .bridge import TransactionalMessageBridge
from .check import TransactionalMessageCheckService

if TYPE_CHECKING:
    from .bridge import TxBroker

__all__ = ["TransactionService", "TransactionalMessageBridge", "TransactionalMessageCheckService"]


class TransactionService:
    """The broker's transaction parts, built with the broker, the check loop started by it."""

    def __init__(self, broker: TxBroker) -> None:
        self.bridge = TransactionalMessageBridge(broker)
        self.check_service = TransactionalMessageCheckService(broker, self.bridge)

    def start_checks(self) -> None:
        """On a master: the first round runs one transactionCheckInterval from now."""
        self.check_service.start()

    async def stop(self) -> None:
        await self.check_service.stop()
