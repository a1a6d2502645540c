"""The store checker behind ``fastmq-broker --check-store``: read-only, file by file.

It opens the commit log and the consume queues read-only (``mmap`` ``ACCESS_READ``), never
creates, cuts or rewrites a file, and reports what recovery would find, each finding with
its file and position:

- PROBLEM: a damaged commit-log record (bad magic, size, CRC or position) with valid records
  after it or inside flushed data; a log file of the wrong size, a gap between files, a file
  without its end marker; a consume-queue entry pointing at the wrong record or at damage
  not yet set aside; a hole of zero entries inside a queue.
- NOTE: what is expected after a crash and what recovery already dealt with: a torn tail past
  the flushed offset (recovery cuts it), queue entries past the log's end (recovery drops
  them), records already set aside in ``damaged/`` (pulls skip them).

Only problems make the check fail. Repairs are the broker's recovery, run on request.
"""
from __future__ import annotations

import fcntl
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from ..protocol.message import BLANK_MAGIC, MAGIC_V1, MessageFormatError, decode_record
from ..protocol.record_layout import fixed_format
from . import StoreError, StoreLockedError
from .commit_log import CommitLog
from .config import CQ_STORE_UNIT_SIZE, MessageStoreConfig
from .consume_queue import CQ_DTYPE
from .damaged import DAMAGED_DIR, damaged_path, load_damaged
from .lock import LOCK_FILE_NAME

__all__ = ["Finding", "NotAStoreError", "check_store_files", "looks_like_store"]

_SIZE_MAGIC = struct.Struct(fixed_format(upto="BODYCRC"))  # TOTALSIZE, MAGICCODE
_CHECKPOINT = struct.Struct(">qqqq")
_MAX_FINDINGS = 1000


class NotAStoreError(StoreError):
    """The path holds no store (no commit log, consume queues nor checkpoint)."""


@dataclass
class Finding:
    """One result of the check: ``kind`` is PROBLEM or NOTE."""

    kind: str
    file: str
    position: int
    text: str

    def __str__(self) -> str:
        return f"{self.kind} {self.file} position {self.position}: {self.text}"


def looks_like_store(root: str | Path, config: MessageStoreConfig) -> bool:
    """Whether ``root`` holds a store's files (so that a mistyped path is refused, not created)."""
    r = Path(root)
    return r.is_dir() and (Path(config.commit_log_dir).is_dir() or (r / "consumequeue").is_dir()
                           or (r / "checkpoint").is_file())


def _files(d: Path) -> list[Path]:
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith("."))


