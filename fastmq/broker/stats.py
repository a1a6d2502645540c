"""Per-topic and per-group counters over the last minute, hour and day: RocketMQ's
BrokerStatsManager, which VIEW_BROKER_STATS_DATA serves (``mqadmin statsAll``, rocketmq-exporter);
the windows are :mod:`fastmq.common.stats_item`'s, sampled by the controller's timers.

The items rocketmq-exporter asks for, with 4.9.8's keys: TOPIC_PUT_NUMS and TOPIC_PUT_SIZE
(``topic``), GROUP_GET_NUMS, GROUP_GET_SIZE and SNDBCK_PUT_NUMS (``topic@group``), BROKER_PUT_NUMS
and BROKER_GET_NUMS (the cluster name). The send path counts only TOPIC_PUT_NUMS, a batch at a
time, and a pull its GROUP_GET_NUMS item, whose bytes become GROUP_GET_SIZE at each snapshot; the
others cost them nothing: TOPIC_PUT_SIZE and the broker totals are read from counters
the store already keeps (the consume queues' entry sizes, the store's totals) just before each
snapshot (:meth:`BrokerStatsManager.feed`), so their windows are the same growth between snapshots.
"""
from __future__ import annotations

import time
from typing import Callable, Mapping

from ..common.stats_item import DAY_EVERY_S, HOUR_EVERY_S, MINUTE_EVERY_S, StatsItem, StatsItemSet

__all__ = ["BrokerStatsManager", "TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE", "GROUP_GET_NUMS", "GROUP_GET_SIZE",
           "SNDBCK_PUT_NUMS", "BROKER_PUT_NUMS", "BROKER_GET_NUMS", "Tally", "MINUTE_EVERY_S", "HOUR_EVERY_S",
           "DAY_EVERY_S"]

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"

#: what :meth:`BrokerStatsManager.feed` reads: item name -> {key: running total}
Feed = Callable[[], Mapping[str, Mapping[str, int]]]


class BrokerStatsManager(StatsItemSet):
    """The broker's stats items by name and key (``topic``, or ``topic@group`` for gets)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, feed: Feed | None = None) -> None:
        super().__init__((TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS,
                          BROKER_PUT_NUMS, BROKER_GET_NUMS), clock)
        #: the running totals of the items read from the store (set by the controller)
        self.feed_from = feed
        self._gets = self.items[GROUP_GET_NUMS]

    def topic_put(self, topic: str, messages: int) -> None:
        self.add(TOPIC_PUT_NUMS, topic, messages)

    def group_get(self, group: str, topic: str, messages: int, size: int = 0) -> None:
        """A pull that found ``messages`` of ``size`` bytes (one call per pull, not per message;
        the bytes ride on the GROUP_GET_NUMS item, see :meth:`feed`)."""
        key = f"{topic}@{group}"
        table = self._gets
        item = table.get(key)
        if item is None:
            item = table[key] = StatsItem()
        item.value += messages
        item.times += 1
        item.extra += size

    def send_back(self, group: str, topic: str) -> None:
        """CONSUMER_SEND_MSG_BACK of a message of ``topic`` (its original topic) by ``group``."""
        self.add(SNDBCK_PUT_NUMS, f"{topic}@{group}", 1)

    def feed(self) -> None:
        """Set the derived items to their running totals (before a snapshot): GROUP_GET_SIZE from
        the bytes the GROUP_GET_NUMS items carry, and the store-read items. RocketMQ adds no call
        count to the broker totals; TOPIC_PUT_SIZE counts one call per message there, so its
        ``avgpt`` is the mean message size here too."""
        sizes = self.items[GROUP_GET_SIZE]
        for key, got in self._gets.items():
            item = sizes.get(key)
            if item is None:
                item = sizes[key] = StatsItem()
            item.value, item.times = got.extra, got.times
        if self.feed_from is None:
            return
        for name, totals in self.feed_from().items():
            table = self.items[name]
            for key, value in totals.items():
                item = table.get(key)
                if item is None:
                    item = table[key] = StatsItem()
                item.value = value
            if name == TOPIC_PUT_SIZE:  # calls: the topic's messages, as incTopicPutSize counts
                puts = self.items[TOPIC_PUT_NUMS]
                for key, item in table.items():
                    p = puts.get(key)
                    item.times = p.value if p is not None else 0

    def sample(self, window: str) -> None:
        self.feed()
        super().sample(window)

    def stats_data(self, name: str, key: str) -> dict[str, dict[str, float | int]] | None:
        """BrokerStatsData's body for VIEW_BROKER_STATS_DATA; None for an unknown item."""
        item = self.get(name, key)
        if item is None:
            return None
        return {"statsDay": item.figures("day"), "statsHour": item.figures("hour"),
                "statsMinute": item.figures("minute")}


class Tally:
    """Counts by a tuple of label values, for events off the send and pull paths (a message moved
    to its group's DLQ, a transaction committed or rolled back)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, ...], int] = {}

    def count(self, *key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
