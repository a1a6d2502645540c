# cython: language_level=3, embedsignature=True
"""The store's one-record put, compiled twin of ``lone_put_py`` (read that module for the contract).

The same steps in the same order; the batch's fields are read as C fields (``send_batch_c.pxd``),
the clocks are read without building float objects, and the rest goes through the C API instead
of the interpreter.
"""
cimport cython
from libc.time cimport time_t

from .record_writer_c cimport index_records, place_one
from .send_batch_c cimport C_KEY, C_SIZE, NCOLS, SendBatch

import logging


__all__ = ["LonePut"]

log = logging.getLogger("fastmq.store")  # (the store's logger: the same records as its own path)

cdef enum:
    MAX_KEYED = 16    # records of a put to queues of their own (_put_keyed)
    CQ_UNIT = 20      # a consume-queue entry: commit-log offset (8), size (4), tag code (8)
    INDEX_COUNT = 5   # IndexFile.state's entry count


cdef extern from "<time.h>" nogil:
    ctypedef int clockid_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(clockid_t clk, timespec* ts)
    clockid_t CLOCK_REALTIME
    clockid_t CLOCK_MONOTONIC


cdef inline long long _wall_ms():
    """int(time.time() * 1000), without the float object."""
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <long long>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef inline double _monotonic():
    """time.monotonic() (CLOCK_MONOTONIC on Linux, as CPython reads it)."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + ts.tv_nsec * 1e-9


@cython.final
cdef class LonePut:
    """The one-record put of one MessageStore (see ``lone_put_py.LonePut``)."""

    cdef readonly object store
    cdef readonly object put_result
    cdef readonly object put_ok
    cdef readonly double disk_check_interval
    cdef readonly object clock
    cdef object commit_log, mfq, queues, acquire, release
    cdef dict cqs, stats, sd

    def __init__(self, store, put_result, put_ok, double disk_check_interval, clock=None):
        self.store = store
        self.put_result = put_result
        self.put_ok = put_ok
        self.disk_check_interval = disk_check_interval
        self.clock = clock
        self.commit_log = store.commit_log
        self.mfq = store.commit_log.mfq
        lock = store.commit_log._lock
        self.acquire = lock.acquire  # (bound once: a method lookup a put fewer)
        self.release = lock.release
        self.queues = store.queues
        self.cqs = store.queues.queues
        self.stats = store.stats
        # the store's flags read from its instance dict, as the interpreter would find them
        # there (each is set in the store's __init__): a dict lookup where a generic attribute
        # read first walks the type
        self.sd = store.__dict__

    cdef inline long long _now(self) except? -1:
        if self.clock is not None:
            return self.clock()
        return _wall_ms()

    def put(self, SendBatch batch not None):
        """Store ``batch`` (one record) as ``put_batch_now`` would: its PutResult, or the
        coroutine of a wait the put owes; None when the store's general path must take it."""
        cdef object store = self.store
        cdef long long size, qoff, pos, cq_pos, phys, end, now
        cdef object now_o
        cdef object key, cq, cq_last, idx, ifile, clog, files, mf, cq_buf, placed, tag, cb
        cdef dict table
        cdef list cq_files, ifiles
        cdef dict sd = self.sd
        if batch.n != 1:
            return self._put_keyed(batch) if 1 < batch.n <= MAX_KEYED and batch.n == len(batch.keys) else None
        if (not sd["_running"] or sd["_shutdown"] or sd["_is_slave"]
                or sd["_refusing"] is not None or sd["_space_failed_at"] is not None
                or _monotonic() - <double>sd["_disk_checked_at"] >= self.disk_check_interval):
            return None
        key = batch.keys[0]
        cq = self.cqs.get(key)
        if cq is None:
            return None
        cq_files = cq.mfq.files
        if not cq_files:
            return None
        cq_last = cq_files[-1]
        if cq_last.reserved_to < cq_last.wrote_position + CQ_UNIT:
            return None
        idx = sd["index"]
        ifile = None
        if idx is not None:
            ifiles = idx.files
            if not ifiles:
                return None
            ifile = ifiles[-1]
            if ifile.state[INDEX_COUNT] > ifile.room_until:
                return None
        size = batch.total_size
        clog = self.commit_log
        files = self.mfq.files
        now = self._now()
        now_o = now  # (boxed once: it is stored in five places)
        qoff = phys = 0  # (set under the lock; the compiler cannot see every early return leaves)
        cq_buf = tag = None
        self.acquire()
        try:
            if not files:
                return None
            mf = files[-1]
            pos = mf.wrote_position
            if pos + size + 8 > mf.reserved_to:
                return None
            table = clog.topic_queue_table
            qoff = table.get(key, 0)
            # the entry goes with the record when it is the queue file's next one, in reserved room
            # (MappedFile.next_unit_pos, which the pure twin calls, written in C: no Python call)
            cq_pos = qoff * CQ_UNIT - <long long>cq_last.file_from_offset
            if cq_pos == <long long>cq_last.wrote_position and cq_pos + CQ_UNIT <= <long long>cq_last.reserved_to:
                cq_buf = cq_last.buffer
            else:
                cq_pos = -1
            try:
                placed = place_one(batch, mf.buffer, pos, mf.file_size, mf.file_from_offset, qoff, now, cq_buf, cq_pos)
            except Exception as exc:
                return store._append_failed(exc)
            if placed is None:  # (the room test above makes this a guard: nothing was written)
                return None
            mf.wrote_position, tag = placed
            if cq_buf is not None:
                cq_last.wrote_position = cq_pos + CQ_UNIT
            table[key] = qoff + 1
            mf.store_timestamp = now_o
            clog.last_store_timestamp = now_o
            if mf.wrote_position >= mf.append_mark:  # (below it after_append has nothing to do)
                self.mfq.after_append(mf)
            phys = <long long>mf.file_from_offset + pos
        finally:
            self.release()
        end = phys + size
        if cq_buf is not None:  # (its entry written with the record: the rest of ConsumeQueue.put)
            cq.max_physic_offset = end
        else:
            cq.put(qoff, phys, size, tag)
        cb = sd["on_arrival"]
        if cb is not None:
            topic, qid = key
            try:
                cb(topic, qid, qoff + 1, tag)
            except Exception:  # a listener bug must not fail a stored send
                log.exception("on_arrival callback failed for %s/%d", topic, qid)
        return self._finish(batch, now, now_o, qoff, phys, end, ifile, sd)

    cdef object _put_keyed(self, SendBatch batch):
        """:meth:`put` of a batch whose every record goes to a queue of its own, in order (a
        commit's real message and op message): the same steps a record at a time under one hold
        of the lock (see ``lone_put_py.LonePut.put_keyed``)."""
        cdef object store = self.store
        cdef Py_ssize_t i, n = batch.n
        cdef long long size, qoff, pos, cq_pos, phys, now, first_qoff = 0, first_phys = 0
        cdef object now_o, key, cq, cq_last, idx, clog, files, mf, cq_buf, placed, tag, cb, failed = None
        cdef dict table
        cdef dict sd = self.sd
        cdef list keys = batch.keys, cq_files, ifiles, cqs = [], lasts = [], done = []
        if (not sd["_running"] or sd["_shutdown"] or sd["_is_slave"]
                or sd["_refusing"] is not None or sd["_space_failed_at"] is not None
                or _monotonic() - <double>sd["_disk_checked_at"] >= self.disk_check_interval):
            return None
        for i in range(n):
            if batch.r[i * NCOLS + C_KEY] != i:
                return None
            cq = self.cqs.get(keys[i])
            if cq is None:
                return None
            cq_files = cq.mfq.files
            if not cq_files:
                return None
            cq_last = cq_files[-1]
            if cq_last.reserved_to < cq_last.wrote_position + CQ_UNIT:
                return None
            cqs.append(cq)
            lasts.append(cq_last)
        idx = sd["index"]
        if idx is not None:
            ifiles = idx.files
            if not ifiles:
                return None
            if ifiles[-1].state[INDEX_COUNT] > ifiles[-1].room_until:
                return None
        size = batch.total_size
        clog = self.commit_log
        files = self.mfq.files
        now = self._now()
        now_o = now
        self.acquire()
        try:
            if not files:
                return None
            mf = files[-1]
            pos = mf.wrote_position
            if pos + size + 8 > mf.reserved_to:
                return None
            table = clog.topic_queue_table
            first_phys = <long long>mf.file_from_offset + pos
            for i in range(n):
                key = keys[i]
                cq_last = lasts[i]
                qoff = table.get(key, 0)
                cq_pos = qoff * CQ_UNIT - <long long>cq_last.file_from_offset
                if cq_pos == <long long>cq_last.wrote_position and cq_pos + CQ_UNIT <= <long long>cq_last.reserved_to:
                    cq_buf = cq_last.buffer
                else:
                    cq_buf = None
                    cq_pos = -1
                try:
                    placed = place_one(batch, mf.buffer, pos, mf.file_size, mf.file_from_offset, qoff, now, cq_buf,
                                       cq_pos, i)
                    if placed is None and i:  # (the room test above makes this a guard)
                        raise RuntimeError("no room for the rest of the put")
                except Exception as exc:
                    if not i:
                        return store._append_failed(exc)
                    # those placed stay (their queues must say so below); the put is refused
                    failed = store._append_failed(exc)
                    break
                if placed is None:  # (the first: nothing written)
                    return None
                phys = <long long>mf.file_from_offset + pos
                pos, tag = placed
                mf.wrote_position = pos
                if cq_buf is not None:
                    cq_last.wrote_position = cq_pos + CQ_UNIT
                table[key] = qoff + 1
                if i == 0:
                    first_qoff = qoff
                done.append((qoff, phys, tag, cq_buf is not None))
            mf.store_timestamp = now_o
            clog.last_store_timestamp = now_o
            if mf.wrote_position >= mf.append_mark:
                self.mfq.after_append(mf)
        finally:
            self.release()
        cb = sd["on_arrival"]
        for i in range(len(done)):
            qoff, phys, tag, with_cq = done[i]
            cq = cqs[i]
            size = batch.r[i * NCOLS + C_SIZE]
            if with_cq:
                cq.max_physic_offset = phys + size
            else:
                cq.put(qoff, phys, size, tag)
            if cb is not None:
                topic, qid = keys[i]
                try:
                    cb(topic, qid, qoff + 1, tag)
                except Exception:  # a listener bug must not fail a stored put
                    log.exception("on_arrival callback failed for %s/%d", topic, qid)
        if failed is not None:
            return failed
        # (the index service indexes the records: one file may not hold them all)
        return self._finish(batch, now, now_o, first_qoff, first_phys, first_phys + batch.total_size, None, sd)

    def stored(self, SendBatch batch not None, object now, long long first_qoff, long long first_phys,
               long long end):
        """The end of the store's general put path, as ``put`` ends (see ``lone_put_py.LonePut.stored``)."""
        return self._finish(batch, now, now, first_qoff, first_phys, end, None, self.sd)

    cdef object _finish(self, SendBatch batch, long long now, object now_o, long long first_qoff,
                        long long first_phys, long long end, object ifile, dict sd):
        cdef object store = self.store
        cdef object idx, result
        cdef list state
        cdef bint fresh
        cdef dict st
        cdef long long size
        self.queues.last_dispatched_store_timestamp = now_o
        if ifile is not None:
            state = ifile.state
            fresh = state[INDEX_COUNT] <= 1
            if index_records(batch, 0, ifile._mm, ifile.slots, ifile.entries, state, now) < 1 and not fresh:
                # its keys did not fit: they go to the next file together, as IndexService.put_batch does
                state[INDEX_COUNT] = ifile.entries
                sd["index"].put_batch(batch, now_o)
        else:
            idx = sd["index"]
            if idx is not None:
                idx.put_batch(batch, now_o)
        st = self.stats
        size = batch.total_size
        st["putMessageTimesTotal"] += batch.n
        st["putMessageSizeTotal"] += size
        result = self.put_result(self.put_ok, "", first_qoff, first_phys, size, batch.n, None, now_o)
        if batch.wait and (sd["_sync_flush"] or (sd["_sync_master"] and sd["ha_service"] is not None)):
            return store._owed(result, batch, now_o, end)
        return self._took(result, now)

    def took(self, result, long long began):
        """The put's latency statistic and ``result`` (see ``lone_put_py.LonePut.took``)."""
        return self._took(result, began)

    cdef inline object _took(self, object result, long long began):
        cdef dict st = self.stats
        cdef long long elapsed = self._now() - began
        if elapsed > <long long>st["putMessageEntireTimeMax"]:
            st["putMessageEntireTimeMax"] = elapsed
        return result
