# Java's String.hashCode() over UTF-8 bytes, shared by the compiled twins (cimported, inlined):
# the send stage's tag codes and the record writer's index slots must be bit-exact with Java's.
from libc.stdint cimport uint8_t, uint32_t


cdef inline uint32_t jhash(const uint8_t* p, Py_ssize_t n, uint32_t h) noexcept nogil:
    """Continue ``h = 31*h + unit`` over the UTF-16 units of valid UTF-8 ``p[:n]``."""
    cdef Py_ssize_t i = 0
    cdef uint32_t c, cp
    while i < n:
        c = p[i]
        if c < 0x80:
            cp = c
            i += 1
        elif c < 0xE0:
            cp = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F)
            i += 2
        elif c < 0xF0:
            cp = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F)
            i += 3
        else:
            cp = ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F)
            i += 4
        if cp >= 0x10000:  # an astral character is two surrogate units in Java
            cp -= 0x10000
            h = h * 31 + (0xD800 + (cp >> 10))
            h = h * 31 + (0xDC00 + (cp & 0x3FF))
        else:
            h = h * 31 + cp
    return h
