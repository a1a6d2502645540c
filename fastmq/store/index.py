"""The message index: find messages by key (KEYS and UNIQ_KEY) for QUERY_MESSAGE.

RocketMQ's IndexFile layout, in files under ``storePathRootDir/index`` named by creation time::

    header   int64 beginTimestamp | int64 endTimestamp | int64 beginPhyOffset | int64 endPhyOffset
             | int32 hashSlotCount | int32 indexCount                                   (40 bytes)
    slots    maxHashSlotNum x int32: the newest entry of each hash slot (0: empty)
    entries  maxIndexNum x (int32 keyHash | int64 phyOffset | int32 timeDiff s | int32 prevIndex)

``keyHash`` is Java's String.hashCode() of ``topic#key``, made non-negative; a slot's entries form
a list newest-first through ``prevIndex``. A file is created only when the first key arrives, and
a new one when it is full. The index is rebuilt past its last entry from the commit log at start,
so a crash loses nothing that the commit log kept.
"""
from __future__ import annotations

import logging
import mmap
import os
import struct
import time
from pathlib import Path

from .._ext.record_writer import index_records
from .._ext.send_batch import SendBatch
from .mapped_file import reserve_range
from ..protocol.message import java_string_hash

__all__ = ["IndexFile", "IndexService", "IndexWalk"]

log = logging.getLogger("fastmq.store")

_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")
HEADER_SIZE = _HEADER.size  # 40
_RESERVE_CHUNK = 1 << 17  # entries (2.5 MiB) reserved past the count: more than one 4 MiB batch holds keys


def _key_hash(topic: str, key: str) -> int:
    h = java_string_hash(f"{topic}#{key}")
    return abs(h) if h != -(1 << 31) else 0  # Math.abs(MIN_VALUE) is negative in Java; RocketMQ maps it to 0


#: positions in :attr:`IndexFile.state` (the header's fields, in its order)
BEGIN_TS, END_TS, BEGIN_PHY, END_PHY, SLOT_COUNT, COUNT = range(6)


