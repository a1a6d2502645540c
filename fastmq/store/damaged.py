"""The archive of damaged commit-log records: ``<storePathRootDir>/damaged/``.

Recovery never throws away bytes it cannot read inside flushed data: it copies them to
``damaged/commitlog-<log offset>.bin`` (the offset of their first byte, 20 digits as the log's
file names) and goes on with the next valid record. The archive is also the store's memory of
which records are known damaged: pulls skip them, and the store checker reports them as
handled rather than as new problems.
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

__all__ = ["DAMAGED_DIR", "damaged_path", "keep_aside", "load_damaged"]

log = logging.getLogger("fastmq.store")

DAMAGED_DIR = "damaged"
_NAME = re.compile(r"^commitlog-(\d{20})\.bin$")


def damaged_path(root: str | Path, log_offset: int) -> Path:
    """Where the damaged bytes starting at commit-log offset ``log_offset`` are kept."""
    return Path(root) / DAMAGED_DIR / f"commitlog-{log_offset:020d}.bin"


def keep_aside(root: str | Path, log_offset: int, data: bytes | memoryview) -> Path:
    """Copy ``data`` to the archive (durably; an existing copy is kept as it is) and return its path."""
    path = damaged_path(root, log_offset)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load_damaged(root: str | Path) -> dict[int, int]:
    """{commit-log offset: length} of every damaged range in the archive."""
    d = Path(root) / DAMAGED_DIR
    out: dict[int, int] = {}
    if not d.is_dir():
        return out
    for p in d.iterdir():
        m = _NAME.match(p.name)
        if m:
            out[int(m.group(1))] = p.stat().st_size
    return out
