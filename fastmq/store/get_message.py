"""The read side of the message store (RocketMQ's DefaultMessageStore.getMessage and its lookups).

:class:`MessageReader` is owned by :class:`~fastmq.store.message_store.MessageStore`, which hands
it the commit log, the consume queues, the config and the stats it counts into, and passes reads
on to it; it needs nothing else of the store (the write side, flushing, recovery). A pull takes
consume-queue entries from the requested offset, filters them by tag code, and slices the records
from the mapped commit log under RocketMQ's transfer limits (count and bytes, in memory or on
disk); the records are sent as they are, never copied into Python objects.
"""
from __future__ import annotations

import enum
import os
import struct
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from . import StoreError
from .config import CQ_STORE_UNIT_SIZE

if TYPE_CHECKING:
    from .._ext.sql_filter import SqlProgram
    from ..protocol.message import MessageExt
    from .commit_log import CommitLog
    from .config import MessageStoreConfig
    from .consume_queue import ConsumeQueue, ConsumeQueueTable

__all__ = ["GetStatus", "GetResult", "MessageReader", "TOTAL_PHYSICAL_MEMORY"]

# RocketMQ MessageStoreConfig pull limits (not yet keys of our MessageStoreConfig)
_PULL_DEFAULTS = {
    "maxTransferBytesOnMessageInMemory": 256 * 1024,
    "maxTransferCountOnMessageInMemory": 32,
    "maxTransferBytesOnMessageInDisk": 64 * 1024,
    "maxTransferCountOnMessageInDisk": 8,
    "accessMessageInMemoryMaxRatio": 40,
}

_TOTALSIZE = struct.Struct(">i")
#: Up to this many messages per pull, an unfiltered pull reads its entries with struct, not numpy
#: (a push consumer asks for 32; numpy's fixed cost is several entries' worth of struct)
_FEW = 64
#: Entries a SQL92 filter converts at first, then twice as many each time it needs more
_SQL_CHUNK = 256

try:
    TOTAL_PHYSICAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
    TOTAL_PHYSICAL_MEMORY = 8 << 30

_perf_counter = time.perf_counter


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class GetResult:
    """A pull's worth of stored records (``buffers`` concatenate into a PULL body).

    A plain class with slots, not a dataclass: every pull makes one (two per message for a
    long-polling consumer), and the dataclass ``__init__`` with its list factories cost a
    third more.
    """

    __slots__ = ("status", "next_begin_offset", "min_offset", "max_offset", "buffers", "msg_count",
                 "buffer_total_size", "queue_offsets", "tag_codes_seen", "suggest_pulling_from_slave")

    def __init__(self, status: GetStatus, next_begin_offset: int, min_offset: int = 0, max_offset: int = 0) -> None:
        self.status = status
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.buffers: list[memoryview] = []
        self.msg_count = 0
        self.buffer_total_size = 0
        self.queue_offsets: list[int] = []
        self.tag_codes_seen: list[int] = []
        self.suggest_pulling_from_slave = False

    def __repr__(self) -> str:
        return (f"GetResult({self.status.name}, next={self.next_begin_offset}, min={self.min_offset}, "
                f"max={self.max_offset}, msgs={self.msg_count}, bytes={self.buffer_total_size})")


# The members as plain names: reading one off the Enum class costs a metaclass __getattr__ call,
# and a pull reads several
_FOUND, _NO_MATCHED_MESSAGE = GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE
_MESSAGE_WAS_REMOVING, _OFFSET_FOUND_NULL = GetStatus.MESSAGE_WAS_REMOVING, GetStatus.OFFSET_FOUND_NULL
_OFFSET_OVERFLOW_BADLY, _OFFSET_OVERFLOW_ONE = GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.OFFSET_OVERFLOW_ONE
_OFFSET_TOO_SMALL, _NO_MESSAGE_IN_QUEUE = GetStatus.OFFSET_TOO_SMALL, GetStatus.NO_MESSAGE_IN_QUEUE


