# cython: boundscheck=False, wraparound=False
"""A traced client's records and its dispatcher's packer, compiled (see ``trace_encode_py``, the
reference both are tested against).

The send path (produce_c) calls :meth:`PubRows.add_row` directly: the record is written from the
strings' own bytes (ASCII ones read in place) into one growing C buffer, with no Python object
made per send. :class:`TracePacker` is the dispatcher's thread: it takes those buffers over
whole, cuts them into trace messages, makes each message's KEYS (each word once, as
:func:`join_keys`) and compresses it, all without the GIL.
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_Clear
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.pythread cimport (NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_free_lock, PyThread_release_lock, PyThread_type_lock)
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memchr, memcmp, memcpy
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport write

from .bytebuf cimport ByteBuf, bytebuf_free, bytebuf_grow, bytebuf_reserve
from .wire_facts cimport NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    void* PyUnicode_DATA(object o)
    # (no ``except``: a NULL is checked and its error cleared here)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)

cdef extern from "pythread.h":
    int PyThread_acquire_lock_timed(PyThread_type_lock lock, long long microseconds, int intr_flag) nogil

import zlib

__all__ = ["PubRows", "TracePacker", "join_keys"]

cdef Py_ssize_t _MIN_CAP = 1 << 16
cdef uint8_t _S = NAME_VALUE_SEPARATOR   # TraceConstants' CONTENT_SPLITOR
cdef uint8_t _E = PROPERTY_SEPARATOR     # and FIELD_SPLITOR
cdef uint8_t _SP = 32                    # MessageConst.KEY_SEPARATOR
cdef uint64_t _FNV_OFFSET = 0xcbf29ce484222325
cdef uint64_t _FNV_PRIME = 0x100000001b3
cdef uint64_t _MIX_8 = 0x9e3779b97f4a7c15
cdef uint64_t _MIX_FINISH = 0xff51afd7ed558ccd


cdef inline int _put(ByteBuf* b, const char* p, Py_ssize_t n) except -1:
    if b.n + n > b.cap:
        bytebuf_reserve(b, n, _MIN_CAP)
    memcpy(b.p + b.n, p, n)
    b.n += n
    return 0


cdef inline int _put_byte(ByteBuf* b, uint8_t c) except -1:
    if b.n + 1 > b.cap:
        bytebuf_reserve(b, 1, _MIN_CAP)
    b.p[b.n] = c
    b.n += 1
    return 0


cdef int _put_str(ByteBuf* b, str s) except -1:
    """``s`` in UTF-8; a lone surrogate as ``?`` (Java's getBytes writes that)."""
    cdef const char* p
    cdef Py_ssize_t n = 0
    if PyUnicode_IS_ASCII(s):
        return _put(b, <const char*>PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s))
    p = PyUnicode_AsUTF8AndSize(s, &n)
    if p != NULL:
        return _put(b, p, n)
    PyErr_Clear()
    u = s.encode("utf-8", "replace")
    return _put(b, PyBytes_AS_STRING(u), PyBytes_GET_SIZE(u))


cdef inline int _put_text_or_null(ByteBuf* b, object s) except -1:
    if s is None:
        return _put(b, b"null", 4)
    return _put_str(b, <str>s)


cdef const char* _PAIRS = (b"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                           b"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                           b"8081828384858687888990919293949596979899")


@cython.cdivision(True)
cdef Py_ssize_t _int_text(int64_t v, char* out) noexcept:
    """``v`` in decimal into ``out`` (24 bytes at least); returns its length."""
    cdef char tmp[24]
    cdef int i = 24
    cdef uint64_t u = (<uint64_t>(-(v + 1)) + 1) if v < 0 else <uint64_t>v
    cdef uint64_t d
    if u < 100 and v >= 0:  # (a body's length under 100 bytes, a send's cost in ms: the usual)
        if u < 10:
            out[0] = <char>(48 + u)
            return 1
        out[0] = _PAIRS[2 * u]
        out[1] = _PAIRS[2 * u + 1]
        return 2
    while u >= 100:  # two digits a step
        d = u % 100
        u = u // 100
        i -= 2
        tmp[i] = _PAIRS[2 * d]
        tmp[i + 1] = _PAIRS[2 * d + 1]
    if u >= 10:
        i -= 2
        tmp[i] = _PAIRS[2 * u]
        tmp[i + 1] = _PAIRS[2 * u + 1]
    else:
        i -= 1
        tmp[i] = <char>(48 + u)
    if v < 0:
        i -= 1
        tmp[i] = 45  # '-'
    memcpy(out, &tmp[i], 24 - i)
    return 24 - i


