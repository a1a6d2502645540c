"""Selects the plain-IPv4 record decoder: compiled ``records_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS
from .records_py import FIELDS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .records_py import decode_v4
else:
    try:
        from .records_c import decode_v4
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .records_py import decode_v4

__all__ = ["FIELDS", "decode_v4"]
