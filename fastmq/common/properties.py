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
import os
import unicodedata
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, TypeVar

from ..errors import ConfigError

__all__ = ["parse_properties", "parse_properties_body", "load_properties", "dump_properties", "write_properties",
           "check_storable", "bind", "config_items", "format_config"]

log = logging.getLogger("fastmq.config")
C = TypeVar("C")

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
#: What java.util.Properties skips before a key and around a separator (not Python's whitespace:
#: U+00A0 or U+2028 are part of a key or value there).
_BLANK = " \t\f"
_HEX = frozenset("0123456789abcdefABCDEF")


def _unescape(s: str) -> str:
    """Properties.loadConvert: ``\\uXXXX``, ``\\t \\n \\r \\f``, and ``\\x`` -> ``x``."""
    if "\\" not in s:
        return s
    out, i, n = [], 0, len(s)
    while i < n:
        ch = s[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:  # a lone backslash at the end: Java drops it
            break
        nxt = s[i + 1]
        if nxt == "u":
            digits = s[i + 2:i + 6]
            if len(digits) < 4 or not _HEX.issuperset(digits):
                raise ConfigError(f"Malformed \\uxxxx encoding in {s!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    text = "".join(out)
    if any("\ud800" <= c <= "\udfff" for c in text):
        # Java's \\u escapes are UTF-16 units: a surrogate pair is one character
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _logical_lines(text: str) -> Iterator[str]:
    """Properties.LineReader: lines end at ``\\n``, ``\\r`` or ``\\r\\n`` only; blank and
    ``#``/``!`` comment lines are skipped (a comment never continues); an odd number of trailing
    backslashes joins the next line, whose leading blanks are dropped."""
    buf: list[str] = []
    skip_blank, comment, new_line, appended, backslash, skip_lf = True, False, True, False, False, False
    for c in text:
        if skip_lf:
            skip_lf = False
            if c == "\n":
                continue
        if skip_blank:
            if c in _BLANK or (not appended and c in "\r\n"):
                continue
            skip_blank = appended = False
        if new_line:
            new_line = False
            if c in "#!":
                comment = True
                continue
        if c != "\n" and c != "\r":
            if not comment:
                buf.append(c)
                backslash = (not backslash) if c == "\\" else False
            continue
        if comment or not buf:
            comment, new_line, skip_blank, backslash = False, True, True, False
            buf = []
            continue
        if backslash:  # continuation: drop the backslash, go on with the next line
            buf.pop()
            skip_blank = appended = True
            backslash = False
            skip_lf = c == "\r"
            continue
        yield "".join(buf)
        buf = []
        new_line = skip_blank = True
        skip_lf = c == "\r"
    if buf and not comment:
        if backslash:
            buf.pop()
        yield "".join(buf)


def _split_key(line: str) -> tuple[str, str]:
    """Properties.load0: the key ends at the first unescaped ``=``, ``:`` or blank; one ``=``
    or ``:`` and the blanks around it separate it from the value."""
    n = len(line)
    key_end = value_start = n
    has_sep = backslash = False
    i = 0
    while i < n:
        c = line[i]
        if c in "=:" and not backslash:
            key_end, value_start, has_sep = i, i + 1, True
            break
        if c in _BLANK and not backslash:
            key_end, value_start = i, i + 1
            break
        backslash = (not backslash) if c == "\\" else False
        i += 1
    while value_start < n:
        c = line[value_start]
        if c not in _BLANK:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text exactly as ``java.util.Properties.load`` does (after decoding).

    ``#``/``!`` comments, ``=``, ``:`` or blank separators, ``\\`` line continuations,
    ``\\uXXXX`` and the other escapes; lines end only at CR, LF or CRLF.

    Raises:
        ConfigError: a malformed ``\\uXXXX`` escape (Java's IllegalArgumentException).
    """
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key(line)
        out[_unescape(key)] = _unescape(value)
    return out


def parse_properties_body(body: bytes) -> dict[str, str]:
    """A request body of properties text (UPDATE_NAMESRV_CONFIG, UPDATE_BROKER_CONFIG).

    4.9 turns the body into a String as UTF-8 first, so the body is read as UTF-8 here too.

    Raises:
        ConfigError: not UTF-8, or a bad escape.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8: {exc.reason}") from None
    return parse_properties(text)


def load_properties(path: str | Path) -> dict[str, str]:
    """Read and parse a properties file as ``Properties.load(InputStream)`` does: the bytes are
    ISO-8859-1 (every byte one character; other characters come as ``\\uXXXX``).

    Raises:
        ConfigError: a missing or unreadable file, or a malformed escape (naming the file).
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        return parse_properties(data.decode("latin-1"))
    except ConfigError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None


def _escape(s: str, *, is_key: bool) -> str:
    """Properties.saveConvert with escUnicode: what ``store(OutputStream)`` writes."""
    out = []
    for i, c in enumerate(s):
        o = ord(c)
        if 61 < o < 127:
            out.append("\\\\" if c == "\\" else c)
        elif c == " ":
            out.append("\\ " if i == 0 or is_key else " ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif c in "=:#!":
            out.append("\\" + c)
        elif o < 0x20 or o > 0x7E:
            if o > 0xFFFF:  # Java writes the UTF-16 surrogate pair
                o -= 0x10000
                out.append(f"\\u{0xD800 + (o >> 10):04X}\\u{0xDC00 + (o & 0x3FF):04X}")
            else:
                out.append(f"\\u{o:04X}")
        else:
            out.append(c)
    return "".join(out)


def dump_properties(items: Mapping[str, str] | Iterable[tuple[str, str]]) -> str:
    """Properties text as ``java.util.Properties.store(OutputStream)`` writes it: ASCII only
    (other characters as ``\\uXXXX``), separators, comment marks, backslashes and line breaks
    escaped, so :func:`parse_properties` (and Java) read back exactly ``items``."""
    pairs = items.items() if isinstance(items, Mapping) else items
    lines = [f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in pairs]
    return "".join(line + "\n" for line in lines)


def write_properties(path: str | Path, items: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
    """Write ``items`` to ``path`` as :func:`dump_properties` text, atomically (temp file, fsync,
    rename), so a crash leaves the old file or the new one.

    Raises:
        OSError: the directory, temp file or rename failed.
    """
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(dump_properties(items).encode("ascii"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def check_storable(props: Mapping[str, str]) -> None:
    """Refuse keys and values holding control characters (a line break, NUL, DEL...): no
    configuration value needs one, and 4.9 writes them raw, making the file unreadable.

    Raises:
        ConfigError: naming the key and the first control character.
    """
    for k, v in props.items():
        for what, text in (("key", k), ("value", v)):
            bad = next((c for c in text if unicodedata.category(c) == "Cc"), None)
            if bad is not None:
                raise ConfigError(f"the {what} of {k!r} holds the control character U+{ord(bad):04X}, "
                                  "which a config file cannot keep; refused")


#: What Java's String.trim removes (every char up to U+0020; not U+00A0 or U+2028 as str.strip does).
_JAVA_TRIM = "".join(map(chr, range(0x21)))


def _convert(key: str, annotation: Any, raw: str) -> Any:
    kind = str(annotation).split("|")[0].strip()
    raw = raw.strip(_JAVA_TRIM)  # MixAll.properties2Object trims, as String.trim does
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
    fields = {f.name: f for f in dataclasses.fields(cfg)}  # type: ignore[arg-type]  # callers pass config dataclasses
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


def config_items(*cfgs: object) -> list[tuple[str, str]]:
    """``(key, text)`` of every field, in declaration order; booleans as Java prints them."""
    out = []
    for cfg in cfgs:
        for f in dataclasses.fields(cfg):  # type: ignore[arg-type]  # callers pass config dataclasses
            v = getattr(cfg, f.name)
            out.append((f.name, "true" if v is True else "false" if v is False else str(v)))
    return out


def format_config(*cfgs: object) -> str:
    """``key=value`` lines of every field, unescaped, in declaration order (what ``-p`` prints and
    GET_BROKER_CONFIG answers, as 4.9's ``MixAll.properties2String``); files are written with
    :func:`write_properties`."""
    return "".join(f"{k}={v}\n" for k, v in config_items(*cfgs))
