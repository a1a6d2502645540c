"""The SQL92 message selector of RocketMQ 4.9.8, parsed by hand into a small tree.

The grammar is 4.9.8's ``SelectorParser.jj`` (ActiveMQ's selector without LIKE, arithmetic and
hex or octal numbers), from loosest to tightest binding::

    or          := and ( OR and )*
    and         := equality ( AND equality )*
    equality    := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
    comparison  := unary ( ('>' | '>=' | '<' | '<=') unary | [NOT] BETWEEN unary AND unary
                         | [NOT] IN '(' string ( ',' string )* ')' )*
    unary       := '+' unary | '-' unary | NOT unary | primary
    primary     := literal | identifier | '(' or ')'

Keywords are case-insensitive, ``--`` and ``/* */`` comments are skipped, identifiers are
``[a-z_$][a-z0-9_$]*`` in any case (the property lookup is case-sensitive). Integers are Java
Integers when they fit in 32 bits, else Longs (a trailing ``L`` is allowed); floats are Doubles.

The checks 4.9.8 makes while building its expression objects are made here too, with its texts:
``<`` and ``>`` need numbers or properties, ``=`` refuses NULL, BETWEEN's constant bounds must be
ordered, IN needs a property on its left, and the whole (and each side of AND, OR, NOT) must be a
condition. A refusal raises :class:`~fastmq.errors.FilterExpressionError`, whose text is what a
4.9.8 broker puts in its SUBSCRIPTION_PARSE_FAILED answer (the Java exception's ``toString()``).
Syntax errors give JavaCC's first line (what was found, where) and a shorter list of what was
expected. An expression longer than :data:`MAX_EXPRESSION_LENGTH` characters or nested deeper
than :data:`MAX_DEPTH` is refused before it is parsed: the broker keeps one per subscription and
evaluates it for every message, and the parser recurses.

The tree is made of tuples (see :data:`Node`); :mod:`fastmq.filter.compiler` turns it into the
flat program both evaluator twins run.
"""
from __future__ import annotations

import math
import re
from typing import Any, NoReturn

from .._ext.sql_filter_py import KINDS, compare_values, ConversionFailed
from ..errors import FilterExpressionError
from ..protocol.java_number import JavaNumberFormatError, parse_long
from .java_text import java_value_text

__all__ = ["parse", "constant_kind", "Node", "MAX_EXPRESSION_LENGTH", "MAX_DEPTH", "MAX_NODES"]

#: Longest expression accepted, in characters (Java's client sends any length; a subscription's
#: expression is a few dozen characters in practice).
MAX_EXPRESSION_LENGTH = 8192
#: Deepest nesting of parentheses and unary operators accepted.
MAX_DEPTH = 64
#: Most tree nodes accepted (the compiled program's size).
MAX_NODES = 2048

#: A tree node: ``("const", value)`` with ``value`` a :class:`JInt`, :class:`JLong`, float, str,
#: bool or None; ``("prop", name)``; ``("neg", node)``; ``("not", node)``; ``("cast", node)`` (a
#: property used as a condition); ``("and" | "or", left, right)``; ``("eq" | "lt" | "le" | "gt" |
#: "ge", left, right)``; ``("in" | "notin", prop_node, tuple_of_strings)``.
Node = tuple[Any, ...]

_PARSE_EXC = "org.apache.rocketmq.filter.parser.ParseException: "
_RUNTIME_EXC = "java.lang.RuntimeException: "
_NUMBER_EXC = "java.lang.NumberFormatException: "
_LEXICAL_EXC = "org.apache.rocketmq.filter.parser.TokenMgrError: "

