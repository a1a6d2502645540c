"""MessageSelector: how a consumer says which messages of a topic it wants (RocketMQ's class).

``MessageSelector.by_tag("tagA || tagB")`` filters on the tag, as a plain string passed to
``subscribe`` does; ``MessageSelector.by_sql("region = 'eu' AND amount > 100")`` filters on
message properties with a SQL92 expression, evaluated by the broker (which needs
``enablePropertyFilter=true``; see docs/filters.md).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MessageSelector", "SQL92", "TAG"]

#: ExpressionType names, as on the wire
SQL92, TAG = "SQL92", "TAG"


@dataclass(frozen=True)
class MessageSelector:
    """An expression and its type (``"TAG"`` or ``"SQL92"``)."""

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> "MessageSelector":
        """A SQL92 filter on message properties (4.9.8's grammar: ``AND OR NOT``, comparisons,
        ``BETWEEN``, ``IN``, ``IS [NOT] NULL``; a missing property never matches).

        Raises:
            ValueError: ``sql`` is empty.
        """
        if not isinstance(sql, str) or not sql.strip():
            raise ValueError("Expression can't be null! SQL92")
        return cls(SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str | None = None) -> "MessageSelector":
        """A tag filter: ``"*"`` (or None, or empty) for every message, else tags joined by ``||``."""
        return cls(TAG, tag or "*")
