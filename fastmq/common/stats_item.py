"""Counters over the last minute, hour and day: RocketMQ's StatsItem and StatsItemSet, which the
broker's BrokerStatsManager (VIEW_BROKER_STATS_DATA) and the client's ConsumerStatsManager
(GET_CONSUMER_RUNNING_INFO) are both made of.

Each item keeps a running ``value`` and ``times`` (calls) and snapshots of both, taken by its
owner's timers: every 10 s for the minute (7 kept), every 10 min for the hour (7 kept), every
hour for the day (25 kept). A window's figures are the growth between its oldest and newest
snapshot: ``sum``, ``tps`` (value per second) and ``avgpt`` (value per call; for an item of
response times, the mean time). As in RocketMQ, a window's first snapshot is preceded by a
zero one an interval earlier, so what an item counted before its first snapshot is spread over
one interval (not over the moments between its creation and that snapshot).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

__all__ = ["StatsItem", "StatsItemSet", "MINUTE_EVERY_S", "HOUR_EVERY_S", "DAY_EVERY_S", "WINDOWS"]

MINUTE_EVERY_S, HOUR_EVERY_S, DAY_EVERY_S = 10.0, 600.0, 3600.0
#: window -> (seconds between snapshots, snapshots kept)
WINDOWS = {"minute": (MINUTE_EVERY_S, 7), "hour": (HOUR_EVERY_S, 7), "day": (DAY_EVERY_S, 25)}

Snapshot = tuple[float, int, int]  # (seconds, value, times)


@dataclass
class StatsItem:
    value: int = 0
    times: int = 0
    #: a second running value counted in the same call (the bytes of a group's pulls, whose
    #: GROUP_GET_SIZE item takes it at each snapshot: one lookup per pull, not two)
    extra: int = 0
    windows: dict[str, deque[Snapshot]] = field(
        default_factory=lambda: {w: deque(maxlen=n) for w, (_, n) in WINDOWS.items()})

    def figures(self, window: str) -> dict[str, float | int]:
        """{"sum", "tps", "avgpt"} of ``window`` (zeros until it holds two snapshots)."""
        snaps = self.windows[window]
        if len(snaps) < 2:
            return {"avgpt": 0.0, "sum": 0, "tps": 0.0}
        (t0, v0, n0), (t1, v1, n1) = snaps[0], snaps[-1]
        total = v1 - v0
        return {"avgpt": total / (n1 - n0) if n1 > n0 else 0.0, "sum": total,
                "tps": total / (t1 - t0) if t1 > t0 else 0.0}

    def snap(self, now: float, windows: Iterable[str] = WINDOWS) -> None:
        for w in windows:
            snaps = self.windows[w]
            if not snaps:
                snaps.append((now - WINDOWS[w][0], 0, 0))
            snaps.append((now, self.value, self.times))


class StatsItemSet:
    """Stats items by name (``TOPIC_PUT_NUMS``, ``CONSUME_RT``...) and key (``topic@group``...)."""

    def __init__(self, names: Iterable[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.items: dict[str, dict[str, StatsItem]] = {n: {} for n in names}

    def add(self, name: str, key: str, value: int, calls: int = 1) -> None:
        """Add ``value`` over ``calls`` calls (for a response-time item: the milliseconds taken)."""
        item = self.items[name].get(key)
        if item is None:
            item = self.items[name][key] = StatsItem()
        item.value += value
        item.times += calls

    def get(self, name: str, key: str) -> StatsItem | None:
        return self.items.get(name, {}).get(key)

    def figures(self, name: str, key: str, window: str) -> dict[str, float | int]:
        """An item's figures over ``window``; zeros for an item never added to."""
        item = self.get(name, key)
        return item.figures(window) if item is not None else StatsItem().figures(window)

    def sample(self, window: str) -> None:
        """Snapshot every item for ``window`` (the owner's timer for it)."""
        now = self.clock()
        for table in self.items.values():
            for item in table.values():
                item.snap(now, (window,))
