"""A compiled SQL92 selector run against stored records, pure twin of ``sql_filter_c``.

The program (made by ``fastmq.filter.compiler`` from the parsed tree) is flat: ``nodes`` is a
tuple of ``(op, a, b)`` with the root last; a ``CONST`` node's ``a`` indexes ``consts``
(``(kind, value)`` pairs), a ``PROP`` node's ``a`` indexes ``props`` (names), an ``IN`` node's
``b`` indexes ``sets`` (frozensets of strings). The evaluation is RocketMQ 4.9.8's exactly:

- a property's value is its string; a missing one is null, and so is an empty one (4.9.8's
  MessageDecoder skips a pair whose name or value is empty);
- comparing a string with a number or boolean converts the string to that type as Java's
  ``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf`` or ``Boolean.valueOf`` do; ``<`` and
  ``>`` between two strings read both as doubles; numbers widen (int, long, double);
- a failed conversion is an error, which makes the whole expression fail (the message is not
  matched, whatever an OR around it says), as the Java evaluator throws;
- null propagates through comparisons; AND, OR and NOT follow three-valued logic; ``=`` with
  a null right side and a non-null left is FALSE (4.9.8's asymmetry);
- a message matches only when the result is TRUE.

:meth:`SqlProgram.evaluate` answers one properties string (``name\\x01value\\x02...``, the stored
form); :meth:`SqlProgram.match_records` marks which of a run of stored records match.
"""
from __future__ import annotations

import math
import re
import struct
from typing import Any

from ..protocol.java_number import JavaNumberFormatError, parse_int, parse_long
from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from ..protocol.record_layout import HOST_V6_BITS, IPV4_HOST_LEN, IPV6_HOST_LEN, MESSAGE_MAGIC_CODE, POS_V4

__all__ = ["SqlProgram", "OPS", "KINDS", "TRUE", "FALSE", "NULL", "ERROR", "java_double", "compare_values",
           "ConversionFailed"]

#: node operations
OPS = {"const": 0, "prop": 1, "neg": 2, "not": 3, "cast": 4, "and": 5, "or": 6, "eq": 7, "lt": 8, "le": 9,
       "gt": 10, "ge": 11, "in": 12, "notin": 13}
#: constant kinds (Java classes): null, Boolean, Integer, Long, Double, String
KINDS = {"null": 0, "bool": 1, "int": 2, "long": 3, "double": 4, "str": 5}
#: what an evaluation gives: the three values, or an error (which matches nothing)
TRUE, FALSE, NULL, ERROR = 1, 0, 2, 3

_CONST, _PROP, _NEG, _NOT, _CAST, _AND, _OR, _EQ, _LT, _LE, _GT, _GE, _IN, _NOTIN = range(14)
_K_NULL, _K_BOOL, _K_INT, _K_LONG, _K_DOUBLE, _K_STR = range(6)

_SYSFLAG = struct.Struct(">i")
_MAGIC = struct.Struct(">I")
_BODYLEN_V4 = POS_V4["BODYLEN"]
_SYSFLAG_POS = POS_V4["SYSFLAG"]
_BORN_V6 = 0x10  # MessageSysFlag.BORNHOST_V6
_STORE_V6 = HOST_V6_BITS & ~_BORN_V6

# Double.valueOf's grammar (FloatingDecimal.readJavaFormatString), after String.trim()
_JAVA_DEC = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_HEX = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP]([+-]?[0-9]+)[fFdD]?")
_CANON_NAN = 0x7FF8000000000000
_BITS = struct.Struct(">q")


class ConversionFailed(Exception):
    """A conversion Java would refuse: the evaluation ends, nothing matches."""


def java_double(s: str) -> float:
    """``Double.valueOf(s)``; raises ValueError as Java throws NumberFormatException."""
    t = _java_trim(s)
    if _JAVA_DEC.fullmatch(t):
        core = t[:-1] if t[-1] in "fFdD" else t  # (NaN and Infinity end otherwise)
        return float(core.replace("Infinity", "inf").replace("NaN", "nan"))
    m = _JAVA_HEX.fullmatch(t)
    if m:
        sign, mant, exp = m.groups()
        try:
            v = float.fromhex(f"0x{mant}p{exp}")
        except OverflowError:
            v = math.inf
        return -v if sign == "-" else v
    raise ValueError(f'For input string: "{s}"')


