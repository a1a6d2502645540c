# Included by produce_c.pyx: UNIQ_KEYs (produce_py.UniqIds and month_bounds are its twin).
# Kept in the same extension module, so its cdef functions stay direct C calls.

cdef int64_t _now_ms() noexcept:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef int64_t _month_start(int64_t ms, int ahead) noexcept:
    """The first millisecond of the UTC month holding ``ms`` (``ahead`` 1: of the month after)."""
    cdef time_t secs = <time_t>(ms // 1000)
    cdef tm t
    gmtime_r(&secs, &t)
    t.tm_mon += ahead
    if t.tm_mon == 12:
        t.tm_mon = 0
        t.tm_year += 1
    t.tm_mday = 1
    t.tm_hour = 0
    t.tm_min = 0
    t.tm_sec = 0
    return <int64_t>timegm(&t) * 1000


def month_bounds(int64_t ms) -> tuple:
    """The first millisecond of the UTC month holding ``ms``, and of the month after it."""
    return _month_start(ms, 0), _month_start(ms, 1)


@cython.final
cdef class UniqIds:
    """UNIQ_KEYs with one 20-hex-digit ``prefix``; thread-safe (each call holds the GIL throughout)."""

    cdef readonly str prefix
    cdef char _prefix[20]
    cdef uint32_t _count
    cdef int64_t _start
    cdef int64_t _next

    def __init__(self, str prefix):
        self.reseed(prefix)

    def reseed(self, str prefix) -> None:
        """A new prefix, the counter from 0 (a forked child must not repeat its parent's keys)."""
        if len(prefix) != 20 or not prefix.isascii():
            raise ValueError(f"a UNIQ_KEY prefix is 20 ASCII hex digits, not {prefix!r}")
        self.prefix = prefix
        memcpy(self._prefix, PyUnicode_DATA(prefix), 20)
        self._count = 0
        self._start = 0
        self._next = 0

    cdef uint32_t _diff(self, int64_t now) noexcept:
        if now < 0:
            now = _now_ms()
        if not (self._start <= now < self._next):
            self._start = _month_start(now, 0)
            self._next = _month_start(now, 1)
        return <uint32_t>((now - self._start) & 0xFFFFFFFF)

    cdef str _make(self, uint32_t diff, uint32_t count):
        cdef str s = PyUnicode_New(32, 127)
        cdef char* p = <char*>PyUnicode_DATA(s)
        cdef int i
        memcpy(p, self._prefix, 20)
        for i in range(8):
            p[20 + i] = _UHEX[(diff >> (28 - 4 * i)) & 15]
        for i in range(4):
            p[28 + i] = _UHEX[(count >> (12 - 4 * i)) & 15]
        return s

    cpdef str next(self, int64_t now_ms=-1):
        """A new UNIQ_KEY (``now_ms`` < 0: the clock's milliseconds)."""
        cdef uint32_t diff = self._diff(now_ms)
        cdef uint32_t c = self._count
        self._count = (c + 1) & 0xFFFF
        return self._make(diff, c)

    def take(self, Py_ssize_t n, int64_t now_ms=-1) -> list:
        """``n`` new UNIQ_KEYs from one clock read, as ``n`` calls of :meth:`next` would make them."""
        cdef uint32_t diff = self._diff(now_ms)
        cdef uint32_t c = self._count
        cdef Py_ssize_t i
        cdef list out = []
        self._count = <uint32_t>((c + n) & 0xFFFF)
        # A plain loop: a comprehension's variable is its own scope, so a cdef outside would not type it.
        for i in range(n):
            out.append(self._make(diff, <uint32_t>((c + i) & 0xFFFF)))
        return out
