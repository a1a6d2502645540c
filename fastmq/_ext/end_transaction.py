"""Selects the END_TRANSACTION record builder: compiled ``end_transaction_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .end_transaction_py import end_fields, end_records
else:
    try:
        from .end_transaction_c import end_fields, end_records
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .end_transaction_py import end_fields, end_records

__all__ = ["end_fields", "end_records"]
