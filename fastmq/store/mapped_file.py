"""Fixed-size memory-mapped files: one file of a log (:mod:`.mapped_file_queue` keeps the queue of them).

A log (the commit log, one consume queue) is a directory of equally sized files, each named by
the 20-digit zero-padded log offset of its first byte (RocketMQ's naming, so a directory can be
read by either implementation). Files are created at full size with ``posix_fallocate`` (the
blocks reserved, an unwritten tail reading as zeros) and mapped whole: a store page written
through a mapping when the disk has no block left for it kills the process with SIGBUS, so the
space must be known to exist before the mapping is used. Consume-queue files, thousands of them
and mostly empty, are created sparse instead and reserved a step ahead of their writes. A file that cannot get its space is
not created (:class:`DiskFullError`), and the put that needed it is refused.

Durability goes through ``os.fdatasync`` on the file descriptor rather than ``mmap.flush``:
on Linux both write back the same dirty page-cache pages (a shared mapping *is* the page
cache), but CPython's ``mmap.flush`` holds the GIL during ``msync`` while ``os.fdatasync``
releases it, so a flush thread does not stall the event loop for the length of a disk sync.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import mmap
import os
import threading
import weakref
from pathlib import Path

from . import DiskFullError, StoreCorruptError, StoreError

__all__ = ["FLUSHED_LOCK", "MappedFile", "OS_PAGE_SIZE", "WARM_AHEAD", "data_extents", "offset_to_file_name", "punch_hole",
           "reserve_range", "reserve_space"]

log = logging.getLogger("fastmq.store")

OS_PAGE_SIZE = 4096
_ZERO_CHUNK = 64 * 1024
_WARM_CHUNK = 1 << 20
WARM_AHEAD = 32 << 20  # how far past the write position MappedFile.warm keeps pages brought in
_WARM_IDLE_S = 1.0  # a warming thread waits at most this for the writer's wake-up
# Guards the flushed marks' check-then-set: two flushers of one log (an event loop's inline
# SYNC_FLUSH sync and the group commit's idle round) could otherwise each read the old mark and
# the slower one set its lower value after the other's, moving the mark back. One lock for all
# files: it is held for a compare and a store, and a per-file lock would cost memory on
# thousands of queue files.
FLUSHED_LOCK = threading.Lock()


def offset_to_file_name(offset: int) -> str:
    """RocketMQ's file name for a file starting at log offset ``offset``."""
    return f"{offset:020d}"


def reserve_range(fd: int, offset: int, length: int, path: Path) -> None:
    """Give ``[offset, offset+length)`` of the file behind ``fd`` real disk blocks
    (``posix_fallocate``; the file grows to cover it).

    Raises:
        DiskFullError: the file system has no room (ENOSPC, or a quota: EDQUOT).
    """
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(exc.errno, f"no space left on the disk for {length} bytes of {path}: "
                                f"{exc.strerror}") from None
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate there: sparse, as before
            if os.fstat(fd).st_size < offset + length:
                os.ftruncate(fd, offset + length)
            return
        raise


def reserve_space(fd: int, size: int, path: Path) -> None:
    """:func:`reserve_range` for the whole of a new file of ``size`` bytes."""
    reserve_range(fd, 0, size, path)


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long)
_MAP_FAILED = ctypes.c_void_p(-1).value
_FALLOC_PUNCH_HOLE = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE (Linux)


