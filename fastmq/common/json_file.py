"""Small JSON state files: written atomically and off the event loop, read back with RocketMQ's
``.bak`` fallback.

Topics, subscription groups, consumer offsets and delay offsets each live in one JSON file under
``storePathRootDir/config`` (the NameServer's KV table in ``kvConfigPath``).

Writing. A crash in the middle of a write must leave either the old file or the new one: we
write ``<name>.tmp``, fsync it, keep the previous file as ``<name>.bak`` and rename the new one
into place (RocketMQ's ``MixAll.string2File`` order). A change does not write at once: it marks
its :class:`JsonConfigFile` dirty and one background thread writes the latest state a moment
later, so a burst of 300 new groups costs one or two writes instead of 300 fsyncs on the event
loop (which froze a broker for 34 s). A clean shutdown writes what is still pending.

Reading, as RocketMQ's ``ConfigManager.load``: the main file; when it cannot be parsed, its
``.bak``. When the main file is damaged and the ``.bak`` is missing or damaged too, loading raises
:class:`ConfigError` naming the file, and the file refuses every later write: a server that
started empty would overwrite what an operator may still recover.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from ..errors import ConfigError

__all__ = ["write_json_atomic", "read_json", "load_json", "JsonConfigFile", "RETRY_AFTER_FAILURE"]

log = logging.getLogger("fastmq.config")

T = TypeVar("T")

#: Seconds before a failed background write (disk full, permissions) is tried again.
RETRY_AFTER_FAILURE = 1.0


def _fsync_dir(directory: Path) -> None:
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - some filesystems refuse directory fsync
        pass


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as pretty JSON to ``path`` so that a crash never leaves half a file.

    Raises:
        OSError: the directory, temp file or rename failed; the previous file is untouched.
    """
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
    _fsync_dir(path.parent)


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def load_json(path: str | Path, parse: Callable[[Any], T], loads: Callable[[str], Any] = json.loads) -> T | None:
    """``parse(loads(text))`` of ``path``, else of ``path.bak``; None when neither file exists.

    ``parse`` turns the JSON value into what the caller keeps and raises (ValueError, TypeError,
    KeyError, AttributeError) when its shape is wrong: a file that is valid JSON of the wrong
    shape is as damaged as a torn one. A main file that is missing (a crash between the two
    renames of a write) is not damage: the ``.bak`` is read, or nothing when there is none.

    Raises:
        ConfigError: the main file is damaged (or unreadable) and the ``.bak`` is missing or
            damaged as well; the message names both files and why.
    """
    return _load(Path(path), parse, loads)[0]


def _load(path: Path, parse: Callable[[Any], T], loads: Callable[[str], Any]) -> tuple[T | None, bool]:
    """:func:`load_json`, and whether the value came from the ``.bak`` because the main file is
    damaged."""
    bak = path.with_name(path.name + ".bak")
    problems: list[str] = []
    main_present = False
    for candidate in (path, bak):
        try:
            data = _read_bytes(candidate)
            if data is None:
                continue
            if candidate == path:
                main_present = True
            text = data.decode("utf-8")
            if not text.strip():
                raise ValueError("the file is empty")
            value = parse(loads(text))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            # (UnicodeDecodeError and RemotingCommandError are ValueErrors)
            if candidate == path:
                main_present = True
            problems.append(f"{candidate}: {exc}")
            log.error("%s is damaged (%s)%s", candidate, exc, "; trying its backup" if candidate == path else "")
            continue
        if candidate == bak and main_present:
            log.warning("loaded %s from its backup %s", path, bak)
        return value, candidate == bak and bool(problems)
    if problems:
        raise ConfigError(f"cannot load {path}, and no good backup {bak.name}: " + "; ".join(problems))
    return None, False


def read_json(path: str | Path, loads: Callable[[str], Any] = json.loads) -> Any | None:
    """The JSON in ``path``, else in ``path.bak``, else None (neither exists or is readable).

    Lenient: for callers that only compare or peek; loading state goes through :func:`load_json`.
    """
    try:
        return load_json(path, lambda v: v, loads)
    except ConfigError:
        return None


