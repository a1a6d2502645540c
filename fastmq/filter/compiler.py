"""A parsed selector made into the flat program the evaluator twins run (``fastmq._ext.sql_filter``).

:func:`compile_expression` is what the broker calls once per subscription: parse, check, flatten.
The program names each property once, so the compiled evaluator finds every value it needs in
one pass over a record's properties.
"""
from __future__ import annotations

from typing import Any

from .._ext.sql_filter_py import OPS
from .._ext.sql_filter import SqlProgram
from .parser import Node, constant_kind, parse

__all__ = ["compile_expression", "compile_tree"]

_OPS = OPS


def compile_tree(tree: Node) -> SqlProgram:
    """The program of a parsed tree."""
    nodes: list[tuple[int, int, int]] = []
    consts: list[tuple[int, Any]] = []
    props: dict[str, int] = {}
    sets: list[frozenset[str]] = []

    def emit(node: Node) -> int:
        op = node[0]
        if op == "const":
            v = node[1]
            consts.append((constant_kind(v), None if v is None else (v if isinstance(v, (bool, float, str))
                                                                     else int(v))))
            nodes.append((_OPS["const"], len(consts) - 1, 0))
        elif op == "prop":
            nodes.append((_OPS["prop"], props.setdefault(node[1], len(props)), 0))
        elif op in ("neg", "not", "cast"):
            a = emit(node[1])
            nodes.append((_OPS[op], a, 0))
        elif op in ("in", "notin"):
            a = emit(node[1])
            sets.append(frozenset(node[2]))
            nodes.append((_OPS[op], a, len(sets) - 1))
        else:
            a = emit(node[1])
            b = emit(node[2])
            nodes.append((_OPS[op], a, b))
        return len(nodes) - 1

    emit(tree)
    return SqlProgram(tuple(nodes), tuple(consts), tuple(props), tuple(sets))


def compile_expression(text: str) -> SqlProgram:
    """Parse and compile a SQL92 selector.

    Raises:
        fastmq.errors.FilterExpressionError: not a valid 4.9.8 selector (4.9.8's text), or over the size limits.
    """
    return compile_tree(parse(text))
