# Java's String.hashCode() over UTF-8 bytes, shared by the compiled twins (cimported): the send
# stage's tag codes and the record writer's index slots must be bit-exact with Java's.
#
# Written in C to be kept out of line: gcc inlines a Cython inline function into the record
# writer's index loop, and that loop then runs ~15% slower than calling it (measured against the
# out-of-line function the single send module had).
from libc.stdint cimport uint8_t, uint32_t

cdef extern from *:
    """
    #include <stdint.h>
    #if defined(__GNUC__)
    __attribute__((noinline, unused))
    #endif
    static uint32_t fastmq_jhash(const uint8_t *p, Py_ssize_t n, uint32_t h) {
        /* continue h = 31*h + unit over the UTF-16 units of valid UTF-8 p[:n] */
        Py_ssize_t i = 0;
        uint32_t c, cp;
        while (i < n) {
            c = p[i];
            if (c < 0x80) {
                cp = c;
                i += 1;
            } else if (c < 0xE0) {
                cp = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F);
                i += 2;
            } else if (c < 0xF0) {
                cp = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
                i += 3;
            } else {
                cp = ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
                i += 4;
            }
            if (cp >= 0x10000) {  /* an astral character is two surrogate units in Java */
                cp -= 0x10000;
                h = h * 31 + (0xD800 + (cp >> 10));
                h = h * 31 + (0xDC00 + (cp & 0x3FF));
            } else {
                h = h * 31 + cp;
            }
        }
        return h;
    }
    """
    uint32_t jhash "fastmq_jhash" (const uint8_t* p, Py_ssize_t n, uint32_t h) noexcept nogil