class MessageReader:
    """The store's read side: a pull's records and the queue lookups (offsets, times, a record by
    its commit-log offset), as DefaultMessageStore answers them.

    It reads only what it is given: the store's ``config``, ``commit_log`` and consume ``queues``,
    and counts each pull into ``stats`` (the store's getMessage* figures). The store sets
    ``damaged_offsets`` when it loads: records recovery set aside, which pulls skip.
    """

    def __init__(self, config: "MessageStoreConfig", commit_log: "CommitLog", queues: "ConsumeQueueTable",
                 stats: dict[str, Any]) -> None:
        self.config = config
        self.commit_log = commit_log
        self.queues = queues
        self.stats = stats
        #: commit-log offsets of the records set aside as damaged
        self.damaged_offsets: set[int] = set()
        # (topic, queue id) -> (commit-log min, queue min, first offset still in the log): see queue_min
        self._min_cache: dict[tuple[str, int], tuple[int, int, int]] = {}

    def forget_queue(self, key: tuple[str, int]) -> None:
        """A queue was dropped: a queue of that name made later starts afresh."""
        self._min_cache.pop(key, None)

    def caught_up(self, topic: str, queue_id: int, offset: int) -> bool:
        """True (counted as :meth:`get_message` counts its miss) when ``offset`` is the end of a
        queue that has messages: the read would be OFFSET_OVERFLOW_ONE, and a long-polling pull
        that only needs that verdict to be held is spared building the whole result."""
        cq = self.queues.queues.get((topic, queue_id))
        if cq is None or not offset:
            return False
        # cq.bounds()'s max and get_message's OFFSET_OVERFLOW_ONE test, written out: calling bounds()
        # here measured +0.9k instructions a held pull (+2.5%, pull_round_instructions --parts,
        # session 17); test_caught_up_is_get_messages_overflow_one_and_counts_its_miss pins the two
        files = cq.mfq.files
        if not files:
            return False
        last = files[-1]
        if offset != (last.file_from_offset + last.wrote_position) // CQ_STORE_UNIT_SIZE:
            return False
        self.stats["getMessageTimesTotalMiss"] += 1
        return True

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    tag_codes: "set[int] | SqlProgram | None" = None) -> GetResult:
        """Up to ``max_msg_nums`` records of a queue from ``offset`` (DefaultMessageStore.getMessage).

        ``tag_codes``: the subscription's codeSet (None or empty: every message matches), or a
        compiled SQL92 filter (``_ext.sql_filter.SqlProgram``): a record matches when the filter
        evaluates TRUE on its properties (4.9.8's ExpressionMessageFilter; one argument for both,
        so that pulls without a filter take the same steps as before).
        ``next_begin_offset`` follows 4.9.8: 0 for an empty queue, the queue's min for a
        too-small offset, its max for an overflow, and past the last entry examined otherwise;
        except that a slave (without offsetCheckInSlave) leaves the requested offset alone
        where those rules would move it (nextOffsetCorrection).
        """
        t0 = _perf_counter()
        cq = self.queues.queues.get((topic, queue_id))
        if cq is None:
            # RocketMQ creates the queue on lookup, so an unknown queue reads as an empty one
            res = GetResult(_NO_MESSAGE_IN_QUEUE, 0)
            min_off = max_off = 0
        else:
            lo, max_off = cq.bounds()
            min_off = self._queue_min(cq, lo, max_off)
            res = GetResult(_NO_MATCHED_MESSAGE, offset, min_off, max_off)
        # (one chain, so that every read leaves through the counting at its end)
        if cq is None:
            pass
        elif offset == max_off and max_off:  # the usual miss (a consumer caught up, to be held): first
            res.status = _OFFSET_OVERFLOW_ONE
        elif max_off == 0:
            res.status, res.next_begin_offset = _NO_MESSAGE_IN_QUEUE, self._corrected(offset, 0)
        elif offset < min_off:
            res.status, res.next_begin_offset = _OFFSET_TOO_SMALL, self._corrected(offset, min_off)
        elif offset > max_off:
            # (4.9.0-4.9.3 sent a queue that starts at 0 back to 0: a consumer ahead of a
            # truncated queue then read it all again; 4.9.4 on use the max)
            res.status, res.next_begin_offset = _OFFSET_OVERFLOW_BADLY, self._corrected(offset, max_off)
        elif not tag_codes and max_msg_nums <= _FEW:
            # no filter: only the first max(1, maxMsgNums) entries can be answered (see below)
            offs, sizes, tags = cq.get_entry_lists(offset, max_msg_nums if max_msg_nums > 1 else 1, max_off)
            max_offset_py = self.commit_log.mfq.max_offset  # (one property frame less than commit_log's)
            if not offs:
                self._found_null(res, offset)
            else:
                damaged = self.damaged_offsets
                if damaged and not damaged.isdisjoint(offs):
                    self._collect(res, offset, offs, sizes, tags, [o not in damaged for o in offs], max_msg_nums,
                                  max_offset_py)
                elif not self._collect_run(res, offset, offs, sizes, tags, max_msg_nums, max_offset_py):
                    self._collect(res, offset, offs, sizes, tags, None, max_msg_nums, max_offset_py)
        else:
            max_filter = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE
            arr = cq.get_entries(offset, max_filter)
            max_offset_py = self.commit_log.max_offset
            n = len(arr)
            if n == 0:
                self._found_null(res, offset)
            else:
                # Only entries up to the max_msg_nums-th match can be answered: the loop in
                # _collect stops right after it, so Python lists of the other (up to 16,000)
                # entries would be built for nothing.
                matched: list[bool] | None
                if not tag_codes:
                    cut = min(n, max(1, max_msg_nums))
                    matched = None
                elif tag_codes.__class__ is set:
                    # codeSet holds Java ints: compare the int32 value of the stored code
                    t32 = arr["tags_code"].astype(np.int64).astype(np.int32)
                    hits = np.isin(t32, np.fromiter(tag_codes, dtype=np.int64, count=len(tag_codes)))
                    where = np.flatnonzero(hits)
                    cut = int(where[max_msg_nums - 1]) + 1 if len(where) >= max_msg_nums > 0 else n
                    matched = hits[:cut].tolist()
                    del t32, hits, where
                else:
                    # a SQL92 filter: evaluated against each record's properties, in place
                    matched, cut = self._sql_matched(tag_codes, arr, max_msg_nums)  # type: ignore[arg-type]
                part = arr[:cut]
                offs = part["offset"].tolist()
                damaged = self.damaged_offsets
                if damaged and not damaged.isdisjoint(offs):
                    # a record set aside by recovery: skipped like a filtered one, the rest delivered
                    matched = [(matched is None or matched[i]) and o not in damaged for i, o in enumerate(offs)]
                sizes = part["size"].tolist()
                tags = part["tags_code"].tolist()
                del arr, part
                if matched is not None or not self._collect_run(res, offset, offs, sizes, tags, max_msg_nums,
                                                                max_offset_py):
                    self._collect(res, offset, offs, sizes, tags, matched, max_msg_nums, max_offset_py)
        st = self.stats
        if res.status is _FOUND:
            st["getMessageTimesTotalFound"] += 1
            st["getMessageTransferedMsgCount"] += res.msg_count
        else:
            st["getMessageTimesTotalMiss"] += 1
        ms = int((_perf_counter() - t0) * 1000)
        if ms > st["getMessageEntireTimeMax"]:
            st["getMessageEntireTimeMax"] = ms
        return res

    def _sql_matched(self, program: "SqlProgram", arr: Any, max_msg_nums: int) -> tuple[list[bool], int]:
        """Which entries of ``arr`` (up to the ``max_msg_nums``-th match) a SQL92 filter takes, and
        how many entries that is. The records are evaluated in the mapped commit log, a file's run
        at a time, in one call each; one that cannot be read is marked taken, so that
        ``_collect`` reads it and answers as for any record gone (MESSAGE_WAS_REMOVING)."""
        n = len(arr)
        out = np.zeros(n, dtype=np.uint8)
        find = self.commit_log.mfq.find_mapped_file_by_offset
        want = max_msg_nums if max_msg_nums > 0 else 1
        found = i = 0
        # (entries are converted a chunk at a time: a pull takes up to 16,000 of them, and one of
        # 32 matches at one in ten needs some 320)
        chunk = max(_SQL_CHUNK, want * 4)
        lo = hi = 0
        offs: Any = None
        sizes: Any = None
        out_part: Any = None
        while i < n and found < want:
            if i >= hi:
                lo, hi = i, min(n, i + chunk)
                part = arr[lo:hi]
                offs, sizes, out_part = part["offset"].astype(np.int64), part["size"].astype(np.int64), out[lo:hi]
                chunk *= 2
            mf = find(int(offs[i - lo]))
            nxt = i
            if mf is not None:
                stop, got = program.match_records(mf.select(0), mf.file_from_offset, offs, sizes, i - lo, out_part,
                                                  want - found)
                nxt = lo + stop
                found += got
            if nxt == i:  # not in a file, or past what was written of it
                out[i] = 1
                found += 1
                nxt = i + 1
            i = nxt
        return out[:i].astype(bool).tolist(), i

    def _found_null(self, res: GetResult, offset: int) -> None:
        """No entry at ``offset`` in its file: on to the next consume-queue file (4.9's
        rollNextFile)."""
        res.status = _OFFSET_FOUND_NULL
        per_file = self.config.mappedFileSizeConsumeQueue // CQ_STORE_UNIT_SIZE
        res.next_begin_offset = offset + per_file - offset % per_file

    def _collect_run(self, res: GetResult, offset: int, offs: list[int], sizes: list[int], tags: list[int],
                     max_msg_nums: int, max_offset_py: int) -> bool:
        """The usual pull in one step; False (``res`` untouched) when ``_collect`` must decide.

        Usual: no tag filter, the first record in memory (so are the later ones: their commit-log
        offsets are larger), every record to take inside one file and what was written of it,
        their bytes within maxTransferBytesOnMessageInMemory. Then ``_collect``'s loop would take
        the first min(count, maxMsgNums, maxTransferCountOnMessageInMemory) records one by one
        (~0.6 µs of Python each, most of a pull's time in the broker); here they are counted at
        once. Records lying end to end in the log (a batch send's, one queue's when it alone is
        written to) go out as one buffer.
        """
        cfg = self.config
        # (the config's own attributes: a getattr call with a default costs a few of these reads)
        mem = TOTAL_PHYSICAL_MEMORY * cfg.accessMessageInMemoryMaxRatio / 100
        first = offs[0]
        if max_offset_py - first > mem:
            return False
        n = len(offs)
        # (conditionals, not min/max: a builtin call costs more than the comparison)
        limit = cfg.maxTransferCountOnMessageInMemory
        if max_msg_nums < limit:
            limit = max_msg_nums
        k = n if n < limit else limit if limit > 1 else 1
        total = sum(sizes[:k]) if k < n else sum(sizes)
        if k > 1 and total > cfg.maxTransferBytesOnMessageInMemory:
            return False
        end = offs[k - 1] + sizes[k - 1]
        mf = self.commit_log.mfq.find_mapped_file_by_offset(first)
        if mf is None or end > mf.file_from_offset + mf.file_size:
            return False
        try:
            run = mf.select(first - mf.file_from_offset, end - first)
        except StoreError:
            return False
        if end - first == total:
            res.buffers.append(run)
        else:
            res.buffers.extend([run[o - first:o - first + sz] for o, sz in zip(offs[:k], sizes[:k])])
        res.msg_count = k
        res.buffer_total_size = total
        res.queue_offsets.extend(range(offset, offset + k))
        res.tag_codes_seen.extend(tags[:k])
        res.status = _FOUND
        res.next_begin_offset = offset + k
        # the last record _collect would have looked at: the one it stopped before, or the last
        res.suggest_pulling_from_slave = (max_offset_py - offs[k if k < n else n - 1]) > mem
        return True

    def _collect(self, res: GetResult, offset: int, offs: list[int], sizes: list[int],
                 tags: list[int], matched: list[bool] | None, max_msg_nums: int,
                 max_offset_py: int) -> None:
        cfg = self.config
        lim = {k: getattr(cfg, k, v) for k, v in _PULL_DEFAULTS.items()}
        mem = TOTAL_PHYSICAL_MEMORY * lim["accessMessageInMemoryMaxRatio"] / 100
        file_size = cfg.mappedFileSizeCommitLog
        next_phy_start = None
        max_phy_pulling = 0
        n = len(offs)
        i = 0
        find = self.commit_log.mfq.find_mapped_file_by_offset
        mf, mf_from, mf_end = None, 0, -1  # the file of the previous record: most pulls read one file
        while i < n:
            o, s = offs[i], sizes[i]
            max_phy_pulling = o
            if next_phy_start is not None and o < next_phy_start:
                i += 1
                continue
            if res.msg_count:  # RocketMQ isTheBatchFull
                if res.msg_count >= max_msg_nums:
                    break
                if max_offset_py - o > mem:
                    if (res.buffer_total_size + s > lim["maxTransferBytesOnMessageInDisk"]
                            or res.msg_count > lim["maxTransferCountOnMessageInDisk"] - 1):
                        break
                elif (res.buffer_total_size + s > lim["maxTransferBytesOnMessageInMemory"]
                        or res.msg_count > lim["maxTransferCountOnMessageInMemory"] - 1):
                    break
            if matched is not None and not matched[i]:
                if not res.buffer_total_size:
                    res.status = _NO_MATCHED_MESSAGE
                i += 1
                continue
            try:
                if not (mf_from <= o and o + s <= mf_end):
                    mf = find(o)
                    if mf is None:
                        raise StoreError(f"offset {o} is outside the commit log")
                    mf_from, mf_end = mf.file_from_offset, mf.file_from_offset + mf.file_size
                buf = mf.select(o - mf_from, s)  # type: ignore[union-attr]  # mf_end -1: the first record sets mf
            except StoreError:
                if not res.buffer_total_size:
                    res.status = _MESSAGE_WAS_REMOVING
                next_phy_start = o + file_size - o % file_size
                i += 1
                continue
            res.buffers.append(buf)
            res.msg_count += 1
            res.buffer_total_size += s
            res.queue_offsets.append(offset + i)
            res.tag_codes_seen.append(tags[i])
            res.status = _FOUND
            next_phy_start = None
            i += 1
        res.next_begin_offset = offset + i
        res.suggest_pulling_from_slave = (max_offset_py - max_phy_pulling) > mem

    def _corrected(self, offset: int, new: int) -> int:
        """nextOffsetCorrection: ``new``, but a slave without offsetCheckInSlave keeps ``offset``
        (evaluated only where a pull's offset is being moved, not on every pull)."""
        return new if self.config.corrects_offsets else offset

    # ------------------------------------------------------------------ lookups
    def queue_min(self, cq: "ConsumeQueue") -> int:
        """A queue's first offset whose record is still in the commit log (RocketMQ's
        correctMinOffset: retention deletes whole queue files, so the first file may start
        with entries pointing below the commit log's minimum)."""
        return self._queue_min(cq, *cq.bounds())

    def _queue_min(self, cq: "ConsumeQueue", lo: int, hi: int) -> int:
        """:meth:`queue_min` of a queue whose stored offsets are ``lo`` to ``hi``."""
        files = self.commit_log.mfq.files  # (commit_log.min_offset without its two property calls)
        cl_min = files[0].file_from_offset if files else 0
        if cl_min == 0 or hi <= lo:
            return lo
        key = (cq.topic, cq.queue_id)
        cached = self._min_cache.get(key)
        if cached is not None and cached[0] == cl_min and cached[1] == lo and cached[2] < hi:
            return cached[2]  # a file's worth of searchsorted per pull would cost ~ms
        if cq.get_entry(lo)[0] >= cl_min:
            return lo
        arr = cq.get_entries(lo, hi - lo)
        offs = arr["offset"].astype(np.int64)
        del arr
        found = lo + int(np.searchsorted(offs, cl_min, side="left"))
        self._min_cache[key] = (cl_min, lo, found)
        return found

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return self.queue_min(cq) if cq is not None else 0

    def _store_ts(self, commit_log_offset: int, size: int) -> int:
        try:
            return self.commit_log.store_timestamp_at(commit_log_offset, size)
        except (StoreError, Exception):  # removed by retention or unreadable
            return -1

    def offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """RocketMQ's ConsumeQueue.getOffsetInQueueByTime: the entry stored exactly at
        ``timestamp``, else the nearer of its two neighbours; the first entry when every
        message is later, the last when every message is earlier; 0 for an empty queue."""
        cq = self.queues.get(topic, queue_id)
        if cq is None or cq.max_offset <= cq.min_offset:
            return 0
        lo_off, hi_off = cq.min_offset, cq.max_offset
        ts_at = self._ts_at_queue_offset
        idx = cq.search_offset_by_timestamp(timestamp, self._store_ts, boundary="lower")
        if idx >= hi_off:
            return hi_off - 1
        right_ts = ts_at(cq, idx)
        if right_ts == timestamp or idx <= lo_off:
            return idx
        left_ts = ts_at(cq, idx - 1)
        return idx if abs(timestamp - left_ts) > abs(timestamp - right_ts) else idx - 1

    def _ts_at_queue_offset(self, cq: "ConsumeQueue", queue_offset: int) -> int:
        try:
            o, s, _ = cq.get_entry(queue_offset)
        except StoreError:
            return -1
        return self._store_ts(o, s)

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the first message still in the queue; -1 when there is none."""
        cq = self.queues.get(topic, queue_id)
        if cq is None or cq.max_offset <= cq.min_offset:
            return -1
        lo = self.queue_min(cq)
        return self._ts_at_queue_offset(cq, lo) if lo < cq.max_offset else -1

    def message_store_time_stamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at queue ``offset``; -1 when there is none."""
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return -1
        return self._ts_at_queue_offset(cq, offset)

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        """The stored record at a commit-log offset, as bytes (None when no record starts there)."""
        try:
            msg = self.commit_log.get_message(commit_log_offset)  # validates the record, not only its size
            return bytes(self.commit_log.get_data(commit_log_offset, msg.store_size))
        except Exception:  # any bad offset means "no message here", never a broken broker
            return None

    def record_view(self, commit_log_offset: int) -> memoryview | None:
        """A zero-copy view of the record that starts at a commit-log offset, as long as its
        TOTALSIZE says, unchecked beyond lying within what was written (None otherwise): for a
        reader that validates the record itself (the end of a transaction)."""
        try:
            view = self.commit_log.read_from(commit_log_offset, 1 << 62)  # (one file lookup, no copy)
            size = _TOTALSIZE.unpack_from(view)[0]
            return view[:size] if 4 < size <= len(view) else None
        except Exception:  # any bad offset means "no record here", never a broken broker
            return None

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """Decode the record at a commit-log offset (None when there is no record there)."""
        try:
            return self.commit_log.get_message(commit_log_offset)
        except (StoreError, ValueError, Exception):
            return None

    def earliest_message_time_in_log(self) -> int:
        """The store time of the oldest record the commit log holds (getEarliestMessageTime);
        -1 when it holds none."""
        first = self.commit_log.min_offset
        if first >= self.commit_log.max_offset:
            return -1
        return self._store_ts(first, 80)  # a record up to its STORETS, IPv6 born host included