cdef inline const char* _utf8_view(str s, Py_ssize_t* n) noexcept:
    """``s``'s UTF-8, held by ``s`` itself (its ASCII data, or its cached UTF-8); NULL when it has
    a lone surrogate (no error left set)."""
    cdef const char* p
    if PyUnicode_IS_ASCII(s):
        n[0] = PyUnicode_GET_LENGTH(s)
        return <const char*>PyUnicode_DATA(s)
    p = PyUnicode_AsUTF8AndSize(s, n)
    if p == NULL:
        PyErr_Clear()
    return p


cdef inline char* _field(char* w, const char* p, Py_ssize_t n) noexcept:
    """``p`` and a field separator at ``w`` (room made); returns where the next field starts."""
    memcpy(w, p, n)
    w[n] = _S
    return w + n + 1


cdef inline char* _field_sp(char* w, const char* p, Py_ssize_t n) noexcept:
    memcpy(w, p, n)
    w[n] = _SP
    return w + n + 1


cdef inline int _put_int(ByteBuf* b, int64_t v) except -1:
    cdef char tmp[24]
    return _put(b, tmp, _int_text(v, tmp))


@cython.final
@cython.auto_pickle(False)
cdef class PubRows:
    """Pub records of answered sends, at most ``limit`` of them (see ``trace_encode_py.PubRows``)."""

    def __init__(self, str trace_topic, str group, store_host, Py_ssize_t limit, Py_ssize_t wake_at):
        if limit < 0:
            raise ValueError(f"limit {limit}")
        free(self.ends)
        self.ends = <Py_ssize_t*>malloc((limit + 1) * 2 * sizeof(Py_ssize_t))
        if self.ends == NULL:
            raise MemoryError()
        self.n = 0
        self.text.n = self.keys.n = 0
        self.trace_topic = trace_topic
        self.group = group
        self.store_host = store_host
        self.limit = limit
        self.wake_at = wake_at
        self.group_text = group.encode("utf-8", "replace")
        self.hosts = {}
        self.last_broker = self.last_host = self.last_topic = None

    def __dealloc__(self):
        bytebuf_free(&self.text)
        bytebuf_free(&self.keys)
        free(self.ends)

    def __len__(self):
        return self.n

    def add(self, int64_t begin_ms, int64_t end_ms, topic, msg_id, tags, keys, broker, int64_t length, int mtype,
            offset_id, bint ok, region) -> int:
        """Record one answered send: 0, 1 (the count reached ``wake_at``) or -1 (full: dropped)."""
        return self.add_row(begin_ms, end_ms, topic, msg_id, tags, keys, broker, length, mtype, offset_id, ok, region)

    cdef int add_row(self, int64_t begin_ms, int64_t end_ms, object topic, object msg_id, object tags, object keys,
                     object broker, int64_t length, int mtype, object offset_id, bint ok, object region) except -2:
        cdef Py_ssize_t n = self.n
        cdef Py_ssize_t rn = 0, tn = 0, mn = 0, gn, hn, tgn = 4, kn = 4, on = 4, need
        cdef const char* rp
        cdef const char* tp
        cdef const char* mp
        cdef const char* tgp = b"null"
        cdef const char* kp = b"null"
        cdef const char* op = b"null"
        cdef char* w
        cdef bytes host
        if n >= self.limit:
            return -1
        if (type(topic) is not str or type(msg_id) is not str or type(region) is not str
                or (tags is not None and type(tags) is not str) or (keys is not None and type(keys) is not str)):
            raise TypeError("a Pub record's text field is not a str")
        if mtype < 0 or mtype > 3:
            raise ValueError(f"message type ordinal {mtype!r}")
        if topic is not self.last_topic:  # (one producer's sends mostly share a topic's str)
            if (<str>topic).startswith(self.trace_topic):
                return 0
            self.last_topic = topic
        if broker is self.last_broker and self.last_host is not None:
            host = self.last_host
        else:
            host = self._host(broker)
        if offset_id is not None and type(offset_id) is not str:
            offset_id = str(offset_id)
        # every field's UTF-8 in place (ASCII text is its own), so the record is written with
        # one reserve and plain copies; text UTF-8 cannot encode takes the general writer
        rp = _utf8_view(<str>region, &rn)
        tp = _utf8_view(<str>topic, &tn)
        mp = _utf8_view(<str>msg_id, &mn)
        if tags is not None:
            tgp = _utf8_view(<str>tags, &tgn)
        if keys is not None:
            kp = _utf8_view(<str>keys, &kn)
        if offset_id is not None:
            op = _utf8_view(<str>offset_id, &on)
        if rp == NULL or tp == NULL or mp == NULL or tgp == NULL or kp == NULL or op == NULL:
            return self._add_general(n, begin_ms, end_ms, topic, msg_id, tags, keys, host, length, mtype,
                                     offset_id, ok, region)
        if begin_ms != self.last_ms or self.ms_len == 0:
            self.ms_len = _int_text(begin_ms, self.ms_text)
            self.last_ms = begin_ms
        gn = PyBytes_GET_SIZE(self.group_text)
        hn = PyBytes_GET_SIZE(host)
        # "Pub", 13 separators and the end, two numbers of at most 20 digits, the type, "false"
        need = 3 + 14 + 2 * 24 + 1 + 5 + self.ms_len + rn + gn + tn + mn + tgn + kn + hn + on
        bytebuf_reserve(&self.text, need, _MIN_CAP)
        bytebuf_reserve(&self.keys, mn + kn + 2, _MIN_CAP)
        w = <char*>self.text.p + self.text.n
        memcpy(w, b"Pub", 3)
        w[3] = _S
        w = _field(w + 4, self.ms_text, self.ms_len)
        w = _field(w, rp, rn)
        w = _field(w, PyBytes_AS_STRING(self.group_text), gn)
        w = _field(w, tp, tn)
        w = _field(w, mp, mn)
        w = _field(w, tgp, tgn)
        w = _field(w, kp, kn)
        w = _field(w, PyBytes_AS_STRING(host), hn)
        w += _int_text(length, w)
        w[0] = _S
        w += 1 + _int_text(end_ms - begin_ms, w + 1)
        w[0] = _S
        w[1] = <char>(48 + mtype)
        w[2] = _S
        w = _field(w + 3, op, on)
        if ok:
            memcpy(w, b"true", 4)
            w += 4
        else:
            memcpy(w, b"false", 5)
            w += 5
        w[0] = _E
        self.text.n = (w + 1) - <char*>self.text.p
        w = _field_sp(<char*>self.keys.p + self.keys.n, mp, mn)
        if keys:  # (a non-empty str: its text is viewed above)
            w = _field_sp(w, kp, kn)
        self.keys.n = w - <char*>self.keys.p
        self.ends[2 * n] = self.text.n
        self.ends[2 * n + 1] = self.keys.n
        self.n = n + 1
        return 1 if n + 1 == self.wake_at else 0

    cdef int _add_general(self, Py_ssize_t n, int64_t begin_ms, int64_t end_ms, object topic, object msg_id,
                          object tags, object keys, bytes host, int64_t length, int mtype, object offset_id, bint ok,
                          object region) except -2:
        """:meth:`add_row`'s record when a field is text UTF-8 cannot encode (written as ``?``)."""
        cdef Py_ssize_t t0 = self.text.n, k0 = self.keys.n
        cdef ByteBuf* t = &self.text
        try:
            _put(t, b"Pub", 3)
            _put_byte(t, _S)
            _put_int(t, begin_ms)
            _put_byte(t, _S)
            _put_str(t, <str>region)
            _put_byte(t, _S)
            _put(t, PyBytes_AS_STRING(self.group_text), PyBytes_GET_SIZE(self.group_text))
            _put_byte(t, _S)
            _put_str(t, <str>topic)
            _put_byte(t, _S)
            _put_str(t, <str>msg_id)
            _put_byte(t, _S)
            _put_text_or_null(t, tags)
            _put_byte(t, _S)
            _put_text_or_null(t, keys)
            _put_byte(t, _S)
            _put(t, PyBytes_AS_STRING(host), PyBytes_GET_SIZE(host))
            _put_byte(t, _S)
            _put_int(t, length)
            _put_byte(t, _S)
            _put_int(t, end_ms - begin_ms)
            _put_byte(t, _S)
            _put_byte(t, <uint8_t>(48 + mtype))
            _put_byte(t, _S)
            _put_text_or_null(t, offset_id)
            _put_byte(t, _S)
            if ok:
                _put(t, b"true", 4)
            else:
                _put(t, b"false", 5)
            _put_byte(t, _E)
            _put_str(&self.keys, <str>msg_id)
            _put_byte(&self.keys, _SP)
            if keys:
                _put_str(&self.keys, <str>keys)
                _put_byte(&self.keys, _SP)
        except BaseException:
            self.text.n, self.keys.n = t0, k0  # (no part of a record is left behind)
            raise
        self.ends[2 * n] = self.text.n
        self.ends[2 * n + 1] = self.keys.n
        self.n = n + 1
        return 1 if n + 1 == self.wake_at else 0

    cdef bytes _host(self, object broker):
        h = self.hosts.get(broker)
        if h is None:
            addr = self.store_host(broker)
            h = b"null" if addr is None else str(addr).encode("utf-8", "replace")
            self.hosts[broker] = h
        self.last_broker = broker
        self.last_host = <bytes>h
        return <bytes>h

    def take(self):
        """Everything held, moved to a new PubRows of the same settings; this one is left empty
        and asks ``store_host`` again."""
        cdef PubRows out = PubRows(self.trace_topic, self.group, self.store_host, self.limit, self.wake_at)
        cdef ByteBuf b = out.text
        cdef Py_ssize_t* e = out.ends
        out.text = self.text
        self.text = b
        b = out.keys
        out.keys = self.keys
        self.keys = b
        out.ends = self.ends
        self.ends = e
        out.n = self.n
        self.n = 0
        self.hosts = {}
        self.last_broker = self.last_host = None
        return out

    def add_text(self, bytes text not None, bytes keys not None) -> int:
        """Record an event already encoded (its records' UTF-8 text, its keys each followed by a
        space): as :meth:`add`, 0, 1 or -1."""
        cdef Py_ssize_t n = self.n
        if n >= self.limit:
            return -1
        # (room for both first: a refusal leaves no half of an event behind)
        bytebuf_reserve(&self.text, PyBytes_GET_SIZE(text), _MIN_CAP)
        bytebuf_reserve(&self.keys, PyBytes_GET_SIZE(keys), _MIN_CAP)
        _put(&self.text, PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text))
        _put(&self.keys, PyBytes_AS_STRING(keys), PyBytes_GET_SIZE(keys))
        self.ends[2 * n] = self.text.n
        self.ends[2 * n + 1] = self.keys.n
        self.n = n + 1
        return 1 if n + 1 == self.wake_at else 0

    def chunk(self, Py_ssize_t start, Py_ssize_t room, keys_room=None):
        """Records ``start`` onwards while their text stays below ``room`` bytes (and their keys
        below ``keys_room``, when given), and the one that reaches it: their text, their keys and
        the index after them."""
        cdef Py_ssize_t j, t0 = 0, k0 = 0, t1 = 0, k1 = 0
        cdef Py_ssize_t kroom = PY_SSIZE_T_MAX if keys_room is None else <Py_ssize_t>keys_room
        if start < 0 or start > self.n:
            raise IndexError(f"record {start} of {self.n}")
        if start:
            t0, k0 = self.ends[2 * start - 2], self.ends[2 * start - 1]
        j = start
        while j < self.n:
            j += 1
            if self.ends[2 * j - 2] - t0 >= room or self.ends[2 * j - 1] - k0 >= kroom:
                break
        if j:
            t1, k1 = self.ends[2 * j - 2], self.ends[2 * j - 1]
        text = PyBytes_FromStringAndSize(<char*>self.text.p + t0, t1 - t0) if t1 > t0 else b""
        keys = PyBytes_FromStringAndSize(<char*>self.keys.p + k0, k1 - k0) if k1 > k0 else b""
        return text, keys, j


