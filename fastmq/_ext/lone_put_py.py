"""The store's one-record put (one send in flight), pure-Python reference of ``lone_put_c``.

:class:`LonePut` does, in one call, what ``MessageStore.put_batch_now`` does for a batch of one
record in the usual case: the record appended to the commit log's last file with its
consume-queue entry, the arrival callback, the index entry, the put statistics and the answer.
It answers None, having done nothing, whenever anything is unusual (the store refusing puts, a
file without the reserved room, a queue without a file yet, an index file near its end, a
record that would not fit): the store then takes its general path, which does all of it with
every check. That path ends here too (:meth:`LonePut.stored`, :meth:`LonePut.took`): the index,
the statistics, the PutResult and the put-latency maximum are written in one place for both. The
store owns every piece of state read here; this class holds the store and those parts of it the
store never replaces.

The compiled twin runs the same steps without the interpreter's per-bytecode cost; it is the
lone send's largest single share of broker work.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from .record_writer import index_records, place_one
from .send_batch_py import C_KEY, C_SIZE

__all__ = ["LonePut"]

log = logging.getLogger("fastmq.store")  # (the store's logger: the same records as its own path)

_MAX_KEYED = 16  # records of a put to queues of their own (put_keyed)
_CQ_UNIT = 20  # a consume-queue entry: commit-log offset (8), size (4), tag code (8)
_INDEX_COUNT = 5  # IndexFile.state's entry count


class LonePut:
    """The one-record put of one :class:`MessageStore` (``store``), made once its commit log,
    queue table and statistics exist (held here: the store never replaces them).

    ``put_result`` is the store's PutResult class and ``put_ok`` its PUT_OK status (the store's
    floor is above this one); ``disk_check_interval`` how long (s) a disk check of the store's
    stays current. ``clock`` (tests only) gives the store timestamp in ms instead of the wall
    clock.
    """

    def __init__(self, store: Any, put_result: Callable[..., Any], put_ok: Any, disk_check_interval: float,
                 clock: Callable[[], int] | None = None) -> None:
        self.store = store
        self.put_result = put_result
        self.put_ok = put_ok
        self.disk_check_interval = disk_check_interval
        self.clock = clock
        self.commit_log = store.commit_log
        self.mfq = store.commit_log.mfq
        self.lock = store.commit_log._lock
        self.queues = store.queues
        self.cqs = store.queues.queues
        self.stats = store.stats

    def put(self, batch: Any) -> Any:
        """Store ``batch`` (one record) as ``put_batch_now`` would: its PutResult, or the
        coroutine of a wait the put owes (SYNC_FLUSH, SYNC_MASTER); None when the store's
        general path must take it (nothing done then)."""
        store = self.store
        if batch.n != 1:
            return self.put_keyed(batch) if 1 < batch.n <= _MAX_KEYED and batch.n == len(batch.keys) else None
        if (not store._running or store._shutdown or store._is_slave or store._refusing is not None
                or store._space_failed_at is not None
                or time.monotonic() - store._disk_checked_at >= self.disk_check_interval):
            return None
        key = batch.keys[0]
        cq = self.cqs.get(key)
        if cq is None:
            return None
        cq_files = cq.mfq.files
        if not cq_files:
            return None
        cq_last = cq_files[-1]
        if cq_last.reserved_to < cq_last.wrote_position + _CQ_UNIT:
            return None
        idx = store.index
        ifile = None
        if idx is not None:
            ifiles = idx.files
            if not ifiles:
                return None
            ifile = ifiles[-1]
            if ifile.state[_INDEX_COUNT] > ifile.room_until:
                return None
        size = batch.total_size
        clog = self.commit_log
        files = self.mfq.files
        now = self.clock() if self.clock is not None else int(time.time() * 1000)
        lock = self.lock
        lock.acquire()
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
            cq_pos = cq_last.next_unit_pos(qoff * _CQ_UNIT, _CQ_UNIT)
            cq_buf = None if cq_pos < 0 else cq_last.buffer
            try:
                placed = place_one(batch, mf.buffer, pos, mf.file_size, mf.file_from_offset, qoff, now, cq_buf, cq_pos)
            except Exception as exc:
                return store._append_failed(exc)
            if placed is None:  # (the room test above makes this a guard: nothing was written)
                return None
            mf.wrote_position, tag = placed
            if cq_buf is not None:
                cq_last.wrote_position = cq_pos + _CQ_UNIT
            table[key] = qoff + 1
            mf.store_timestamp = now
            clog.last_store_timestamp = now
            if mf.wrote_position >= mf.append_mark:  # (below it after_append has nothing to do)
                self.mfq.after_append(mf)
            phys = mf.file_from_offset + pos
        finally:
            lock.release()
        end = phys + size
        if cq_buf is not None:  # (its entry written with the record: the rest of ConsumeQueue.put)
            cq.max_physic_offset = end
        else:
            cq.put(qoff, phys, size, tag)
        cb = store.on_arrival
        if cb is not None:
            topic, qid = key
            try:
                cb(topic, qid, qoff + 1, tag)
            except Exception:  # a listener bug must not fail a stored send
                log.exception("on_arrival callback failed for %s/%d", topic, qid)
        return self._finish(batch, now, qoff, phys, end, ifile)

    def put_keyed(self, batch: Any) -> Any:
        """:meth:`put` of a batch whose every record goes to a queue of its own, in order (a
        commit's real message and op message; row ``i`` of queue key ``i``): the same steps a
        record at a time under one hold of the lock, the records back to back; None (nothing
        done) when :meth:`put` would say None for any of them or the batch has another shape.
        The index service indexes them (one index file may not hold them all). Should a record
        after the first fail to be written (the room test makes it a guard), those written stay
        in their queues and the put is refused."""
        store = self.store
        n = batch.n
        if (not store._running or store._shutdown or store._is_slave or store._refusing is not None
                or store._space_failed_at is not None
                or time.monotonic() - store._disk_checked_at >= self.disk_check_interval):
            return None
        keys = batch.keys
        cols = batch.cols
        lasts = []
        for i in range(n):
            if int(cols[i, C_KEY]) != i:
                return None
            cq = self.cqs.get(keys[i])
            if cq is None or not cq.mfq.files:
                return None
            cq_last = cq.mfq.files[-1]
            if cq_last.reserved_to < cq_last.wrote_position + _CQ_UNIT:
                return None
            lasts.append((cq, cq_last))
        idx = store.index
        if idx is not None and (not idx.files or idx.files[-1].state[_INDEX_COUNT] > idx.files[-1].room_until):
            return None
        size = batch.total_size
        clog = self.commit_log
        files = self.mfq.files
        now = self.clock() if self.clock is not None else int(time.time() * 1000)
        done: list[tuple[int, int, int, bool]] = []
        failed = None
        self.lock.acquire()
        try:
            if not files:
                return None
            mf = files[-1]
            pos = mf.wrote_position
            if pos + size + 8 > mf.reserved_to:
                return None
            table = clog.topic_queue_table
            first_phys = mf.file_from_offset + pos
            for i in range(n):
                key = keys[i]
                cq_last = lasts[i][1]
                qoff = table.get(key, 0)
                cq_pos = cq_last.next_unit_pos(qoff * _CQ_UNIT, _CQ_UNIT)
                cq_buf = None if cq_pos < 0 else cq_last.buffer
                try:
                    placed = place_one(batch, mf.buffer, pos, mf.file_size, mf.file_from_offset, qoff, now, cq_buf,
                                       cq_pos, i)
                    if placed is None and i:
                        raise RuntimeError("no room for the rest of the put")
                except Exception as exc:
                    if not i:
                        return store._append_failed(exc)
                    failed = store._append_failed(exc)
                    break
                if placed is None:
                    return None
                phys = mf.file_from_offset + pos
                pos, tag = placed
                mf.wrote_position = pos
                if cq_buf is not None:
                    cq_last.wrote_position = cq_pos + _CQ_UNIT
                table[key] = qoff + 1
                done.append((qoff, phys, tag, cq_buf is not None))
            mf.store_timestamp = now
            clog.last_store_timestamp = now
            if mf.wrote_position >= mf.append_mark:
                self.mfq.after_append(mf)
        finally:
            self.lock.release()
        cb = store.on_arrival
        for i, (qoff, phys, tag, with_cq) in enumerate(done):
            cq = lasts[i][0]
            rsize = int(cols[i, C_SIZE])
            if with_cq:
                cq.max_physic_offset = phys + rsize
            else:
                cq.put(qoff, phys, rsize, tag)
            if cb is not None:
                topic, qid = keys[i]
                try:
                    cb(topic, qid, qoff + 1, tag)
                except Exception:  # a listener bug must not fail a stored put
                    log.exception("on_arrival callback failed for %s/%d", topic, qid)
        if failed is not None:
            return failed
        return self._finish(batch, now, done[0][0], first_phys, first_phys + size, None)

    def stored(self, batch: Any, now: int, first_qoff: int, first_phys: int, end: int) -> Any:
        """The end of the store's general put path (any number of records, stored and in their
        queues, from ``first_qoff`` at ``first_phys`` to commit-log offset ``end``, store
        timestamp ``now``): the index, the statistics and the answer, as :meth:`put` ends. The
        PutResult, or the coroutine of a wait the put owes."""
        return self._finish(batch, now, first_qoff, first_phys, end, None)

    def _finish(self, batch: Any, now: int, first_qoff: int, first_phys: int, end: int, ifile: Any) -> Any:
        """The one end of every batch put: ``ifile`` is the index file :meth:`put` checked has room
        for the record's keys (None: the index service places them, file rolls included)."""
        store = self.store
        self.queues.last_dispatched_store_timestamp = now
        if ifile is not None:
            state = ifile.state
            fresh = state[_INDEX_COUNT] <= 1
            if index_records(batch, 0, ifile._mm, ifile.slots, ifile.entries, state, now) < 1 and not fresh:
                # its keys did not fit: they go to the next file together, as IndexService.put_batch does
                state[_INDEX_COUNT] = ifile.entries
                store.index.put_batch(batch, now)
        elif store.index is not None:
            store.index.put_batch(batch, now)
        st = self.stats
        size = batch.total_size
        st["putMessageTimesTotal"] += batch.n
        st["putMessageSizeTotal"] += size
        result = self.put_result(self.put_ok, "", first_qoff, first_phys, size, batch.n, None, now)
        if batch.wait and (store._sync_flush or (store._sync_master and store.ha_service is not None)):
            return store._owed(result, batch, now, end)
        return self.took(result, now)

    def took(self, result: Any, began: int) -> Any:
        """The put's latency statistic, from ``began`` (its store timestamp, ms), and ``result``.
        (Wall-clock milliseconds, as 4.9 measures putMessageEntireTimeMax from the time it
        stamps: one clock read a put fewer than a monotonic start of its own.)"""
        elapsed = (self.clock() if self.clock is not None else int(time.time() * 1000)) - began
        st = self.stats
        if elapsed > st["putMessageEntireTimeMax"]:
            st["putMessageEntireTimeMax"] = elapsed
        return result