def _java_trim(s: str) -> str:
    i, j = 0, len(s)
    while i < j and s[i] <= " ":
        i += 1
    while j > i and s[j - 1] <= " ":
        j -= 1
    return s[i:j]


def _dbits(d: float) -> int:
    return _CANON_NAN if d != d else _BITS.unpack(struct.pack(">d", d))[0]


def _dcmp(a: float, b: float) -> int:
    """``Double.compare``: NaN above everything and equal to itself, -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    x, y = _dbits(a), _dbits(b)
    return (x > y) - (x < y)


def _conv(kind: int, s: str) -> Any:
    try:
        if kind == _K_INT:
            return parse_int(s)
        if kind == _K_LONG:
            return parse_long(s)
        if kind == _K_DOUBLE:
            return java_double(s)
    except (JavaNumberFormatError, ValueError):
        raise ConversionFailed from None
    return s.lower() == "true"  # Boolean.valueOf  (_K_BOOL)


def compare_values(lk: int, lv: Any, rk: int, rv: Any) -> int:
    """4.9.8's ComparisonExpression.compare with string conversion on: the sign of lv - rv."""
    if lk != rk:
        if lk == _K_BOOL:
            if rk == _K_STR:
                raise ConversionFailed  # (4.9.8 casts the Boolean to a String: ClassCastException)
            return -1
        if lk == _K_STR:
            if rk == _K_NULL:
                return -1
            lv, lk = _conv(rk, lv), rk
        elif rk == _K_STR:
            if lk == _K_NULL:
                return -1
            rv, rk = _conv(lk, rv), lk
        elif lk in (_K_INT, _K_LONG) and rk in (_K_INT, _K_LONG):
            pass
        elif lk == _K_DOUBLE and rk in (_K_INT, _K_LONG):
            rv, rk = float(rv), _K_DOUBLE
        elif rk == _K_DOUBLE and lk in (_K_INT, _K_LONG):
            lv, lk = float(lv), _K_DOUBLE
        else:
            return -1
    if lk == _K_DOUBLE:
        return _dcmp(lv, rv)
    if lk == _K_STR:
        return 0 if lv == rv else 1  # (only '=' compares two strings this way; it needs equality)
    return int((lv > rv) - (lv < rv))