cdef Py_ssize_t _count_words(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """How many words ``p`` holds at most (its separators plus one): what sizes the set below, so
    that a message of a few records does not clear a table sized for its bytes."""
    cdef Py_ssize_t c = 1
    cdef const uint8_t* at = p
    cdef const uint8_t* end = p + n
    while at < end:
        at = <const uint8_t*>memchr(at, _SP, end - at)
        if at == NULL:
            break
        c += 1
        at += 1
    return c


cdef Py_ssize_t _unique_words(const uint8_t* p, Py_ssize_t n, uint8_t* out, Py_ssize_t* slots,
                              Py_ssize_t mask) noexcept nogil:
    """The words of ``p`` each once into ``out``, space-separated; returns the bytes written.
    ``slots``: an empty open-addressed set of ``mask + 1`` (start + 1, length) pairs. A word's
    end is found by memchr and it is hashed eight bytes a step (the words are message ids of
    some 32 bytes)."""
    cdef Py_ssize_t i = 0, s, w, m = 0, at, k
    cdef uint64_t h, x = 0
    cdef const uint8_t* e
    while i < n:
        if p[i] == _SP:
            i += 1
            continue
        s = i
        e = <const uint8_t*>memchr(p + i, _SP, n - i)
        i = n if e == NULL else e - p
        w = i - s
        h = _FNV_OFFSET
        k = s
        while k + 8 <= i:
            memcpy(&x, p + k, 8)
            h = (h ^ x) * _MIX_8
            h ^= h >> 32  # (a product's high bits never reach the low ones, which pick the slot)
            k += 8
        while k < i:
            h = (h ^ p[k]) * _FNV_PRIME
            k += 1
        h ^= h >> 33  # (MurmurHash3's finish: ids that differ in their last bytes spread)
        h *= _MIX_FINISH
        h ^= h >> 33
        at = <Py_ssize_t>(h & <uint64_t>mask)
        while slots[2 * at] != 0:
            if slots[2 * at + 1] == w and memcmp(p + slots[2 * at] - 1, p + s, w) == 0:
                break  # seen
            at = (at + 1) & mask
        else:
            slots[2 * at] = s + 1
            slots[2 * at + 1] = w
            if m:
                out[m] = _SP
                m += 1
            memcpy(out + m, p + s, w)
            m += w
    return m


cdef uint8_t* _unique_keys(const uint8_t* p, Py_ssize_t n, Py_ssize_t* m) noexcept nogil:
    """The words of ``p`` each once, first seen first, space-separated, in a new buffer of ``m[0]``
    bytes (the caller frees it); NULL when memory is short."""
    cdef Py_ssize_t cap = 16, words = _count_words(p, n)
    cdef Py_ssize_t* slots
    cdef uint8_t* out
    while cap < 2 * words + 2:  # (at most half full)
        cap <<= 1
    slots = <Py_ssize_t*>calloc(cap * 2, sizeof(Py_ssize_t))
    out = <uint8_t*>malloc(n + 1)
    if slots != NULL and out != NULL:
        m[0] = _unique_words(p, n, out, slots, cap - 1)
    else:
        free(out)
        out = NULL
    free(slots)
    return out


def join_keys(bytes raw not None) -> str:
    """The words of ``raw`` each once, first seen first, joined by spaces (see ``trace_encode_py``)."""
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw), m = 0
    cdef uint8_t* out
    # one release of the GIL for the whole scan: each time this thread takes it back, the loop's
    # thread is made to drop it, so the count, the allocations and the set share one
    with nogil:
        out = _unique_keys(p, n, &m)
    if out == NULL:
        raise MemoryError()
    try:
        return PyUnicode_DecodeUTF8(<const char*>out, m, b"replace")
    finally:
        free(out)


