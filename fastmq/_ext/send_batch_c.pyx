# cython: language_level=3, embedsignature=True
"""The send batch's column container, compiled twin of ``send_batch_py`` (read that module for
the contract). Its C fields are declared in ``send_batch_c.pxd`` for the stages that cimport it."""
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

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

    def __dealloc__(self):
        bytebuf_free(&self.staging)

    @property
    def records(self) -> bytes:
        """The staging buffer (all records back to back)."""
        return PyBytes_FromStringAndSize(<char*>self.staging.p, self.staging.n) if self.staging.p != NULL else b""

    cdef int start(self, Py_ssize_t nreq, long long rr) except -1:
        """Empty, with rows for ``nreq`` records and the round-robin counter at ``rr``."""
        # exactly one row a request: a request of one message each (the usual) fills them all, so
        # finish has no slice to make; a batch request's records grow them (reserve_row)
        self.cols = np.zeros((max(1, nreq), NCOLS), np.int64)
        self.rows = self.cols
        self.n = 0
        self.keys = []
        self.slow = []
        self.fast = []
        self.rr = rr
        self.wait = False
        self.total_size = 0
        self.key_index = {}
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
            for k in self.keys[nkeys:]:
                del self.key_index[k]
            del self.keys[nkeys:]
            self.last_topic = None
        return 0

    cdef int reserve_row(self) except -1:
        """Room for one more row."""
        cdef object grown
        if self.n >= self.rows.shape[0]:
            grown = np.zeros((max(16, self.rows.shape[0] * 2), NCOLS), np.int64)
            grown[:self.n] = self.cols[:self.n]
            self.cols = grown
            self.rows = grown
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int finish(self) except -1:
        """Cut ``cols`` to the rows written; sum ``wait`` and ``total_size`` over them."""
        cdef Py_ssize_t i
        if self.n != self.rows.shape[0]:
            self.cols = self.cols[:self.n]
        for i in range(self.n):
            if self.rows[i, C_FLAGS] & F_WAIT:
                self.wait = True
            self.total_size += self.rows[i, C_SIZE]
        return 0
