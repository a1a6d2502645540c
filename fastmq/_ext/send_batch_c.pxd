# C-level view of the SendBatch column container, for the compiled stages that cimport it: the
# broker's send stage (send_c) fills it, the store's record writer (record_writer_c) places and
# indexes it, and both touch its C fields directly instead of going through Python attributes.
cimport cython
from libc.stdint cimport int64_t

from .bytebuf cimport ByteBuf

cdef enum:
    C_REQ = 0        # index of the request in the list given to encode_sends
    C_POS = 1        # offset of the record in the staging buffer
    C_SIZE = 2       # record size
    C_KEY = 3        # index into SendBatch.keys: (topic, queue id)
    C_TAGS = 4       # tag hash code for the consume queue
    C_FLAGS = 5      # F_WAIT | F_INDEX
    C_QOFF = 6       # queue offset (place_records)
    C_PHYS = 7       # commit-log offset (place_records)
    C_QID = 8        # queue id
    NCOLS = 9
    F_WAIT = 1       # the producer waits for the store (no WAIT=false): SYNC_FLUSH waits for it
    F_INDEX = 2      # has KEYS or UNIQ_KEY


@cython.final
cdef class SendBatch:
    cdef ByteBuf staging           # the records back to back
    cdef int64_t* r                # the rows, NCOLS int64 each, row i at r + i * NCOLS (``cols`` views them)
    cdef Py_ssize_t cap            # rows allocated
    cdef Py_ssize_t exports        # buffer views of the rows alive: the rows may not move
    cdef Py_ssize_t shape[2]
    cdef Py_ssize_t strides[2]
    cdef readonly Py_ssize_t n     # records
    cdef public list keys          # (topic, queue id) of each C_KEY
    cdef public list slow          # request indices for the slow path
    cdef public list fast          # request indices encoded here, in order
    cdef public long long rr       # round-robin counter for queueId < 0
    cdef public bint wait          # some record has F_WAIT
    cdef public long long total_size
    cdef dict key_index
    cdef object last_topic
    cdef int64_t last_qid
    cdef int64_t last_key

    cdef int _grow(self, Py_ssize_t rows) except -1
    cdef int start(self, Py_ssize_t nreq, long long rr) except -1
    cdef int64_t key(self, object topic, int64_t qid) except -1
    cdef int forget_keys(self, Py_ssize_t nkeys) except -1
    cdef int reserve_row(self) except -1
    cdef int finish(self) except -1