def data_extents(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The ranges of ``[start, end)`` of a file that hold data, by ``SEEK_DATA``/``SEEK_HOLE``;
    the whole range where the file system cannot tell.

    Recovery reads only these: on tmpfs, reading a hole through a mapping allocates a page (a
    sparse consume-queue file read to its end became whole, and on a full tmpfs the read faulted
    with SIGBUS). Extents are block-aligned, so they may start or end mid-entry.
    """
    out: list[tuple[int, int]] = []
    pos = start
    while pos < end:  # each round moves past one extent: bounded by the file's blocks
        try:
            lo = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data at or after pos
                break
            return [(start, end)]  # not supported here: everything may be data
        if lo >= end:
            break
        hi = min(end, os.lseek(fd, lo, os.SEEK_HOLE))
        out.append((lo, hi))
        pos = hi
    return out


def punch_hole(fd: int, offset: int, length: int) -> bool:
    """Give the blocks of ``[offset, offset + length)`` back to the file system (they read as
    zeros after); False where the file system cannot (the caller zeroes instead)."""
    if length <= 0:
        return True
    return bool(_libc.fallocate(fd, _FALLOC_PUNCH_HOLE, offset, length) == 0)
_MS_SYNC = 4  # Linux


class _FdlessMapping:
    """A shared read/write mapping of a whole file that holds no file descriptor.

    CPython's ``mmap`` keeps a duplicate of the descriptor for the mapping's life, so a file
    mapped that way costs two: a broker with thousands of consume-queue files hit the usual
    1024 limit, stopped writing and could not restart. A mapping needs no open descriptor
    (POSIX), so consume-queue files are mapped with libc's ``mmap`` and the descriptor closed.
    The mapping goes (``munmap``) when the last view of it does, as with CPython's ``mmap``
    whose close is refused while views exist; calls through ctypes release the GIL, so the
    flusher's ``msync`` does not stall the event loop.
    """

    __slots__ = ("_addr", "_size", "view")

    def __init__(self, fd: int, size: int) -> None:
        addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap failed: {os.strerror(err)}")
        arr = (ctypes.c_char * size).from_address(addr)
        weakref.finalize(arr, _libc.munmap, addr, size)  # when the last view goes
        self._addr: int | None = addr
        self._size = size
        self.view = memoryview(arr).cast("B")  # (holds arr)

    def madvise_dontneed(self, length: int | None = None) -> None:
        """MADV_DONTNEED on the first ``length`` bytes (a multiple of the page size; None: all)."""
        n = self._size if length is None else length
        if self._addr is not None and _libc.madvise(self._addr, n, mmap.MADV_DONTNEED) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def sync(self, start: int = 0, end: int | None = None) -> None:
        """msync ``[start, end)`` (rounded out to whole pages; the whole mapping by default)."""
        if self._addr is None:
            return
        lo = start // mmap.PAGESIZE * mmap.PAGESIZE
        hi = self._size if end is None else min(self._size, end)
        if hi > lo and _libc.msync(self._addr + lo, hi - lo, _MS_SYNC) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def close(self) -> None:
        """Give up this object's hold; the pages go when no view is left."""
        self._addr = None
        try:
            self.view.release()
        except BufferError:  # a reader's array still uses it: unmapped when that goes
            pass


def _all_zero(fd: int, size: int) -> bool:
    """True when the first ``size`` bytes of ``fd`` are all zero (read in 1 MiB steps)."""
    pos = 0
    while pos < size:
        chunk = os.pread(fd, min(1 << 20, size - pos), pos)
        if not chunk or chunk.count(0) != len(chunk):
            return not chunk
        pos += len(chunk)
    return True


class MappedFile:
    """One fixed-size file mapped read/write.

    ``wrote_position`` is where the next append goes; ``flushed_position`` how far the file is
    known to be on disk. (RocketMQ also has a committed position for its off-heap transient
    pool; we always write straight into the mapping, so committed == wrote.)
    """

    # slots: a broker holds one per queue file, thousands of them
    __slots__ = ("path", "file_from_offset", "file_size", "_fd", "reserve_step", "reserved_to", "_mm", "_map", "_mv",
                 "buffer", "wrote_position", "flushed_position", "store_timestamp", "_closed", "_released_wrote",
                 "_warm_mark", "_warm_wake", "_half_mark", "append_mark")

    def __init__(self, path: str | Path, file_size: int, *, keep_fd: bool = True, reserve_step: int = 0) -> None:
        """``keep_fd`` False: map without holding a descriptor (:class:`_FdlessMapping`; no
        warming, flushes by ``msync``), for logs of many small files (consume queues).

        ``reserve_step`` > 0: a new file is created sparse, with no block reserved, and writers
        call :meth:`reserve_to` ahead of each write, which reserves in steps of that size. A broker with a thousand queues would otherwise hold
        6 GB of disk for queue files that are nearly empty (RocketMQ's are sparse, unreserved).
        """
        self.path = Path(path)
        try:
            self.file_from_offset = int(self.path.name)
        except ValueError:
            raise StoreCorruptError(f"{self.path}: not a 20-digit offset file name") from None
        if file_size <= 0:
            raise StoreError(f"mapped file size must be positive, got {file_size}")
        self.file_size = file_size
        existed = self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(self._fd).st_size
            if existed and size < file_size and _all_zero(self._fd, size):
                # a kill -9 between creating the file and sizing it: nothing was ever written
                # into it (writes start once it is sized), so it is finished as a new one
                existed = False
            if existed and size != file_size:
                raise StoreCorruptError(
                    f"{self.path}: size {size} differs from the configured mapped file size {file_size}")
            self.reserve_step = reserve_step
            if size < file_size:
                if reserve_step > 0:  # blocks come with the first write (reserve_to)
                    os.ftruncate(self._fd, file_size)
                    self.reserved_to = 0
                else:
                    reserve_space(self._fd, file_size, self.path)
                    self.reserved_to = file_size
            else:
                # an existing file's blocks are not known: the first reservation covers what
                # was written too (posix_fallocate passes over blocks already allocated)
                self.reserved_to = 0 if reserve_step > 0 else file_size
            self._mm: mmap.mmap | None = None
            self._map: _FdlessMapping | None = None
            if keep_fd:
                self._mm = mmap.mmap(self._fd, file_size)
            else:
                self._map = _FdlessMapping(self._fd, file_size)
        except BaseException:
            os.close(self._fd)
            if not existed:  # a short new file would make the next start refuse the store
                try:
                    self.path.unlink()
                except OSError:
                    pass
            raise
        if self._map is not None:
            os.close(self._fd)
            self._fd = -1
            self._mv = self._map.view
        else:
            assert self._mm is not None  # keep_fd: mapped above
            self._mv = memoryview(self._mm)
        #: The whole mapping (writers in the store use it with ``struct.pack_into``); an attribute,
        #: not a property: every append reads it
        self.buffer: memoryview = self._mv
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # of the last message appended (checkpoint input)
        self._closed = False
        self._released_wrote = -1  # the write position at the last release_behind
        # warming (see warm): the write position it waits for, and the writer's wake-up (only
        # files with a descriptor are warmed)
        self._warm_mark = self.file_size + 1
        self._warm_wake: threading.Event | None = threading.Event() if keep_fd else None
        # the first write position past half the file (the next file is prepared there), until
        # MappedFileQueue.after_append has prepared it
        self._half_mark = self.file_size // 2 + 1
        #: The write position from which an append must call MappedFileQueue.after_append (the
        #: lower of the two marks): below it that call has nothing to do, and a writer that
        #: compares first spares the call (one send in flight)
        self.append_mark = self._half_mark

    # -- space ---------------------------------------------------------------------------
    def _reserve(self, fd: int, upto: int) -> None:
        reserve_range(fd, self.reserved_to, upto - self.reserved_to, self.path)
        self.reserved_to = upto

    def reserve_to(self, end: int) -> None:
        """Make sure ``[0, end)`` of the file has its disk blocks before it is written through
        the mapping (a write to a hole the disk cannot fill is a SIGBUS, see the module's
        docstring); reserves a step past ``end`` so that most writes find their room reserved.

        Raises:
            DiskFullError: the file system has no room for it.
        """
        if end <= self.reserved_to:
            return
        step = self.reserve_step or self.file_size
        upto = min(self.file_size, -(-end // step) * step)
        if self._fd >= 0:
            self._reserve(self._fd, upto)
            return
        fd = os.open(self.path, os.O_RDWR)  # an fd-less mapping: its descriptor, for a moment
        try:
            self._reserve(fd, upto)
        finally:
            os.close(fd)

    def next_unit_pos(self, offset: int, size: int) -> int:
        """Where the ``size`` bytes at the queue-wide ``offset`` go in this file when they are
        its next ones and their room is already reserved (a consume queue's usual entry); -1
        otherwise, for the caller's general case (a new file, a gap, bytes already there, room
        to reserve)."""
        pos = offset - self.file_from_offset
        return pos if pos == self.wrote_position and pos + size <= self.reserved_to else -1

    # -- state ---------------------------------------------------------------------------
    @property
    def fd(self) -> int:
        """The file's descriptor (-1 for a mapping without one), for a syncer outside this class."""
        return self._fd

    @property
    def committed_position(self) -> int:
        return self.wrote_position

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    # -- write / read --------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the wrote position and return the position it went to.

        Raises:
            StoreError: it does not fit (the caller decides about rolling).
        """
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            raise StoreError(f"{self.path.name}: {len(data)} bytes do not fit at {pos}")
        self._mv[pos:end] = data
        self.wrote_position = end
        return pos

    def select(self, pos: int, size: int | None = None) -> memoryview:
        """A zero-copy view of ``[pos, pos+size)`` (to the wrote position if ``size`` is None).

        The view keeps the mapping alive: release it (or drop it) before the file is closed.

        Raises:
            StoreError: the range is outside what was written.
        """
        end = self.wrote_position if size is None else pos + size
        if pos < 0 or end > self.wrote_position or end < pos:
            raise StoreError(
                f"{self.path.name}: range [{pos}, {end}) outside written [0, {self.wrote_position})")
        return self._mv[pos:end]

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """The mapping's ``find`` (C speed, no copy): first index of ``sub`` in [start, end), or -1."""
        end = self.file_size if end is None else end
        if self._mm is None:
            i = self._mv[start:end].tobytes().find(sub)
            return i + start if i >= 0 else -1
        return self._mm.find(sub, start, end)

    def release_pages(self) -> bool:
        """Stop counting this file's pages in the process's resident memory, once it is on disk.

        ``MADV_DONTNEED`` on a shared file mapping drops only our page-table entries: the data
        stays in the page cache and on disk, and the next read faults it back in. Without it a
        broker's RSS grows by every file it ever wrote or read (RocketMQ's does too). Returns
        False when the file still has unflushed bytes or is closed.
        """
        if self._closed or self.flushed_position < self.wrote_position:
            return False
        try:
            if self._map is not None:
                self._map.madvise_dontneed()
            else:
                assert self._mm is not None  # keep_fd: mapped at init
                self._mm.madvise(mmap.MADV_DONTNEED)
        except (ValueError, OSError):  # closed by retention meanwhile
            return False
        return True

    def release_behind(self, limit: int, changed_only: bool = False) -> bool:
        """:meth:`release_pages` for the part of a file still being written: the flushed pages
        wholly before file position ``limit``, and the page holding the write position too once
        all that was written is flushed and ``limit`` reaches it (an idle queue's last page; its
        next write faults it back in from the page cache).

        The writer only appends, so the pages behind it are done with; without this, a log's
        newest file stays resident as it fills (a 1 GiB commit-log file, thousands of queue files
        each holding a page). ``changed_only``: nothing happens unless the file was written
        since the last release (a broker with thousands of idle queues makes one call for each).
        Returns True when pages were released.
        """
        wrote, flushed = self.wrote_position, self.flushed_position
        if self._closed or (changed_only and wrote == self._released_wrote):
            return False
        end = min(limit, flushed)
        if end >= wrote and flushed >= wrote:
            end = min(self.file_size, -(-end // OS_PAGE_SIZE) * OS_PAGE_SIZE)
        else:
            end = end // OS_PAGE_SIZE * OS_PAGE_SIZE
        if end <= 0:
            return False
        try:
            if self._map is not None:
                self._map.madvise_dontneed(end)
            else:
                assert self._mm is not None  # keep_fd: mapped at init
                self._mm.madvise(mmap.MADV_DONTNEED, 0, end)
        except (ValueError, OSError):  # closed by retention meanwhile
            return False
        self._released_wrote = wrote
        return True

    def _sync(self, start: int = 0, end: int | None = None) -> None:
        """Write ``[start, end)`` to disk (the whole file by default). A mapping without a
        descriptor syncs that range only: msync of a whole 6 MB consume-queue file walks every
        page of it, and a flush round over a thousand queues paid that for a few entries each."""
        if self._map is not None:
            self._map.sync(start, end)
        else:
            os.fdatasync(self._fd)

    # -- flush ---------------------------------------------------------------------------
    def is_able_to_flush(self, least_pages: int) -> bool:
        """RocketMQ's rule: enough whole pages dirty, or anything when ``least_pages`` <= 0,
        or the file is full (its tail must reach disk before we move on)."""
        wrote, flushed = self.wrote_position, self.flushed_position
        if wrote <= flushed:
            return False
        if self.is_full:
            return True
        if least_pages > 0:
            return (wrote // OS_PAGE_SIZE) - (flushed // OS_PAGE_SIZE) >= least_pages
        return True

    def flush(self, least_pages: int = 0) -> int:
        """fdatasync when :meth:`is_able_to_flush`; returns the flushed position."""
        if self.is_able_to_flush(least_pages) and not self._closed:
            target = self.wrote_position  # read once: appends may race ahead of the sync
            # what is behind flushed_position is on disk already (appends never rewrite it;
            # truncate_to syncs its zeroing itself); another flusher may have passed target
            self._sync(min(self.flushed_position, target), target)
            return self.mark_flushed(target)
        return self.flushed_position

    def mark_flushed(self, pos: int) -> int:
        """Record that the file is on disk up to ``pos``; the mark never moves back (another
        thread's flush may have recorded more meanwhile). Returns the mark."""
        with FLUSHED_LOCK:
            if pos > self.flushed_position:
                self.flushed_position = pos
            return self.flushed_position

    def warm(self, ahead: int = WARM_AHEAD, limit: int | None = None) -> None:
        """Read the file's unwritten pages once so they sit in the page cache, keeping at most
        ``ahead`` bytes past the write position; return when the file is full or closed (or,
        with ``limit``, once the pages before ``limit`` are in, without waiting for writes).

        A first write to a page of a fresh sparse file costs a page fault that allocates and
        zeroes it; measured here that caps 1 KiB appends at ~270k/s, against ~2.8M/s once the
        pages are cached. ``os.preadv`` releases the GIL, so this runs in a background thread
        without stalling appenders (RocketMQ pre-touches with writes for the same reason).
        Paced by the writes rather than the whole file at once: bringing in a file of 256 MiB
        in one go took ~0.5 s of CPU on the 2-vCPU machine (page allocation and zeroing is
        slow in its VM), all of it taken from the broker and its clients at that moment. Far
        enough ahead, it sleeps until the writer's :meth:`wake_warm` (once a chunk) rather
        than polling.
        """
        wake = self._warm_wake
        if self._map is not None or wake is None:
            return  # (no descriptor to read through; only the commit log is warmed)
        buf = bytearray(_WARM_CHUNK)
        off = self.wrote_position - self.wrote_position % _WARM_CHUNK
        end = self.file_size if limit is None else min(limit, self.file_size)
        while off < end and not self._closed:
            if limit is None and off >= self.wrote_position + ahead:
                self._warm_mark = off - ahead + 1
                self.append_mark = min(self._warm_mark, self._half_mark)
                wake.clear()
                if off >= self.wrote_position + ahead:  # no write landed between the mark and the clear
                    wake.wait(_WARM_IDLE_S)
                continue
            try:
                os.preadv(self._fd, [buf], off)
            except OSError:  # closed under us: warming is only an optimisation
                return
            off += _WARM_CHUNK

    def wake_warm(self) -> None:
        """The writer's side of :meth:`warm`: wake it once the write position reached its mark."""
        if self.wrote_position >= self._warm_mark and self._warm_wake is not None:
            self._warm_mark = self.file_size + 1
            self.append_mark = self._half_mark
            self._warm_wake.set()

    def half_prepared(self, done: bool) -> None:
        """Whether the file after this one is prepared (``done``), or must be prepared again
        once an append passes half the file (its preparation was taken or dropped)."""
        self._half_mark = self.file_size + 1 if done else self.file_size // 2 + 1
        self.append_mark = min(self._warm_mark, self._half_mark)

    # -- recovery ------------------------------------------------------------------------
    def data_extents(self, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
        """:func:`data_extents` of this file (``end``: the file's size)."""
        end = self.file_size if end is None else end
        if self._fd >= 0:
            return data_extents(self._fd, start, end)
        fd = os.open(self.path, os.O_RDONLY)  # an fd-less mapping: its descriptor, for a moment
        try:
            return data_extents(fd, start, end)
        finally:
            os.close(fd)

    def truncate_to(self, pos: int) -> None:
        """Make ``pos`` the end of the file's content and zero whatever was written after it.

        Zeroing matters: a torn tail may hold complete older records right after the cut; a
        later append of exactly the cut length would otherwise make them look valid again to
        the next recovery. Only the extents that hold data are read (holes read as zeros, and
        reading one through the mapping would allocate it on tmpfs), and only non-zero chunks
        written. A sparse file (``reserve_step``) gives the whole pages after ``pos`` back to
        the file system instead: a tail an older version made whole on tmpfs is freed.
        """
        pos = max(0, min(pos, self.file_size))
        zeroed = False
        if self.reserve_step > 0:
            page = -(-pos // OS_PAGE_SIZE) * OS_PAGE_SIZE
            if page < self.file_size and self.data_extents(page):
                fd = self._fd if self._fd >= 0 else os.open(self.path, os.O_RDWR)
                try:
                    if punch_hole(fd, page, self.file_size - page):
                        self.reserved_to = min(self.reserved_to, page)
                finally:
                    if fd != self._fd:
                        os.close(fd)
        for lo, hi in self.data_extents(pos):
            i = max(lo, pos)
            while i < hi:
                end = min(hi, (i // _ZERO_CHUNK + 1) * _ZERO_CHUNK)
                chunk = self._mv[i:end].tobytes()
                if chunk.count(0) != len(chunk):
                    self._mv[i:end] = bytes(end - i)
                    zeroed = True
                i = end
        self.wrote_position = pos
        self.flushed_position = pos
        if zeroed:  # (a sync per file would cost a restart on thousands of queues many seconds)
            self._sync()

    # -- lifetime ------------------------------------------------------------------------
    def close(self) -> None:
        """Unmap and close. Views still held by readers keep the mapping until they go away."""
        if self._closed:
            return
        self._closed = True
        if self._warm_wake is not None:
            self._warm_wake.set()  # a warming thread waiting for writes ends now
        if self._map is not None:
            self._map.close()  # unmapped when the last reader's view goes
            return
        try:
            self._mv.release()
            assert self._mm is not None  # keep_fd: mapped at init
            self._mm.close()
        except BufferError:  # a reader still holds a view; the GC unmaps it when it goes
            log.debug("%s: mapping still referenced at close", self.path)
        os.close(self._fd)

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return (f"MappedFile({self.path.name}, wrote={self.wrote_position}, "
                f"flushed={self.flushed_position}, size={self.file_size})")
