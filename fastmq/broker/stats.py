"""Per-topic and per-group counters over the last minute, hour and day: RocketMQ's
BrokerStatsManager, which VIEW_BROKER_STATS_DATA serves (``mqadmin statsAll``).

Each item keeps a running ``value`` (messages) and ``times`` (calls) and snapshots of both: every
10 s for the minute (7 kept), every 10 min for the hour (7 kept), every hour for the day (25
kept). A window's figures are the growth between its oldest and newest snapshot: ``sum``, ``tps``
(per second) and ``avgpt`` (messages per call).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["BrokerStatsManager", "TOPIC_PUT_NUMS", "GROUP_GET_NUMS", "MINUTE_EVERY_S", "HOUR_EVERY_S",
           "DAY_EVERY_S"]

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
MINUTE_EVERY_S, HOUR_EVERY_S, DAY_EVERY_S = 10.0, 600.0, 3600.0
_KEEP = {"minute": 7, "hour": 7, "day": 25}

Snapshot = tuple[float, int, int]  # (seconds, value, times)


@dataclass
class StatsItem:
    value: int = 0
    times: int = 0
    windows: dict[str, deque[Snapshot]] = field(
        default_factory=lambda: {w: deque(maxlen=n) for w, n in _KEEP.items()})

    def figures(self, window: str) -> dict[str, float | int]:
        """{"sum", "tps", "avgpt"} of ``window`` (zeros until it holds two snapshots)."""
        snaps = self.windows[window]
        if len(snaps) < 2:
            return {"avgpt": 0.0, "sum": 0, "tps": 0.0}
        (t0, v0, n0), (t1, v1, n1) = snaps[0], snaps[-1]
        total = v1 - v0
        return {"avgpt": total / (n1 - n0) if n1 > n0 else 0.0, "sum": total,
                "tps": total / (t1 - t0) if t1 > t0 else 0.0}


class BrokerStatsManager:
    """The broker's stats items by name and key (``topic``, or ``topic@group`` for gets)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.items: dict[str, dict[str, StatsItem]] = {TOPIC_PUT_NUMS: {}, GROUP_GET_NUMS: {}}

    def add(self, name: str, key: str, messages: int, calls: int = 1) -> None:
        item = self.items[name].get(key)
        if item is None:
            item = self.items[name][key] = StatsItem()
            self._snap(item, self.clock())  # a window starts where the item does
        item.value += messages
        item.times += calls

    def topic_put(self, topic: str, messages: int) -> None:
        self.add(TOPIC_PUT_NUMS, topic, messages)

    def group_get(self, group: str, topic: str, messages: int) -> None:
        self.add(GROUP_GET_NUMS, f"{topic}@{group}", messages)

    def get(self, name: str, key: str) -> StatsItem | None:
        return self.items.get(name, {}).get(key)

    @staticmethod
    def _snap(item: StatsItem, now: float, windows: tuple[str, ...] = ("minute", "hour", "day")) -> None:
        for w in windows:
            item.windows[w].append((now, item.value, item.times))

    def sample(self, window: str) -> None:
        """Snapshot every item for ``window`` (the broker's timers: minute, hour, day)."""
        now = self.clock()
        for table in self.items.values():
            for item in table.values():
                self._snap(item, now, (window,))

    def stats_data(self, name: str, key: str) -> dict[str, dict[str, float | int]] | None:
        """BrokerStatsData's body for VIEW_BROKER_STATS_DATA; None for an unknown item."""
        item = self.get(name, key)
        if item is None:
            return None
        return {"statsDay": item.figures("day"), "statsHour": item.figures("hour"),
                "statsMinute": item.figures("minute")}
