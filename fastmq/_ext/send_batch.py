"""Selects the send batch's column container: compiled ``send_batch_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .send_batch_py import COLUMNS, SendBatch
else:
    try:
        from .send_batch_c import COLUMNS, SendBatch
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .send_batch_py import COLUMNS, SendBatch

__all__ = ["SendBatch", "COLUMNS"]
