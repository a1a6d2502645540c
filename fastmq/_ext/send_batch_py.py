"""The send batch's column container, pure-Python reference of ``send_batch_c``.

A :class:`SendBatch` carries the SEND requests of one socket read through the broker's send
stage (``send``: requests in, records and rows out, then answers) and the store's record writer
(``record_writer``: records placed into the commit log and indexed). It holds, back to back in
one staging buffer, a commit-log record per message, and one int64 row per record whose columns
are :data:`COLUMNS`; ``keys`` lists the (topic, queue id) each row's ``key`` column points at.
The compiled twin's staging buffer and rows are C fields that the compiled stages cimport
(``send_batch_c.pxd``); here they are ``staging`` and ``cols``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["SendBatch", "COLUMNS"]

COLUMNS = ("req", "pos", "size", "key", "tags", "flags", "queue_offset", "commit_log_offset", "queue_id")
C_REQ, C_POS, C_SIZE, C_KEY, C_TAGS, C_FLAGS, C_QOFF, C_PHYS, C_QID = range(len(COLUMNS))
#: ``flags`` bits: the producer waits for the store (no WAIT=false), the record has KEYS or UNIQ_KEY
F_WAIT, F_INDEX = 1, 2


class SendBatch:
    """Records encoded from a run of SEND requests, one int64 row of ``COLUMNS`` per record."""

    def __init__(self, nreq: int, rr: int) -> None:
        self.staging = bytearray()
        self.cols: np.ndarray = np.zeros((max(1, nreq), len(COLUMNS)), np.int64)
        self.n = 0
        self.keys: list[tuple[str, int]] = []
        self.slow: list[int] = []
        self.fast: list[int] = []
        self.rr = rr
        self.wait = False
        self.total_size = 0

    @property
    def records(self) -> bytes:
        """The staging buffer (all records back to back)."""
        return bytes(self.staging)

    def add(self, req: int, rec: bytes, key: int, tags: int, flags: int, qid: int) -> None:
        """Append one record and its row (offsets and store timestamp left 0)."""
        if self.n >= len(self.cols):
            grown = np.zeros((max(16, len(self.cols) * 2), len(COLUMNS)), np.int64)
            grown[:self.n] = self.cols[:self.n]
            self.cols = grown
        self.cols[self.n] = (req, len(self.staging), len(rec), key, tags, flags, 0, 0, qid)
        self.staging += rec
        self.n += 1

    def finish(self) -> None:
        """Cut ``cols`` to the rows written; sum ``wait`` and ``total_size`` over them."""
        self.cols = self.cols[:self.n]
        self.wait = bool((self.cols[:, C_FLAGS] & F_WAIT).any()) if self.n else False
        self.total_size = int(self.cols[:, C_SIZE].sum()) if self.n else 0
