"""Selects the SEND_BATCH_MESSAGE body encoder: compiled ``batch_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .batch_py import encode_batch_body
else:
    try:
        from .batch_c import encode_batch_body
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .batch_py import encode_batch_body

__all__ = ["encode_batch_body"]
