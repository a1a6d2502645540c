"""How Java prints the values of a selector, for 4.9.8's error texts (``toString()``/``valueOf``)."""
from __future__ import annotations

import math

__all__ = ["java_double_text", "java_value_text"]


def java_double_text(d: float) -> str:
    """``Double.toString(d)``: plain between 10^-3 and 10^7, else ``d.dddE<n>``; the shortest
    digits that read back as ``d`` (what Python's ``repr`` picks too)."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    sign = "-" if d < 0 else ""
    digits, exp = _shortest(abs(d))  # value = 0.<digits> * 10**exp
    if 1e-3 <= abs(d) < 1e7:
        if exp <= 0:
            return f"{sign}0.{'0' * -exp}{digits}"
        whole, frac = digits[:exp].ljust(exp, "0"), digits[exp:]
        return f"{sign}{whole}.{frac or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp - 1}"


def _shortest(d: float) -> tuple[str, int]:
    r = repr(d)
    if "e" in r:
        m, _, ex = r.partition("e")
        digits = m.replace(".", "")
        exp = int(ex) + 1
    else:
        whole, _, frac = r.partition(".")
        frac = "" if frac == "0" else frac
        if whole != "0":
            digits, exp = whole + frac, len(whole)
        else:
            stripped = frac.lstrip("0")
            digits, exp = stripped, -(len(frac) - len(stripped))
    digits = digits.lstrip("0").rstrip("0") or "0"
    return digits, exp


def java_value_text(v: object, *, quoted: bool = False) -> str:
    """A constant as 4.9.8 prints it: ``quoted`` is ConstantExpression.toString (NULL, TRUE,
    'text' with quotes doubled), else String.valueOf (null, true, text)."""
    if v is None:
        return "NULL" if quoted else "null"
    if isinstance(v, bool):
        return ("TRUE" if v else "FALSE") if quoted else ("true" if v else "false")
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'" if quoted else v
    if isinstance(v, float):
        return java_double_text(v)
    return str(int(v))  # type: ignore[call-overload]
