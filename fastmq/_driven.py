"""An event loop that runs in the thread of whoever is waiting on it: the blocking Producer's machinery.

Profiled (issue 18, benchmarks/results/profiles/README.md): a blocking ``send`` that hands its
work to a background loop thread and waits for that thread's answer spends its time asleep, in
the two thread wake-ups of every call (the caller's hand-over, the loop's answer), and on a busy
2-core machine each wake-up waits for a CPU. So here the caller's thread runs the loop itself
while it waits: a send is written, its answer read and its result returned by one thread, as a
single-threaded asyncio program does.

The loop is a plain asyncio loop: uvloop sets up its signal self-pipe (a socketpair) each time
``run_forever`` starts in the main thread, ~100 µs, once per call here.

Who runs the loop (the *driver*) at any moment:

- a user thread inside a blocking call, which takes the loop when nobody runs it, or asks the
  background thread to give it up and waits for that (one hand-over, as a call used to cost);
- this loop's background thread, when no user thread has driven for GRACE_S (so timers,
  heartbeats and answers to sends already made go on while the program does other things), or
  at once when a thread waits for work another thread's drive is running. While sends wait for
  answers (``awaiting``) it looks as that grace ends, not at its backed-off pace: a sender
  waiting for its own sends' callbacks (a semaphore they release) has nobody else to read them.

A user thread that finds another user thread driving hands its work over as before (the driver's
loop runs it) and waits; whoever stops driving while such threads wait wakes the background
thread, and the background thread also looks every GRACE_S, so such work never waits for a
user's next call.

Why nothing handed over waits for ever: a wake-up of the background thread may be missed (a
thread gives the loop back just before another hands work over), but the background thread also
looks every POLL_MAX_S at most and takes a loop nobody drives, so a miss costs a delay, never a
stall. What must never happen is work with no turn scheduled to run it: each queue (``_posted``,
``_crossed``, the callbacks' batch) has its turn on the loop from the moment it is non-empty, and
a turn cut short by a BaseException (KeyboardInterrupt, SystemExit) puts what it did not run back
with a turn; a caller's drive refuses a loop already running (as run_forever does) rather than
run it from two threads.

A lone call (its request written straight to a socket, nothing else ready on the loop, no timer
due) first waits on that one socket and the loop's wake-up pipe with ``poll``, and runs the
socket's own reader when the answer is there: what one turn of the loop would have run, without
the turn (its selector bookkeeping, the reader's Handle queued and popped, a second
running-loop switch). Anything else (another thread's hand-over waking the loop, a timer coming
due, no answer within LONE_SLICE_S, an answer that did not end the call) goes back to driving
the loop as before, so the direct wait changes what runs first, never what runs.

User callbacks (``send_async``'s) never run on a user's thread inside its own call (where a lock
it holds could deadlock them): they go, in order, to one callback thread per loop
(:class:`Callbacks`).
"""
from __future__ import annotations

import asyncio
import functools
import logging
import math
import queue
import select
import threading
import time
from typing import Any, Callable, Coroutine, Iterator, TypeVar

from ._ext.produce import SendWindow
from .remoting.connection import LONE_WRITE, Connection
from .remoting.loop import relay_outcome

__all__ = ["DrivenLoop", "Callbacks", "Closed", "LOOP_ITSELF", "GRACE_S", "POLL_MAX_S", "TURN_EVERY", "CALLBACK_BATCH"]

log = logging.getLogger("fastmq")
T = TypeVar("T")
Callback = Callable[[Any, BaseException | None], None]

#: How long the loop may stand still after a user thread stopped driving before the background
#: thread runs it: short enough for answers and timers not to wait noticeably, long enough that a
#: thread calling in a tight loop is back before the background thread takes the loop (taking it
#: back costs a hand-over).
GRACE_S = 0.001
#: The longest the background thread waits between looks while user threads drive: how late, at
#: worst, it takes over from a thread that drove without a pause for a while and then stopped.
POLL_MAX_S = 0.01
#: Calls a driving ``post`` queues before it runs one turn of the loop (writes, reads, answers).
TURN_EVERY = 32
#: Callbacks a sender's turns gather before they wake the callback thread (see Callbacks._hand_over).
CALLBACK_BATCH = 256
#: Calls the loop runs per turn from other threads' hand-overs (as _blocking.SUBMIT_BATCH).
CROSS_BATCH = 256
#: The longest a lone call waits on its one connection's socket (see DrivenLoop._await_lone)
#: before it drives the whole loop: how late, at worst, the loop's other sockets are read.
LONE_SLICE_S = 0.01

