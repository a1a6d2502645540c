# cython: language_level=3, embedsignature=True
"""The send batch's column container, compiled twin of ``send_batch_py`` (read that module for
the contract). Its C fields are declared in ``send_batch_c.pxd`` for the stages that cimport it."""
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from libc.stdint cimport int64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memset

import numpy as np

from .bytebuf cimport bytebuf_free

__all__ = ["SendBatch", "COLUMNS"]

COLUMNS = ("req", "pos", "size", "key", "tags", "flags", "queue_offset", "commit_log_offset", "queue_id")


@cython.final
cdef class SendBatch:
    """Records encoded from a run of SEND requests, one int64 row of ``COLUMNS`` per record."""

    def __cinit__(self):
        self.staging.p = NULL
        self.staging.n = 0
        self.staging.cap = 0
        self.r = NULL
        self.cap = 0
        self.exports = 0

    def __dealloc__(self):
        bytebuf_free(&self.staging)
        free(self.r)

    @property
    def records(self) -> bytes:
        """The staging buffer (all records back to back)."""
        return PyBytes_FromStringAndSize(<char*>self.staging.p, self.staging.n) if self.staging.p != NULL else b""

    @property
    def cols(self):
        """The rows as a writable int64 ``(n, NCOLS)`` numpy array over the batch's own memory.

        The rows are a C buffer, not an array made per batch: one send in flight pays for no
        numpy array unless Python code asks for one (the store's general path, statistics of
        several topics, tests).
        """
        return np.asarray(self)

    def __getbuffer__(self, Py_buffer* view, int flags):
        if self.r == NULL:
            self._grow(1)
        self.shape[0] = self.n
        self.shape[1] = NCOLS
        self.strides[0] = NCOLS * sizeof(int64_t)
        self.strides[1] = sizeof(int64_t)
        view.buf = self.r
        view.obj = self
        view.len = self.n * NCOLS * sizeof(int64_t)
        view.readonly = 0
        view.itemsize = sizeof(int64_t)
        view.format = "q"
        view.ndim = 2
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self.exports -= 1

    cdef int _grow(self, Py_ssize_t rows) except -1:
        """Room for ``rows`` rows (the first ``n`` kept, the new ones zero)."""
        cdef int64_t* grown
        if rows <= self.cap:
            return 0
        if self.exports:
            raise BufferError("the batch's rows are viewed (cols): they cannot grow")
        grown = <int64_t*>realloc(self.r, rows * NCOLS * sizeof(int64_t))
        if grown == NULL:
            raise MemoryError()
        memset(grown + self.cap * NCOLS, 0, (rows - self.cap) * NCOLS * sizeof(int64_t))
        self.r = grown
        self.cap = rows
        return 0

    cdef int start(self, Py_ssize_t nreq, long long rr) except -1:
        """Empty, with rows for ``nreq`` records and the round-robin counter at ``rr``."""
        # exactly one row a request: a request of one message each (the usual) fills them all; a
        # batch request's records grow them (reserve_row)
        self._grow(max(1, nreq))
        self.n = 0
        self.keys = []
        self.slow = []
        self.fast = []
        self.rr = rr
        self.wait = False
        self.total_size = 0
        self.key_index = None  # made for a second queue (key)
        self.last_topic = None
        self.last_qid = -1
        self.last_key = -1
        return 0

    cdef int64_t key(self, object topic, int64_t qid) except -1:
        """The index of (topic, queue id) in ``keys``, adding it when new."""
        cdef PyObject* found
        cdef object k
        if topic is self.last_topic and qid == self.last_qid:
            return self.last_key
        key = (topic, <int>qid)
        if self.key_index is None and (not self.keys or self.keys[0] == key):
            # one queue so far (a lone send, a producer's batch): no dict until a second one
            k = 0
            if not self.keys:
                self.keys.append(key)
        else:
            if self.key_index is None:
                self.key_index = {self.keys[0]: 0}
            found = PyDict_GetItem(self.key_index, key)
            if found == NULL:
                k = len(self.keys)
                self.key_index[key] = k
                self.keys.append(key)
            else:
                k = <object>found
        self.last_topic, self.last_qid, self.last_key = topic, qid, <int64_t>k
        return self.last_key

    cdef int forget_keys(self, Py_ssize_t nkeys) except -1:
        """Drop the keys added after the first ``nkeys`` (a request taken back)."""
        if len(self.keys) > nkeys:
            if self.key_index is not None:
                for k in self.keys[nkeys:]:
                    del self.key_index[k]
            del self.keys[nkeys:]
            self.last_topic = None
        return 0

    cdef int reserve_row(self) except -1:
        """Room for one more row."""
        if self.n >= self.cap:
            self._grow(max(16, self.cap * 2))
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int finish(self) except -1:
        """Sum ``wait`` and ``total_size`` over the rows written."""
        cdef Py_ssize_t i
        cdef int64_t* row
        for i in range(self.n):
            row = self.r + i * NCOLS
            if row[C_FLAGS] & F_WAIT:
                self.wait = True
            self.total_size += row[C_SIZE]
        return 0
