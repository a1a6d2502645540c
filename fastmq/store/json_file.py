"""Small JSON state files written atomically, as RocketMQ's ConfigManager writes its own.

Topics, subscription groups, consumer offsets and delay offsets each live in one JSON file under
``storePathRootDir/config``. A crash in the middle of a write must leave either the old file or
the new one: we write ``<name>.tmp``, fsync it, keep the previous file as ``<name>.bak`` and rename
the new one into place (RocketMQ's ``MixAll.string2File`` order). Reading falls back to the
``.bak`` copy when the main file is missing or unreadable.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Callable

__all__ = ["write_json_atomic", "read_json"]

log = logging.getLogger("fastmq.store")


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as pretty JSON to ``path`` so that a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=False).encode("utf-8")
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if path.exists():
        os.replace(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - some filesystems refuse directory fsync
        pass


def read_json(path: str | Path, loads: Callable[[str], Any] = json.loads) -> Any | None:
    """The JSON in ``path``, else in ``path.bak``, else None (neither exists or is readable).

    ``loads`` may be a lenient reader, for files a Java broker wrote with fastjson.
    """
    path = Path(path)
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        if not text.strip():
            continue
        try:
            return loads(text)
        except (ValueError, UnicodeDecodeError) as exc:  # RemotingCommandError is a ValueError
            log.error("%s is not valid JSON (%s); trying the backup", candidate, exc)
    return None
