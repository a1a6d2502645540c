"""The threads a push consumer runs plain-function listeners on (RocketMQ's consumeExecutor).

Work goes to the threads through one ``queue.SimpleQueue`` and each outcome comes back to the
event loop with ``call_soon_threadsafe``: a consumed batch costs a queue put and get and one
callback on the loop. ``loop.run_in_executor`` cost a Task for the batch's coroutine, a
concurrent future wrapped in an asyncio one and their callbacks on top of that, and held plain
listeners to about a sixth of what an ``async def`` listener consumed.

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
import queue
import threading
from typing import Any, Callable

__all__ = ["ConsumePool"]

Done = Callable[[Any, BaseException | None], None]


class ConsumePool:
    def __init__(self, max_threads: int, name: str) -> None:
        if max_threads < 1:
            raise ValueError(f"consume threads must be at least 1, not {max_threads}")
        self.max_threads = max_threads
        self.name = name
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Done,
                                             asyncio.AbstractEventLoop] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...], done: Done) -> None:
        """Run ``fn(*args)`` on a pool thread; ``done(result, error)`` then runs on this loop."""
        if self._closed:
            raise RuntimeError(f"{self.name}: the consume pool is shut down")
        self._queue.put((fn, args, done, asyncio.get_running_loop()))
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
            fn, args, done, loop = item
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to ``done``, on the loop
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(done, result, error)
            except RuntimeError:  # the loop is closed: nobody is left to tell
                return
            if len(self._threads) < self.max_threads:
                self._idle.release()