_KEYWORDS = {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"}
# One alternation, longest-match as JavaCC tokenizes: floats before integers, two-character
# operators before one-character ones.
_TOKEN = re.compile(r"""
    (?P<ws>[ \t\n\r\f]+)
  | (?P<line_comment>--[^\n\r]*(?:\r\n|\n|\r))
  | (?P<block_comment>/\*(?:[^*]|\*+[^*/])*\*+/)
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<decimal>(?:0|[1-9][0-9]*)[lL]?)
  | (?P<string>'(?:''|[^'])*')
  | (?P<id>[a-zA-Z_$][a-zA-Z0-9_$]*)
  | (?P<op><>|>=|<=|[=<>(),+-])
""", re.VERBOSE)
# how JavaCC names a token of each kind in "Encountered ..." (tokenImage)
_KIND_IMAGE = {"float": "<FLOATING_POINT_LITERAL>", "decimal": "<DECIMAL_LITERAL>", "string": "<STRING_LITERAL>",
               "id": "<ID>", "eof": "<EOF>"}
# what JavaCC lists as expected, in its order, where an expression must start (no "+": JavaCC
# takes it only by a syntactic lookahead), and where a parenthesised one must go on or close
_EXPR_START = ('"NOT"', '"TRUE"', '"FALSE"', '"NULL"', "<DECIMAL_LITERAL>", "<FLOATING_POINT_LITERAL>",
               "<STRING_LITERAL>", "<ID>", '"("', '"-"')
_IN_PARENS = ('"NOT"', '"AND"', '"OR"', '"BETWEEN"', '"IN"', '"IS"', '"="', '"<>"', '">"', '">="', '"<"', '"<="',
              '")"')
_AFTER_NOT = ('"BETWEEN"', '"IN"', '">"', '">="', '"<"', '"<="')


class JInt(int):
    """A Java Integer constant (32 bits)."""

    __slots__ = ()


class JLong(int):
    """A Java Long constant (beyond 32 bits)."""

    __slots__ = ()


class _Tok:
    """A token, or (kind ``lexerr``) the lexical error JavaCC raises when the parser asks for it."""

    __slots__ = ("kind", "image", "line", "column")

    def __init__(self, kind: str, image: str, line: int, column: int) -> None:
        self.kind, self.image, self.line, self.column = kind, image, line, column

    def is_kw(self, word: str) -> bool:
        return self.kind == "id" and self.image.upper() == word

    def is_op(self, op: str) -> bool:
        return self.kind == "op" and self.image == op

    def describe(self) -> str:
        if self.kind == "eof":
            return "<EOF>"
        if self.kind == "id" and self.image.upper() in _KEYWORDS:
            label = f'"{self.image.upper()}"'
        elif self.kind == "op":
            label = f'"{self.image}"'
        else:
            label = _KIND_IMAGE[self.kind]
        return f' {label} "{_escape(self.image)} "'


_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "'": "\\'",
            "\\": "\\\\"}


def _escape(s: str) -> str:
    """JavaCC's addEscapes: C escapes, quotes escaped, other controls and non-ASCII as \\uXXXX."""
    out = []
    for c in s:
        if c == "\0":
            continue
        e = _ESCAPES.get(c)
        if e is None:
            e = f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) > 0x7E else c
        out.append(e)
    return "".join(out)


def _positions(text: str) -> list[tuple[int, int]]:
    """(line, column) of each character as JavaCC's SimpleCharStream counts them: a line ends at
    \n, \r or \r\n, and a tab moves the column to the next multiple of 8."""
    out = []
    line, col = 1, 0
    after_lf = after_cr = False
    for c in text:
        col += 1
        if after_lf:
            after_lf = False
            line, col = line + 1, 1
        elif after_cr:
            after_cr = False
            if c == "\n":
                after_lf = True
            else:
                line, col = line + 1, 1
        if c == "\r":
            after_cr = True
        elif c == "\n":
            after_lf = True
        elif c == "\t":
            col -= 1
            col += 8 - col % 8
        out.append((line, col))
    return out


def _partial_end(text: str, start: int) -> int:
    """Where the token that could begin at ``start`` stops matching (JavaCC's lexer reads on while
    some token can still match): a string or a block comment may run to the end."""
    c = text[start]
    if c == "'":
        return len(text)  # (a closed one matched the pattern)
    if c == "/" and text[start + 1:start + 2] == "*":
        return len(text)
    if c in "/.":
        return start + 1
    return start


def _lexical_error(text: str, start: int, pos: list[tuple[int, int]]) -> str:
    """TokenMgrError's text for the token that cannot be read at ``start``: the character that
    stopped it and what was read before; <EOF> when that character is the last (JavaCC looks one
    past it), placed after the last character."""
    fail = _partial_end(text, start)
    n = len(text)
    if fail < n - 1:
        line, col = pos[fail]
        c = text[fail]
        return (f'{_LEXICAL_EXC}Lexical error at line {line}, column {col}.  Encountered: "{_escape(c)}" ({ord(c)}), '
                f'after : "{_escape(text[start:fail])}"')
    line, col = pos[-1]
    if text[-1] in "\n\r":
        line, col = line + 1, 0
    else:
        col += 1
    after = "" if n - start <= 1 else text[start:]
    return f'{_LEXICAL_EXC}Lexical error at line {line}, column {col}.  Encountered: <EOF> after : "{_escape(after)}"'


