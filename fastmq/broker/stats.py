"""Per-topic and per-group counters over the last minute, hour and day: RocketMQ's
BrokerStatsManager, which VIEW_BROKER_STATS_DATA serves (``mqadmin statsAll``); the windows are
:mod:`fastmq.common.stats_item`'s, sampled by the controller's timers.
"""
from __future__ import annotations

import time
from typing import Callable

from ..common.stats_item import DAY_EVERY_S, HOUR_EVERY_S, MINUTE_EVERY_S, StatsItemSet

__all__ = ["BrokerStatsManager", "TOPIC_PUT_NUMS", "GROUP_GET_NUMS", "MINUTE_EVERY_S", "HOUR_EVERY_S",
           "DAY_EVERY_S"]

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"


class BrokerStatsManager(StatsItemSet):
    """The broker's stats items by name and key (``topic``, or ``topic@group`` for gets)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__((TOPIC_PUT_NUMS, GROUP_GET_NUMS), clock)

    def topic_put(self, topic: str, messages: int) -> None:
        self.add(TOPIC_PUT_NUMS, topic, messages)

    def group_get(self, group: str, topic: str, messages: int) -> None:
        self.add(GROUP_GET_NUMS, f"{topic}@{group}", messages)

    def stats_data(self, name: str, key: str) -> dict[str, dict[str, float | int]] | None:
        """BrokerStatsData's body for VIEW_BROKER_STATS_DATA; None for an unknown item."""
        item = self.get(name, key)
        if item is None:
            return None
        return {"statsDay": item.figures("day"), "statsHour": item.figures("hour"),
                "statsMinute": item.figures("minute")}
