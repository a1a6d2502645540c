"""Selects the timer-delivery record builder: compiled ``timer_deliver_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .timer_deliver_py import delivered_records
else:
    try:
        from .timer_deliver_c import delivered_records
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .timer_deliver_py import delivered_records

__all__ = ["delivered_records"]
