"""Queue selection for sends, pure-Python reference twin of ``selector_c``.

A topic's writable queues are two parallel arrays built from its route: ``queue_broker[i]`` (the
producer's number for the queue's broker) and the queue id. Selection is round robin from a counter
the caller keeps per thread (started at a random value, as ThreadLocalIndex does) and returns an
index into those arrays, -1 when there are none.

Every path that picks a queue for a try after a failed one passes over ``last_broker`` (the
broker of the try that just failed) whenever another broker has a queue, and over brokers marked
unreachable (``FaultTable.unreachable``) whenever a reachable one has a queue; the fallbacks
included, so a dead broker whose refusals are fast never wins a retry on its low latency.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

    from .fault_py import FaultTable

__all__ = ["select_queue", "select_queue_fault", "select_queue_reachable", "QueueTable"]


def select_queue(queue_broker: Sequence[int] | npt.NDArray[np.int32], counter: int, last_broker: int = -1) -> int:
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


def select_queue_fault(queue_broker: Sequence[int] | npt.NDArray[np.int32], counter: int, last_broker: int,
                       present: npt.NDArray[np.uint8], available_from: npt.NDArray[np.int64], now_ms: int,
                       unreachable: npt.NDArray[np.uint8] | None = None) -> int:
    """The first queue, round robin from ``counter``, whose broker is out of its fault penalty,
    reachable (``unreachable[b]`` is 0, when given) and not ``last_broker``; -1 when there is none
    (the caller then falls back on FaultTable.pick_one_at_least)."""
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
        # availability first: a broker in its penalty is passed over without the reachability
        # lookup (the common skip; both must hold either way)
        if ((b >= cap or not present[b] or now_ms >= available_from[b])
                and (unreachable is None or not 0 <= b < len(unreachable) or not unreachable[b])):
            return pos
    return -1


def select_queue_reachable(queue_broker: Sequence[int] | npt.NDArray[np.int32], counter: int, last_broker: int,
                           unreachable: npt.NDArray[np.uint8]) -> int:
    """Round robin from ``counter``, in order of preference: a queue of a reachable broker other
    than ``last_broker``; of a reachable one (``last_broker`` itself: it answered, where the others
    refuse connections); of a broker other than ``last_broker``; any. -1 when there are none."""
    n = len(queue_broker)
    cap = len(unreachable)
    reachable_last = other = -1
    for i in range(n):
        pos = abs(counter + i) % n
        b = queue_broker[pos]
        reachable = b < 0 or b >= cap or not unreachable[b]
        if b != last_broker:
            if reachable:
                return pos
            if other < 0:
                other = pos
        elif reachable and reachable_last < 0:
            reachable_last = pos
    if reachable_last >= 0:
        return reachable_last
    if other >= 0:
        return other
    return abs(counter) % n if n else -1


class QueueTable:
    """A topic's writable queues: ``queue_broker[i]`` is the broker number of queue ``i``.

    The object form of the two functions above, built once per route update so a send does not
    pay for converting the arrays on every selection.
    """

    def __init__(self, queue_broker: npt.ArrayLike) -> None:
        self.queue_broker = np.ascontiguousarray(queue_broker, dtype=np.int32)
        self._qb: list[int] = self.queue_broker.tolist()

    def __len__(self) -> int:
        return len(self._qb)

    def select(self, counter: int, last_broker: int = -1) -> int:
        return select_queue(self._qb, counter, last_broker)

    def select_fault(self, counter: int, last_broker: int, faults: FaultTable, now_ms: int) -> int:
        return select_queue_fault(self._qb, counter, last_broker, faults.present, faults.available_from, now_ms,
                                  faults.unreachable)

    def select_reachable(self, counter: int, last_broker: int, faults: FaultTable) -> int:
        """:func:`select_queue_reachable` with ``faults.unreachable``."""
        return select_queue_reachable(self._qb, counter, last_broker, faults.unreachable)

    def select_of_broker(self, counter: int, broker: int) -> int:
        """The ``counter``-th queue (round robin) of ``broker``; -1 when it has none."""
        idx = [i for i, b in enumerate(self._qb) if b == broker]
        if not idx:
            return -1
        return idx[abs(counter) % len(idx)]
