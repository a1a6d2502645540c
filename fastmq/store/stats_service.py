"""Throughput over the last 10 s, 1 min and 10 min, as RocketMQ's StoreStatsService reports it.

The broker samples the store's counters once a second (``sample``); ``putTps`` and the get-side
rates are then the growth between the newest sample and the one 10, 60 or 600 samples older,
per second, three figures joined by spaces. A window not yet covered by samples is an empty
string, as in Java (``mqadmin clusterList`` reads the first figure).
"""
from __future__ import annotations

import time
from collections import deque
from typing import Callable

__all__ = ["StoreStatsService"]

WINDOWS = (10, 60, 600)
_COUNTERS = ("putMessageTimesTotal", "getMessageTimesTotalFound", "getMessageTimesTotalMiss",
             "getMessageTransferedMsgCount")


class StoreStatsService:
    """Once-a-second snapshots of the store's counters (``stats``: the store's dict)."""

    def __init__(self, stats: dict[str, int], clock: Callable[[], float] = time.monotonic) -> None:
        self.stats = stats
        self.clock = clock
        self.snapshots: deque[tuple[float, tuple[int, ...]]] = deque(maxlen=WINDOWS[-1] + 1)

    def sample(self) -> None:
        self.snapshots.append((self.clock(), tuple(self.stats.get(k, 0) for k in _COUNTERS)))

    def _tps(self, column: Callable[[tuple[int, ...]], int], window: int) -> str:
        if len(self.snapshots) <= window:
            return ""
        t0, before = self.snapshots[-1 - window]
        t1, last = self.snapshots[-1]
        if t1 <= t0:
            return "0.0"
        return str((column(last) - column(before)) / (t1 - t0))

    def _three(self, column: Callable[[tuple[int, ...]], int]) -> str:
        return " ".join(self._tps(column, w) for w in WINDOWS)

    def runtime_info(self) -> dict[str, str]:
        """putTps, getFoundTps, getMissTps, getTotalTps and getTransferedTps."""
        return {"putTps": self._three(lambda c: c[0]),
                "getFoundTps": self._three(lambda c: c[1]),
                "getMissTps": self._three(lambda c: c[2]),
                "getTotalTps": self._three(lambda c: c[1] + c[2]),
                "getTransferedTps": self._three(lambda c: c[3])}
