# cython: language_level=3, embedsignature=True
"""Latency fault tolerance, compiled twin of ``fault_py`` (see it for the contract)."""
import numpy as np
from libc.stdint cimport int64_t, uint8_t
cimport cython

__all__ = ["LATENCY_MAX", "NOT_AVAILABLE_DURATION", "FAILED_SEND_LATENCY", "not_available_duration", "FaultTable"]

LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
FAILED_SEND_LATENCY = 30000

cdef long long[7] _LAT = [50, 100, 550, 1000, 2000, 3000, 15000]
cdef long long[7] _DUR = [0, 0, 30000, 60000, 120000, 180000, 600000]


cdef inline long long _duration(long long latency) noexcept nogil:
    cdef int i
    for i in range(6, -1, -1):
        if latency >= _LAT[i]:
            return _DUR[i]
    return 0


def not_available_duration(long long latency_ms):
    return _duration(latency_ms)


@cython.final
cdef class FaultTable:
    # fields are declared in fault_c.pxd, so that selector_c reads them without a Python call

    def __init__(self, Py_ssize_t capacity=16):
        if capacity < 1:
            capacity = 1
        self._bind(np.zeros(capacity, dtype=np.int64), np.zeros(capacity, dtype=np.int64),
                   np.zeros(capacity, dtype=np.uint8), np.zeros(capacity, dtype=np.uint8))
        self._worst = 0

    cdef _bind(self, lat, avail, present, unreach):
        self.latency = lat
        self.available_from = avail
        self.present = present
        self.unreachable = unreach
        self._lat = lat
        self._avail = avail
        self._present = present
        self._unreach = unreach

    @property
    def capacity(self):
        return self._present.shape[0]

    cdef _grow(self, long long broker):
        cdef Py_ssize_t n, old = self._present.shape[0]
        if broker < 0:
            raise ValueError(f"broker number {broker} is negative")
        if broker >= old:
            n = max(broker + 1, 2 * old)
            lat = np.zeros(n, dtype=np.int64); lat[:old] = self.latency
            avail = np.zeros(n, dtype=np.int64); avail[:old] = self.available_from
            pres = np.zeros(n, dtype=np.uint8); pres[:old] = self.present
            unr = np.zeros(n, dtype=np.uint8); unr[:old] = self.unreachable
            self._bind(lat, avail, pres, unr)

    def update(self, long long broker, long long latency_ms, bint isolation, long long now_ms):
        self._grow(broker)
        cdef long long duration = _duration(FAILED_SEND_LATENCY if isolation else latency_ms)
        self._lat[broker] = latency_ms
        self._avail[broker] = now_ms + duration
        self._present[broker] = 1

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def is_available(self, long long broker, long long now_ms):
        if broker < 0 or broker >= self._present.shape[0] or not self._present[broker]:
            return True
        return now_ms >= self._avail[broker]

    def remove(self, long long broker):
        """Drop the broker's fault item (its reachability stays as it is)."""
        if 0 <= broker < self._present.shape[0]:
            self._present[broker] = 0

    def mark_unreachable(self, long long broker):
        """The broker refused or lost a connection: pass it over until ``mark_reachable``."""
        self._grow(broker)
        self._unreach[broker] = 1

    def mark_reachable(self, long long broker):
        if 0 <= broker < self._unreach.shape[0]:
            self._unreach[broker] = 0

    def is_reachable(self, long long broker):
        return broker < 0 or broker >= self._unreach.shape[0] or not self._unreach[broker]

    def unreachable_brokers(self):
        """The numbers of the brokers marked unreachable, in order."""
        # A plain loop: a comprehension's variable is its own scope, so a cdef outside would not type it.
        cdef Py_ssize_t i
        cdef list out = []
        for i in range(self._unreach.shape[0]):
            if self._unreach[i]:
                out.append(i)
        return out

    cdef bint _less(self, Py_ssize_t a, Py_ssize_t b, long long now) noexcept:
        # (available first, lower latency, earlier end of penalty, lower number)
        cdef int ua = 0 if now >= self._avail[a] else 1
        cdef int ub = 0 if now >= self._avail[b] else 1
        if ua != ub:
            return ua < ub
        if self._lat[a] != self._lat[b]:
            return self._lat[a] < self._lat[b]
        if self._avail[a] != self._avail[b]:
            return self._avail[a] < self._avail[b]
        return a < b

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def pick_one_at_least(self, long long now_ms, long long avoid=-1):
        """A broker to try when none is available: never ``avoid`` nor an unreachable one; -1
        when there is no such fault item."""
        cdef Py_ssize_t cap = self._present.shape[0]
        cdef Py_ssize_t i, j, k = 0, half, cur
        cdef Py_ssize_t[::1] items = np.empty(cap, dtype=np.intp)
        for i in range(cap):
            if self._present[i] and not self._unreach[i] and i != avoid:
                # insertion sort: a producer talks to a handful of brokers
                cur = i
                j = k
                while j > 0 and self._less(cur, items[j - 1], now_ms):
                    items[j] = items[j - 1]
                    j -= 1
                items[j] = cur
                k += 1
        if k == 0:
            return -1
        half = k // 2
        if half <= 0:
            return items[0]
        self._worst += 1
        return items[self._worst % half]
