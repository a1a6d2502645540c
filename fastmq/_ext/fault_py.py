"""Latency fault tolerance, pure-Python reference twin of ``fault_c``.

RocketMQ's MQFaultStrategy: every send's latency maps, through the buckets below, to a time the
broker is avoided ("not available duration"); a failed send counts as 30 s of latency. One fault
item per broker, held in numpy arrays indexed by the producer's broker number:

    latency[b]         the last latency observed (ms)
    available_from[b]  wall-clock ms at which the broker may be chosen again
    present[b]         1 when the broker has a fault item
    unreachable[b]     1 while the broker cannot be connected to (refused, reset, connect timeout)

Unreachable is not slow (RocketMQ 5's reachable flag): a refused connection is fast, so by
latency alone a dead broker would rank above a slow live one. An unreachable broker is never
picked while a reachable one can be; only a probe that reaches it (``mark_reachable``) clears the
flag, not the end of a penalty, and ``remove`` leaves it alone.

When every broker is in its penalty box, ``pick_one_at_least`` still names one: round robin over
the better half of the reachable items other than the one to avoid (the broker whose try just
failed), ordered by (available first, lower latency, earlier end of penalty).
"""
from __future__ import annotations

import numpy as np

__all__ = ["LATENCY_MAX", "NOT_AVAILABLE_DURATION", "FAILED_SEND_LATENCY", "not_available_duration", "FaultTable"]

#: latencyMax and notAvailableDuration of MQFaultStrategy (ms).
LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
#: What a failed send (isolation) counts as when computing the penalty.
FAILED_SEND_LATENCY = 30000


def not_available_duration(latency_ms: int) -> int:
    """The penalty for a send that took ``latency_ms``: the bucket of the largest bound reached."""
    for i in range(len(LATENCY_MAX) - 1, -1, -1):
        if latency_ms >= LATENCY_MAX[i]:
            return NOT_AVAILABLE_DURATION[i]
    return 0


class FaultTable:
    """Fault items for brokers numbered 0..capacity-1 (grown on demand)."""

    def __init__(self, capacity: int = 16) -> None:
        capacity = max(1, capacity)
        self.latency = np.zeros(capacity, dtype=np.int64)
        self.available_from = np.zeros(capacity, dtype=np.int64)
        self.present = np.zeros(capacity, dtype=np.uint8)
        self.unreachable = np.zeros(capacity, dtype=np.uint8)
        self._worst = 0  # whichItemWorst: rotates pick_one_at_least over the better half

    @property
    def capacity(self) -> int:
        return len(self.present)

    def _grow(self, broker: int) -> None:
        if broker < 0:
            raise ValueError(f"broker number {broker} is negative")
        if broker >= len(self.present):
            n = max(broker + 1, 2 * len(self.present))
            for name in ("latency", "available_from", "present", "unreachable"):
                old = getattr(self, name)
                new = np.zeros(n, dtype=old.dtype)
                new[:len(old)] = old
                setattr(self, name, new)

    def update(self, broker: int, latency_ms: int, isolation: bool, now_ms: int) -> None:
        """Record a send to ``broker``; ``isolation`` marks a failed send (30 s of latency)."""
        self._grow(broker)
        duration = not_available_duration(FAILED_SEND_LATENCY if isolation else latency_ms)
        self.latency[broker] = latency_ms
        self.available_from[broker] = now_ms + duration
        self.present[broker] = 1

    def is_available(self, broker: int, now_ms: int) -> bool:
        """True unless the broker is inside its penalty (no item: available)."""
        if broker < 0 or broker >= len(self.present) or not self.present[broker]:
            return True
        return now_ms >= int(self.available_from[broker])

    def remove(self, broker: int) -> None:
        """Drop the broker's fault item (its reachability stays as it is)."""
        if 0 <= broker < len(self.present):
            self.present[broker] = 0

    def mark_unreachable(self, broker: int) -> None:
        """The broker refused or lost a connection: pass it over until :meth:`mark_reachable`."""
        self._grow(broker)
        self.unreachable[broker] = 1

    def mark_reachable(self, broker: int) -> None:
        if 0 <= broker < len(self.unreachable):
            self.unreachable[broker] = 0

    def is_reachable(self, broker: int) -> bool:
        return broker < 0 or broker >= len(self.unreachable) or not self.unreachable[broker]

    def unreachable_brokers(self) -> list[int]:
        """The numbers of the brokers marked unreachable, in order."""
        return [b for b in range(len(self.unreachable)) if self.unreachable[b]]

    def pick_one_at_least(self, now_ms: int, avoid: int = -1) -> int:
        """A broker to try when none is available: never ``avoid`` nor an unreachable one; -1
        when there is no such fault item."""
        items = [b for b in range(len(self.present))
                 if self.present[b] and not self.unreachable[b] and b != avoid]
        if not items:
            return -1
        items.sort(key=lambda b: (0 if now_ms >= self.available_from[b] else 1, int(self.latency[b]),
                                  int(self.available_from[b]), b))
        half = len(items) // 2
        if half <= 0:
            return items[0]
        self._worst += 1
        return items[self._worst % half]