def _tokenize(text: str) -> list[_Tok]:
    """The tokens, ending in ``eof``; a lexical error ends them as a ``lexerr`` token, raised only
    if the parser reads that far (JavaCC reads a token when the grammar asks for it)."""
    toks: list[_Tok] = []
    pos_of = _positions(text)
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            toks.append(_Tok("lexerr", _lexical_error(text, pos, pos_of), 0, 0))
            return toks
        kind = m.lastgroup or ""
        if kind not in ("ws", "line_comment", "block_comment"):
            line, col = pos_of[pos]
            toks.append(_Tok(kind, m.group(), line, col))
        pos = m.end()
    line, col = pos_of[-1] if pos_of else (0, 0)  # (JavaCC places <EOF> on the last character)
    toks.append(_Tok("eof", "", line, col))
    return toks


# ---------------------------------------------------------------- 4.9.8's toString() of a node
def _text(node: Node) -> str:
    op = node[0]
    if op == "const":
        return java_value_text(node[1], quoted=True)
    if op == "prop":
        return str(node[1])
    if op == "cast":
        return _text(node[1])
    if op in ("neg", "not"):
        return f"({'-' if op == 'neg' else 'NOT'} {_text(node[1])})"
    if op in ("in", "notin"):
        return f"{_text(node[1])} {'IN' if op == 'in' else 'NOT IN'} ( {', '.join(node[2])} )"
    sym = {"and": "&&", "or": "||", "eq": "==", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
    return f"({_text(node[1])} {sym} {_text(node[2])})"


def _is_bool_expr(node: Node) -> bool:
    """A BooleanExpression of 4.9.8 (comparisons, logic, NOT, IN, casts, TRUE/FALSE/NULL)."""
    op = node[0]
    if op == "const":
        return node[1] is None or isinstance(node[1], bool)
    return op not in ("prop", "neg")


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0
        self.nodes = 0

    # -- tokens
    @property
    def tok(self) -> _Tok:
        return self.at(self.i)

    def at(self, i: int) -> _Tok:
        t = self.toks[i] if i < len(self.toks) else self.toks[-1]
        if t.kind == "lexerr":
            raise FilterExpressionError(t.image)
        return t

    def take(self) -> _Tok:
        t = self.tok
        if t.kind != "eof":
            self.i += 1
        return t

    def fail(self, expected: tuple[str, ...], t: _Tok | None = None) -> NoReturn:
        t = t if t is not None else self.tok
        one = len(expected) == 1
        lines = "".join(f"{e} ...\n    " for e in expected)
        raise FilterExpressionError(f'{_PARSE_EXC}Encountered "{t.describe()}" at line {t.line}, column {t.column}.\n'
                                    f'Was expecting{":" if one else " one of:"}\n    {lines}')

    def node(self, *parts: Any) -> Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise FilterExpressionError(f"the SQL92 expression has more than {MAX_NODES} terms")
        return tuple(parts)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterExpressionError(f"the SQL92 expression nests deeper than {MAX_DEPTH} levels")

    # -- 4.9.8's checks, with its texts
    def boolean(self, node: Node) -> Node:
        if _is_bool_expr(node):
            return node
        if node[0] == "prop":
            return self.node("cast", node)
        raise FilterExpressionError(f"{_PARSE_EXC}Expression will not result in a boolean value: {_text(node)}")

    @staticmethod
    def _orderable(node: Node) -> None:
        if node[0] == "const":
            v = node[1]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return
            raise FilterExpressionError(f"{_RUNTIME_EXC}Value '{_text(node)}' cannot be compared.")
        if _is_bool_expr(node):
            raise FilterExpressionError(f"{_RUNTIME_EXC}Value '{_text(node)}' cannot be compared.")

    def ordering(self, op: str, left: Node, right: Node) -> Node:
        self._orderable(left)
        self._orderable(right)
        return self.node(op, left, right)

    def equal(self, left: Node, right: Node) -> Node:
        for side in (left, right):
            if side[0] == "const" and side[1] is None:
                raise FilterExpressionError(f"{_RUNTIME_EXC}'{_text(side)}' cannot be compared.")
        if (left[0] == "const" and right[0] == "const" and _is_bool_expr(left) and not _is_bool_expr(right)):
            raise FilterExpressionError(f"{_RUNTIME_EXC}'{_text(left)}' cannot be compared with '{_text(right)}'")
        return self.node("eq", left, right)

    def between(self, value: Node, low: Node, high: Node) -> Node:
        if low[0] == "const" and high[0] == "const":
            lv, hv = low[1], high[1]
            if lv is None or hv is None:
                raise FilterExpressionError(f"{_RUNTIME_EXC}Illegal values of between, values can not be null!")
            if constant_compare(hv, lv) < 0:
                raise FilterExpressionError(
                    f"{_RUNTIME_EXC}Illegal values of between, left value({java_value_text(lv)}) must less than "
                    f"or equal to right value({java_value_text(hv)})")
        return self.node("and", self.ordering("ge", value, low), self.ordering("le", value, high))

    # -- the grammar
    def selector(self) -> Node:
        # (4.9.8's grammar ends with the expression, not <EOF>: what follows it is not read)
        return self.boolean(self.or_expr())

    def or_expr(self) -> Node:
        left = self.and_expr()
        while self.tok.is_kw("OR"):
            self.take()
            right = self.and_expr()
            left = self.node("or", self.boolean(left), self.boolean(right))
        return left

    def and_expr(self) -> Node:
        left = self.equality()
        while self.tok.is_kw("AND"):
            self.take()
            right = self.equality()
            left = self.node("and", self.boolean(left), self.boolean(right))
        return left

    def equality(self) -> Node:
        left = self.comparison()
        while True:
            t = self.tok
            if t.is_op("="):
                self.take()
                left = self.equal(left, self.comparison())
            elif t.is_op("<>"):
                self.take()
                left = self.node("not", self.equal(left, self.comparison()))
            elif t.is_kw("IS"):
                self.take()
                negate = self.tok.is_kw("NOT")
                if negate:
                    self.take()
                if not self.tok.is_kw("NULL"):
                    self.fail(('"NULL"',) if negate else ('"NOT"',))
                self.take()
                left = self.node("eq", left, ("const", None))
                if negate:
                    left = self.node("not", left)
            else:
                return left

    def comparison(self) -> Node:
        left = self.unary()
        while True:
            t = self.tok
            if t.kind == "op" and t.image in (">", ">=", "<", "<="):
                self.take()
                op = {">": "gt", ">=": "ge", "<": "lt", "<=": "le"}[t.image]
                left = self.ordering(op, left, self.unary())
            elif t.is_kw("BETWEEN"):
                self.take()
                left = self.between(left, *self._bounds())
            elif t.is_kw("IN"):
                self.take()
                left = self.in_list(left, "in")
            elif t.is_kw("NOT"):
                # (JavaCC enters this loop on NOT, then needs BETWEEN or IN after it)
                if not (self.at(self.i + 1).is_kw("BETWEEN") or self.at(self.i + 1).is_kw("IN")):
                    self.fail(_AFTER_NOT)
                self.take()
                if self.take().is_kw("BETWEEN"):
                    low, high = self._bounds()
                    left = self.node("or", self.ordering("lt", left, low), self.ordering("gt", left, high))
                else:
                    left = self.in_list(left, "notin")
            else:
                return left

    def _bounds(self) -> tuple[Node, Node]:
        low = self.unary()
        if not self.tok.is_kw("AND"):
            self.fail(('"AND"',))
        self.take()
        return low, self.unary()

    def in_list(self, left: Node, op: str) -> Node:
        if not self.tok.is_op("("):
            self.fail(('"("',))
        self.take()
        items = [self.string()]
        while self.tok.is_op(","):
            self.take()
            items.append(self.string())
        if not self.tok.is_op(")"):
            self.fail(('","', '")"'))
        self.take()
        if left[0] != "prop":
            raise FilterExpressionError(f"{_RUNTIME_EXC}Expected a property for In expression, got: {_text(left)}")
        return self.node(op, left, tuple(items))

    def string(self) -> str:
        t = self.tok
        if t.kind != "string":
            self.fail(("<STRING_LITERAL>",))
        self.take()
        return t.image[1:-1].replace("''", "'")

    def unary(self) -> Node:
        self.enter()
        try:
            t = self.tok
            if t.is_op("+"):
                if not self._starts_unary(self.i + 1):  # (JavaCC's syntactic lookahead for "+")
                    self.fail(_EXPR_START)
                self.take()
                return self.unary()
            if t.is_op("-"):
                self.take()
                return self.node("neg", self.unary())
            if t.is_kw("NOT"):
                self.take()
                return self.node("not", self.boolean(self.unary()))
            return self.primary()
        finally:
            self.depth -= 1

    def _starts_unary(self, i: int) -> bool:
        t = self.at(i)
        while t.is_op("+") or t.is_op("-") or t.is_kw("NOT"):
            i += 1
            t = self.at(i)
        return t.kind in ("string", "decimal", "float") or t.is_op("(") or (
            t.kind == "id" and t.image.upper() not in _KEYWORDS - {"TRUE", "FALSE", "NULL"})

    def primary(self) -> Node:
        t = self.take()
        k = t.kind
        if k == "string":
            return self.node("const", t.image[1:-1].replace("''", "'"))
        if k == "decimal":
            return self.node("const", _decimal(t.image))
        if k == "float":
            return self.node("const", _float(t.image))
        if k == "id":
            word = t.image.upper()
            if word == "TRUE":
                return self.node("const", True)
            if word == "FALSE":
                return self.node("const", False)
            if word == "NULL":
                return self.node("const", None)
            if word not in _KEYWORDS:
                return self.node("prop", t.image)
        elif t.is_op("("):
            inner = self.or_expr()
            if not self.tok.is_op(")"):
                self.fail(_IN_PARENS)
            self.take()
            return inner
        self.fail(_EXPR_START, t)


def _decimal(image: str) -> int:
    """ConstantExpression.createFromDecimal: a Long, narrowed to an Integer when it fits."""
    digits = image[:-1] if image[-1] in "lL" else image
    try:
        v = parse_long(digits)
    except JavaNumberFormatError as exc:
        raise FilterExpressionError(f"{_NUMBER_EXC}{exc}") from None
    return JInt(v) if -(1 << 31) <= v < (1 << 31) else JLong(v)


def _float(image: str) -> float:
    """ConstantExpression.createFloat, with its two range checks (the second refuses zero: 4.9.8
    compares with Double.MIN_VALUE, the smallest positive double)."""
    v = float(image)
    if math.isinf(v):
        raise FilterExpressionError(f"{_RUNTIME_EXC}{image} is greater than 1.7976931348623157E308")
    if v < 5e-324:
        raise FilterExpressionError(f"{_RUNTIME_EXC}{image} is less than 4.9E-324")
    return v


def constant_kind(v: Any) -> int:
    """The Java class of a constant of the tree, as a program's kind."""
    if v is None:
        return KINDS["null"]
    if isinstance(v, bool):
        return KINDS["bool"]
    if isinstance(v, JLong):
        return KINDS["long"]
    if isinstance(v, int):
        return KINDS["int"]
    if isinstance(v, float):
        return KINDS["double"]
    return KINDS["str"]


def constant_compare(a: Any, b: Any) -> int:
    """4.9.8's ``__compare(a, b, true)`` of two constants (BETWEEN's bound check), with its
    exception texts."""
    if isinstance(a, str) and isinstance(b, str):  # String.compareTo: UTF-16 code units
        x, y = a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass")
        return (x > y) - (x < y)
    try:
        return compare_values(constant_kind(a), a, constant_kind(b), b)
    except ConversionFailed:
        if isinstance(a, bool) and isinstance(b, str):
            raise FilterExpressionError(
                "java.lang.ClassCastException: class java.lang.Boolean cannot be cast to class java.lang.String "
                "(java.lang.Boolean and java.lang.String are in module java.base of loader 'bootstrap')") from None
        text = b if isinstance(b, str) else a
        raise FilterExpressionError(
            f'java.lang.RuntimeException: java.lang.NumberFormatException: For input string: "{text}"') from None


def parse(text: str) -> Node:
    """The tree of a SQL92 selector.

    Raises:
        FilterExpressionError: ``text`` is not a valid 4.9.8 selector (the text is 4.9.8's), or is
            over the size limits.
    """
    if not isinstance(text, str):
        raise FilterExpressionError("the SQL92 expression is not a string")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise FilterExpressionError(
            f"the SQL92 expression is {len(text)} characters long, over the limit of {MAX_EXPRESSION_LENGTH}")
    return _Parser(text).selector()