class _ReadOnlyLog:
    """The commit-log files mapped read-only, and the scan of them."""

    def __init__(self, config: MessageStoreConfig, out: list[Finding], flushed_offset: int,
                 damaged: dict[int, int], root: Path) -> None:
        self.config = config
        self.size = config.mappedFileSizeCommitLog
        self.out = out
        self.flushed_offset = flushed_offset
        self.damaged = damaged
        self.root = root
        self.maps: dict[int, tuple[Path, mmap.mmap]] = {}
        self.cl = CommitLog(config)  # for its record checks only: no file is opened
        self.end = 0     # the end recovery would find
        self.start = -1  # the first file's offset

    def rel(self, p: Path) -> str:
        try:
            return str(p.relative_to(self.root))
        except ValueError:
            return str(p)

    def open(self) -> None:
        prev = None
        for p in _files(Path(self.config.commit_log_dir)):
            if len(p.name) != 20 or not p.name.isdigit():
                self.out.append(Finding("PROBLEM", self.rel(p), 0, "not a commit-log file name (20 digits)"))
                continue
            off = int(p.name)
            st = p.stat()
            if st.st_size != self.size:
                self.out.append(Finding("PROBLEM", self.rel(p), 0, f"size {st.st_size}, the configured "
                                        f"mappedFileSizeCommitLog is {self.size}"))
                continue
            if off % self.size:
                self.out.append(Finding("PROBLEM", self.rel(p), 0, "offset is not a multiple of the file size"))
                continue
            if prev is not None and off != prev + self.size:
                self.out.append(Finding("PROBLEM", self.rel(p), 0, f"gap: the previous file starts at {prev}"))
            prev = off
            with open(p, "rb") as f:
                self.maps[off] = (p, mmap.mmap(f.fileno(), self.size, access=mmap.ACCESS_READ))
        if self.maps:
            self.start = min(self.maps)

    def close(self) -> None:
        for _, mm in self.maps.values():
            mm.close()
        self.maps.clear()

    def _why(self, view: memoryview, pos: int, file_from: int) -> str:
        size, magic = _SIZE_MAGIC.unpack_from(view, pos)
        if magic == BLANK_MAGIC:
            return f"end-of-file marker of size {size}, the file has {len(view) - pos} bytes left"
        if magic != MAGIC_V1:
            return f"bad magic code 0x{magic:08X} (record size field {size})"
        try:
            m = decode_record(view[pos:pos + size] if 0 < size <= len(view) - pos else view[pos:],
                              verify_crc=True, with_body=False)
        except (MessageFormatError, ValueError) as exc:
            return str(exc)
        return f"record written for offset {m.commit_log_offset}, found at {file_from + pos}"

    def scan(self, step: Callable[[], None] | None = None) -> None:
        """Check every record of every file; ``step()`` after each file."""
        offs = sorted(self.maps)
        for idx, off in enumerate(offs):
            path, mm = self.maps[off]
            last = idx == len(offs) - 1
            view = memoryview(mm)
            try:
                self._scan_file(path, mm, view, off, last)
            finally:
                view.release()
            try:
                mm.madvise(mmap.MADV_DONTNEED)  # a checked 1 GiB file must not stay resident
            except (OSError, ValueError):
                pass
            if step is not None:
                step()

    def _scan_file(self, path: Path, mm: mmap.mmap, view: memoryview, off: int, last: bool) -> None:
        pos = 0
        name = self.rel(path)
        while pos < self.size:
            size, req = self.cl.check_record(view, pos, True, off)
            if size > 0 and req is None:
                self.end = off + self.size
                return
            if size > 0:
                pos += size
                self.end = off + pos
                continue
            at = off + pos
            if size == 0:  # zeros: the end of the data
                if at < self.flushed_offset:
                    self.out.append(Finding("PROBLEM", name, pos, f"the data ends at commit-log offset {at}, "
                                            f"but the checkpoint says it was flushed to {self.flushed_offset}"))
                elif not last and self._later_data(off):
                    self.out.append(Finding("PROBLEM", name, pos, f"the data ends at commit-log offset {at} "
                                            "without the end-of-file marker, and later files hold data"))
                elif not last:
                    self.out.append(Finding("NOTE", name, pos, f"the log ends at commit-log offset {at}; the empty "
                                            "files after it (created ahead of need) are deleted by recovery"))
                return
            why = self._why(view, pos, off)
            nxt = self.cl.find_next_record(view, mm.find, pos + 1, off)
            if at in self.damaged:
                self.out.append(Finding("NOTE", name, pos, f"damaged record at commit-log offset {at} ({why}), "
                                        f"set aside in {self.rel(damaged_path(self.root, at))}; pulls skip it"))
            elif nxt is not None:
                self.out.append(Finding("PROBLEM", name, pos, f"damaged record at commit-log offset {at}: {why}; "
                                        f"{nxt - pos} bytes up to the next valid record (position {nxt}); "
                                        "--repair sets them aside and keeps every other record"))
            elif not last:
                self.out.append(Finding("PROBLEM", name, pos, f"damaged data at commit-log offset {at} to the end "
                                        f"of the file: {why}"))
                return
            elif at < self.flushed_offset:
                self.out.append(Finding("PROBLEM", name, pos, f"damaged record at commit-log offset {at} inside "
                                        f"flushed data (flushed to {self.flushed_offset}): {why}; no valid record "
                                        "follows in this file"))
                return
            else:
                self.out.append(Finding("NOTE", name, pos, f"torn tail at commit-log offset {at} ({why}), past the "
                                        f"flushed offset {self.flushed_offset}: recovery cuts the log here"))
                return
            if nxt is None:
                return
            pos = nxt
            self.end = off + pos

    def _later_data(self, off: int) -> bool:
        """Whether a file after the one at ``off`` starts with anything but zeros."""
        return any(self.maps[o][1][:8] != bytes(8) for o in self.maps if o > off)

    def record_at(self, offset: int, size: int) -> memoryview | None:
        base = offset - offset % self.size
        got = self.maps.get(base)
        if got is None or offset - base + size > self.size:
            return None
        return memoryview(got[1])[offset - base:offset - base + size]


def _queue_dirs(root: Path) -> Iterator[tuple[str, int, Path]]:
    cq_root = root / "consumequeue"
    if not cq_root.is_dir():
        return
    for tdir in sorted(cq_root.iterdir()):
        if not tdir.is_dir():
            continue
        for qdir in sorted(tdir.iterdir()):
            if qdir.is_dir() and qdir.name.isdigit():
                yield tdir.name, int(qdir.name), qdir


