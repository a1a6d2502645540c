"""Small JSON state files: written atomically and off the event loop, read back with RocketMQ's
``.bak`` fallback.

Topics, subscription groups, consumer offsets and delay offsets each live in one JSON file under
``storePathRootDir/config`` (the NameServer's KV table in ``kvConfigPath``).

Writing. A crash in the middle of a write must leave either the old file or the new one: we
write ``<name>.tmp``, fsync it, keep the previous file as ``<name>.bak`` and rename the new one
into place (RocketMQ's ``MixAll.string2File`` order). A change does not write at once: it marks
its :class:`JsonConfigFile` dirty and one background thread writes the latest state a moment
later, so a burst of 300 new groups costs one or two writes instead of 300 fsyncs on the event
loop (which froze a broker for 34 s). A clean shutdown writes what is still pending. A request
that must answer only once its change is on disk (an admin's new topic) awaits
:meth:`JsonConfigFile.durable`: it asks that thread for a write now, and every change made before
that write began rides in it (group commit), so 100 such requests a second cost a few writes.

Encoding. The files are pretty JSON, as 4.9.8's ``ConfigManager.persist`` writes them (an
operator reads and edits them; Apache's broker reads ours). Python's pretty encoder is pure
Python: 20,000 topics took 190 ms of the interpreter's lock per write, stalling the event loop
that shares it. :class:`PrettyTable` keeps the text of each table entry between writes and
encodes only entries that changed, so a write of that table costs a few milliseconds. The text
is ``json.dumps(indent=4, sort_keys=True)``'s, except that a table's entries keep the table's own
order (4.9.8's follow its hash map's order; any order reads back the same).

Reading, as RocketMQ's ``ConfigManager.load``: the main file; when it cannot be parsed, its
``.bak``. When the main file is damaged and the ``.bak`` is missing or damaged too, loading raises
:class:`ConfigError` naming the file, and the file refuses every later write: a server that
started empty would overwrite what an operator may still recover.
"""
from __future__ import annotations

import json
import logging
import operator
import os
import threading
import time
from asyncio import AbstractEventLoop, Future, get_running_loop
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, Mapping, TypeVar

from ..errors import ConfigError

__all__ = ["write_json_atomic", "read_json", "load_json", "JsonConfigFile", "RETRY_AFTER_FAILURE", "JsonText",
           "pretty_json", "pretty_object", "PrettyTable"]

log = logging.getLogger("fastmq.config")

T = TypeVar("T")
V = TypeVar("V")

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


@dataclass(frozen=True)
class JsonText:
    """JSON already encoded, in pieces (a big table's text is not copied into one string):
    :func:`write_json_atomic` writes them as they are."""

    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(self.parts)


def pretty_json(obj: Any) -> str:
    """The state files' format: 4-space indent, sorted keys, UTF-8 text rather than escapes."""
    return json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=False)


def pretty_object(fields: Mapping[str, Any]) -> JsonText:
    """:func:`pretty_json` of the object ``fields``, where a :class:`JsonText` value is already
    encoded at depth 1 (a :meth:`PrettyTable.encode` result) and goes in as it is."""
    if not fields:
        return JsonText(("{}",))
    parts = ["{\n"]
    for n, key in enumerate(sorted(fields)):
        value = fields[key]
        parts.append(("" if n == 0 else ",\n") + "    " + json.dumps(key, ensure_ascii=False) + ": ")
        if isinstance(value, JsonText):
            parts.extend(value.parts)
        else:
            parts.append(pretty_json(value).replace("\n", "\n    "))
    parts.append("\n}")
    return JsonText(tuple(parts))


class _Block(Generic[V]):
    """A run of consecutive table entries and their text."""

    __slots__ = ("keys", "values", "text")

    def __init__(self, keys: list[str], values: list[V], text: str) -> None:
        self.keys, self.values, self.text = keys, values, text


