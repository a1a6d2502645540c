"""The group commit's wait-then-sync twin the store imports: compiled, or the pure-Python reference."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ._flags import NO_EXTENSIONS

if TYPE_CHECKING or NO_EXTENSIONS:
    from .sync_wait_py import PAST_LIMIT, TIMED_OUT, wait_and_sync
else:
    try:
        from .sync_wait_c import PAST_LIMIT, TIMED_OUT, wait_and_sync
    except ImportError:  # unbuilt source checkout; the test suite refuses this (tests/conftest.py)
        from .sync_wait_py import PAST_LIMIT, TIMED_OUT, wait_and_sync

__all__ = ["wait_and_sync", "TIMED_OUT", "PAST_LIMIT"]
