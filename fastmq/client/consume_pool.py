"""The threads a push consumer runs plain-function listeners on (RocketMQ's consumeExecutor).

Work goes to the threads through one ``queue.SimpleQueue`` and each outcome comes back to the
event loop through an outbox: a deque the threads append to, emptied by one callback on the loop
(``call_soon_threadsafe``) that a thread schedules only when none is pending. A consumed batch
costs a queue put and get and a deque append and pop; outcomes that finish while the loop is busy
share one wake-up of the loop and one callback (a callback and a wake-up each cost the loop a
few thousand instructions, and the threads a write to the loop's self-pipe). ``loop.run_in_executor``
cost a Task for the batch's coroutine, a concurrent future wrapped in an asyncio one and their
callbacks on top of that, and held plain listeners to about a sixth of what an ``async def``
listener consumed.

Threads start on demand up to ``max_threads``, as ThreadPoolExecutor starts them: a new one only
when no started thread is idle. A push consumer starts them all at once when it starts
(:meth:`ConsumePool.prestart`), which is where RocketMQ's pool of ``consumeThreadMin`` core
threads stands after its first messages: ``Thread.start`` waits until the new thread runs, and on
the event loop, between two messages, that wait held up everything behind it (issue 18: the e2e
probe, benchmarks/e2e_tail_probe.py, caught the consumer's loop stalled in it for milliseconds at
a time on a busy machine, with threads still being added 14 s into a steady 1,000 msgs/s).
"""
from __future__ import annotations

import asyncio
import collections
import queue
import threading
from typing import Any, Callable

__all__ = ["ConsumePool"]

Done = Callable[..., None]  # done(result, error), or done(ctx, result, error) when submitted with a ctx
_NO_CTX: Any = object()


class _Outbox:
    """The outcomes waiting for one loop: ``(done, ctx, result, error)`` appended by the threads,
    run on the loop by :meth:`empty`.

    A thread appends first and then schedules :meth:`empty` unless one is pending; ``empty``
    clears ``pending`` first and then pops, so an outcome is never left behind (at worst a
    thread schedules one call too many, which finds the deque empty)."""

    __slots__ = ("loop", "items", "pending")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.items: collections.deque[tuple[Done, Any, Any, BaseException | None]] = collections.deque()
        self.pending = False

    def empty(self) -> None:
        self.pending = False
        items = self.items
        while items:
            done, ctx, result, error = items.popleft()
            try:
                if ctx is _NO_CTX:
                    done(result, error)
                else:
                    done(ctx, result, error)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:  # as the loop does for a callback of its own
                self.loop.call_exception_handler({"message": f"Exception in consume pool callback {done!r}",
                                                  "exception": exc})


class ConsumePool:
    def __init__(self, max_threads: int, name: str) -> None:
        if max_threads < 1:
            raise ValueError(f"consume threads must be at least 1, not {max_threads}")
        self.max_threads = max_threads
        self.name = name
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Done, Any, _Outbox] | None] = \
            queue.SimpleQueue()
        self._outbox: _Outbox | None = None  # that of the loop work was last submitted from
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...], done: Done, ctx: Any = _NO_CTX) -> None:
        """Run ``fn(*args)`` on a pool thread; ``done(result, error)`` then runs on this loop, or
        ``done(ctx, result, error)`` when a ``ctx`` is given (what a ``functools.partial`` would
        carry, without one made and called per submit)."""
        if self._closed:
            raise RuntimeError(f"{self.name}: the consume pool is shut down")
        box = self._outbox
        loop = asyncio.get_running_loop()
        if box is None or box.loop is not loop:  # (a consumer's pool serves one loop; a test's may see several)
            box = self._outbox = _Outbox(loop)
        self._queue.put((fn, args, done, ctx, box))
        # idle threads are counted only while the pool may still grow: once every thread is
        # started, the count would buy nothing and cost the loop a Python-level Condition per
        # batch, whose lock it may have to wait for while a pool thread that holds it waits for
        # the interpreter lock
        if len(self._threads) < self.max_threads and not self._idle.acquire(blocking=False):
            self._start_thread()

    def prestart(self) -> int:
        """Start every thread the pool may have now (ThreadPoolExecutor's prestartAllCoreThreads),
        so that no later :meth:`submit` waits for one to start; returns how many were started."""
        started = 0
        if self._closed:  # (submit says so, if anything is ever submitted)
            return started
        while len(self._threads) < self.max_threads:
            self._start_thread()
            started += 1
        return started

    def _start_thread(self) -> None:
        t = threading.Thread(target=self._work, name=f"{self.name}_{len(self._threads) + 1}", daemon=True)
        self._threads.append(t)
        t.start()

    def run(self, fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        """``fn(*args)`` on a pool thread, as a future of this loop."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(result: Any, error: BaseException | None) -> None:
            if fut.cancelled():
                return
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(result)
        self.submit(fn, args, done)
        return fut

    def shutdown(self) -> None:
        """Stop taking work; each thread ends after its current call (work still queued is
        dropped: its messages were never committed, so they come again)."""
        self._closed = True
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        for _ in self._threads:
            self._queue.put(None)

    def _work(self) -> None:
        q = self._queue
        while True:
            item = q.get()
            if item is None:
                return
            fn, args, done, ctx, box = item
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to ``done``, on the loop
                result, error = None, exc
            box.items.append((done, ctx, result, error))
            if not box.pending:
                box.pending = True
                try:
                    box.loop.call_soon_threadsafe(box.empty)
                except RuntimeError:  # the loop is closed: nobody is left to tell
                    return
            if len(self._threads) < self.max_threads:
                self._idle.release()
