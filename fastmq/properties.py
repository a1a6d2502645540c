"""Java ``.properties`` files and typed configuration objects bound to them.

RocketMQ configures its servers with ``key=value`` files whose keys are the Java field names
(``listenPort``, ``flushDiskType``...). fastmq keeps those names: a config class is a dataclass
whose attribute names *are* the keys, so a file written for Apache RocketMQ loads unchanged.
Unknown keys are reported (a typo should not pass silently) but do not stop the server, as
RocketMQ's ``MixAll.properties2Object`` ignores them too.
"""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Iterable, Mapping, TypeVar

from .errors import ConfigError

__all__ = ["parse_properties", "load_properties", "bind", "format_config"]

log = logging.getLogger("fastmq.config")
C = TypeVar("C")

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out, i, n = [], 0, len(s)
    while i < n:
        ch = s[i]
        if ch == "\\" and i + 1 < n:
            nxt = s[i + 1]
            if nxt == "u" and i + 6 <= n:
                try:
                    out.append(chr(int(s[i + 2:i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    raise ConfigError(f"bad \\u escape in {s!r}") from None
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _logical_lines(text: str) -> Iterable[str]:
    """Lines with Java's continuation rule: an odd number of trailing backslashes joins the next."""
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip() if pending else raw
        stripped = line.rstrip("\r")
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            pending += stripped[:-1]
            continue
        yield pending + stripped
        pending = ""
    if pending:
        yield pending


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text: ``#``/``!`` comments, ``=``, ``:`` or blank separators, escapes."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        s = line.lstrip()  # Java keeps trailing blanks in values; bind() strips them
        if not s or s[0] in "#!":
            continue
        i, n = 0, len(s)
        while i < n:
            if s[i] == "\\":
                i += 2
                continue
            if s[i] in "=: \t":
                break
            i += 1
        key = s[:i]
        rest = s[i:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        out[_unescape(key)] = _unescape(rest)
    return out


def parse_properties_body(body: bytes) -> dict[str, str]:
    """A request body of properties text (UPDATE_NAMESRV_CONFIG, UPDATE_BROKER_CONFIG).

    Raises:
        ConfigError: not UTF-8, or a bad escape.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8: {exc.reason}") from None
    return parse_properties(text)


def load_properties(path: str | Path) -> dict[str, str]:
    """Read and parse a properties file; a missing or unreadable file is a ConfigError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8: {exc.reason}") from None
    return parse_properties(text)


def _convert(key: str, annotation: Any, raw: str) -> Any:
    kind = str(annotation).split("|")[0].strip()
    raw = raw.strip()
    if kind == "bool":
        low = raw.lower()
        if low not in ("true", "false"):
            raise ConfigError(f"{key}={raw!r}: expected true or false")
        return low == "true"
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{key}={raw!r}: expected an integer") from None
    if kind == "float":
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{key}={raw!r}: expected a number") from None
    return raw


def bind(cfg: C, values: Mapping[str, str], *, source: str = "config") -> C:
    """Set the dataclass fields of ``cfg`` named by ``values`` (converted to the field's type).

    Returns the keys it did not know in a warning; raises ConfigError for a value of the
    wrong type, naming the key.
    """
    fields = {f.name: f for f in dataclasses.fields(cfg)}  # type: ignore[arg-type]
    unknown = []
    for key, raw in values.items():
        f = fields.get(key)
        if f is None:
            unknown.append(key)
            continue
        setattr(cfg, key, _convert(key, f.type, raw))
    if unknown:
        log.warning("%s: unknown keys ignored: %s", source, ", ".join(sorted(unknown)))
    return cfg


def format_config(*cfgs: object) -> str:
    """``key=value`` lines of every field, in declaration order (what ``-p`` prints)."""
    lines = []
    for cfg in cfgs:
        for f in dataclasses.fields(cfg):  # type: ignore[arg-type]
            v = getattr(cfg, f.name)
            lines.append(f"{f.name}={'true' if v is True else 'false' if v is False else v}")
    return "\n".join(lines) + "\n"
