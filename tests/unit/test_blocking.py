"""The blocking facade's machinery (``fastmq._blocking``): a call crosses to the background loop
and back with its result, its error, or a timeout that cancels what it started."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from fastmq import _blocking


def test_call_returns_raises_and_times_out() -> None:
    async def add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    async def fail() -> None:
        raise KeyError("nope")

    assert _blocking.call(add(2, 3), 5) == 5
    with pytest.raises(KeyError):
        _blocking.call(fail(), 5)

    stopped = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        _blocking.call(forever(), 0.2)
    assert time.monotonic() - t0 < 5
    assert stopped.wait(5)  # the coroutine was cancelled on the loop, not left running


def test_outcome_and_submit() -> None:
    outcome: _blocking.Outcome[int] = _blocking.Outcome()
    _blocking.submit(outcome, 7, None)
    assert outcome.wait(5) == 7
    failed: _blocking.Outcome[int] = _blocking.Outcome()
    _blocking.submit(failed, None, ValueError("bad"))
    _blocking.submit(failed, 1, None)  # a second outcome is ignored
    with pytest.raises(ValueError, match="bad"):
        failed.wait(5)
    with pytest.raises(TimeoutError):
        _blocking.Outcome().wait(0.05)


def test_no_blocking_call_from_the_loop_itself() -> None:
    async def inner() -> str:
        async def never_run() -> None:
            raise AssertionError("ran")
        coro = never_run()
        try:
            _blocking.call(coro, 1)
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert "use fastmq.aio there" in _blocking.call(inner(), 5)
