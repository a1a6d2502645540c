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
    #include <string.h>
    #if defined(__GNUC__)
    __attribute__((noinline, unused))
    #endif
    static uint32_t fastmq_jhash(const uint8_t *p, Py_ssize_t n, uint32_t h) {
        /* continue h = 31*h + unit over the UTF-16 units of valid UTF-8 p[:n] */
        Py_ssize_t i = 0;
        uint32_t c, cp, w;
        while (i < n) {
            /* eight, then four ASCII bytes a step (31^8 = 2487512833 and 31^4 = 923521 mod
               2^32): a trace message's KEYS are hundreds of ids, hashed one by one into the
               index; the same sum as the single steps */
            while (i + 8 <= n) {
                uint64_t w8;
                memcpy(&w8, p + i, 8);
                if (w8 & 0x8080808080808080ull)
                    break;
                h = h * 2487512833u + (uint32_t)p[i] * 1742810335u + (uint32_t)p[i + 1] * 887503681u
                    + (uint32_t)p[i + 2] * 28629151u + (uint32_t)p[i + 3] * 923521u
                    + (uint32_t)p[i + 4] * 29791u + (uint32_t)p[i + 5] * 961u
                    + (uint32_t)p[i + 6] * 31u + (uint32_t)p[i + 7];
                i += 8;
            }
            while (i + 4 <= n) {
                memcpy(&w, p + i, 4);
                if (w & 0x80808080u)
                    break;
                h = h * 923521u + (uint32_t)p[i] * 29791u + (uint32_t)p[i + 1] * 961u
                    + (uint32_t)p[i + 2] * 31u + (uint32_t)p[i + 3];
                i += 4;
            }
            if (i >= n)
                break;
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
