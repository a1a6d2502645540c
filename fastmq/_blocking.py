"""The blocking facade's machinery: one background event loop thread runs every asyncio core.

Blocking calls submit a coroutine to that loop and wait for it, bounded by the call's timeout
plus a grace, so a caller never hangs past what it asked for.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
from typing import Any, Coroutine, TypeVar

from .remoting.loop import new_event_loop

__all__ = ["call", "background_loop"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's facade loop, started on first use (a daemon thread)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = new_event_loop()
            t = threading.Thread(target=loop.run_forever, name="fastmq-loop", daemon=True)
            t.start()
            _loop, _thread = loop, t
        return _loop


def call(coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
    """Run ``coro`` on the background loop and wait for its result (at most ``timeout`` s)."""
    loop = background_loop()
    if threading.current_thread() is _thread:
        raise RuntimeError("blocking fastmq call made from the fastmq loop itself; use fastmq.aio there")
    fut = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return fut.result(timeout)
    except concurrent.futures.TimeoutError:
        fut.cancel()
        raise TimeoutError(f"fastmq call did not finish within {timeout}s") from None


@atexit.register
def _stop() -> None:
    loop = _loop
    if loop is not None and loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
