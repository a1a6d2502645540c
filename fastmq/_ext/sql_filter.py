"""Selects the SQL92 evaluator: compiled ``sql_filter_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .sql_filter_py import SqlProgram
else:
    try:
        from .sql_filter_c import SqlProgram
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .sql_filter_py import SqlProgram

__all__ = ["SqlProgram"]
