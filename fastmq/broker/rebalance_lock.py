"""RebalanceLockManager: which client of a group holds each queue, for orderly consumption.

An orderly consumer locks its queues (LOCK_BATCH_MQ) before consuming them and renews the lock
every 20 s; a lock not renewed for 60 s (``rocketmq.broker.rebalance.lockMaxLiveTime``) expires, so
a crashed client's queues pass to another member.
"""
from __future__ import annotations

import threading
import time
from typing import Iterable

__all__ = ["RebalanceLockManager", "LOCK_MAX_LIVE_MS", "MessageQueueKey"]

LOCK_MAX_LIVE_MS = 60_000

#: (topic, brokerName, queueId): how RocketMQ's MessageQueue compares.
MessageQueueKey = tuple[str, str, int]


class RebalanceLockManager:
    def __init__(self, max_live_ms: int = LOCK_MAX_LIVE_MS) -> None:
        self.max_live_ms = max_live_ms
        self._table: dict[str, dict[MessageQueueKey, tuple[str, int]]] = {}
        self._lock = threading.Lock()

    def _now(self) -> int:
        return int(time.monotonic() * 1000)

    def _held_by(self, group: str, mq: MessageQueueKey, client_id: str, now: int) -> bool:
        entry = self._table.get(group, {}).get(mq)
        return entry is not None and entry[0] == client_id and now - entry[1] <= self.max_live_ms

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueueKey], client_id: str) -> set[MessageQueueKey]:
        """Lock (or renew) every queue that is free, expired, or already ours; return those we hold."""
        now = self._now()
        got: set[MessageQueueKey] = set()
        with self._lock:
            table = self._table.setdefault(group, {})
            for mq in mqs:
                entry = table.get(mq)
                if entry is None or entry[0] == client_id or now - entry[1] > self.max_live_ms:
                    table[mq] = (client_id, now)
                    got.add(mq)
        return got

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueueKey], client_id: str) -> None:
        with self._lock:
            table = self._table.get(group)
            if not table:
                return
            for mq in mqs:
                entry = table.get(mq)
                if entry is not None and entry[0] == client_id:
                    del table[mq]

    def is_locked(self, group: str, mq: MessageQueueKey, client_id: str) -> bool:
        return self._held_by(group, mq, client_id, self._now())
