"""The client's consumption rates (RocketMQ's ConsumerStatsManager), which GET_CONSUMER_RUNNING_INFO
reports per topic: pull and consume response times and TPS over the last minute, and the
messages whose consumption failed in the last hour.

Consumers do not add to these items message by message: a process queue counts into plain
attributes (:class:`QueueCounters`), and :meth:`ConsumerStatsManager.fold` moves those into the
items before each snapshot, so a consumed message costs a few integer additions.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from ..common.stats_item import StatsItemSet
from ..protocol.consumer_running_info import TopicConsumeStatus

__all__ = ["ConsumerStatsManager", "QueueCounters", "PULL_RT", "PULL_TPS", "CONSUME_RT", "CONSUME_OK_TPS",
           "CONSUME_FAILED_TPS"]

PULL_RT, PULL_TPS, CONSUME_RT = "PULL_RT", "PULL_TPS", "CONSUME_RT"
CONSUME_OK_TPS, CONSUME_FAILED_TPS = "CONSUME_OK_TPS", "CONSUME_FAILED_TPS"


@dataclass(slots=True)
class QueueCounters:
    """What one queue did since the last fold (times in whole milliseconds, as Java counts them)."""

    pull_rt_ms: int = 0
    pulls: int = 0             # pull answers that found messages
    pulled: int = 0            # messages they brought, after tag filtering
    consume_rt_ms: int = 0
    consumes: int = 0          # listener calls
    consumed_ok: int = 0
    consumed_failed: int = 0


class ConsumerStatsManager(StatsItemSet):
    """Items keyed ``topic@group``; sampled by the client instance's timers."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__((PULL_RT, PULL_TPS, CONSUME_RT, CONSUME_OK_TPS, CONSUME_FAILED_TPS), clock)

    def fold(self, group: str, topic: str, c: QueueCounters) -> None:
        """Move a queue's counters into the items and zero them."""
        key = f"{topic}@{group}"
        if c.pulls:
            self.add(PULL_RT, key, c.pull_rt_ms, c.pulls)
            self.add(PULL_TPS, key, c.pulled, c.pulls)
        if c.consumes:
            self.add(CONSUME_RT, key, c.consume_rt_ms, c.consumes)
            self.add(CONSUME_OK_TPS, key, c.consumed_ok, c.consumes)
            self.add(CONSUME_FAILED_TPS, key, c.consumed_failed, c.consumes)
        c.pull_rt_ms = c.pulls = c.pulled = c.consume_rt_ms = c.consumes = c.consumed_ok = c.consumed_failed = 0

    def consume_status(self, group: str, topic: str) -> TopicConsumeStatus:
        """A topic's TopicConsumeStatus: the last minute's rates (consume RT falls back to the hour's
        when the minute saw no consumption) and the hour's failed messages."""
        key = f"{topic}@{group}"
        rt = self.figures(CONSUME_RT, key, "minute")
        if not rt["sum"]:
            rt = self.figures(CONSUME_RT, key, "hour")
        return TopicConsumeStatus(pull_rt=float(self.figures(PULL_RT, key, "minute")["avgpt"]),
                             pull_tps=float(self.figures(PULL_TPS, key, "minute")["tps"]),
                             consume_rt=float(rt["avgpt"]),
                             consume_ok_tps=float(self.figures(CONSUME_OK_TPS, key, "minute")["tps"]),
                             consume_failed_tps=float(self.figures(CONSUME_FAILED_TPS, key, "minute")["tps"]),
                             consume_failed_msgs=int(self.figures(CONSUME_FAILED_TPS, key, "hour")["sum"]))
