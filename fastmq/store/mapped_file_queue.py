"""The queue of equally sized mapped files that makes one log (RocketMQ's MappedFileQueue).

The files of a log are contiguous and named by the log offset of their first byte
(:func:`.mapped_file.offset_to_file_name`); the queue finds the file of an offset, creates the next
one ahead of the writer on a background thread, and moves the log's flushed mark.
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
from pathlib import Path
from typing import Iterator

from . import DiskFullError, StoreCorruptError
from .mapped_file import FLUSHED_LOCK, WARM_AHEAD, MappedFile, offset_to_file_name

__all__ = ["MappedFileQueue"]

log = logging.getLogger("fastmq.store")


class MappedFileQueue:
    """The files of one log, in offset order, contiguous."""

    __slots__ = ("store_path", "mapped_file_size", "keep_fd", "reserve_step", "files", "flushed_where", "preload",
                 "_next")  # one per queue, thousands of them

    def __init__(self, store_path: str | Path, mapped_file_size: int, *, preload: bool = False,
                 keep_fd: bool = True, reserve_step: int = 0) -> None:
        self.store_path = Path(store_path)
        self.mapped_file_size = mapped_file_size
        self.keep_fd = keep_fd  # see MappedFile
        self.reserve_step = reserve_step  # see MappedFile
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        # preload: create the next file ahead of need and warm it (see MappedFile.warm), the
        # job of RocketMQ's AllocateMappedFileService; only the commit log needs it.
        self.preload = preload
        self._next: tuple[int, concurrent.futures.Future[MappedFile]] | None = None

    def release_cold(self, keep_bytes: int = 0, changed_only: bool = False) -> int:
        """Release the resident pages of what is on disk, but the last ``keep_bytes`` before the
        write position: :meth:`MappedFile.release_pages` for the files wholly before that,
        :meth:`MappedFile.release_behind` (``changed_only`` passed on) for the one it falls
        in and the file being written. How many files released pages."""
        files = list(self.files)  # the loop thread may add or delete files meanwhile
        if not files:
            return 0
        last = files[-1]
        behind = last.file_from_offset + last.wrote_position - keep_bytes
        n = 0
        for mf in files:
            if mf.file_from_offset + mf.file_size <= behind:
                n += mf.release_pages()
            elif mf.file_from_offset < behind:
                n += mf.release_behind(behind - mf.file_from_offset, changed_only)
        return n

    def load(self) -> None:
        """Map the existing files. Each is marked full; recovery then sets the real end.

        Raises:
            StoreCorruptError: a file of the wrong size or name, or a gap between files.
        """
        self.store_path.mkdir(parents=True, exist_ok=True)
        names = sorted(p for p in self.store_path.iterdir() if p.is_file() and not p.name.startswith("."))
        for p in names:
            if len(p.name) != 20 or not p.name.isdigit():
                raise StoreCorruptError(f"{p}: unexpected file in a log directory")
            mf = MappedFile(p, self.mapped_file_size, keep_fd=self.keep_fd, reserve_step=self.reserve_step)
            if self.files and mf.file_from_offset != self.files[-1].file_from_offset + self.mapped_file_size:
                mf.close()
                raise StoreCorruptError(f"{p}: gap after {self.files[-1].path.name}")
            if mf.file_from_offset % self.mapped_file_size:
                mf.close()
                raise StoreCorruptError(f"{p}: offset is not a multiple of the file size")
            mf.wrote_position = mf.flushed_position = self.mapped_file_size
            self.files.append(mf)
        if self.files:
            self.flushed_where = self.max_offset

    # -- lookup --------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """End of the written content (the next append's offset)."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def get_last_mapped_file(self, start_offset: int = 0) -> MappedFile:
        """The file appends go to, creating the next one when there is none or it is full.

        ``start_offset`` places the first file of an empty log (a consume queue that starts
        past zero after retention).
        """
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full:
            return last
        if last is None:
            from_offset = start_offset - start_offset % self.mapped_file_size
        else:
            from_offset = last.file_from_offset + self.mapped_file_size
        mf = self._take_prepared(from_offset)
        if mf is None:
            mf = self._new_file(from_offset)
            if self.preload:
                threading.Thread(target=mf.warm, name="fastmq-warm", daemon=True).start()
        if last is None:
            self.flushed_where = from_offset
        self.files.append(mf)
        return mf

    def _new_file(self, from_offset: int) -> MappedFile:
        self.store_path.mkdir(parents=True, exist_ok=True)
        return MappedFile(self.store_path / offset_to_file_name(from_offset), self.mapped_file_size,
                          keep_fd=self.keep_fd, reserve_step=self.reserve_step)

    def _take_prepared(self, from_offset: int) -> MappedFile | None:
        nxt, self._next = self._next, None
        self._rearm_half()
        if nxt is None:
            return None
        off, fut = nxt
        try:
            mf = fut.result()  # normally long done: it started half a file ago
        except DiskFullError as exc:
            log.error("preparing %s failed: %s", offset_to_file_name(off), exc)
            return None
        except Exception:
            log.exception("preparing %s failed; creating it now", offset_to_file_name(off))
            return None
        if off == from_offset:
            return mf
        mf.destroy()  # prepared for an offset the log no longer needs (a truncation)
        return None

    def ensure_room(self, nbytes: int, start_offset: int = 0) -> None:
        """Create now the file an append of ``nbytes`` would roll to (or the first file, at
        ``start_offset``), so that running out of space is known before anything is written.

        Raises:
            DiskFullError: no room for that file.
        """
        last = self.files[-1] if self.files else None
        if last is None:
            first = self.get_last_mapped_file(start_offset)
            first.reserve_to(start_offset - first.file_from_offset + nbytes)
            return
        if last.remaining >= nbytes:
            last.reserve_to(last.wrote_position + nbytes)
            return
        last.reserve_to(last.file_size)
        off = last.file_from_offset + self.mapped_file_size
        nxt = self._next
        if nxt is not None and nxt[0] == off and nxt[1].done() and nxt[1].exception() is None:
            nxt[1].result().reserve_to(nbytes - last.remaining)
            return
        mf = self._take_prepared(off)  # (waits for a preparation under way)
        if mf is None:
            mf = self._new_file(off)
        fut: concurrent.futures.Future[MappedFile] = concurrent.futures.Future()
        fut.set_result(mf)
        self._next = (off, fut)
        mf.reserve_to(nbytes - last.remaining)

    def after_append(self, mf: MappedFile) -> None:
        """What follows appends to ``mf``: its warming woken when due, the next file prepared
        once ``mf`` is half full. (Nothing to do while ``mf.wrote_position < mf.append_mark``:
        a writer may compare first and spare the call.)"""
        mf.wake_warm()
        if mf.wrote_position > mf.file_size // 2:
            self.prepare_next()
            if self._next is not None or not self.preload:
                mf.half_prepared(True)

    def _rearm_half(self) -> None:
        """The preparation of the next file was taken or dropped: the last file's appends past
        its half must ask for it again (as before :meth:`after_append` spared them)."""
        if self.files:
            self.files[-1].half_prepared(False)

    def prepare_next(self) -> None:
        """Start creating and warming the file after the last one (idempotent, preload only)."""
        last = self.files[-1] if self.files else None
        if not self.preload or last is None:
            return
        off = last.file_from_offset + self.mapped_file_size
        if self._next is not None:
            return
        fut: concurrent.futures.Future[MappedFile] = concurrent.futures.Future()
        self._next = (off, fut)

        def work() -> None:
            try:
                mf = self._new_file(off)
                mf.warm(limit=WARM_AHEAD)  # its first part now; the rest keeps pace with the writes
                fut.set_result(mf)
            except BaseException as exc:  # reported by _take_prepared
                fut.set_exception(exc)
                return
            mf.warm()

        threading.Thread(target=work, name="fastmq-prepare-file", daemon=True).start()

    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        """The file holding log offset ``offset`` (None outside the log)."""
        if not self.files:
            return None
        first = self.files[0].file_from_offset
        idx = (offset - first) // self.mapped_file_size
        if offset < first or idx >= len(self.files):
            return None
        return self.files[idx]

    def __iter__(self) -> Iterator[MappedFile]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    # -- flush ---------------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        """Flush from ``flushed_where`` on; True when something was written to disk."""
        did = False
        files = list(self.files)  # (a snapshot: retention may drop files from the front meanwhile)
        # from the file holding the flushed offset: a sync per send must not walk every file
        first = files[0].file_from_offset if files else 0
        start = max(0, (self.flushed_where - first) // self.mapped_file_size)
        for mf in files[start:]:
            if mf.file_from_offset + mf.file_size <= self.flushed_where:
                continue
            before = mf.flushed_position
            after = mf.flush(least_pages)
            if after > before:
                did = True
            self.mark_flushed(mf.file_from_offset + after)
            if not mf.is_full:
                break
        return did

    def mark_flushed(self, where: int) -> None:
        """Record that the log is on disk up to offset ``where``; never moves back (see
        :meth:`MappedFile.mark_flushed`)."""
        if where <= self.flushed_where:  # (the usual case, an idle queue's: marks only grow, no lock needed)
            return
        with FLUSHED_LOCK:
            if where > self.flushed_where:
                self.flushed_where = where

    # -- recovery ------------------------------------------------------------------------
    def truncate_dirty_files(self, offset: int) -> None:
        """Make ``offset`` the end of the log: cut the file holding it, delete files after it."""
        keep: list[MappedFile] = []
        for mf in self.files:
            end = mf.file_from_offset + self.mapped_file_size
            if end <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                mf.truncate_to(offset - mf.file_from_offset)
                keep.append(mf)
            else:
                log.info("deleting %s past the log end %d", mf.path.name, offset)
                mf.destroy()
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset) if keep else 0
        self._drop_prepared()

    def _drop_prepared(self) -> None:
        nxt, self._next = self._next, None
        self._rearm_half()
        if nxt is not None:
            try:
                nxt[1].result(timeout=60).destroy()
            except Exception:
                pass

    def close(self) -> None:
        self._drop_prepared()
        for mf in self.files:
            mf.close()