# ---------------------------------------------------------------- the dispatcher's packer

# zlib's one-shot entry points, called through pointers found at run time (_zlib_entry_points):
# the packer's thread compresses without the GIL, and the build needs no zlib headers
ctypedef int (*_compress2_t)(uint8_t* dest, unsigned long* dest_len, const uint8_t* src,
                             unsigned long src_len, int level) noexcept nogil
ctypedef unsigned long (*_bound_t)(unsigned long n) noexcept nogil

cdef enum:
    _HEAD = 500              # bytes of a message's text kept for the log of a failed send
cdef int _FREE_MAX = 4       # batch buffers kept for reuse


cdef struct _Job:
    ByteBuf text
    ByteBuf keys
    Py_ssize_t* ends
    Py_ssize_t n
    Py_ssize_t ends_cap      # pairs ``ends`` holds
    int64_t token
    _Packed* marker          # a token's report, made when it is handed over
    _Job* next


cdef struct _Packed:
    uint8_t* body
    Py_ssize_t body_n
    bint compressed
    uint8_t* keys
    Py_ssize_t keys_n
    Py_ssize_t head_n
    int64_t token            # not 0: a marker (the flush or stop of that token is done), no message
    char head[_HEAD]
    _Packed* next


_ZLIB: dict = {}


