# C-level view of PubRows, for the compiled send path that cimports it: an answered send of a
# traced producer is written as its Pub record by a direct C call (produce_c's AsyncSend.finish).
cimport cython
from libc.stdint cimport int64_t

from .bytebuf cimport ByteBuf


@cython.final
cdef class PubRows:
    cdef ByteBuf text              # the records' UTF-8 text, back to back
    cdef ByteBuf keys              # each record's keys, each followed by a space
    cdef Py_ssize_t* ends          # per record: its end in text, its end in keys (``limit`` pairs)
    cdef Py_ssize_t n              # records held
    cdef readonly Py_ssize_t limit
    cdef readonly Py_ssize_t wake_at
    cdef readonly str trace_topic
    cdef readonly str group
    cdef public object store_host
    cdef bytes group_text
    cdef dict hosts                # broker name -> its address as UTF-8 (or b"null"), until taken
    cdef object last_broker        # the broker name of the last record, and its address
    cdef bytes last_host
    cdef object last_topic         # the last record's topic (a str), known not the trace topic's
    cdef int64_t last_ms           # the last record's timestamp, and its digits (sends of one
    cdef Py_ssize_t ms_len         # millisecond share them)
    cdef char ms_text[24]

    cdef int add_row(self, int64_t begin_ms, int64_t end_ms, object topic, object msg_id, object tags, object keys,
                     object broker, int64_t length, int mtype, object offset_id, bint ok, object region) except -2
    cdef int _add_general(self, Py_ssize_t n, int64_t begin_ms, int64_t end_ms, object topic, object msg_id,
                          object tags, object keys, bytes host, int64_t length, int mtype, object offset_id, bint ok,
                          object region) except -2
    cdef bytes _host(self, object broker)
