"""Queue selection for sends, pure-Python reference twin of ``selector_c``.

A topic's writable queues are two parallel arrays built from its route: ``queue_broker[i]`` (the
producer's number for the queue's broker) and the queue id. Selection is round robin from a counter
the caller keeps per thread (started at a random value, as ThreadLocalIndex does) and returns an
index into those arrays, -1 when there are none.
"""
from __future__ import annotations

import numpy as np

__all__ = ["select_queue", "select_queue_fault", "QueueTable"]


def select_queue(queue_broker, counter: int, last_broker: int = -1) -> int:
    """Round robin from ``counter``; on a retry (``last_broker`` >= 0) skip that broker's queues
    when another broker has one."""
    n = len(queue_broker)
    if n == 0:
        return -1
    if last_broker >= 0:
        for i in range(n):
            pos = abs(counter + i) % n
            if queue_broker[pos] != last_broker:
                return pos
    return abs(counter) % n


def select_queue_fault(queue_broker, counter: int, last_broker: int, present, available_from, now_ms: int) -> int:
    """The first queue, round robin from ``counter``, whose broker is out of its fault penalty and
    is not ``last_broker``; -1 when there is none (the caller then falls back on
    FaultTable.pick_one_at_least)."""
    # Some 4.x releases accepted a queue here only when its broker *equalled* the last failed
    # one, steering retries back to the broker that just failed. That is a defect; we skip the
    # last failed broker instead, which is what the fault strategy is for.
    n = len(queue_broker)
    cap = len(present)
    for i in range(n):
        pos = abs(counter + i) % n
        b = queue_broker[pos]
        if b == last_broker:
            continue
        if b >= cap or not present[b] or now_ms >= available_from[b]:
            return pos
    return -1


class QueueTable:
    """A topic's writable queues: ``queue_broker[i]`` is the broker number of queue ``i``.

    The object form of the two functions above, built once per route update so a send does not
    pay for converting the arrays on every selection.
    """

    def __init__(self, queue_broker) -> None:
        self.queue_broker = np.ascontiguousarray(queue_broker, dtype=np.int32)
        self._qb = self.queue_broker.tolist()

    def __len__(self) -> int:
        return len(self._qb)

    def select(self, counter: int, last_broker: int = -1) -> int:
        return select_queue(self._qb, counter, last_broker)

    def select_fault(self, counter: int, last_broker: int, faults, now_ms: int) -> int:
        return select_queue_fault(self._qb, counter, last_broker, faults.present, faults.available_from, now_ms)

    def select_of_broker(self, counter: int, broker: int) -> int:
        """The ``counter``-th queue (round robin) of ``broker``; -1 when it has none."""
        idx = [i for i, b in enumerate(self._qb) if b == broker]
        if not idx:
            return -1
        return idx[abs(counter) % len(idx)]
