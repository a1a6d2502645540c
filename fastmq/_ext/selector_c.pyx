# cython: language_level=3, embedsignature=True
"""Queue selection for sends, compiled twin of ``selector_py`` (see it for the contract)."""
from libc.stdint cimport int32_t, int64_t, uint8_t
cimport cython
import numpy as np

from fastmq._ext.fault_c cimport FaultTable, fault_available, fault_unreachable, fault_unreachable_flags

__all__ = ["select_queue", "select_queue_fault", "select_queue_reachable", "QueueTable"]


cdef inline Py_ssize_t _pos(long long counter, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    cdef long long v = counter + i
    if v < 0:
        v = -v
    return <Py_ssize_t>(v % n)


@cython.boundscheck(False)
@cython.wraparound(False)
def select_queue(const int32_t[::1] queue_broker, long long counter, long long last_broker=-1):
    cdef Py_ssize_t n = queue_broker.shape[0]
    cdef Py_ssize_t i, pos
    if n == 0:
        return -1
    if last_broker >= 0:
        for i in range(n):
            pos = _pos(counter, i, n)
            if queue_broker[pos] != last_broker:
                return pos
    return _pos(counter, 0, n)


@cython.boundscheck(False)
@cython.wraparound(False)
def select_queue_fault(const int32_t[::1] queue_broker, long long counter, long long last_broker,
                       const uint8_t[::1] present, const int64_t[::1] available_from, long long now_ms,
                       const uint8_t[::1] unreachable=None):
    # Some 4.x releases accepted a queue here only when its broker *equalled* the last failed
    # one, steering retries back to the broker that just failed. That is a defect; we skip the
    # last failed broker instead, which is what the fault strategy is for.
    cdef Py_ssize_t n = queue_broker.shape[0]
    cdef Py_ssize_t cap = present.shape[0]
    cdef Py_ssize_t ucap = 0 if unreachable is None else unreachable.shape[0]
    cdef Py_ssize_t i, pos
    cdef int32_t b
    if available_from.shape[0] < cap:
        raise ValueError("available_from is shorter than present")
    for i in range(n):
        pos = _pos(counter, i, n)
        b = queue_broker[pos]
        if b == last_broker:
            continue
        # availability first: a broker in its penalty is passed over without the reachability
        # lookup (the common skip; both must hold either way)
        if ((b < 0 or b >= cap or not present[b] or now_ms >= available_from[b])
                and not (0 <= b < ucap and unreachable[b])):
            return pos
    return -1


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _select_reachable(const int32_t[::1] queue_broker, long long counter, long long last_broker,
                                  const uint8_t[::1] unreachable) noexcept:
    # the preference order of selector_py.select_queue_reachable, in one pass
    cdef Py_ssize_t n = queue_broker.shape[0]
    cdef Py_ssize_t cap = unreachable.shape[0]
    cdef Py_ssize_t i, pos, reachable_last = -1, other = -1
    cdef int32_t b
    cdef bint reachable
    for i in range(n):
        pos = _pos(counter, i, n)
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
    return _pos(counter, 0, n) if n else -1


def select_queue_reachable(const int32_t[::1] queue_broker, long long counter, long long last_broker,
                           const uint8_t[::1] unreachable):
    return _select_reachable(queue_broker, counter, last_broker, unreachable)


@cython.final
cdef class QueueTable:
    """A topic's writable queues as the producer selects among them (see ``selector_py``)."""

    cdef public object queue_broker
    cdef int32_t[::1] _qb
    cdef Py_ssize_t _n

    def __init__(self, queue_broker):
        arr = np.ascontiguousarray(queue_broker, dtype=np.int32)
        self.queue_broker = arr
        self._qb = arr
        self._n = arr.shape[0]

    def __len__(self):
        return self._n

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def select(self, long long counter, long long last_broker=-1):
        cdef Py_ssize_t i, pos, n = self._n
        if n == 0:
            return -1
        if last_broker >= 0:
            for i in range(n):
                pos = _pos(counter, i, n)
                if self._qb[pos] != last_broker:
                    return pos
        return _pos(counter, 0, n)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def select_fault(self, long long counter, long long last_broker, FaultTable faults, long long now_ms):
        # Avoid the last failed broker, never prefer it: see select_queue_fault.
        cdef Py_ssize_t i, pos, n = self._n
        cdef int32_t b
        for i in range(n):
            pos = _pos(counter, i, n)
            b = self._qb[pos]
            if b == last_broker:
                continue
            if fault_available(faults, b, now_ms) and not fault_unreachable(faults, b):
                return pos
        return -1

    def select_reachable(self, long long counter, long long last_broker, FaultTable faults):
        """``select_queue_reachable`` with ``faults.unreachable``."""
        return _select_reachable(self._qb, counter, last_broker, fault_unreachable_flags(faults))

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def select_of_broker(self, long long counter, long long broker):
        """The ``counter``-th queue (round robin) of ``broker``; -1 when it has none."""
        cdef Py_ssize_t i, k = 0, n = self._n
        for i in range(n):
            if self._qb[i] == broker:
                k += 1
        if k == 0:
            return -1
        k = _pos(counter, 0, k)
        for i in range(n):
            if self._qb[i] == broker:
                if k == 0:
                    return i
                k -= 1
        return -1