class IndexFile:
    # The header's fields live in one list, ``state`` (positions BEGIN_TS..COUNT), which
    # index_records updates in place: a put of a send's keys then neither gathers six attributes
    # into a list nor spreads them back.
    @property
    def count(self) -> int:
        """Entries used, entry 0 included (never written: 0 means none)."""
        return self.state[COUNT]

    def __init__(self, path: Path, slots: int, entries: int) -> None:
        self.path, self.slots, self.entries = path, slots, entries
        size = HEADER_SIZE + slots * 4 + entries * 20
        fresh = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._reserved_to = 0
        self.room_until = -1
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)  # sparse; the blocks written are reserved as they come near
                self._reserve(fd, HEADER_SIZE + slots * 4 + _RESERVE_CHUNK * 20)
            self._mm = mmap.mmap(fd, size)
        except BaseException:
            if fresh:
                try:
                    path.unlink()
                except OSError:
                    pass
            raise
        finally:
            os.close(fd)
        if fresh:
            _HEADER.pack_into(self._mm, 0, 0, 0, 0, 0, 0, 1)
        self.state: list[int] = list(_HEADER.unpack_from(self._mm, 0))
        self.state[COUNT] = max(1, self.state[COUNT])  # entry 0 is never used: 0 means "none"
        self._released_to = 0

    @property
    def full(self) -> bool:
        return self.count >= self.entries

    def _reserve(self, fd: int, upto: int) -> None:
        """Real blocks for the first ``upto`` bytes (a write to a hole the disk cannot fill is a
        SIGBUS, see mapped_file). Slots are written at random, so they are reserved whole at
        creation; entries are appended, so they are reserved a chunk ahead of the count.

        Raises:
            DiskFullError: no room.
        """
        base = HEADER_SIZE + self.slots * 4
        upto = min(upto, base + self.entries * 20)
        if upto > self._reserved_to:
            reserve_range(fd, self._reserved_to, upto - self._reserved_to, self.path)
            self._reserved_to = upto
        # the count up to which a put needs neither reserve_ahead() nor a new file (read by the
        # store's one-record put)
        self.room_until = (self.entries - 1 if self._reserved_to >= base + self.entries * 20
                           else min(self.entries - 1, (self._reserved_to - base) // 20 - _RESERVE_CHUNK))

    def reserve_ahead(self, extra: int = 0) -> None:
        """Keep at least :data:`_RESERVE_CHUNK` entries past the count (and the ``extra`` a
        put is about to add) reserved (before a put)."""
        base = HEADER_SIZE + self.slots * 4
        if self._reserved_to >= base + min(self.entries, self.count + extra + _RESERVE_CHUNK) * 20:
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            self._reserve(fd, base + (self.count + extra + 2 * _RESERVE_CHUNK) * 20)
        finally:
            os.close(fd)

    def put(self, key_hash: int, phy: int, store_ts: int) -> bool:
        if self.full:
            return False
        st = self.state
        slot_pos = HEADER_SIZE + (key_hash % self.slots) * 4
        prev = _SLOT.unpack_from(self._mm, slot_pos)[0]
        if prev <= 0 or prev >= st[COUNT]:
            prev = 0
        if st[BEGIN_TS] == 0:
            st[BEGIN_TS], st[BEGIN_PHY] = store_ts, phy
        diff = max(0, (store_ts - st[BEGIN_TS]) // 1000)
        _ENTRY.pack_into(self._mm, HEADER_SIZE + self.slots * 4 + st[COUNT] * 20, key_hash, phy, diff, prev)
        _SLOT.pack_into(self._mm, slot_pos, st[COUNT])
        st[COUNT] += 1
        st[END_TS], st[END_PHY] = store_ts, phy
        st[SLOT_COUNT] += prev == 0
        _HEADER.pack_into(self._mm, 0, *st)
        return True

    def query(self, key_hash: int, max_num: int, begin: int, end: int) -> list[int]:
        out: list[int] = []
        self.walk(key_hash, max_num, begin, end, -1, out, 1 << 62)
        return out

    def walk(self, key_hash: int, max_num: int, begin: int, end: int, idx: int, out: list[int],
             budget: int) -> int:
        """Follow ``key_hash``'s chain for at most ``budget`` entries from ``idx`` (-1: its slot),
        appending the matches' commit-log offsets to ``out`` until it holds ``max_num``.

        Returns where to go on from, or 0 when the walk is over: a key's chain can be as long as
        the file (every message under one key), so a caller on an event loop walks it in slices.
        """
        st = self.state
        if idx < 0:
            if st[BEGIN_TS] == 0 or end < st[BEGIN_TS] or begin > st[END_TS]:
                return 0
            idx = _SLOT.unpack_from(self._mm, HEADER_SIZE + (key_hash % self.slots) * 4)[0]
        base = HEADER_SIZE + self.slots * 4
        count, begin_ts, unpack, mm = self.count, st[BEGIN_TS], _ENTRY.unpack_from, self._mm
        while 0 < idx < count and len(out) < max_num and budget > 0:
            h, phy, diff, prev = unpack(mm, base + idx * 20)
            ts = begin_ts + diff * 1000
            if h == key_hash and begin <= ts <= end + 999:
                out.append(phy)
            # Newest first: past ``begin`` nothing older can match (4.9.8 stops there too);
            # a link that does not go back is damage, and would loop.
            if prev <= 0 or prev >= idx or ts + 999 < begin:
                return 0
            idx, budget = prev, budget - 1
        return idx if 0 < idx < count and len(out) < max_num else 0

    def release_written(self) -> None:
        """Drop the resident entry pages already filled (queries fault them back in).

        Entries are appended, so every whole page behind the newest one is done being written;
        the slot table, written at random, stays resident. The kernel keeps a dropped dirty page
        in the page cache for writeback, so nothing is lost (the same as the commit log's cold
        files, see MappedFile.release_pages).
        """
        page = mmap.PAGESIZE
        base = HEADER_SIZE + self.slots * 4
        start = max(self._released_to, -(-base // page) * page)
        end = (base + self.count * 20) // page * page
        if end > start:
            try:
                self._mm.madvise(mmap.MADV_DONTNEED, start, end - start)
            except (ValueError, OSError):  # closed meanwhile
                return
            self._released_to = end

    def flush(self) -> None:
        self._mm.flush()

    def close(self) -> None:
        self._mm.flush()
        self._mm.close()


class IndexService:
    """Index files, newest last; ``put`` the keys of appended messages, ``query`` by topic and key."""

    def __init__(self, directory: str | Path, slots: int = 5_000_000, entries: int = 20_000_000) -> None:
        self.dir = Path(directory)
        self.slots, self.entries = slots, entries
        self.files: list[IndexFile] = []

    def load(self) -> None:
        if self.dir.exists():
            for p in sorted(self.dir.iterdir()):
                if p.name.isdigit():
                    self.files.append(IndexFile(p, self.slots, self.entries))

    @property
    def max_phy_offset(self) -> int:
        """The commit-log offset of the newest indexed message (-1: none)."""
        return self.files[-1].state[END_PHY] if self.files and self.files[-1].count > 1 else -1

    def _writable(self) -> IndexFile:
        files = self.files
        if files and files[-1].state[COUNT] < files[-1].entries:  # (not IndexFile.full: every put asks, without a call)
            return files[-1]
        self.dir.mkdir(parents=True, exist_ok=True)
        name = time.strftime("%Y%m%d%H%M%S", time.localtime()) + f"{int(time.time() * 1000) % 1000:03d}"
        while (self.dir / name).exists():
            name = str(int(name) + 1)
        files.append(IndexFile(self.dir / name, self.slots, self.entries))
        return files[-1]

    def reserve(self, entries: int = 0) -> None:
        """Create the next index file now if the current one is full (or there is none), and
        reserve room for ``entries`` more past the usual chunk, so a lack of space is known
        before a put writes anything.

        Raises:
            DiskFullError: no room for it.
        """
        self._writable().reserve_ahead(entries)

    def put(self, topic: str, keys: list[str], phy: int, store_ts: int) -> None:
        for key in keys:
            if key:
                f = self._writable()
                f.put(_key_hash(topic, key), phy, store_ts)

    def put_batch(self, batch: SendBatch, store_ts: int) -> None:
        """Index the KEYS and UNIQ_KEY of a placed :class:`SendBatch` with one compiled call per file."""
        i = 0
        files = self.files
        while i < batch.n:
            f = files[-1] if files and files[-1].state[COUNT] < files[-1].entries else self._writable()
            state = f.state
            fresh = state[COUNT] <= 1
            i2 = index_records(batch, i, f._mm, f.slots, f.entries, state, store_ts)
            if i2 < batch.n:
                if i2 == i and fresh:
                    i2 += 1  # more keys than a whole file holds: this record stays unindexed
                state[COUNT] = f.entries  # the next record's keys go to a new file together
            i = i2

    def release_cold(self) -> None:
        """:meth:`IndexFile.release_written` for every file (callable from the flusher thread)."""
        for f in list(self.files):
            f.release_written()

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Commit-log offsets of messages of ``topic`` with ``key`` stored in [begin, end], newest first."""
        w = self.walk(topic, key, max_num, begin, end)
        for _ in range(len(self.files) + 1):  # one step per file with an unbounded budget
            if w.step(1 << 62):
                break
        return w.found

    def walk(self, topic: str, key: str, max_num: int, begin: int, end: int) -> "IndexWalk":
        """:meth:`query` as a walk taken a slice at a time (:meth:`IndexWalk.step`)."""
        return IndexWalk(list(reversed(self.files)), _key_hash(topic, key), max_num, begin, end)

    @property
    def last_update(self) -> tuple[int, int]:
        """(indexLastUpdateTimestamp, indexLastUpdatePhyoffset) as QUERY_MESSAGE reports them."""
        if not self.files:
            return 0, 0
        st = self.files[-1].state
        return st[END_TS], st[END_PHY]

    def flush(self) -> None:
        for f in self.files[-2:]:
            f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files = []


class IndexWalk:
    """One key's walk through the index files, newest first, resumable: QUERY_MESSAGE's broker
    side runs it a slice at a time so that a key with 100,000 entries (a client may put every
    message under one key) never holds the event loop for the whole walk."""

    def __init__(self, files: list[IndexFile], key_hash: int, max_num: int, begin: int, end: int) -> None:
        self.files, self.key_hash, self.max_num, self.begin, self.end = files, key_hash, max_num, begin, end
        self.found: list[int] = []
        self._file = 0
        self._idx = -1

    def step(self, budget: int) -> bool:
        """Walk at most ``budget`` entries more; True when the walk is over (``found`` is final)."""
        while self._file < len(self.files) and len(self.found) < self.max_num:
            f = self.files[self._file]
            try:
                nxt = f.walk(self.key_hash, self.max_num, self.begin, self.end, self._idx, self.found, budget)
            except ValueError:  # the file was closed between slices (deleted by retention)
                nxt = 0
            if nxt:
                self._idx = nxt
                return False
            self._file, self._idx = self._file + 1, -1
            if self._file < len(self.files) and len(self.found) < self.max_num:
                return False  # the next file in the next slice: this one may have used the budget
        return True
