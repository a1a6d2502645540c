# cython: language_level=3, embedsignature=True
"""Plain IPv4 store-format records, compiled twin of ``records_py`` (read that module for the contract).

Building the record objects is the cost: a dataclass ``__init__`` of 16 arguments is about a
microsecond. Here each object is ``cls.__new__(cls)`` whose 16 attributes are set from C in the
order of ``FIELDS``, as ``__init__`` sets them (so CPython keeps them in the instance's inline
values, shared keys and all: no dict per object, and its specialised attribute loads stay fast;
a ready ``__dict__`` per object measured slower). For a class that neither defines ``__new__``
nor ``__setattr__`` (``MessageExt``) the object comes straight from its ``tp_new`` and the sets go
to ``PyObject_GenericSetAttr``: the same object as ``cls.__new__(cls)`` and ``setattr``, ~850
instructions a record less. The properties dict is read from the bytes in
C; property names, a value that repeats its name's last value, a topic or a host that repeats
the previous record's are the same ``str``/``tuple`` object.
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_SetItem
from cpython.list cimport PyList_Append
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp

from .bigendian cimport get32 as _get32
from .wire_facts cimport *

cdef extern from "Python.h":
    int setattr_ "PyObject_SetAttr"(object o, object name, object value) except -1
    int generic_setattr "PyObject_GenericSetAttr"(object o, object name, object value) except -1

cdef extern from *:
    """
    /* A class whose objects object.__new__ makes and whose attributes object.__setattr__ sets
       (a plain dataclass such as MessageExt): cls.__new__(cls) is then its tp_new called with
       no arguments, and setattr() is PyObject_GenericSetAttr, called here without the lookup
       of cls.__new__, the builtin's argument checks, or PyObject_SetAttr's re-interning. */
    static int fastmq_records_plain_class(PyObject *cls) {
        PyTypeObject *t = (PyTypeObject *)cls;
        return PyType_Check(cls) && t->tp_new == PyBaseObject_Type.tp_new
               && t->tp_setattro == PyObject_GenericSetAttr;
    }
    static PyObject *fastmq_records_new_plain(PyObject *cls, PyObject *no_args) {
        return ((PyTypeObject *)cls)->tp_new((PyTypeObject *)cls, no_args, NULL);
    }
    """
    bint plain_class "fastmq_records_plain_class"(object cls)
    object new_plain "fastmq_records_new_plain"(object cls, object no_args)

__all__ = ["decode_v4"]

# the record layout is the declaration's (protocol/record_layout.py), through wire_facts.pxd
cdef uint32_t _MAGIC_V1 = <uint32_t>MESSAGE_MAGIC_CODE
cdef int32_t _V6_BITS = SYSFLAG_HOST_V6_BITS
cdef Py_ssize_t _FIXED = REC_FIXED_LEN_V4
cdef Py_ssize_t _MIN_TOTAL = REC_MIN_LEN_V4


cdef inline int64_t _get64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t>_get32(p) << 32) | _get32(p + 4))


cdef inline str _utf8(const uint8_t* s, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>s, n, NULL)


cdef struct Prop:
    # a property name seen in this body and the value it had last, both as bytes in the body
    # and as the str made of them (kept alive by the Cache's list)
    Py_ssize_t name_at, name_len, value_at, value_len
    PyObject* name
    PyObject* value


cdef enum:
    _CACHED = 16


cdef class _Cache:
    """The names of a body's properties and their last values: nearly every record of a body
    repeats the same names and most of the values (TAGS, WAIT), and a reused name's hash is
    already computed for the dict."""
    cdef const uint8_t* base
    cdef Prop props[_CACHED]
    cdef int n
    cdef list keep

    cdef object value(self, int slot, Py_ssize_t at, Py_ssize_t length):
        """``base[at:at+length]`` decoded, the same str as last time if the name's value repeats."""
        cdef Prop* e = &self.props[slot]
        cdef object s
        if e.value != NULL and e.value_len == length and memcmp(self.base + at, self.base + e.value_at,
                                                               length) == 0:
            return <object>e.value
        s = _utf8(self.base + at, length)
        self.keep.append(s)
        e.value = <PyObject*>s
        e.value_at = at
        e.value_len = length
        return s

    cdef int slot(self, Py_ssize_t at, Py_ssize_t length):
        """The slot of the name at ``at``, made now if there is room; -1 if none is left."""
        cdef Prop* e
        cdef int i
        cdef object s
        for i in range(self.n):
            e = &self.props[i]
            if e.name_len == length and memcmp(self.base + at, self.base + e.name_at, length) == 0:
                return i
        if self.n == _CACHED:
            return -1
        s = _utf8(self.base + at, length)
        self.keep.append(s)
        e = &self.props[self.n]
        e.name = <PyObject*>s
        e.name_at = at
        e.name_len = length
        e.value = NULL
        self.n += 1
        return self.n - 1


