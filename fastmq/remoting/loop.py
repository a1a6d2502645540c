"""The event loop fastmq runs on: uvloop when it is installed, asyncio's own otherwise.

uvloop's transports cost a fraction of the default loop's per read and write, which is most of a
broker's per-frame overhead; ``FASTMQ_NO_UVLOOP=1`` turns it off (for debugging, or to compare).
"""
from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine, TypeVar

__all__ = ["new_event_loop", "run", "USING_UVLOOP"]

T = TypeVar("T")

try:
    if os.environ.get("FASTMQ_NO_UVLOOP"):
        raise ImportError("FASTMQ_NO_UVLOOP is set")
    import uvloop as _uvloop
except ImportError:
    _uvloop = None  # type: ignore[assignment]

#: True when new loops are uvloop loops.
USING_UVLOOP: bool = _uvloop is not None


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A fresh event loop of the best available kind."""
    if _uvloop is not None:
        return _uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a loop from :func:`new_event_loop`."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)