LOOP_ITSELF = "blocking fastmq call made from the fastmq loop itself; use fastmq.aio there"


class Closed(RuntimeError):
    """The loop was closed (its producer shut down)."""


class Callbacks:
    """One thread running user callbacks in the order they were put. Callbacks put during one
    turn of the loop reach that thread together, at the end of the turn: one wake-up of it per
    turn, not per callback (each wake-up is a thread asking for the GIL). A sending thread's own
    turns (``defer``) gather up to CALLBACK_BATCH before they wake it."""

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self._name = name
        self._loop = loop
        self._q: queue.SimpleQueue[list[tuple[Callback, Any, BaseException | None]] | None] = queue.SimpleQueue()
        #: the batch put since the last hand-over, its counters (queued, places of a window held
        #: by its callbacks), and the owner's window of sends (opened by a blocking Producer): a
        #: compiled object, so that a send's place and its callback's hand-back are one C call
        #: each (see SendWindow.take, put_releasing)
        self.window = SendWindow(self._first)
        # what gives a window's places back: once per hand-over rather than a locked release per callback
        self.release: Callable[[int], None] | None = None
        self._ran = 0
        #: set by the loop's driver while a sender's turn runs (see _hand_over)
        self.defer = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        #: ``put(fn, result, error)``: queue ``fn(result, error)``; called on the loop (by its driver)
        self.put: Callable[[Callback, Any, BaseException | None], None] = self.window.put_plain
        #: ``put_releasing(fn, result, error)``: :attr:`put`, for a send that holds a place of the
        #: window ``release`` gives back: the place is given back once the callback is queued (so a
        #: send it lets in calls back after this one), together with the batch's others
        self.put_releasing: Callable[[Callback, Any, BaseException | None], None] = self.window.put_releasing

    # (read by tests and diagnostics: the batch and its counters live in the window)
    @property
    def _batch(self) -> list[tuple[Callback, Any, BaseException | None]]:
        return self.window.batch

    @property
    def _put(self) -> int:
        return self.window.queued

    @property
    def _held(self) -> int:
        return self.window.held

    def _first(self) -> None:
        # the batch's first callback: its hand-over gets a turn
        self._loop.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        window = self.window
        if self.defer and len(window.batch) < CALLBACK_BATCH:
            # a sender's own turn (DrivenLoop.post): it turns again after its next posts, so
            # the batch waits for more rather than waking the callback thread (and handing it
            # the GIL) every turn; any other drive hands it over
            self._loop.call_soon(self._hand_over)
            return
        if not window.batch:  # handed over already by flush()
            return
        batch, held = window.swap()
        try:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=f"{self._name}-callbacks", daemon=True)
                self._thread.start()
            self._q.put(batch)
        finally:  # (even if the thread could not start: a window's places are never lost)
            if held and self.release is not None:
                self.release(held)

    def flush(self) -> None:
        """Hand the callbacks put in this turn over now (by the loop's driver, as it stops)."""
        if self.window.batch:
            self._hand_over()

    def wait_drained(self, timeout: float) -> None:
        """Return once every callback put so far has run (at most ``timeout`` s): what completed
        before a blocking call's own send has been told before the call returns."""
        target = self.window.queued
        if self._ran >= target or threading.current_thread() is self._thread:
            return
        with self._cond:
            self._cond.wait_for(lambda: self._ran >= target, timeout)

    def close(self, timeout: float) -> None:
        """Run what is queued, then stop the thread (the loop has run its last turn)."""
        self.flush()
        t = self._thread
        if t is not None:
            self._q.put(None)
            if t is not threading.current_thread():
                t.join(timeout)

    def _work(self) -> None:
        q = self._q
        while True:
            batch = q.get()
            if batch is None:
                return
            for fn, result, error in batch:
                try:
                    fn(result, error)
                except BaseException:  # a user's callback: reported, and the next ones still run
                    # (BaseException too: a SystemExit raised in one would otherwise end this
                    # thread, and every later callback would wait for ever)
                    log.exception("%s: send callback %r raised", self._name, fn)
            with self._cond:
                self._ran += len(batch)
                self._cond.notify_all()


