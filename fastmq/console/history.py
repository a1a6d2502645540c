"""A consumer group's lag over the last minutes, kept in the console's memory, bounded."""
from __future__ import annotations

import time
from collections import OrderedDict, deque

__all__ = ["LagHistory"]


class LagHistory:
    """``(time ms, total lag)`` samples per group: at most ``points`` per group, at most
    ``max_groups`` groups (the one updated longest ago goes first), nothing older than
    ``window_s``. Memory stays bounded whatever the cluster holds."""

    def __init__(self, window_s: float = 30 * 60, points: int = 360, max_groups: int = 500) -> None:
        if window_s <= 0 or points < 2 or max_groups < 1:
            raise ValueError("window_s > 0, points >= 2 and max_groups >= 1")
        self.window_ms = int(window_s * 1000)
        self.points = points
        self.max_groups = max_groups
        self._series: OrderedDict[str, deque[tuple[int, int]]] = OrderedDict()

    def add(self, group: str, lag: int, now_ms: int | None = None) -> None:
        """Record the group's total lag now."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        series = self._series.pop(group, None)
        if series is None:
            series = deque(maxlen=self.points)
        series.append((now, int(lag)))
        self._series[group] = series
        while len(self._series) > self.max_groups:
            self._series.popitem(last=False)

    def series(self, group: str, now_ms: int | None = None) -> list[tuple[int, int]]:
        """The group's samples within the window, oldest first."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return [p for p in self._series.get(group, ()) if now - p[0] <= self.window_ms]

    def __len__(self) -> int:
        return len(self._series)
