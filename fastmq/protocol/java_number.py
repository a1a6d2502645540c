"""Java's ``Integer.parseInt`` and ``Long.parseLong`` (radix 10), the one number parser of fastmq.

Every numeric header field and message property a server or client reads goes through here, so
that fastmq takes exactly the texts a 4.9 broker takes: a store written by fastmq then holds
nothing an Apache broker would refuse to read back. Python's ``int()`` is more lenient than
Java in three ways, each refused here: blanks around the digits (``" 1"``), underscores between
them (``"1_0"``), and no range (``"2147483648"`` is not an ``int``). Like Java, a leading ``+``
or ``-`` is taken, and so are Unicode decimal digits (``Character.digit`` accepts them too).

Numbers inside JSON bodies follow the same rules (:func:`json_int`, :func:`json_long`): fastjson
binds a JSON integer to an ``int`` field only within 32 bits (``long``: 64), and a JSON string
through ``Integer.parseInt``; Python's ``json`` reads any integer and ``int()`` forgives blanks.

This module imports nothing, so every floor may read it, the header declarations included.
"""
from __future__ import annotations

__all__ = ["JavaNumberFormatError", "parse_int", "parse_long", "json_int", "json_long", "INT_MIN", "INT_MAX",
           "LONG_MIN", "LONG_MAX"]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


class JavaNumberFormatError(ValueError):
    """Java's NumberFormatException: ``str()`` is its message, :attr:`java_text` its ``toString()``."""

    def __init__(self, text: str | None) -> None:
        # JDK 8's texts: parseInt(null) says "null", anything else 'For input string: "<s>"'
        # (radix 10 adds nothing on later JDKs either).
        super().__init__("null" if text is None else f'For input string: "{text}"')
        self.text = text

    @property
    def java_text(self) -> str:
        """What 4.9's remoting server puts in the remark of its SYSTEM_ERROR answer."""
        return f"java.lang.NumberFormatException: {self}"


def _parse(text: str | None, lo: int, hi: int) -> int:
    if not text:  # None or ""
        raise JavaNumberFormatError(text)
    digits = text[1:] if text[0] in "+-" else text
    # isdecimal() is Unicode category Nd, what Character.digit(c, 10) takes; it refuses blanks,
    # underscores, signs and everything else int() would forgive.
    if not digits.isdecimal():
        raise JavaNumberFormatError(text)
    # int() of thousands of digits raises; past 40 significant ones the value is out of range anyway.
    value = int(text) if len(digits) <= 40 or len(digits.lstrip("0")) <= 40 else hi + 1
    if not lo <= value <= hi:
        raise JavaNumberFormatError(text)
    return value


def parse_int(text: str | None) -> int:
    """``Integer.parseInt(text)``.

    Raises:
        JavaNumberFormatError: ``text`` is None, empty, not a signed decimal, or beyond 32 bits.
    """
    return _parse(text, INT_MIN, INT_MAX)


def parse_long(text: str | None) -> int:
    """``Long.parseLong(text)``.

    Raises:
        JavaNumberFormatError: ``text`` is None, empty, not a signed decimal, or beyond 64 bits.
    """
    return _parse(text, LONG_MIN, LONG_MAX)


def _json_number(value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        # a boolean, a fraction, null, a list or an object where Java wants a whole number
        raise JavaNumberFormatError(None if value is None else str(value))
    if isinstance(value, str):
        return _parse(value, lo, hi)
    if not lo <= value <= hi:
        raise JavaNumberFormatError(str(value))
    return value


def json_int(value: object) -> int:
    """A JSON body's value bound to a Java ``int`` field: a JSON integer within 32 bits, or a
    string :func:`parse_int` takes.

    Raises:
        JavaNumberFormatError: anything else (out of range, blanks, a fraction, a boolean...).
    """
    return _json_number(value, INT_MIN, INT_MAX)


def json_long(value: object) -> int:
    """:func:`json_int` for a Java ``long`` field (64 bits).

    Raises:
        JavaNumberFormatError: anything but a JSON integer within 64 bits or a decimal string.
    """
    return _json_number(value, LONG_MIN, LONG_MAX)