class _Flusher:
    """One daemon thread that writes every due :class:`JsonConfigFile`, so no file write runs on
    an event loop and a server's few files share one thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[JsonConfigFile[Any], float] = {}
        self._thread: threading.Thread | None = None

    def schedule(self, f: "JsonConfigFile[Any]", delay: float) -> None:
        at = time.monotonic() + delay
        with self._cond:
            old = self._due.get(f)
            if old is not None and old <= at:
                return  # already due sooner: this change goes in that write
            self._due[f] = at
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="fastmq-config-flush", daemon=True)
                self._thread.start()
            self._cond.notify()

    def cancel(self, f: "JsonConfigFile[Any]") -> None:
        with self._cond:
            self._due.pop(f, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    ready = [f for f, at in self._due.items() if at <= now]
                    if ready:
                        for f in ready:
                            del self._due[f]
                        break
                    self._cond.wait(min(self._due.values()) - now if self._due else None)
            for f in ready:
                f._write_pending()


_FLUSHER = _Flusher()


class JsonConfigFile(Generic[T]):
    """One JSON state file of a server: loaded with the ``.bak`` fallback, written in the
    background after changes, and on demand.

    Args:
        path: the file.
        snapshot: returns the JSON value to write, taken under the owner's lock; called on the
            flusher thread (or the caller's, for :meth:`flush`).
        delay: seconds a change waits for more changes before the write that carries them all.
    """

    def __init__(self, path: str | Path, snapshot: Callable[[], Any], *, delay: float = 0.1) -> None:
        self.path = Path(path)
        self.snapshot = snapshot
        self.delay = delay
        self._state = threading.Lock()  # guards _dirty
        self._write_lock = threading.Lock()  # one writer of <name>.tmp at a time
        self._dirty = False
        self._main_damaged = False  # loaded from .bak: the next write must not make the damage the .bak
        #: Set when loading failed: the damaged file is left for the operator, never overwritten.
        self.refused: str | None = None
        #: The last write's error, None after a good write (for the log and tests).
        self.last_error: OSError | None = None

    def load(self, parse: Callable[[Any], T], loads: Callable[[str], Any] = json.loads) -> T | None:
        """:func:`load_json` of this file; a failure also stops every later write of it."""
        try:
            value, self._main_damaged = _load(self.path, parse, loads)
        except ConfigError as exc:
            self.refused = str(exc)
            raise
        return value

    @property
    def pending(self) -> bool:
        """True while a change waits to be written or is being written."""
        return self._dirty or self._write_lock.locked()

    def changed(self, delay: float | None = None) -> None:
        """Record a change: written by the background thread after ``delay`` (default
        :attr:`delay`) seconds, with whatever else changed meanwhile. Cheap; safe on any thread."""
        if self.refused is not None:
            return
        with self._state:
            self._dirty = True
        _FLUSHER.schedule(self, self.delay if delay is None else delay)

    def flush(self) -> None:
        """Write now, in the caller's thread, if a change is pending.

        Raises:
            OSError: the write failed; the change stays pending.
        """
        _FLUSHER.cancel(self)
        self._write(retry=False)

    def write_now(self) -> None:
        """Write the current state now, pending change or not (see :meth:`flush`)."""
        with self._state:
            self._dirty = True
        self.flush()

    def _write_pending(self) -> None:
        """The flusher thread's write: errors are logged and the write retried later."""
        try:
            self._write(retry=True)
        except Exception:  # a snapshot bug must not kill the thread every file shares
            log.exception("writing %s failed", self.path)

    def _write(self, *, retry: bool) -> None:
        if self.refused is not None:
            log.error("not writing %s: it could not be loaded at start and is kept for recovery", self.path)
            return
        with self._write_lock:
            with self._state:
                if not self._dirty:
                    return
                self._dirty = False
            try:
                if self._main_damaged:
                    damaged = self.path.with_name(self.path.name + ".damaged")
                    try:  # kept for the operator; the good .bak stays
                        os.replace(self.path, damaged)
                        log.warning("moved the damaged %s aside to %s", self.path, damaged.name)
                    except FileNotFoundError:
                        pass
                    self._main_damaged = False
                write_json_atomic(self.path, self.snapshot())
            except OSError as exc:
                with self._state:
                    self._dirty = True
                self.last_error = exc
                log.error("persist %s failed: %s%s", self.path, exc, "; retrying" if retry else "")
                if retry:
                    _FLUSHER.schedule(self, max(self.delay, RETRY_AFTER_FAILURE))
                    return
                raise
            except BaseException:
                with self._state:
                    self._dirty = True
                raise
            self.last_error = None
