"""The latency-fault twin the rest of fastmq imports: compiled, or the pure-Python reference."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .fault_py import (FAILED_SEND_LATENCY, LATENCY_MAX, NOT_AVAILABLE_DURATION, FaultTable,
                           not_available_duration)
else:
    try:
        from .fault_c import (FAILED_SEND_LATENCY, LATENCY_MAX, NOT_AVAILABLE_DURATION, FaultTable,
                              not_available_duration)
    except ImportError:  # unbuilt source checkout; the test suite refuses this (tests/conftest.py)
        from .fault_py import (FAILED_SEND_LATENCY, LATENCY_MAX, NOT_AVAILABLE_DURATION, FaultTable,
                               not_available_duration)

__all__ = ["LATENCY_MAX", "NOT_AVAILABLE_DURATION", "FAILED_SEND_LATENCY", "not_available_duration", "FaultTable"]
