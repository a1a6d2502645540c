"""Selects the timer-delivery record builder: compiled ``timer_deliver_c`` unless FASTMQ_NO_EXTENSIONS is set."""
from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .timer_deliver_py import delivered_records, real_topic_ids
else:
    try:
        from .timer_deliver_c import delivered_records, real_topic_ids
    except ImportError:  # unbuilt source checkout; the test suite refuses to run like this
        from .timer_deliver_py import delivered_records, real_topic_ids

__all__ = ["delivered_records", "real_topic_ids"]
