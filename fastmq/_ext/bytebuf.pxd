# A growable C byte buffer, shared by the compiled twins that build bytes (cimported, inlined).
from libc.stdint cimport uint8_t
from libc.stdlib cimport free, realloc


cdef struct ByteBuf:
    uint8_t* p
    Py_ssize_t n      # bytes written
    Py_ssize_t cap    # bytes allocated


cdef inline bint bytebuf_grow(ByteBuf* b, Py_ssize_t extra, Py_ssize_t min_cap) noexcept nogil:
    """Room for ``extra`` more bytes: the buffer at least doubles, and is never below ``min_cap``.
    False when memory is short (the buffer as it was); usable without the GIL."""
    cdef Py_ssize_t cap
    cdef uint8_t* grown
    if b.n + extra <= b.cap:
        return True
    cap = max(b.n + extra, b.cap * 2, min_cap)
    grown = <uint8_t*>realloc(b.p, cap)
    if grown == NULL:
        return False
    b.p = grown
    b.cap = cap
    return True


cdef inline int bytebuf_reserve(ByteBuf* b, Py_ssize_t extra, Py_ssize_t min_cap) except -1:
    """:func:`bytebuf_grow`, raising MemoryError when memory is short."""
    if b.n + extra <= b.cap:
        return 0
    if not bytebuf_grow(b, extra, min_cap):
        raise MemoryError()
    return 0


cdef inline void bytebuf_free(ByteBuf* b) noexcept nogil:
    free(b.p)
    b.p = NULL
    b.n = 0
    b.cap = 0
