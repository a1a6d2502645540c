"""SYNC_FLUSH's group commit: one ``fdatasync`` answers every waiter whose bytes it covers.

:class:`GroupCommitService` is RocketMQ's ``CommitLog.GroupCommitService``: a thread the
appenders wake, plus (fastmq's) the lone producer's sync on the event loop itself
(``syncFlushInlineMaxMicros``). :class:`~fastmq.store.commit_log.CommitLog` starts it under
SYNC_FLUSH and bridges asyncio callers through ``CommitLog.wait_flushed``.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import select
import sys
import threading
import time
import weakref
from typing import Protocol

import numpy as np

from .._ext.sync_wait import PAST_LIMIT, TIMED_OUT, wait_and_sync
from . import FlushTimeoutError
from .config import MessageStoreConfig
from .mapped_file_queue import MappedFileQueue

__all__ = ["GroupCommitService"]

log = logging.getLogger("fastmq.store")


class FlushedLog(Protocol):
    """The log the service flushes: what it uses of :class:`fastmq.store.commit_log.CommitLog`
    (which imports this module, so it is described here rather than imported)."""

    config: MessageStoreConfig
    mfq: MappedFileQueue
    last_store_timestamp: int
    flushed_store_timestamp: int
    flush_times: int
    flush_micros: int

    @property
    def max_offset(self) -> int: ...

    @property
    def flushed_offset(self) -> int: ...

    def flush(self, least_pages: int = 0) -> int: ...


def _expire(fut: asyncio.Future[bool], offset: int, t: float) -> None:
    """A SYNC_FLUSH waiter's syncFlushTimeout ran out (a disk slower than that, or hung)."""
    if not fut.done():
        fut.set_exception(FlushTimeoutError(f"flush to offset {offset} not done within {t:.3f}s"))


_Waiter = tuple[int, "asyncio.Future[bool] | concurrent.futures.Future[bool]"]


class _LoopWaiters:
    """The waiters of one event loop; only that loop's thread touches ``pending``."""

    __slots__ = ("loop", "pending", "inline_due")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: list[_Waiter] = []
        self.inline_due = False  # an inline round is scheduled on the loop (it covers every waiter until it runs)


