"""The broker's compiled SQL92 subscriptions (RocketMQ's ConsumerFilterManager and its parse cache).

A SQL92 expression is compiled once, when a heartbeat registers it or a CHECK_CLIENT_CONFIG or
pull first names it, and kept by its text: every pull of every consumer subscribing with it
finds the program with one dict lookup. A text that does not compile is kept with its error, so
a consumer retrying a bad expression is not parsed again at each pull. The table is bounded
(:data:`MAX_EXPRESSIONS`; the oldest entry goes first), as 4.9.8 bounds its parse cache.
"""
from __future__ import annotations

import logging

from .._ext.sql_filter import SqlProgram
from ..errors import FilterExpressionError
from ..filter import compile_expression

__all__ = ["ConsumerFilterManager", "MAX_EXPRESSIONS", "SQL92", "TAG"]

log = logging.getLogger("fastmq.broker")

#: ExpressionType names
SQL92, TAG = "SQL92", "TAG"
#: Most expressions kept compiled
MAX_EXPRESSIONS = 1024


class ConsumerFilterManager:
    """SQL92 programs by expression text."""

    def __init__(self, limit: int = MAX_EXPRESSIONS) -> None:
        self._limit = limit
        self._table: dict[str, SqlProgram | FilterExpressionError] = {}

    def __len__(self) -> int:
        return len(self._table)

    def compile(self, expression_type: str, expression: str | None) -> SqlProgram:
        """The program of a subscription (``FilterFactory.get(type).compile(expression)``).

        Raises:
            FilterExpressionError: the type is not SQL92, or the expression does not compile
                (4.9.8's text).
        """
        if expression_type != SQL92:
            raise FilterExpressionError(f"no filter for expression type {expression_type}")
        text = expression or ""
        got = self._table.get(text)
        if got is None:
            try:
                got = compile_expression(text)
            except FilterExpressionError as exc:
                got = exc
            if len(self._table) >= self._limit:
                del self._table[next(iter(self._table))]
            self._table[text] = got
        if isinstance(got, FilterExpressionError):
            raise got
        return got