class PrettyTable(Generic[V]):
    """The pretty text of a ``{name: entry}`` table, one level deep in its file (``{"dataVersion":
    ..., "topicConfigTable": <here>}``), re-encoding only the entries that changed since the last
    call.

    The entries come in the table's own order (as loaded, then as created), each encoded as
    :func:`pretty_json` would. The table is cut in blocks of :attr:`BLOCK` entries whose text is
    kept; a block is reused when it holds the same names and the very same entry objects, which
    C-level comparisons check, so a write after one new topic on a 20,000-topic table is a few
    milliseconds of the interpreter's lock, not the 190 ms of encoding it all. An entry counts as
    unchanged while the table holds the same object: the owners replace an entry to change it
    and never modify one in place. Not thread-safe: one writer calls it (the file's write lock
    serialises them).

    Args:
        to_obj: an entry's JSON value.
    """

    BLOCK = 256
    _PAD = " " * 8  # the entries' indent at depth 1

    def __init__(self, to_obj: Callable[[V], Any]) -> None:
        self._to_obj = to_obj
        self._blocks: list[_Block[V]] = []
        self._texts: dict[str, tuple[V, str]] = {}  # every entry's text, for blocks that moved

    def _entry(self, name: str, value: V) -> str:
        hit = self._texts.get(name)
        if hit is None or hit[0] is not value:
            # pretty_json escapes every newline inside strings, so each "\n" is between tokens
            hit = (value, self._PAD + json.dumps(name, ensure_ascii=False) + ": "
                   + pretty_json(self._to_obj(value)).replace("\n", "\n" + self._PAD))
            self._texts[name] = hit
        return hit[1]

    def encode(self, table: Mapping[str, V]) -> JsonText:
        """The table's text in its own order, each entry as :func:`pretty_json` would indent it
        at depth 1."""
        keys, values = list(table), list(table.values())
        old, blocks = self._blocks, []
        for n, i in enumerate(range(0, len(keys), self.BLOCK)):
            k, v = keys[i:i + self.BLOCK], values[i:i + self.BLOCK]
            b = old[n] if n < len(old) else None
            if b is None or b.keys != k or not all(map(operator.is_, b.values, v)):
                b = _Block(k, v, ",\n".join(map(self._entry, k, v)))
            blocks.append(b)
        self._blocks = blocks
        if len(self._texts) > 2 * len(keys) + self.BLOCK:  # names deleted since: forget them
            self._texts = {name: self._texts[name] for name in keys if name in self._texts}
        if not blocks:
            return JsonText(("{}",))
        parts = ["{\n"]
        for b in blocks:
            parts += (b.text, ",\n")
        parts[-1] = "\n    }"
        return JsonText(tuple(parts))


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as pretty JSON to ``path`` so that a crash never leaves half a file.

    ``obj`` is a JSON value, or a :class:`JsonText` written as it is.

    Raises:
        OSError: the directory, temp file or rename failed; the previous file is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = obj.parts if isinstance(obj, JsonText) else (pretty_json(obj),)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for part in parts:
            f.write(part.encode("utf-8"))
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
        self._changes = 0  # changes counted, under _state
        self._written = 0  # how many of them the last good write holds
        self._waiters: list[tuple[int, AbstractEventLoop, Future[None]]] = []  # (changes, loop, future)
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
            self._changes += 1
        _FLUSHER.schedule(self, self.delay if delay is None else delay)

    async def durable(self) -> None:
        """Return once every change recorded before this call is on disk, written by the
        background thread now, together with whatever else changed before that write began.

        Returns at once for a file refused at load (nothing is written; that write logs why).

        Raises:
            OSError: the write that carried the changes failed; it is retried in the background.
        """
        if self.refused is not None:
            return
        loop = get_running_loop()
        with self._state:
            want = self._changes
            if self._written >= want:
                return
            fut: Future[None] = loop.create_future()
            self._waiters.append((want, loop, fut))
        _FLUSHER.schedule(self, 0.0)
        await fut

    def _settle(self, upto: int, error: OSError | None) -> None:
        """Wake the :meth:`durable` callers whose changes the write of ``upto`` changes carried
        (or, with ``error``, failed to)."""
        with self._state:
            if error is None:
                self._written = max(self._written, upto)
            done = [w for w in self._waiters if w[0] <= upto]
            if not done:
                return
            self._waiters = [w for w in self._waiters if w[0] > upto]
        for _want, loop, fut in done:
            try:
                loop.call_soon_threadsafe(_wake, fut, error)
            except RuntimeError:  # that loop is closed: nobody waits any more
                pass

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
            self._changes += 1
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
                upto = self._changes
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
                self._settle(upto, exc)
                if retry:
                    _FLUSHER.schedule(self, max(self.delay, RETRY_AFTER_FAILURE))
                    return
                raise
            except BaseException as exc:
                with self._state:
                    self._dirty = True
                # (a snapshot bug: whoever awaits durable() hears of it rather than waiting forever)
                self._settle(upto, OSError(f"writing {self.path} failed: {exc!r}"))
                raise
            self.last_error = None
            self._settle(upto, None)


def _wake(fut: "Future[None]", error: OSError | None) -> None:
    if fut.done():  # the waiting request was cancelled
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)