class SqlProgram:
    """A selector compiled for evaluation (see the module doc for the form)."""

    def __init__(self, nodes: tuple[tuple[int, int, int], ...], consts: tuple[tuple[int, Any], ...],
                 props: tuple[str, ...], sets: tuple[frozenset[str], ...]) -> None:
        self.nodes = tuple(nodes)
        self.consts = tuple(consts)
        self.props = tuple(props)
        self.sets = tuple(sets)
        if not self.nodes:
            raise ValueError("an empty program")

    def evaluate(self, properties: bytes) -> int:
        """TRUE, FALSE, NULL or ERROR for a message whose stored properties string is
        ``properties`` (UTF-8, ``name\\x01value`` pairs joined by ``\\x02``)."""
        values: dict[str, str] = {}
        if properties:
            for item in properties.decode("utf-8", "replace").split(PROPERTY_SEPARATOR):
                name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
                if sep and name and value:  # (MessageDecoder.string2messageProperties: both non-empty)
                    values[name] = value
        return self.evaluate_dict(values)

    def evaluate_dict(self, values: dict[str, str]) -> int:
        """:meth:`evaluate` of properties already decoded."""
        try:
            k, v = self._eval(len(self.nodes) - 1, values)
        except ConversionFailed:
            return ERROR
        if k == _K_NULL:
            return NULL
        return TRUE if v is True else FALSE

    def _eval(self, i: int, values: dict[str, str]) -> tuple[int, Any]:
        op, a, b = self.nodes[i]
        if op == _CONST:
            return self.consts[a]
        if op == _PROP:
            s = values.get(self.props[a])
            return (_K_NULL, None) if s is None else (_K_STR, s)
        if op == _AND or op == _OR:
            stop = op == _OR  # the value that decides at once: TRUE for OR, FALSE for AND
            lk, lv = self._eval(a, values)
            if lk != _K_NULL and lv is stop:
                return _K_BOOL, stop
            rk, rv = self._eval(b, values)
            if rk != _K_NULL and rv is stop:
                return _K_BOOL, stop
            if lk == _K_NULL or rk == _K_NULL:
                return _K_NULL, None
            return _K_BOOL, not stop
        if op == _NOT:
            k, v = self._eval(a, values)
            return (_K_NULL, None) if k == _K_NULL else (_K_BOOL, not v)
        if op == _CAST:
            k, v = self._eval(a, values)
            if k == _K_NULL:
                return _K_NULL, None
            return _K_BOOL, v is True and k == _K_BOOL
        if op == _NEG:
            k, v = self._eval(a, values)
            if k in (_K_INT, _K_LONG, _K_DOUBLE):
                return k, -v
            return _K_NULL, None
        if op == _IN or op == _NOTIN:
            k, v = self._eval(a, values)
            if k != _K_STR:
                return _K_NULL, None
            return _K_BOOL, (v in self.sets[b]) != (op == _NOTIN)
        lk, lv = self._eval(a, values)
        if op == _EQ:
            rk, rv = self._eval(b, values)
            if lk == _K_NULL or rk == _K_NULL:
                if lk == rk:
                    return _K_BOOL, True
                return (_K_NULL, None) if lk == _K_NULL else (_K_BOOL, False)
            return _K_BOOL, compare_values(lk, lv, rk, rv) == 0
        if lk == _K_NULL:
            return _K_NULL, None
        rk, rv = self._eval(b, values)
        if rk == _K_NULL:
            return _K_NULL, None
        if lk == _K_STR and rk == _K_STR:
            try:
                c = _dcmp(java_double(lv), java_double(rv))
            except ValueError:
                raise ConversionFailed from None
        else:
            c = compare_values(lk, lv, rk, rv)
        if op == _LT:
            return _K_BOOL, c < 0
        if op == _LE:
            return _K_BOOL, c <= 0
        if op == _GT:
            return _K_BOOL, c > 0
        return _K_BOOL, c >= 0

    def match_records(self, buf: Any, base: int, offs: Any, sizes: Any, start: int, out: Any,
                      max_match: int) -> tuple[int, int]:
        """Evaluate the records ``offs[i]`` (commit-log offsets, ``sizes[i]`` bytes) from
        ``start`` on, as long as they lie inside ``buf`` (the bytes from commit-log offset
        ``base``), setting ``out[i]`` to 1 for a match and 0 otherwise. Stops after ``max_match``
        matches (``max_match`` <= 0: no limit). Returns (the index after the last record
        evaluated, the matches). A record that is not a readable message matches nothing."""
        mv = memoryview(buf)
        end = len(mv)
        n = len(offs)
        found = 0
        i = start
        while i < n:
            o, s = int(offs[i]) - base, int(sizes[i])
            if o < 0 or s < 0 or o + s > end:
                break
            out[i] = 1 if self.evaluate(_record_properties(mv, o, s)) == TRUE else 0
            found += out[i]
            i += 1
            if 0 < max_match <= found:
                break
        return i, found


def _record_properties(mv: memoryview, o: int, s: int) -> bytes:
    """The properties string of the stored record at ``mv[o:o + s]`` (empty when unreadable)."""
    if s < _BODYLEN_V4 + 4 or _MAGIC.unpack_from(mv, o + 4)[0] != MESSAGE_MAGIC_CODE:
        return b""
    sys_flag = _SYSFLAG.unpack_from(mv, o + _SYSFLAG_POS)[0]
    wide = IPV6_HOST_LEN - IPV4_HOST_LEN
    p = o + _BODYLEN_V4 + (wide if sys_flag & _BORN_V6 else 0) + (wide if sys_flag & _STORE_V6 else 0)
    if p + 4 > o + s:
        return b""
    body_len = _SYSFLAG.unpack_from(mv, p)[0]
    p += 4 + body_len
    if body_len < 0 or p + 1 > o + s:
        return b""
    p += 1 + mv[p]
    if p + 2 > o + s:
        return b""
    n = (mv[p] << 8) | mv[p + 1]
    p += 2
    if p + n > o + s:
        return b""
    return bytes(mv[p:p + n])
