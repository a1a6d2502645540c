cimport cython
from libc.stdint cimport int64_t, uint8_t

@cython.final
cdef class FaultTable:
    cdef public object latency
    cdef public object available_from
    cdef public object present
    cdef public object unreachable
    cdef long long _worst
    cdef int64_t[::1] _lat
    cdef int64_t[::1] _avail
    cdef uint8_t[::1] _present
    cdef uint8_t[::1] _unreach
    cdef _bind(self, lat, avail, present, unreach)
    cdef _grow(self, long long broker)
    cdef bint _less(self, Py_ssize_t a, Py_ssize_t b, long long now) noexcept


# What a compiled selector may ask of the table (selector_c): inline, so asking costs what reading
# the arrays did, while the arrays stay the table's own.
@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline bint fault_unreachable(FaultTable t, Py_ssize_t b) noexcept:
    return 0 <= b < t._unreach.shape[0] and t._unreach[b] != 0


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline bint fault_available(FaultTable t, Py_ssize_t b, long long now_ms) noexcept:
    """No fault item for ``b``, or its not-available-until time has passed."""
    return b < 0 or b >= t._present.shape[0] or not t._present[b] or now_ms >= t._avail[b]


cdef inline uint8_t[::1] fault_unreachable_flags(FaultTable t):
    return t._unreach
