# cython: language_level=3, embedsignature=True
"""SEND_BATCH_MESSAGE bodies, compiled twin of ``batch_py`` (read that module for the contract).

One call encodes the whole batch into one growing C buffer: no bytes object per property,
per header or per message, which is where the reference spends its time.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

from .bigendian cimport put32 as _put32
from .bytebuf cimport ByteBuf, bytebuf_free, bytebuf_reserve
from .properties cimport write_properties
from .wire_facts cimport *

__all__ = ["encode_batch_body"]


cdef int _put_raw(ByteBuf* b, const char* ks, Py_ssize_t kn, const char* vs, Py_ssize_t vn) except -1:
    bytebuf_reserve(b, kn + vn + 2, 4096)
    memcpy(b.p + b.n, ks, kn)
    b.p[b.n + kn] = NAME_VALUE_SEPARATOR
    memcpy(b.p + b.n + kn + 1, vs, vn)
    b.p[b.n + kn + 1 + vn] = PROPERTY_SEPARATOR
    b.n += kn + vn + 2
    return 0


cdef Py_ssize_t _write_props(ByteBuf* b, object props) except -1:
    """Append ``k\x01v\x02`` for each property; returns the bytes written."""
    cdef Py_ssize_t start = b.n
    write_properties(b, props, _put_raw)
    return b.n - start


def encode_batch_body(messages) -> bytes:
    """The body of a SEND_BATCH_MESSAGE holding ``messages`` (see ``batch_py``)."""
    cdef ByteBuf b
    cdef Py_buffer view
    cdef Py_ssize_t head, plen, blen
    cdef int64_t flag
    b.p = NULL
    b.n = 0
    b.cap = 0
    try:
        for m in messages:
            f = m.flag
            if not -2147483648 <= f <= 2147483647:
                raise ValueError(f"flag {f} is outside int32")
            flag = f
            PyObject_GetBuffer(m.body, &view, PyBUF_SIMPLE)
            try:
                blen = view.len
                bytebuf_reserve(&b, BATCH_MIN_LEN + blen, 4096)
                head = b.n
                _put32(b.p + head + BATCH_BODYCRC_POS, 0)
                _put32(b.p + head + BATCH_MAGICCODE_POS, 0)
                _put32(b.p + head + BATCH_FLAG_POS, <uint32_t>flag)
                _put32(b.p + head + BATCH_BODYLEN_POS, <uint32_t>blen)
                memcpy(b.p + head + BATCH_BODY_POS, view.buf, blen)
            finally:
                PyBuffer_Release(&view)
            b.n = head + BATCH_MIN_LEN + blen
            plen = _write_props(&b, m.properties)
            if plen > REC_MAX_PROPERTIES_LEN:
                raise ValueError(f"properties are {plen} bytes, the batch format allows {REC_MAX_PROPERTIES_LEN}")
            b.p[head + BATCH_BODY_POS + blen] = <uint8_t>(plen >> 8)
            b.p[head + BATCH_BODY_POS + 1 + blen] = <uint8_t>plen
            _put32(b.p + head + BATCH_TOTALSIZE_POS, <uint32_t>(b.n - head))
        return PyBytes_FromStringAndSize(<char*>b.p, b.n) if b.n else b""
    finally:
        bytebuf_free(&b)
