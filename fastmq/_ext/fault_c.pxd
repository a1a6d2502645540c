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
