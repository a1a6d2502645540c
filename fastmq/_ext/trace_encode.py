"""Selects the trace dispatcher's Pub record encoder: compiled ``trace_encode_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .trace_encode_py import PUB_ROW, encode_pub_rows
else:
    try:
        from .trace_encode_c import PUB_ROW, encode_pub_rows
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .trace_encode_py import PUB_ROW, encode_pub_rows

__all__ = ["PUB_ROW", "encode_pub_rows"]