cdef dict _properties(_Cache c, Py_ssize_t at, Py_ssize_t n):
    """``decode_properties`` of ``c.base[at:at+n]``; UnicodeDecodeError if any of it is not UTF-8.

    The separators are ASCII, so they never sit inside a UTF-8 sequence: the pieces between
    them are valid exactly when the whole is.
    """
    cdef dict out = {}
    cdef const uint8_t* base = c.base
    cdef const uint8_t* s = base + at
    cdef const uint8_t* end = s + n
    cdef const uint8_t* stop
    cdef const uint8_t* sep
    cdef int slot
    while True:
        stop = <const uint8_t*>memchr(s, PROPERTY_SEPARATOR, end - s)
        if stop == NULL:
            stop = end
        sep = <const uint8_t*>memchr(s, NAME_VALUE_SEPARATOR, stop - s)
        if sep == NULL or sep == s:
            _utf8(s, stop - s)  # skipped, but it still has to be UTF-8
        else:
            slot = c.slot(s - base, sep - s)
            if slot >= 0:
                PyDict_SetItem(out, <object>c.props[slot].name, c.value(slot, sep + 1 - base, stop - sep - 1))
            else:  # more distinct names than slots: no reuse for the rest
                PyDict_SetItem(out, _utf8(s, sep - s), _utf8(sep + 1, stop - sep - 1))
        if stop == end:
            return out
        s = stop + 1


cdef tuple _host(const uint8_t* p):
    return (f"{p[0]}.{p[1]}.{p[2]}.{p[3]}", <int32_t>_get32(p + 4))


# The born and store hosts of the last record decoded, kept from one body to the next: a consumer
# at a steady rate gets a message or two per pull answer, every one from the same producer and
# broker, and formatting a host cost ~2,700 instructions a record (run under the GIL: no lock).
cdef class _HostCache:
    """One host (address and port) and its 8-byte key, remade only when the key changes."""
    cdef uint64_t key
    cdef object host

    cdef tuple get(self, const uint8_t* p, uint64_t key):
        if self.host is None or key != self.key:
            self.host = _host(p)
            self.key = key
        return <tuple>self.host


cdef _HostCache _born = _HostCache(), _stored = _HostCache()


ctypedef int (*Setter)(object, object, object) except -1


cdef inline int _fill(object obj, Setter set_, const uint8_t* r, object topic, object body, object props,
                      int32_t total, int32_t sys_flag, object born, object store) except -1:
    """The record's 16 attributes, in the order of ``FIELDS`` (as ``__init__`` sets them)."""
    set_(obj, "topic", topic)
    set_(obj, "body", body)
    set_(obj, "flag", <int32_t>_get32(r + REC_FLAG_POS))
    set_(obj, "properties", props)
    set_(obj, "queue_id", <int32_t>_get32(r + REC_QUEUEID_POS))
    set_(obj, "store_size", total)
    set_(obj, "queue_offset", _get64(r + REC_QUEUEOFFSET_POS))
    set_(obj, "sys_flag", sys_flag)
    set_(obj, "born_timestamp", _get64(r + REC_BORNTIMESTAMP_POS))
    set_(obj, "born_host", born)
    set_(obj, "store_timestamp", _get64(r + REC_STORETIMESTAMP_POS))
    set_(obj, "store_host", store)
    set_(obj, "commit_log_offset", _get64(r + REC_PHYSICALOFFSET_POS))
    set_(obj, "body_crc", <int32_t>_get32(r + REC_BODYCRC_POS))
    set_(obj, "reconsume_times", <int32_t>_get32(r + REC_RECONSUMETIMES_POS))
    set_(obj, "prepared_transaction_offset", _get64(r + REC_PREPARED_TRANSACTION_OFFSET_POS))
    return 0


