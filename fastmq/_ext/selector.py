"""The queue-selection twin the rest of fastmq imports: compiled, or the pure-Python reference."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .selector_py import QueueTable, select_queue, select_queue_fault, select_queue_reachable
else:
    try:
        from .selector_c import QueueTable, select_queue, select_queue_fault, select_queue_reachable
    except ImportError:  # unbuilt source checkout; the test suite refuses this (tests/conftest.py)
        from .selector_py import QueueTable, select_queue, select_queue_fault, select_queue_reachable

__all__ = ["select_queue", "select_queue_fault", "select_queue_reachable", "QueueTable"]
