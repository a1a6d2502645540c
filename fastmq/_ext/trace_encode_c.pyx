# cython: boundscheck=False, wraparound=False
"""A traced producer's answered sends kept as Pub records, compiled (see ``trace_encode_py``, the
reference both are tested against).

The send path (produce_c) calls :meth:`PubRows.add_row` directly: the record is written from the
strings' own bytes (ASCII ones read in place) into one growing C buffer, with no Python object
made per send. The dispatcher's thread cuts the buffer into trace messages (:meth:`chunk`) and
makes each message's KEYS with :func:`join_keys`, whose scan runs with the GIL released.
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_Clear
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memchr, memcmp, memcpy

from .bytebuf cimport ByteBuf, bytebuf_free, bytebuf_reserve
from .wire_facts cimport NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    void* PyUnicode_DATA(object o)
    # (no ``except``: a NULL is checked and its error cleared here)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)

__all__ = ["PubRows", "join_keys"]

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


def join_keys(bytes raw) -> str:
    """The words of ``raw`` each once, first seen first, joined by spaces (see ``trace_encode_py``)."""
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw), cap = 16, m = 0, words
    cdef Py_ssize_t* slots = NULL
    cdef uint8_t* out = NULL
    # one release of the GIL for the whole scan: each time this thread takes it back, the loop's
    # thread is made to drop it, so the count, the allocations and the set share one
    with nogil:
        words = _count_words(p, n)
        while cap < 2 * words + 2:  # (at most half full)
            cap <<= 1
        slots = <Py_ssize_t*>calloc(cap * 2, sizeof(Py_ssize_t))
        out = <uint8_t*>malloc(n + 1)
        if slots != NULL and out != NULL:
            m = _unique_words(p, n, out, slots, cap - 1)
    try:
        if slots == NULL or out == NULL:
            raise MemoryError()
        return PyUnicode_DecodeUTF8(<const char*>out, m, b"replace")
    finally:
        free(slots)
        free(out)