class DrivenLoop:
    """An asyncio loop run by the thread waiting on it (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.callbacks = Callbacks(name, self.loop)
        self._name = name
        self._drive = threading.Lock()  # held by whoever runs the loop
        self._mutex = threading.Lock()  # the counters below
        self._driver = 0  # ident of the thread holding _drive, 0 when nobody does
        self._bg_driving = False
        self._wanted = 0  # user threads asking the background thread to give the loop up
        self._waiters = 0  # user threads waiting on work another thread's drive runs
        self._released = time.monotonic()
        # when the caller's post runs a turn for the calls in _posted, whatever their number
        # (_released plus grace_s, as the first of them was posted: see post)
        self._turn_by = self._released
        # by drivers, for the next turn: (fn, args tuple) of post, (run, items list) of post_batched
        self._posted: list[tuple[Callable[..., Any], Any]] = []
        self._crossed: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._cross_scheduled = False
        self._wake = threading.Event()
        self._closed = False
        # the timer that bounds a call's drive (see _arm_guard), and whether a call drives now
        self._guard: asyncio.TimerHandle | None = None
        self._guard_at = 0.0
        self._calling = False
        # asyncio's own loop, whose run_forever a caller's drive may skip (see _run_until_stopped)
        self._lean = (type(self.loop).run_forever is asyncio.BaseEventLoop.run_forever
                      and hasattr(self.loop, "_run_once"))
        #: this loop's GRACE_S and POLL_MAX_S (a harness may lengthen them for one loop; changing
        #: the module's would stall every other loop of the process)
        self.grace_s = GRACE_S
        self.poll_max_s = POLL_MAX_S
        #: True while calls handed to the loop wait for answers that only a drive reads (set by
        #: the owner, e.g. the blocking Producer's send window); the background thread then
        #: looks as soon as a stopped driver's grace ends instead of backing off
        self.awaiting: Callable[[], bool] | None = None
        self.defer_callbacks = True
        #: socket reads run by the direct wait of lone calls (see _await_lone)
        self.lone_reads = 0
        # the selector's table of registered descriptors (the direct wait runs a socket's reader
        # from it), the loop's wake-up pipe, and a poll object over that pipe and the descriptor
        # of the connection last waited on
        sel = getattr(self.loop, "_selector", None)
        self._fd_to_key: dict[int, Any] | None = getattr(sel, "_fd_to_key", None)
        ssock = getattr(self.loop, "_ssock", None)
        self._poller: Any = None
        self._poll_fd = -1
        if self._lean and isinstance(self._fd_to_key, dict) and ssock is not None and hasattr(select, "poll"):
            self._poller = select.poll()
            self._poller.register(ssock.fileno(), select.POLLIN)
        self._thread = threading.Thread(target=self._background, name=f"{name}-loop", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ driving

    def _take(self) -> bool:
        """Become the loop's driver: True, or False when another user thread drives it (or this
        thread runs an asyncio loop of its own, which cannot run a second one)."""
        me = threading.get_ident()
        if self._driver == me:
            raise RuntimeError(LOOP_ITSELF)
        if self._closed:
            raise Closed(f"{self._name}: closed")
        if asyncio._get_running_loop() is not None:
            return False
        if self._drive.acquire(blocking=False):
            self._driver = me
            return True
        with self._mutex:
            if not self._bg_driving:
                return False
            self._wanted += 1
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
            while not self._drive.acquire(timeout=self.grace_s * 10):
                with self._mutex:  # (the background thread changes both under it, not at once)
                    if not self._bg_driving and self._driver != 0:
                        return False  # another user thread took it meanwhile: hand over to it
        finally:
            with self._mutex:
                self._wanted -= 1
        self._driver = me
        return True

    def _give_back(self) -> None:
        self._driver = 0
        self._released = time.monotonic()
        self._drive.release()
        if self._waiters:
            self._wake.set()

    def _turn(self) -> None:
        """One pass of the loop, without waiting for anything (a stale stop request only ends
        a run_forever sooner, and this one ends after one pass anyway)."""
        loop = self.loop
        loop.call_soon(loop.stop)
        self._run_until_stopped()

    def _background(self) -> None:
        loop, me = self.loop, threading.get_ident()
        interval = self.grace_s
        while True:
            self._wake.wait(interval)
            self._wake.clear()
            if self._closed:
                return
            with self._mutex:
                idle = time.monotonic() - self._released
                take = not self._wanted and (self._waiters or idle >= self.grace_s)
                if not take or not self._drive.acquire(blocking=False):
                    awaiting = self.awaiting
                    if awaiting is not None and awaiting():
                        # Sends wait for answers only a drive reads: a sender that stops
                        # (waiting for those sends' callbacks, say) would otherwise wait for
                        # the backed-off look below. Look again as the grace ends.
                        interval = max(self.grace_s - idle, self.grace_s / 8)
                    else:
                        # A user thread drives: look again later, less often the longer it
                        # goes on (each look asks the driver for the GIL).
                        interval = min(interval * 2, self.poll_max_s)
                    continue
                self._bg_driving, self._driver = True, me
            interval = self.grace_s
            try:
                loop.run_forever()  # until a user thread asks for the loop, or close()
            except BaseException:  # nothing a callback raises reaches here; keep the loop served
                log.exception("%s: background drive failed", self._name)
            finally:
                with self._mutex:
                    self._bg_driving, self._driver = False, 0
                    self._released = time.monotonic()
                    self._drive.release()

    # ------------------------------------------------------------------ calls

    def call(self, start: Callable[[Callback], None], timeout: float) -> Any:
        """``start(callback)`` on the loop, and its ``callback(result, error)``'s result (or
        error raised), waiting at most ``timeout`` s (TimeoutError after). Callbacks of sends
        that ended before this one have run when it returns (waited for after the loop is given
        back: a callback may itself make a blocking call)."""
        if self._take():
            try:
                result, error = self._drive_callback(start, timeout)
            finally:
                self._give_back()
        else:
            from ._blocking import Outcome
            outcome: Outcome[Any] = Outcome()
            with self._mutex:
                self._waiters += 1
            try:
                self.cross(start, outcome)
                result, error = outcome.wait(timeout), None
            finally:
                with self._mutex:
                    self._waiters -= 1
        self.callbacks.wait_drained(timeout)
        if error is not None:
            raise error
        return result

    def _drive_callback(self, start: Callable[[Callback], None], timeout: float) -> tuple[Any, BaseException | None]:
        loop = self.loop
        box: list[tuple[Any, BaseException | None]] = []
        driving: list[bool] = []  # (a flag: loop.is_running() is a Python call per send)

        def done(result: Any, error: BaseException | None) -> None:
            if not box:
                box.append((result, error))
                if driving:  # (not when ``start`` failed at once, before the loop ran)
                    loop.stop()
        end = loop.time() + timeout
        if self._posted or self._crossed:
            driving.append(True)
            loop.call_soon(start, done)  # after what was handed over before it (send order)
        else:
            # Started here rather than in the loop's first turn (a turn is an epoll call and the
            # loop's bookkeeping, per send): as the loop's driver this thread may run its code,
            # with the loop set as running so that what ``start`` schedules lands on it.
            asyncio._set_running_loop(loop)
            try:
                LONE_WRITE[0] = None
                start(done)
                lone = LONE_WRITE[0]
                if lone is not None and not box and self._poller is not None:
                    LONE_WRITE[0] = None
                    conn = lone()
                    if conn is not None:
                        self._await_lone(conn, end)
            finally:
                asyncio._set_running_loop(None)
            driving.append(True)
        self._calling = True
        try:
            while not box:
                if self._guard is None or self._guard_at > end:
                    self._arm_guard(end)
                self._run_until_stopped()
                if not box and loop.time() >= end:
                    raise TimeoutError(f"fastmq call did not finish within {timeout}s")
        finally:
            self._calling = False
        if self.callbacks.window.batch:
            self.callbacks.flush()
        return box[0]

    def _await_lone(self, conn: Connection, end: float) -> None:
        """Wait on ``conn``'s socket (and the loop's wake-up pipe) for the answer to the request
        just written to it, and run the socket's reader when it is readable; called by the driver,
        with the loop set as running. Returns having done nothing whenever the loop has anything
        else to do first: the caller's drive then runs the loop as before."""
        loop = self.loop
        fd = conn.fileno
        if conn._loop is not loop or conn.closed or fd < 0 or loop._ready:  # type: ignore[attr-defined]
            return
        key = self._fd_to_key.get(fd)  # type: ignore[union-attr]  # (set whenever _poller is)
        if key is None:
            return
        reader, writer = key.data
        # reading (a reader registered) and nothing left unwritten (no writer): the request is out
        if reader is None or writer is not None or reader._cancelled:
            return
        until = end
        scheduled = loop._scheduled  # type: ignore[attr-defined]
        if scheduled and scheduled[0]._when < until:
            until = scheduled[0]._when
        wait = min(until - time.monotonic(), LONE_SLICE_S)  # (asyncio's loop clock)
        if wait <= 0:
            return
        poller = self._poller
        if fd != self._poll_fd:
            if self._poll_fd >= 0:
                poller.unregister(self._poll_fd)
            poller.register(fd, select.POLLIN)
            self._poll_fd = fd
        # (the selector's table and the reader cannot change meanwhile: nothing runs the loop
        # while this thread holds the drive)
        for ready, _ in poller.poll(math.ceil(wait * 1000)):
            if ready == fd:
                loop._thread_id = threading.get_ident()  # type: ignore[attr-defined]  # (as run_forever's)
                try:
                    reader._run()  # as the loop's turn runs it (its context, its error reporting)
                finally:
                    loop._thread_id = None  # type: ignore[attr-defined]
                self.lone_reads += 1
                return

    def _run_until_stopped(self) -> None:
        """``loop.run_forever()`` for a user thread's drive (a call's, a turn's), leaner on asyncio's own loop.

        Its passes are run_forever's (``_run_once`` until ``stop()``, the loop set as this
        thread's running loop and its ``_thread_id`` set); what it leaves out is what run_forever
        does on entry and exit for code a call's drive never runs: the checks that the loop is
        open and not running elsewhere (this thread holds the drive, and the loop closes only
        under it), coroutine origin tracking (debug mode only: then run_forever itself runs), and
        installing the loop's async-generator hooks in this thread and restoring the caller's
        (fastmq runs no async generator on a producer's loop). Measured with valgrind: those
        cost ~13,000 instructions a drive, a tenth of a blocking send."""
        loop = self.loop
        if not self._lean or loop._debug:  # type: ignore[attr-defined]
            loop.run_forever()
            return
        if loop._thread_id is not None:  # type: ignore[attr-defined]
            # run_forever's own check, kept: two threads in _run_once at once would lose or
            # repeat callbacks silently, where this raises
            raise RuntimeError("This event loop is already running")
        run_once = loop._run_once  # type: ignore[attr-defined]
        loop._thread_id = threading.get_ident()  # type: ignore[attr-defined]  # (is_running() stays true)
        asyncio._set_running_loop(loop)
        try:
            while True:
                run_once()
                if loop._stopping:  # type: ignore[attr-defined]
                    break
        finally:
            loop._stopping = False  # type: ignore[attr-defined]
            loop._thread_id = None  # type: ignore[attr-defined]
            asyncio._set_running_loop(None)

    def _arm_guard(self, at: float) -> None:
        """Have the loop stop by ``at`` (loop clock) while a call drives it.

        The guard is left armed when a call returns and serves the next calls too, whose ends
        are later (it stops their drive early, and they arm a new one): a timer made, pushed and
        cancelled per call cost a blocking send more than its frame's encoding."""
        if self._guard is not None:
            self._guard.cancel()
        self._guard_at = at
        self._guard = self.loop.call_at(at, self._guard_fired)

    def _guard_fired(self) -> None:
        self._guard = None
        if self._calling:  # (not the background thread's drive: nothing bounds that one)
            self.loop.stop()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop and return its result (TimeoutError after ``timeout`` s, the
        coroutine then cancelled)."""
        try:
            drive = self._take()
        except BaseException:
            coro.close()  # never to run: not to be reported as never awaited
            raise
        if not drive:
            def start(cb: Callback) -> None:
                task = asyncio.ensure_future(coro)
                task.add_done_callback(functools.partial(relay_outcome, cb))
                self.loop.call_at(self.loop.time() + timeout, task.cancel)
            try:
                return self.call(start, timeout + 1.0)  # type: ignore[no-any-return]
            except asyncio.CancelledError:
                raise TimeoutError(f"fastmq call did not finish within {timeout}s") from None
        try:
            loop = self.loop
            task = loop.create_task(coro)
            task.add_done_callback(lambda _t: loop.stop())
            timed_out: list[bool] = []

            def expire() -> None:
                timed_out.append(True)
                task.cancel()
            guard = loop.call_at(loop.time() + timeout, expire)
            try:
                while not task.done():
                    loop.run_forever()
            finally:
                guard.cancel()
            if timed_out and task.cancelled():
                raise TimeoutError(f"fastmq call did not finish within {timeout}s")
            return task.result()
        finally:
            self._give_back()

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Have the loop call ``fn(*args)`` soon, in order, without waiting for it. The driving
        caller runs a turn of the loop once TURN_EVERY posts have gathered, or once the first of
        them has waited ``grace_s``; the rest wait for the next turn (a user's next call, or the
        background thread within GRACE_S).

        The time bound is for a caller that posts more often than ``grace_s`` but fewer than
        TURN_EVERY in it (a send_async every 100 µs, say): the background thread never finds
        the loop idle for its grace, so without it a send waited for the TURN_EVERY-th post
        after it (3.2 ms at 10,000 a second, 29 ms at 1,100), and its frame for the turn after
        that (issue 33: 4.7 ms from send_async to the socket at 10,000 a second, measured by
        benchmarks/probes/e2e_hops.py; 0.8 ms with the bound). The clock read is the one
        ``_give_back`` already made (when the caller's previous call gave the loop back): no
        clock read of its own per post."""
        drive = self._drive
        # _take's common case inline (nobody drives: the lock is free), _give_back's below: two
        # Python calls less per post. Anything else (closed, this thread driving already, an
        # asyncio loop running in this thread, the lock held) is _take's to judge.
        if not self._closed and asyncio._get_running_loop() is None and drive.acquire(False):
            self._driver = threading.get_ident()
        elif not self._take():
            self.cross(fn, *args)
            return
        try:
            if self._crossed:
                # Handed-over calls are still waiting, and one may be this thread's own earlier
                # post (made while another thread drove); a turn of _run_posted already queued
                # would run this one before it. Behind them it keeps each thread's order.
                self.cross(fn, *args)
                return
            posted = self._posted
            posted.append((fn, args))  # (a list append: a Handle a call cost more than the call)
            if len(posted) == 1:
                self.loop.call_soon(self._run_posted)
                # (_released: about now for a caller posting on; see above)
                self._turn_by = self._released + self.grace_s
            if len(posted) >= TURN_EVERY or self._released >= self._turn_by:
                self._sender_turn()
        finally:
            # (_give_back, inline)
            self._driver = 0
            self._released = time.monotonic()
            drive.release()
            if self._waiters:
                self._wake.set()

    def post_batched(self, run: Callable[[list[Any]], None], item: Any) -> None:
        """:meth:`post` of ``run([item])``, except that items posted one after another for the
        same ``run`` (nothing else posted between them) share one call: ``run(items)``, in
        posting order. A batch's items count as posts for TURN_EVERY. For a hot caller (the blocking
        Producer's send_async): one Python call per batch on the loop, where ``post`` makes one
        per item. ``run`` handles each item's own errors; a BaseException it raises must leave in
        ``items`` those it did not run (they go back with a turn, as ``post``'s calls do)."""
        drive = self._drive
        # (post's lock handling, inline as there: see it)
        if not self._closed and asyncio._get_running_loop() is None and drive.acquire(False):
            self._driver = threading.get_ident()
        elif not self._take():
            self.cross(run, [item])
            return
        try:
            if self._crossed:
                self.cross(run, [item])  # behind handed-over calls, as post does
                return
            posted = self._posted
            if posted and posted[-1][0] is run:
                items = posted[-1][1]
                items.append(item)
            else:
                # (args a list, not post's tuple: _run_posted hands it over whole)
                items = [item]
                posted.append((run, items))
                if len(posted) == 1:
                    self.loop.call_soon(self._run_posted)
                    self._turn_by = self._released + self.grace_s
            # (the batch's items count as TURN_EVERY's posts; not a counter of all posts: one
            # more attribute would take this object's __dict__ past the 29 keys CPython shares
            # between instances, and every attribute read here would be slower)
            if len(items) >= TURN_EVERY or len(posted) >= TURN_EVERY or self._released >= self._turn_by:
                self._sender_turn()
        finally:
            self._driver = 0
            self._released = time.monotonic()
            drive.release()
            if self._waiters:
                self._wake.set()

    def _sender_turn(self) -> None:
        """A posting driver's turn (see post): the posted calls, then one pass of the loop."""
        callbacks = self.callbacks
        callbacks.defer = self.defer_callbacks
        try:
            # The posted calls run before the turn's pass, not in it: what they schedule
            # (a connection's flush of the frames they queued) then runs in this pass,
            # where it used to wait for the next turn (another TURN_EVERY posts)
            asyncio._set_running_loop(self.loop)
            try:
                self._run_posted()
            finally:
                asyncio._set_running_loop(None)
            self._turn()
        finally:
            callbacks.defer = False

    def _run_posted(self) -> None:
        posted, self._posted = self._posted, []
        calls = iter(posted)
        fn: Any = None
        args: Any = ()
        try:
            for fn, args in calls:
                try:
                    if type(args) is list:  # post_batched's: the batch, whole
                        fn(args)
                    else:
                        fn(*args)
                except Exception as exc:  # as the loop reports a failing callback; the rest still run
                    self.loop.call_exception_handler({"message": f"fastmq posted call {fn!r} failed", "exception": exc})
        except BaseException:
            # (KeyboardInterrupt, SystemExit): what is left goes back first, with its turn
            # scheduled, rather than lost with the batch (a batch's unrun items with it)
            rest = list(calls)
            if type(args) is list and args:
                rest.insert(0, (fn, args))
            if rest:
                if not self._posted:
                    self.loop.call_soon(self._run_posted)
                self._posted[:0] = rest
            raise

    def _run_each(self, calls: Iterator[tuple[Callable[..., Any], tuple[Any, ...]]], what: str) -> None:
        for fn, args in calls:
            try:
                fn(*args)
            except Exception as exc:  # as the loop reports a failing callback; the rest still run
                self.loop.call_exception_handler({"message": f"fastmq {what} call {fn!r} failed", "exception": exc})

    def cross(self, fn: Callable[..., Any], *args: Any) -> None:
        """Hand ``fn(*args)`` to whichever thread runs the loop: one wake-up per batch, at most
        CROSS_BATCH calls a turn (a burst must not keep the loop from its sockets)."""
        with self._mutex:
            self._crossed.append((fn, args))
            if self._cross_scheduled:
                return
            self._cross_scheduled = True
        self.loop.call_soon_threadsafe(self._run_crossed)

    def _run_crossed(self) -> None:
        with self._mutex:
            batch, self._crossed = self._crossed[:CROSS_BATCH], self._crossed[CROSS_BATCH:]
        calls = iter(batch)
        try:
            self._run_each(calls, "handed-over")
        except BaseException:
            # (KeyboardInterrupt, SystemExit): what is left goes back first, and a turn stays
            # scheduled for it; otherwise _cross_scheduled would stay set with no turn to clear
            # it, and every later hand-over would wait for ever
            with self._mutex:
                self._crossed[:0] = list(calls)
            self.loop.call_soon(self._run_crossed)
            raise
        with self._mutex:
            if not self._crossed:
                self._cross_scheduled = False
                return
        self.loop.call_soon(self._run_crossed)  # the next turn, after the loop has read its sockets

    # ------------------------------------------------------------------ end

    def close(self, timeout: float = 5.0) -> None:
        """Stop the background thread, run what is still queued (so every send handed over gets
        its answer or error), close the loop and then the callback thread. Idempotent."""
        me = threading.get_ident()
        if self._driver == me:
            raise RuntimeError(LOOP_ITSELF)
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._drive.acquire(timeout=timeout):
            log.warning("%s: loop still driven after %ss; left open", self._name, timeout)
            return
        self._driver = me
        try:
            loop = self.loop
            for _ in range(8):  # connection_lost, failed sends' callbacks, handed-over calls
                self._turn()
                if not loop._ready:  # type: ignore[attr-defined]  # (asyncio's own loop: this is its run queue)
                    break
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        finally:
            self._driver = 0
            self._drive.release()
        self.callbacks.close(timeout)