def _zlib_entry_points():
    """The addresses of ``compress2`` and ``compressBound`` in the system's zlib (the library
    Python's ``zlib`` module wraps), or (0, 0) when none loads: the packer then compresses under
    the GIL, with the ``zlib`` module. Looked up once."""
    if "found" in _ZLIB:
        return _ZLIB["found"]
    import ctypes
    _ZLIB["found"] = (0, 0)
    for name in ("libz.so.1", "libz.1.dylib", "libz.so", "libz.dylib"):
        try:
            lib = ctypes.CDLL(name)
            found = (ctypes.cast(lib.compress2, ctypes.c_void_p).value or 0,
                     ctypes.cast(lib.compressBound, ctypes.c_void_p).value or 0)
        except (OSError, AttributeError):
            continue
        if found[0] and found[1]:
            _ZLIB["lib"], _ZLIB["found"] = lib, found  # (the library held: called by address)
            break
    return _ZLIB["found"]


cdef inline double _monotonic() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline void _lock(PyThread_type_lock m) noexcept:
    """The packer's mutex, taken by a thread holding the GIL (held briefly by its other user,
    which never waits for the GIL while it holds it)."""
    if not PyThread_acquire_lock(m, NOWAIT_LOCK):
        with nogil:
            PyThread_acquire_lock(m, WAIT_LOCK)