@cython.boundscheck(False)
@cython.wraparound(False)
def decode_v4(bytes data not None, cls):
    """One ``cls`` object per record of ``data``, or ``None`` if a record is not plain IPv4."""
    cdef const uint8_t* base = <const uint8_t*>PyBytes_AS_STRING(data)
    cdef const uint8_t* r
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data), pos = 0, end, p, body_len, topic_len, props_len
    cdef Py_ssize_t last_topic_at = -1, last_topic_len = 0
    cdef int32_t total, sys_flag
    cdef uint64_t last_born = 0, last_store = 0
    cdef uint64_t born_key, store_key
    cdef list out = []
    cdef bint plain = plain_class(cls)
    cdef object new = None if plain else cls.__new__
    cdef object topic = None, born = None, store = None, props, obj
    cdef _Cache cache = _Cache.__new__(_Cache)
    cache.base = base
    cache.n = 0
    cache.keep = []
    try:
        while pos < n:
            if n - pos < _FIXED:
                return None
            r = base + pos
            total = <int32_t>_get32(r)
            sys_flag = <int32_t>_get32(r + REC_SYSFLAG_POS)
            if (_get32(r + REC_MAGICCODE_POS) != _MAGIC_V1 or sys_flag & _V6_BITS or total < _MIN_TOTAL
                    or total > n - pos):
                return None
            end = pos + total
            body_len = <int32_t>_get32(r + REC_BODYLEN_POS)
            p = pos + _FIXED
            if body_len < 0 or p + body_len + 3 > end:
                return None
            body = PyBytes_FromStringAndSize(<const char*>base + p, body_len)
            p += body_len
            topic_len = base[p]
            p += 1
            if p + topic_len + 2 > end:
                return None
            if (last_topic_at < 0 or topic_len != last_topic_len
                    or memcmp(base + p, base + last_topic_at, topic_len) != 0):
                topic = _utf8(base + p, topic_len)
                last_topic_at = p
                last_topic_len = topic_len
            p += topic_len
            props_len = (base[p] << 8) | base[p + 1]
            if p + 2 + props_len != end:
                return None
            props = _properties(cache, p + 2, props_len) if props_len else {}
            # a host's 4 address bytes and its port, as one key
            born_key = <uint64_t>_get64(r + REC_BORNHOST_POS)
            if born is None or born_key != last_born:
                born = _born.get(r + REC_BORNHOST_POS, born_key)
                last_born = born_key
            store_key = <uint64_t>_get64(r + REC_STOREHOST_POS)
            if store is None or store_key != last_store:
                store = born if store_key == born_key else _stored.get(r + REC_STOREHOST_POS, store_key)
                last_store = store_key
            if plain:
                obj = new_plain(cls, ())
                _fill(obj, generic_setattr, r, topic, body, props, total, sys_flag, born, store)
            else:
                obj = new(cls)
                _fill(obj, setattr_, r, topic, body, props, total, sys_flag, born, store)
            PyList_Append(out, obj)
            pos = end
    except UnicodeDecodeError:
        return None
    return out


def wire_facts() -> dict:
    """The wire-fact constants this module was compiled with (tests/test_wire_facts.py holds them
    to protocol's declarations, so a build from a stale ``wire_facts.pxd`` is caught)."""
    return compiled_wire_facts()