def _check_queue(log: _ReadOnlyLog, topic: str, qid: int, qdir: Path, out: list[Finding]) -> None:
    size = log.config.mappedFileSizeConsumeQueue
    per_file = size // CQ_STORE_UNIT_SIZE
    ended_at: tuple[str, int] | None = None  # the first zero entry seen: only zeros may follow
    seen_entry = False  # zeros before a queue's first entry are its unused start, not a hole
    past_end = 0
    for p in _files(qdir):
        name = log.rel(p)
        if len(p.name) != 20 or not p.name.isdigit() or p.stat().st_size != size:
            out.append(Finding("PROBLEM", name, 0, f"not a consume-queue file of {size} bytes"))
            continue
        first_q = int(p.name) // CQ_STORE_UNIT_SIZE
        with open(p, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
            arr = np.frombuffer(mm, dtype=CQ_DTYPE, count=per_file)
            offs, sizes = arr["offset"].tolist(), arr["size"].tolist()
            del arr
            try:
                mm.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                pass
        for i, (o, s) in enumerate(zip(offs, sizes)):
            if o == 0 and s == 0:
                if not seen_entry:
                    continue  # below the queue's first offset (recovery passes over these too)
                if ended_at is None:
                    ended_at = (name, i * CQ_STORE_UNIT_SIZE)
                continue
            q = first_q + i
            seen_entry = True
            if ended_at is not None:
                out.append(Finding("PROBLEM", ended_at[0], ended_at[1], f"{topic}/{qid}: a hole of zero entries "
                                   f"before queue offset {q}; a restart would end the queue there"))
                ended_at = None
            if o < 0 or s <= 0:
                out.append(Finding("PROBLEM", name, i * CQ_STORE_UNIT_SIZE,
                                   f"{topic}/{qid}@{q}: invalid entry (offset {o}, size {s})"))
                continue
            if o < log.start or log.start < 0:
                continue  # its commit-log file is gone (retention): pulls skip it
            if o + s > log.end:
                past_end += 1
                continue
            if o in log.damaged:
                continue
            rec = log.record_at(o, s)
            why = None
            if rec is None:
                why = "outside the commit-log files"
            else:
                try:
                    m = decode_record(rec, verify_crc=False, with_body=False)
                    if (m.topic, m.queue_id, m.queue_offset, m.store_size) != (topic, qid, q, s):
                        why = f"points at {m.topic}/{m.queue_id}@{m.queue_offset} of {m.store_size} bytes"
                except (MessageFormatError, ValueError) as exc:
                    why = f"points at no record ({exc})"
                finally:
                    if rec is not None:
                        rec.release()
            if why is not None:
                out.append(Finding("PROBLEM", name, i * CQ_STORE_UNIT_SIZE,
                                   f"{topic}/{qid}@{q}: entry (commit-log offset {o}, size {s}) {why}"))
            if len(out) >= _MAX_FINDINGS:
                return
    if past_end:
        out.append(Finding("NOTE", log.rel(qdir), 0, f"{topic}/{qid}: {past_end} entries point past the end of "
                           f"the commit log ({log.end}): recovery drops them"))


def _read_flushed_offset(root: Path) -> int:
    try:
        with open(root / "checkpoint", "rb") as f:
            data = f.read(_CHECKPOINT.size)
    except FileNotFoundError:
        return 0
    return _CHECKPOINT.unpack(data)[3] if len(data) == _CHECKPOINT.size else 0


def check_store_files(config: MessageStoreConfig,
                      progress: Callable[[int, int], None] | None = None) -> list[Finding]:
    """Check the store at ``config.storePathRootDir`` read-only; return the findings.
    ``progress(done, total)`` is told of each commit-log file and consume queue checked.

    The store's lock is held (shared with nobody) for the length of the check, so a broker
    cannot start on it meanwhile.

    Raises:
        NotAStoreError: the path holds no store.
        StoreLockedError: a running broker owns the store.
    """
    root = Path(config.storePathRootDir)
    if not looks_like_store(root, config):
        raise NotAStoreError(f"{root} holds no store (no commitlog, consumequeue nor checkpoint); "
                             "nothing was created there")
    lock_fd = None
    lock_path = root / LOCK_FILE_NAME
    if lock_path.exists():
        lock_fd = os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise StoreLockedError(f"the store {root} is in use by a running broker (it holds {lock_path}); "
                                   "stop it before checking the store") from None
    out: list[Finding] = []
    log = _ReadOnlyLog(config, out, _read_flushed_offset(root), load_damaged(root), root)
    try:
        log.open()
        queues = list(_queue_dirs(root))
        total = len(log.maps) + len(queues)
        done = 0

        def step() -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total)
        log.scan(step)
        for topic, qid, qdir in queues:
            _check_queue(log, topic, qid, qdir, out)
            step()
            if len(out) >= _MAX_FINDINGS:
                out.append(Finding("NOTE", str(root), 0, f"stopped after {_MAX_FINDINGS} findings"))
                break
    finally:
        log.close()
        if lock_fd is not None:
            os.close(lock_fd)
    known = load_damaged(root)
    if known:
        out.append(Finding("NOTE", DAMAGED_DIR, 0, f"{len(known)} damaged range(s) kept aside in {root / DAMAGED_DIR}"))
    return out