@cython.final
@cython.auto_pickle(False)
cdef class TracePacker:
    """A trace dispatcher's worker (see ``trace_encode_py.TracePacker``, the reference): batches
    of records handed over from the loop are cut into trace messages on the packer's own thread,
    which never takes the GIL (its messages are picked up by the loop with :meth:`take_ready`)."""

    cdef PyThread_type_lock mutex      # guards the job, ready and free lists and ``posted``
    cdef PyThread_type_lock wake       # released to wake the thread (a binary semaphore)
    cdef bint posted                   # wake released and not yet taken
    cdef _Job* jobs
    cdef _Job* jobs_tail
    cdef Py_ssize_t jobs_n
    cdef _Job* free_jobs
    cdef int free_n
    cdef _Packed* ready
    cdef _Packed* ready_tail
    # the thread's own: the next message's records and keys, and when its first record came
    cdef ByteBuf ptext
    cdef ByteBuf pkeys
    cdef double first_at
    cdef Py_ssize_t pn                 # records held
    cdef readonly Py_ssize_t fill
    cdef readonly Py_ssize_t keys_fill
    cdef readonly Py_ssize_t keys_max
    cdef readonly Py_ssize_t compress_over
    cdef readonly int level
    cdef readonly double wait_s
    cdef readonly Py_ssize_t jobs_max
    cdef public int notify_fd        # set before the thread runs
    cdef readonly Py_ssize_t lost      # records lost for want of memory (added by the thread)
    cdef _compress2_t compress2
    cdef _bound_t bound

    def __cinit__(self):
        self.mutex = PyThread_allocate_lock()
        self.wake = PyThread_allocate_lock()
        if self.mutex == NULL or self.wake == NULL:
            raise MemoryError()
        PyThread_acquire_lock(self.wake, WAIT_LOCK)  # held while there is nothing to do

    def __init__(self, Py_ssize_t fill, Py_ssize_t keys_fill, Py_ssize_t keys_max, Py_ssize_t compress_over,
                 int level, double wait_s, Py_ssize_t jobs_max, int notify_fd=-1):
        cdef size_t c2, cb
        if fill <= 0 or keys_fill <= 0 or keys_max <= 0 or jobs_max <= 0:
            raise ValueError("fill, keys_fill, keys_max and jobs_max must be positive")
        self.fill, self.keys_fill, self.keys_max = fill, keys_fill, keys_max
        self.compress_over, self.level, self.wait_s = compress_over, level, wait_s
        self.jobs_max, self.notify_fd = jobs_max, notify_fd
        c2, cb = _zlib_entry_points()
        self.compress2 = <_compress2_t>c2
        self.bound = <_bound_t>cb

    def __dealloc__(self):
        # (the thread is over: its ``run`` holds this object while it runs)
        cdef _Packed* p
        _free_jobs(self.jobs)
        _free_jobs(self.free_jobs)
        while self.ready != NULL:
            p = self.ready
            self.ready = p.next
            _free_packed(p)
        bytebuf_free(&self.ptext)
        bytebuf_free(&self.pkeys)
        if self.mutex != NULL:
            PyThread_free_lock(self.mutex)
        if self.wake != NULL:
            PyThread_free_lock(self.wake)

    @property
    def jobs_waiting(self):
        """Batches handed over and not yet taken by the thread."""
        return self.jobs_n

    def submit(self, PubRows rows not None, int64_t token=0):
        """Hand everything ``rows`` holds to the thread, leaving ``rows`` empty (it asks its
        ``store_host`` again). ``token``: 0 for a batch; above 0, the thread then packs what it
        holds and reports the token back (:meth:`take_ready`) after its messages; -1, that, and
        the thread ends. False (``rows`` untouched) for a batch when ``jobs_max`` are waiting."""
        cdef _Job* job = NULL
        cdef Py_ssize_t* ends
        cdef _Packed* marker = NULL
        cdef Py_ssize_t want = rows.limit + 1
        if token:
            marker = <_Packed*>calloc(1, sizeof(_Packed))
            if marker == NULL:
                raise MemoryError()
            marker.token = token
        _lock(self.mutex)
        try:
            if token == 0 and self.jobs_n >= self.jobs_max:
                return False
            # (no error can come between here and the job's hand-over but a MemoryError)
            job = self.free_jobs
            if job != NULL:
                self.free_jobs = job.next
                self.free_n -= 1
        finally:
            PyThread_release_lock(self.mutex)
        if job == NULL:
            job = <_Job*>calloc(1, sizeof(_Job))
            if job == NULL:
                free(marker)
                raise MemoryError()
        if job.ends == NULL or job.ends_cap != want:
            ends = <Py_ssize_t*>malloc(want * 2 * sizeof(Py_ssize_t))
            if ends == NULL:
                _free_job(job)
                free(marker)
                raise MemoryError()
            free(job.ends)
            job.ends = ends
            job.ends_cap = want
        # the rows' buffers to the job, the job's (emptied) ones to the rows
        job.text, rows.text = rows.text, job.text
        job.keys, rows.keys = rows.keys, job.keys
        job.ends, rows.ends = rows.ends, job.ends
        job.n, rows.n = rows.n, 0
        rows.text.n = rows.keys.n = 0
        rows.hosts = {}
        rows.last_broker = rows.last_host = None
        job.token = token
        job.marker = marker
        job.next = NULL
        _lock(self.mutex)
        if self.jobs_tail == NULL:
            self.jobs = job
        else:
            self.jobs_tail.next = job
        self.jobs_tail = job
        self.jobs_n += 1
        if not self.posted:
            self.posted = True
            PyThread_release_lock(self.wake)
        PyThread_release_lock(self.mutex)
        return True

    def take_ready(self):
        """What the thread has made since the last call, in order: a message as ``(body,
        compressed, keys, head)`` (``head``: the start of its text, for a log), or the token of
        a flush or stop that is done."""
        cdef _Packed* p
        cdef _Packed* nxt
        _lock(self.mutex)
        p = self.ready
        self.ready = self.ready_tail = NULL
        PyThread_release_lock(self.mutex)
        out = []
        try:
            while p != NULL:
                if p.token:
                    out.append(p.token)
                else:
                    out.append((PyBytes_FromStringAndSize(<char*>p.body, p.body_n), bool(p.compressed),
                                PyUnicode_DecodeUTF8(<char*>p.keys, p.keys_n, b"replace"),
                                PyBytes_FromStringAndSize(p.head, p.head_n)))
                nxt = p.next
                _free_packed(p)
                p = nxt
        finally:
            while p != NULL:  # (what a failed object left)
                nxt = p.next
                _free_packed(p)
                p = nxt
        return out

    def run(self):
        """The thread's body: returns once a stop (token -1) is done."""
        with nogil:
            self._run()

    cdef void _run(self) noexcept nogil:
        cdef _Job* job
        cdef _Job* nxt
        cdef long long wait_us
        cdef bint stop = False
        while not stop:
            PyThread_acquire_lock(self.mutex, WAIT_LOCK)
            job = self.jobs
            self.jobs = self.jobs_tail = NULL
            self.jobs_n = 0
            if job == NULL:
                self.posted = False
            PyThread_release_lock(self.mutex)
            if job == NULL:
                wait_us = -1
                if self.ptext.n:
                    wait_us = <long long>(max(0.0, self.first_at + self.wait_s - _monotonic()) * 1e6)
                if PyThread_acquire_lock_timed(self.wake, wait_us, 0) != 1:
                    self._pack()  # the first record waited long enough
                continue
            while job != NULL:
                nxt = job.next
                self._take(job)
                if job.token:
                    self._pack()
                    self._push(job.marker)
                    job.marker = NULL
                    stop = job.token < 0
                self._recycle(job)
                job = nxt

    cdef void _take(self, _Job* job) noexcept nogil:
        """A batch's records into the next messages, a message packed once it is full."""
        cdef Py_ssize_t i = 0, j, t0, k0, t1, k1, n = job.n
        cdef Py_ssize_t* e = job.ends
        while i < n:
            t0 = e[2 * i - 2] if i else 0
            k0 = e[2 * i - 1] if i else 0
            j = i
            while j < n:  # (as PubRows.chunk: up to the record that reaches the room)
                j += 1
                if e[2 * j - 2] - t0 >= self.fill - self.ptext.n or e[2 * j - 1] - k0 >= self.keys_fill - self.pkeys.n:
                    break
            t1, k1 = e[2 * j - 2], e[2 * j - 1]
            if (not bytebuf_grow(&self.ptext, t1 - t0, _MIN_CAP)
                    or not bytebuf_grow(&self.pkeys, k1 - k0, _MIN_CAP)):
                self.lost += j - i
                i = j
                continue
            if self.ptext.n == 0:
                self.first_at = _monotonic()
            self.pn += j - i
            memcpy(self.ptext.p + self.ptext.n, job.text.p + t0, t1 - t0)
            self.ptext.n += t1 - t0
            memcpy(self.pkeys.p + self.pkeys.n, job.keys.p + k0, k1 - k0)
            self.pkeys.n += k1 - k0
            i = j
            if self.ptext.n >= self.fill or self.pkeys.n >= self.keys_fill:
                self._pack()

    cdef void _pack(self) noexcept nogil:
        """A message of the records held, onto the ready list."""
        cdef Py_ssize_t n = self.ptext.n, cut
        cdef unsigned long zn
        cdef _Packed* p
        if n == 0:
            return
        p = <_Packed*>calloc(1, sizeof(_Packed))
        if p != NULL:
            p.head_n = min(n, <Py_ssize_t>_HEAD)
            memcpy(p.head, self.ptext.p, p.head_n)
            # the keys: each word once, cut after the last whole word within keys_max
            p.keys = _unique_keys(self.pkeys.p, self.pkeys.n, &p.keys_n)
            if p.keys == NULL:
                _free_packed(p)
                p = NULL
            elif p.keys_n > self.keys_max:
                cut = self.keys_max
                while cut > 0 and p.keys[cut] != _SP:
                    cut -= 1
                p.keys_n = cut
        if p != NULL and n >= self.compress_over:
            if self.compress2 != NULL:
                zn = self.bound(n)
                p.body = <uint8_t*>malloc(zn)
                if p.body != NULL and self.compress2(p.body, &zn, self.ptext.p, n, self.level) == 0:
                    p.body_n = zn
                    p.compressed = True
                else:
                    free(p.body)
                    p.body = NULL
            else:
                self._compress_with_gil(p)
        if p != NULL and not p.compressed:  # the text itself becomes the body
            p.body, p.body_n = self.ptext.p, n
            self.ptext.p, self.ptext.cap = NULL, 0
        if p == NULL:
            self.lost += self.pn
        self.ptext.n = self.pkeys.n = self.pn = 0
        if p != NULL:
            self._push(p)

    cdef void _compress_with_gil(self, _Packed* p) noexcept nogil:
        with gil:
            try:
                z = zlib.compress(PyBytes_FromStringAndSize(<char*>self.ptext.p, self.ptext.n), self.level)
                p.body = <uint8_t*>malloc(PyBytes_GET_SIZE(z))
                if p.body != NULL:
                    memcpy(p.body, PyBytes_AS_STRING(z), PyBytes_GET_SIZE(z))
                    p.body_n = PyBytes_GET_SIZE(z)
                    p.compressed = True
            except MemoryError:
                pass

    cdef void _push(self, _Packed* p) noexcept nogil:
        cdef bint was_empty
        PyThread_acquire_lock(self.mutex, WAIT_LOCK)
        was_empty = self.ready == NULL
        if self.ready_tail == NULL:
            self.ready = p
        else:
            self.ready_tail.next = p
        self.ready_tail = p
        PyThread_release_lock(self.mutex)
        if was_empty and self.notify_fd >= 0:
            write(self.notify_fd, b"x", 1)  # (a full pipe has told the loop already)

    cdef void _recycle(self, _Job* job) noexcept nogil:
        job.text.n = job.keys.n = 0
        job.n = 0
        PyThread_acquire_lock(self.mutex, WAIT_LOCK)
        if self.free_n < _FREE_MAX:
            job.next = self.free_jobs
            self.free_jobs = job
            self.free_n += 1
            job = NULL
        PyThread_release_lock(self.mutex)
        if job != NULL:
            _free_job(job)


cdef void _free_job(_Job* job) noexcept nogil:
    bytebuf_free(&job.text)
    bytebuf_free(&job.keys)
    free(job.ends)
    free(job.marker)
    free(job)


cdef void _free_jobs(_Job* job) noexcept nogil:
    cdef _Job* nxt
    while job != NULL:
        nxt = job.next
        _free_job(job)
        job = nxt


cdef void _free_packed(_Packed* p) noexcept nogil:
    free(p.body)
    free(p.keys)
    free(p)
