"""A put's outcome: RocketMQ's ``PutMessageStatus`` and ``PutMessageResult``.

The broker's send processor turns them into response codes; the schedule and transaction
services read them after their own puts.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["PutStatus", "PUT_OK", "PutResult"]


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    # SYNC_MASTER: stored on the master, but no slave has it (yet)
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class PutResult:
    """One batch's outcome. Offsets describe the first message; ``msg_id`` holds all ids."""

    status: PutStatus
    msg_id: str = ""
    queue_offset: int = 0
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_num: int = 0
    remark: str | None = None
    store_timestamp: int = 0

    @property
    def ok(self) -> bool:
        """Stored (FLUSH_DISK_TIMEOUT and the SYNC_MASTER statuses are stored too, just not
        known durable or replicated)."""
        return self.status in _STORED


#: PutStatus.PUT_OK, read once: read off the Enum class, a member takes the metaclass's attribute
#: hook (~400 instructions); the send path's store and processor read this name instead
PUT_OK = PutStatus.PUT_OK
_STORED = frozenset((PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT,
                     PutStatus.SLAVE_NOT_AVAILABLE))
