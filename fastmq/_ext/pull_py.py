"""The usual PULL_MESSAGE header in one call, pure twin of ``pull_c`` (the reference).

:func:`decode_pull_header` takes a pull's ext-fields and builds its header only when every field
is in the form the Java and C++ clients send: the two names present as strings, the seven
numbers plain ASCII decimals (an optional sign, 1 to 19 digits) within their Java types. For
anything else it returns None and the broker's general decoder (``PullMessageRequestHeader.decode``,
down to ``Header.from_fields``) decides: it accepts what these refuse only where Java does too
(blanks around a number) and names the field it refuses. So both paths give the same header for
what this one accepts. (The broker's pull processor calls it: the header declarations, a floor
below ``_ext``, do not.)

:func:`usual_longs` is the consumer's side: two numbers of a pull answer's header
(``suggestWhichBrokerId``, ``nextBeginOffset``) in the same usual form, or None, and the caller's
general parser (``ext_int``, ``Long.parseLong``'s rules) decides; every pull round reads both.
"""
from __future__ import annotations

from typing import Any

__all__ = ["decode_pull_header", "PULL_NUMBERS", "usual_longs"]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

#: the numeric fields in the header's constructor order, with their Java type's range
PULL_NUMBERS = (("queueId", INT_MIN, INT_MAX), ("queueOffset", LONG_MIN, LONG_MAX), ("maxMsgNums", INT_MIN, INT_MAX),
                ("sysFlag", INT_MIN, INT_MAX), ("commitOffset", LONG_MIN, LONG_MAX),
                ("suspendTimeoutMillis", LONG_MIN, LONG_MAX), ("subVersion", LONG_MIN, LONG_MAX))


def _number(v: Any, lo: int, hi: int) -> int | None:
    if type(v) is not str:
        return None
    digits = v[1:] if v[:1] in ("+", "-") and len(v) > 1 else v
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 19:
        return None
    n = int(v)
    return n if lo <= n <= hi else None


def decode_pull_header(fields: dict[str, Any], cls: Any) -> Any:
    """``cls(consumerGroup, topic, the seven numbers, subscription, expressionType)`` from a pull's
    ext-fields, or None when a field is missing or not in the usual form (see the module doc)."""
    group, topic = fields.get("consumerGroup"), fields.get("topic")
    if type(group) is not str or type(topic) is not str:
        return None
    nums = []
    for name, lo, hi in PULL_NUMBERS:
        n = _number(fields.get(name), lo, hi)
        if n is None:
            return None
        nums.append(n)
    return cls(group, topic, *nums, fields.get("subscription"), fields.get("expressionType"))


def usual_longs(fields: dict[str, Any] | None, first: str, second: str) -> tuple[int, int] | None:
    """``(fields[first], fields[second])`` as Java longs when both are in the usual form (see the
    module doc), else None: a field missing, None, not a string or in any other form (or
    ``fields`` not a dict: a command without ext-fields has None)."""
    if not fields or type(fields) is not dict:
        return None
    a = _number(fields.get(first), LONG_MIN, LONG_MAX)
    if a is None:
        return None
    b = _number(fields.get(second), LONG_MIN, LONG_MAX)
    if b is None:
        return None
    return a, b
