"""The event loop fastmq runs on: uvloop when it is installed, asyncio's own otherwise.

uvloop's transports cost a fraction of the default loop's per read and write, which is most of a
broker's per-frame overhead; ``FASTMQ_NO_UVLOOP=1`` turns it off (for debugging, or to compare).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import os
from typing import Any, Callable, Coroutine, Generator, TypeVar

from ..errors import FastMQError

__all__ = ["new_event_loop", "run", "every", "USING_UVLOOP", "Resume", "run_eagerly", "relay_outcome"]

log = logging.getLogger("fastmq")

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


async def every(interval_s: float, fn: Callable[[], Any]) -> None:
    """Call ``fn`` (plain or async) every ``interval_s`` seconds until cancelled.

    A round that raises is logged and the timer goes on: one failed scan or flush must not stop
    the ones after it.
    """
    name = getattr(fn, "__qualname__", repr(fn))
    while True:
        await asyncio.sleep(max(0.05, interval_s))
        try:
            r = fn()
            if inspect.isawaitable(r):
                await r
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, FastMQError):
                log.warning("scheduled task %s failed: %s", name, exc)
            else:
                log.exception("scheduled task %s failed", name)


class Resume:
    """The rest of a coroutine whose first step already ran by hand and yielded ``first``:
    awaiting this (in a Task) finishes it.

    Delegates like ``yield from``: the futures the coroutine waits on go up to the Task, and
    what the Task sends or throws back (its cancellation included) goes down to the coroutine.
    """

    __slots__ = ("coro", "first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self.coro, self.first = coro, first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, pending = self.coro, self.first
        while True:
            try:
                value = yield pending
            except BaseException as exc:  # noqa: BLE001 - cancellation included: the coroutine decides
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = coro.send(value)
                except StopIteration as stop:
                    return stop.value


def run_eagerly(coro: Coroutine[Any, Any, T]) -> Any:
    """Run ``coro`` now; its result if it finished without waiting, else a :class:`Resume` to
    await for the rest (what Python 3.12's eager tasks do, without a Task for the quick case)."""
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return stop.value
    return Resume(coro, first)



def relay_outcome(callback: Callable[[Any, BaseException | None], None], task: "asyncio.Future[Any]",
                  result: bool = True) -> None:
    """A finished task (or future) to ``callback(result, error)``: its result, its exception, or a
    CancelledError; with ``result`` False only a failure is passed on. For add_done_callback."""
    if task.cancelled():
        callback(None, asyncio.CancelledError())
    elif task.exception() is not None:
        callback(None, task.exception())
    elif result:
        callback(task.result(), None)
