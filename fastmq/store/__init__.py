"""The message store: commit log, consume queues, flush, checkpoint and recovery.

Only the store's exceptions live here, so that every store module can import them without
pulling in the others (``fastmq.errors`` is owned elsewhere; these may move there later).
"""
from __future__ import annotations

from ..errors import FastMQError

__all__ = ["StoreError", "StoreCorruptError", "MessageTooLargeError", "FlushTimeoutError",
           "StoreLockedError", "DiskFullError"]


class StoreError(FastMQError):
    """Something the store cannot do (bad directory layout, closed store, ...)."""


class StoreCorruptError(StoreError, ValueError):
    """Files on disk that do not make a valid store (gaps, wrong sizes, bad names)."""


class MessageTooLargeError(StoreError, ValueError):
    """A record larger than maxMessageSize or than one mapped file (RocketMQ: MESSAGE_ILLEGAL)."""


class FlushTimeoutError(StoreError, TimeoutError):
    """A SYNC_FLUSH append was not on disk within syncFlushTimeout (RocketMQ: FLUSH_DISK_TIMEOUT)."""


class StoreLockedError(StoreError):
    """The store directory is locked by another process (a running broker owns it)."""


class DiskFullError(StoreError, OSError):
    """No space could be reserved for a new store file (RocketMQ: SERVICE_NOT_AVAILABLE)."""
