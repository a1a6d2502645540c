"""ProcessQueue: the messages of one queue pulled but not yet consumed (RocketMQ's ProcessQueue)."""
from __future__ import annotations

import asyncio
import collections
import operator
import time
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Callable, Iterable, Sequence

from ..protocol.bodies import MASTER_ID
from ..protocol.consumer_running_info import ProcessQueueInfo
from ..protocol.message import MessageExt
from ..protocol.message_queue import MessageQueue
from .consumer_stats import QueueCounters

__all__ = ["ProcessQueue"]


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ProcessQueue:
    """The messages of one queue pulled but not yet consumed, by queue offset.

    RocketMQ keeps them in a TreeMap and commits its first key. Pull answers come in queue-offset
    order, so here the dict's insertion order is that order and its first key is the smallest
    offset (``min`` over up to 1,000 keys cost ~15 µs per commit); ``ordered`` turns False when
    an offset arrives below one already seen (an offset moved back), and ``min`` serves until
    the dict empties.
    """

    mq: MessageQueue
    next_offset: int = 0
    msgs: dict[int, MessageExt] = field(default_factory=dict)
    size_bytes: int = 0
    max_seen: int = -1
    dropped: bool = False
    task: asyncio.Task[None] | None = None
    locked: bool = False                       # orderly: the broker lock on this queue is ours
    consuming: asyncio.Task[None] | None = None  # orderly: the one task consuming this queue
    pulling_from: str | None = None            # the broker address of the last pull (master or slave)
    pull_from: int = MASTER_ID                 # the broker id the last pull answer suggested (pull_service)
    ordered: bool = True                       # msgs' insertion order is offset order
    has_compressed: bool = False               # a pull answer held a compressed body (see pull_service.inflated)
    counters: QueueCounters = field(default_factory=QueueCounters)  # consumer stats since the last fold
    # epoch seconds (``time.time()``, read as ms by the properties below), for
    # GET_CONSUMER_RUNNING_INFO; from the queue's creation, as in RocketMQ (an admin tool calls a
    # queue with cached messages and no consumption for 60 s blocked). Every pull and every commit
    # sets one: a float costs half what the millisecond int did
    last_pull_time: float = field(default_factory=time.time)
    last_consume_time: float = field(default_factory=time.time)
    last_lock_timestamp: int = field(default_factory=_now_ms)  # epoch ms

    @property
    def last_pull_timestamp(self) -> int:
        """Epoch ms of the last pull written for the queue (RocketMQ's lastPullTimestamp)."""
        return int(self.last_pull_time * 1000)

    @last_pull_timestamp.setter
    def last_pull_timestamp(self, ms: int) -> None:
        self.last_pull_time = ms / 1000

    @property
    def last_consume_timestamp(self) -> int:
        """Epoch ms of the last commit of consumed messages (RocketMQ's lastConsumeTimestamp)."""
        return int(self.last_consume_time * 1000)

    @last_consume_timestamp.setter
    def last_consume_timestamp(self, ms: int) -> None:
        self.last_consume_time = ms / 1000

    def info(self, commit_offset: int) -> ProcessQueueInfo:
        """ProcessQueue.fillProcessQueueInfo: what GET_CONSUMER_RUNNING_INFO reports of this queue."""
        d = self.msgs
        pqi = ProcessQueueInfo(commit_offset=commit_offset, locked=self.locked, dropped=self.dropped,
                               last_lock_timestamp=self.last_lock_timestamp,
                               last_pull_timestamp=self.last_pull_timestamp,
                               last_consume_timestamp=self.last_consume_timestamp)
        if d:
            offsets = list(d)  # (a listener thread may not change it: removals run on the loop)
            pqi.cached_msg_min_offset, pqi.cached_msg_max_offset = min(offsets), max(offsets)
            pqi.cached_msg_count = len(offsets)
            pqi.cached_msg_size_in_mib = self.size_bytes // (1024 * 1024)
        return pqi

    def put(self, msgs: Sequence[MessageExt]) -> None:
        if not msgs:
            return
        d = self.msgs
        if len(msgs) == 1:
            # one message an answer, as a consumer keeping up with a steady rate is mostly sent
            m = msgs[0]
            o = m.queue_offset
            if o > self.max_seen:
                d[o] = m
                self.size_bytes += len(m.body)
                self.max_seen = o
                return
        elif msgs[0].queue_offset > self.max_seen:
            # the usual case: a pull answer past everything seen, its offsets ascending
            d.update(zip(map(_queue_offset, msgs), msgs))
            self.size_bytes += sum(map(len, map(_body, msgs)))
            self.max_seen = max(self.max_seen, msgs[-1].queue_offset)
            return
        for m in msgs:
            o = m.queue_offset
            if o not in d:
                if d and o < self.max_seen:
                    self.ordered = False
                d[o] = m
                self.size_bytes += len(m.body)
                if o > self.max_seen:
                    self.max_seen = o

    def remove(self, msgs: Sequence[MessageExt]) -> int:
        """Forget consumed messages; returns the offset safe to commit (-1: nothing new)."""
        d = self.msgs
        if len(msgs) == 1:  # (the usual commit: one message)
            m = msgs[0]
            if d.pop(m.queue_offset, None) is not None:
                self.size_bytes -= len(m.body)
            else:  # not held: count what is left
                self.size_bytes = sum(map(len, map(_body, d.values())))
        else:
            before = len(d)
            # the pops run in C (a Python loop over a batch was ~3 µs per commit)
            _drain(map(d.pop, map(_queue_offset, msgs), repeat(None, len(msgs))))
            if before - len(d) == len(msgs):
                self.size_bytes -= sum(map(len, map(_body, msgs)))
            else:  # some were not held (or came twice): count what is left
                self.size_bytes = sum(map(len, map(_body, d.values())))
        if d:
            return next(iter(d)) if self.ordered else min(d)
        self.ordered = True
        return self.max_seen + 1 if self.max_seen >= 0 else -1


_queue_offset = operator.attrgetter("queue_offset")
_body = operator.attrgetter("body")
_drain: Callable[[Iterable[Any]], None] = collections.deque(maxlen=0).extend  # runs an iterator to its end, keeping nothing