class GroupCommitService(threading.Thread):
    """SYNC_FLUSH with group commit: one fdatasync answers every waiter whose bytes it covers.

    Each round syncs everything appended before it starts (the log's write position is read
    when the sync begins), so waiters that queued while the previous sync ran share the next
    one. A request writes the end offset it needs into a shared cell and wakes the thread
    through an ``eventfd``; between requests it still flushes every 10 ms, as RocketMQ's does,
    so appends nobody waits for (WAIT=false, a slave's copy) reach the disk too. Event-loop
    waiters are settled on their loop with one ``call_soon_threadsafe`` per sync, however many
    they are; thread waiters (``request``) get concurrent futures set from this thread.

    Syncs on the event loop: while syncs are fast (the last took less than
    ``syncFlushInlineMaxMicros``), the thread is neither mid-round nor failing, and requests come
    one at a time (none of the last ``INLINE_QUIET_S`` covered several), the loop syncs itself and
    no thread is involved: :meth:`sync_now` for a caller at the end of its turn (the broker's
    send fast path: PutResult at once, no future), else :meth:`wait` schedules one
    ``call_soon`` round that runs after every callback ready in that turn and answers every
    waiter it covers. The loop is held for the sync (``fdatasync`` releases the GIL, not the
    loop), hence the bound; many producers keep the thread, whose syncs overlap the loop's work.
    A thread's idle round skips its sync while a loop syncs.

    One producer alone on the thread (the last round answered at most one waiter, and no request is queued
    when the thread comes back to wait) with every unflushed byte in the last file: the thread
    waits, reads the offset asked for and ``fdatasync``-s in one compiled call that never takes
    the GIL (:func:`~fastmq._ext.sync_wait.wait_and_sync`). A Python thread woken by a request
    first has to get the GIL back, which the event loop holds until it has finished the
    request that asked, so the sync used to start only then (benchmarks/results/profiles/
    README.md: four thread hand-overs in series per lone send).

    Many producers each with one send in flight get their answers together and send again
    one by one, a few hundred microseconds apart over a network: a round begun at the first
    of them would leave the rest to the next sync, and the producers split into groups that
    take turns. So when the last round answered more than one waiter, the thread lets the
    requests still coming in join (until none came for ``GATHER_QUIET_S``, at most a quarter
    of the last sync's time and ``GATHER_MAX_S``). One producer alone never waits.

    The general round's thread needs the GIL twice a round: to start the sync once woken, and
    to tell the waiters once it returned. While the event loop is busy (many producers) it waits for the
    interpreter's switch interval (up to 5 ms by default) each time: longer than the disk's own sync
    here (benchmarks/results/profiles/sync-flush-*: the broker's flush measured 4-6 ms a round
    beside a floor of ~1 ms). So while a service runs the interval is at most
    ``SWITCH_INTERVAL_S`` (process-wide; put back when the last running service stops, unless
    someone else changed it meanwhile).
    """

    IDLE_WAIT_S = 0.01
    GATHER_QUIET_S = 0.0001
    GATHER_MAX_S = 0.001
    SWITCH_INTERVAL_S = 0.0005
    INLINE_QUIET_S = 0.1
    _switch_lock = threading.Lock()
    _switch_users = 0  # services started and not yet stopped
    _switch_was: float | None = None  # the interval before the first of them lowered it

    def __init__(self, commit_log: FlushedLog) -> None:
        super().__init__(name="fastmq-group-commit", daemon=True)
        self.commit_log = commit_log
        # every request writes it (a lost wake-up is worse than a syscall); the thread's read
        # takes the count, so requests made during a sync leave it readable for the next round
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        # closed with the service, not at stop: a requester racing the stop must never write
        # to a descriptor number the process has given to another file since
        weakref.finalize(self, os.close, self._wake_fd)
        self._target = np.zeros(1, np.int64)  # the highest end offset asked for (written before the wake)
        self._stopping = False
        self._loops: dict[asyncio.AbstractEventLoop, _LoopWaiters] = {}
        self._threads: list[_Waiter] = []
        self._threads_lock = threading.Lock()
        self._failing = False
        self._arrivals = 0  # waiters ever queued (approximate across threads: a hint for _gather)
        self._arrivals_at_round = 0
        self._last_round_waiters = 0
        self._last_sync_s = 0.0
        self._lowered = False  # this service counts in _switch_users
        self._busy = False  # the thread is in a general round (an inline sync would only wait beside it)
        self._inline_busy = False  # a loop is in an inline sync (the thread's idle round need not sync too)
        self.flushes = 0  # rounds that synced, for tests: << waiters under load
        self.inline_flushes = 0  # of them, the syncs run on an event loop
        self._many_at = -1e9  # monotonic time of the last sign of many producers (see _inline_ok)

    def start(self) -> None:
        """Start the thread, with the GIL's switch interval lowered (see the class docstring)."""
        cls = GroupCommitService
        with cls._switch_lock:
            cls._switch_users += 1
            self._lowered = True
            was = sys.getswitchinterval()
            if was > self.SWITCH_INTERVAL_S:
                cls._switch_was = was
                sys.setswitchinterval(self.SWITCH_INTERVAL_S)
        super().start()

    # -- waiters -------------------------------------------------------------------------
    def wait(self, offset: int, loop: asyncio.AbstractEventLoop, weight: int = 1) -> asyncio.Future[bool]:
        """A future of ``loop`` (the running one) set to True once the log is on disk up to
        ``offset``, False if it never can be (past the log's end, or the service stopped),
        or failed with the sync's error. ``weight``: the requests this wait answers (more
        than one: many producers, whose syncs the thread shares out better)."""
        fut: asyncio.Future[bool] = loop.create_future()
        if self._stopping:
            fut.set_result(False)
            return fut
        holder = self._loops.get(loop)
        if holder is None:
            holder = self._loops[loop] = _LoopWaiters(loop)
        holder.pending.append((offset, fut))
        if holder.inline_due:  # appended before the scheduled round runs: it covers this one too
            return fut
        if self._inline_ok(weight):
            holder.inline_due = True
            loop.call_soon(self._inline_round, holder)
            return fut
        self._arrivals += 1
        self._signal(offset)
        return fut

    def sync_now(self, offset: int, weight: int = 1) -> bool | Exception | None:
        """Sync on the calling (event-loop) thread now, when the inline rules allow it.

        For a caller at the end of its loop turn with every record of the turn appended (the
        broker's send fast path runs there, see ``Dispatcher.run_gathered``): one request
        alone, with fast syncs, answers at once, without a future, a Task or a thread.

        Returns:
            True: ``offset`` is on disk; the sync's error if it failed (nothing known
            durable); None: not synced here (the rules said no), :meth:`wait` instead.
        """
        if not self._inline_ok(weight):
            return None
        error = self._sync_inline()
        self._last_round_waiters = weight
        if error is not None:
            return error
        return True if self.commit_log.flushed_offset >= offset else None

    def _inline_ok(self, weight: int) -> bool:
        """Whether the loop may sync itself: ``syncFlushInlineMaxMicros`` > the last sync's
        time, the thread neither mid-round nor failing, and one request at a time for the last
        ``INLINE_QUIET_S`` (many producers keep the thread, whose rounds overlap the loop's work:
        a sync on the loop stops it reading and appending meanwhile)."""
        if weight > 1 or self._last_round_waiters > 1:
            self._many_at = time.monotonic()
            return False
        return (not self._busy and not self._failing and not self._stopping
                and self._last_sync_s * 1e6 < self.commit_log.config.syncFlushInlineMaxMicros
                and time.monotonic() - self._many_at > self.INLINE_QUIET_S)

    def request(self, offset: int) -> concurrent.futures.Future[bool]:
        """:meth:`wait` for a caller on any thread, as a concurrent future."""
        fut: concurrent.futures.Future[bool] = concurrent.futures.Future()
        if self._stopping:
            fut.set_result(False)
            return fut
        with self._threads_lock:
            self._threads.append((offset, fut))
        self._arrivals += 1
        self._signal(offset)
        return fut

    def _signal(self, offset: int = 0) -> None:
        # The requester's bytes are appended before this, the target before the wake: the
        # thread reads the target after it took the wake, so the sync it starts covers them.
        target = self._target
        if offset > target[0]:
            # (thread requesters may race the check and leave a lower target: a waiter then
            # left out of a round is answered by the next, at the latest the 10 ms idle one)
            target[0] = offset
        os.eventfd_write(self._wake_fd, 1)

    # -- the thread ----------------------------------------------------------------------
    def run(self) -> None:
        while True:
            if self._stopping:  # (its wake may have been taken by the compiled wait)
                self._round(final=True)
                return
            # the compiled wait pays off when the thread will wait for the next request (one
            # producer, who sends again only once answered); requests already queued are many
            # producers', better gathered by the general round
            if (not self._stopping and self._last_round_waiters < 2 and self._arrivals == self._arrivals_at_round
                    and self._fast_round()):
                continue
            asked = self._wait_asked()
            if asked and not self._stopping:
                self._gather()
            stopping = self._stopping
            self._round(final=stopping, idle=not asked)
            if stopping:
                return

    def _wait_asked(self) -> bool:
        """Wait up to IDLE_WAIT_S for a request; True when one came (its wake taken)."""
        p = select.poll()
        p.register(self._wake_fd, select.POLLIN)
        if not p.poll(int(self.IDLE_WAIT_S * 1000)):
            return False
        try:
            os.eventfd_read(self._wake_fd)
        except BlockingIOError:  # (only this thread reads it; a guard, not a path)
            return False
        return True

    def _fast_round(self) -> bool:
        """One round through :func:`wait_and_sync` when every unflushed byte is in the last
        file (False when not, for the general round to run instead). A wait that timed out is
        followed by the idle round, one woken for bytes in the next file by the general round,
        both at once (the wake is taken)."""
        cl = self.commit_log
        mfq = cl.mfq
        mf = mfq.files[-1] if mfq.files else None
        done = mfq.flushed_where
        if mf is None or mf.fd < 0 or done < mf.file_from_offset:
            return False
        ts, end = cl.last_store_timestamp, cl.max_offset  # before the sync: it covers only these
        try:
            covered, ns = wait_and_sync(self._wake_fd, mf.fd, self._target, mf.file_from_offset + mf.file_size,
                                        done, int(self.IDLE_WAIT_S * 1000))
        except OSError as exc:  # a disk error fails the waiters, not the thread
            if not self._failing:
                log.exception("group commit flush failed")
            self._failing = True
            self._answer(exc, False)
            return True
        if covered == TIMED_OUT or covered == PAST_LIMIT:
            self._round(idle=covered == TIMED_OUT)
            return True
        self._failing = False
        if ns:  # it synced (a target already flushed needs none)
            mf.mark_flushed(covered - mf.file_from_offset)
            mfq.mark_flushed(covered)
            if ts and covered >= end:
                cl.flushed_store_timestamp = ts
            cl.flush_times += 1
            cl.flush_micros += ns // 1000
            self.flushes += 1
            self._last_sync_s = ns / 1e9
        self._answer(None, False)
        return True

    def _gather(self) -> None:
        """After a round that answered several waiters, wait while their next requests arrive."""
        if self._last_round_waiters < 2:
            return
        deadline = time.monotonic() + min(self.GATHER_MAX_S, self._last_sync_s / 4)
        seen = self._arrivals
        while time.monotonic() < deadline:
            time.sleep(self.GATHER_QUIET_S)  # (releases the GIL: the loop goes on appending)
            now = self._arrivals
            if now == seen:
                return
            seen = now

    def _round(self, final: bool = False, idle: bool = False) -> None:
        """One sync of everything appended so far, then every waiter it settles told.
        ``idle``: nobody asked (the 10 ms round); skipped while a loop syncs inline, which
        covers the same bytes (the next idle round takes what it left)."""
        if idle and self._inline_busy:
            self._answer(None, final)
            return
        self._busy = True
        try:
            error = self._sync_all()
        finally:
            self._busy = False
        self._answer(error, final)

    def _sync_inline(self) -> Exception | None:
        """:meth:`_sync_all` on a loop's thread, counted as inline."""
        flushes = self.flushes
        self._inline_busy = True
        try:
            error = self._sync_all()
        finally:
            self._inline_busy = False
        if self.flushes != flushes:
            self.inline_flushes += 1
        return error

    def _sync_all(self) -> Exception | None:
        """Sync everything appended so far (on whichever thread calls); the error if it failed."""
        error: Exception | None = None
        before = self.commit_log.flush_times
        t0 = time.perf_counter()
        try:
            self.commit_log.flush(0)
            self._failing = False
        except Exception as exc:  # a disk error fails the waiters, not the thread
            if not self._failing:  # (once per run of failures: the idle rounds retry every 10 ms)
                log.exception("group commit flush failed")
            self._failing = True
            error = exc
        if self.commit_log.flush_times != before:
            self.flushes += 1
            self._last_sync_s = time.perf_counter() - t0
        return error

    def _inline_round(self, holder: _LoopWaiters) -> None:
        """The sync of one loop turn, on the loop's own thread: scheduled by the turn's first
        waiter with ``call_soon``, so it runs after every callback that was ready in that turn
        (the sends read in that poll, all appended), covers them all, and answers them with no
        thread in between. ``fdatasync`` releases the GIL, but the loop waits for it; hence
        only while syncs are fast (see :meth:`wait`)."""
        holder.inline_due = False
        if not holder.pending:
            return
        if self._stopping:  # the stop's last round synced everything there was
            holder.pending = self._settle(holder.pending, None, True)
            return
        error = self._sync_inline()
        waiting = len(holder.pending)
        holder.pending = self._settle(holder.pending, error, False)
        self._last_round_waiters = waiting - len(holder.pending)
        if holder.pending:  # (bytes another thread appended past what this sync read): the thread's
            self._arrivals += len(holder.pending)
            self._signal(max(offset for offset, _ in holder.pending))

    def _answer(self, error: Exception | None, final: bool) -> None:
        """Tell every waiter the round settles (thread waiters here, loop waiters on their loop)."""
        arrivals = self._arrivals
        self._last_round_waiters = arrivals - self._arrivals_at_round
        self._arrivals_at_round = arrivals
        if self._threads:
            with self._threads_lock:
                waiting, self._threads = self._threads, []
            keep = self._settle(waiting, error, final)
            if keep:
                with self._threads_lock:
                    self._threads[:0] = keep
        self._post(error, final)

    def _post(self, error: Exception | None, final: bool) -> None:
        for holder in list(self._loops.values()):
            if not holder.pending:  # (read from this thread: a waiter queued after this signals again)
                continue
            try:
                holder.loop.call_soon_threadsafe(self._settle_loop, holder, error, final)
            except RuntimeError:  # its loop is closed: nobody is left to answer
                self._loops.pop(holder.loop, None)

    def _settle_loop(self, holder: _LoopWaiters, error: Exception | None, final: bool) -> None:
        if holder.pending:
            holder.pending = self._settle(holder.pending, error, final)

    def _settle(self, waiting: list[_Waiter], error: Exception | None, final: bool) -> list[_Waiter]:
        """Answer the waiters the log's flushed offset now covers; return the others.

        The flushed offset is read now, not when the sync that prompted this ended: a later
        sync may have covered more. ``error``: the last sync failed, so the waiters it left
        get it (some may have appended after that sync began; they are answered as not
        durable, never the other way round).
        """
        cl = self.commit_log
        flushed = cl.flushed_offset
        end = cl.max_offset
        keep: list[_Waiter] = []
        for offset, fut in waiting:
            if fut.done():  # timed out (or its caller gave up)
                continue
            try:
                if offset <= flushed:
                    fut.set_result(True)
                elif error is not None:
                    fut.set_exception(error)
                elif final or offset > end:  # (past the end: bytes that were never appended)
                    fut.set_result(False)
                else:
                    keep.append((offset, fut))
            except (asyncio.InvalidStateError, concurrent.futures.InvalidStateError):
                pass  # a thread waiter cancelled between the check and the set
        return keep

    def stop(self) -> None:
        """The last round (everything flushed, every waiter answered), then the thread ends."""
        self._stopping = True
        self._signal()
        self.join(timeout=10)
        self._round(final=True)  # waiters that queued while the last round ran
        cls = GroupCommitService
        with cls._switch_lock:
            if not self._lowered:  # (never started, or stopped already)
                return
            self._lowered = False
            cls._switch_users -= 1
            if cls._switch_users == 0:
                was, cls._switch_was = cls._switch_was, None
                if was is not None and sys.getswitchinterval() == self.SWITCH_INTERVAL_S:
                    sys.setswitchinterval(was)
