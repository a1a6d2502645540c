"""The blocking Producer's own loop (``fastmq._driven``): run by the thread waiting in a call, by a
background thread otherwise; callbacks on a callback thread. Unit tests of the loop, then the
Producer against real fastmq-namesrv / fastmq-broker processes."""
from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any, Iterator

import pytest

import fastmq
from fastmq import _driven
from fastmq.errors import ClientStateError
from fastmq.testing import EmbeddedCluster

# ------------------------------------------------------------------ the loop alone


@pytest.fixture
def driven() -> Iterator[_driven.DrivenLoop]:
    d = _driven.DrivenLoop("test-driven")
    try:
        yield d
    finally:
        d.close()


def test_run_returns_raises_and_times_out(driven: _driven.DrivenLoop) -> None:
    async def where() -> int:
        await asyncio.sleep(0)
        return threading.get_ident()

    async def fail() -> None:
        raise KeyError("nope")
    assert driven.run(where(), 5) == threading.get_ident()  # run by the caller's own thread
    with pytest.raises(KeyError):
        driven.run(fail(), 5)
    stopped = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()
    with pytest.raises(TimeoutError):
        driven.run(forever(), 0.2)
    assert stopped.is_set()  # cancelled before the call returned


def test_call_waits_for_its_callback(driven: _driven.DrivenLoop) -> None:
    loop = driven.loop
    assert driven.call(lambda cb: loop.call_later(0.01, cb, 7, None), 5) == 7
    with pytest.raises(ValueError, match="bad"):
        driven.call(lambda cb: cb(None, ValueError("bad")), 5)
    with pytest.raises(TimeoutError):
        driven.call(lambda cb: None, 0.1)  # never called back


def test_a_calls_guard_serves_the_next_calls_and_each_still_times_out_on_its_own(
        driven: _driven.DrivenLoop) -> None:
    """A call leaves the timer that bounds its drive armed for the next calls (they end later);
    a call with a shorter timeout arms its own, and one never called back still raises
    TimeoutError after its own timeout, not the guard's."""
    loop = driven.loop
    assert driven.call(lambda cb: loop.call_soon(cb, 1, None), 30) == 1
    guard = driven._guard
    assert guard is not None and not guard.cancelled()
    assert driven.call(lambda cb: loop.call_soon(cb, 2, None), 30) == 2
    assert driven._guard is guard  # reused: its end comes before this call's
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        driven.call(lambda cb: None, 0.2)  # never called back
    assert 0.2 <= time.monotonic() - t0 < 25  # (its own end, not the 30 s guard's)
    assert guard.cancelled() and driven._guard is not guard
    assert driven.call(lambda cb: loop.call_later(0.05, cb, 3, None), 5) == 3


def test_a_guard_firing_between_calls_does_not_stop_the_background_drive(driven: _driven.DrivenLoop) -> None:
    """The guard left armed fires while no call drives: the background thread's drive goes on
    (the timer it serves still runs in time)."""
    loop = driven.loop
    assert driven.call(lambda cb: loop.call_soon(cb, 1, None), 0.1) == 1
    done = threading.Event()
    driven.post(lambda: loop.call_later(0.5, done.set))
    assert done.wait(5)
    assert driven._guard is None  # it fired, and stopped nothing


@pytest.mark.parametrize("debug", [False, True])
def test_a_drive_runs_the_loop_as_run_forever_would(driven: _driven.DrivenLoop, debug: bool) -> None:
    """What runs during a caller's drive sees the loop running in this thread (the lean drive
    on asyncio's own loop, or run_forever itself in debug mode), and a stop request is used up
    by the drive that ends: the loop is left stopped, and the next drive runs until its own end."""
    loop = driven.loop
    loop.set_debug(debug)
    seen: list[tuple[bool, bool]] = []

    def start(cb: Any) -> None:
        def inside() -> None:
            seen.append((loop.is_running(), asyncio.get_running_loop() is loop))
            cb(len(seen), None)
        loop.call_soon(inside)
    assert driven.call(start, 5) == 1
    assert seen == [(True, True)]
    assert not loop.is_running() and asyncio._get_running_loop() is None
    assert not loop._stopping  # type: ignore[attr-defined]
    assert driven.call(lambda cb: loop.call_later(0.05, cb, "later", None), 5) == "later"
    loop.set_debug(False)


def test_the_background_thread_runs_the_loop_when_no_caller_does(driven: _driven.DrivenLoop) -> None:
    ran: list[int] = []
    done = threading.Event()
    driven.post(lambda: driven.loop.call_later(0.05, lambda: (ran.append(threading.get_ident()), done.set())))
    assert done.wait(5)  # nobody called again: the background thread ran the timer
    assert ran == [driven._thread.ident]


def test_posts_run_in_order_from_many_threads(driven: _driven.DrivenLoop) -> None:
    """Several threads post and call at once: each thread's posts run in its order, every call
    gets its own answer, whoever drives."""
    seen: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(300):
                driven.post(lambda i=i: seen.setdefault(k, []).append(i))
                if i % 50 == 0:
                    assert driven.call(lambda cb, i=i: cb(i * k, None), 10) == i * k
        except BaseException as exc:  # reported to the test's thread
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    deadline = time.monotonic() + 10
    while sum(map(len, seen.values())) < 1500 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == {k: list(range(300)) for k in range(1, 6)}


def test_a_post_handed_over_runs_before_the_same_threads_next_driven_post(driven: _driven.DrivenLoop) -> None:
    """The CI failure of session 15, made deterministic: a thread's post handed over while
    another thread drove, then its next post made as the driver while a turn of driven posts was
    already queued, must still run second."""
    ran: list[str] = []
    assert driven._take()  # this thread drives, as another user's blocking call would
    try:
        driven._posted.append((ran.append, ("driver's",)))  # a driven post, its turn queued
        driven.loop.call_soon(driven._run_posted)

        def other() -> None:
            driven.post(ran.append, "first")  # handed over: this thread drives
        t = threading.Thread(target=other)
        t.start()
        t.join(10)
        assert driven._crossed  # (it was handed over, not yet run)
    finally:
        driven._give_back()

    def again() -> None:
        driven.post(ran.append, "second")  # nobody drives now: taken, while "first" still waits
    t = threading.Thread(target=again)
    t.start()
    t.join(10)
    deadline = time.monotonic() + 10
    while len(ran) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran.index("first") < ran.index("second")


def test_a_call_from_the_driving_thread_is_refused(driven: _driven.DrivenLoop) -> None:
    async def inner() -> str:
        try:
            driven.call(lambda cb: cb(1, None), 1)
        except RuntimeError as exc:
            return str(exc)
        return "no error"
    assert driven.run(inner(), 5) == _driven.LOOP_ITSELF


def test_a_caller_running_its_own_asyncio_loop_is_served_by_the_background_thread(
        driven: _driven.DrivenLoop) -> None:
    async def from_async_code() -> Any:
        return driven.call(lambda cb: cb(threading.get_ident(), None), 5)
    assert asyncio.run(from_async_code()) == driven._thread.ident


def test_callbacks_run_in_order_on_their_thread_and_one_raising_stops_nothing(
        driven: _driven.DrivenLoop, caplog: pytest.LogCaptureFixture) -> None:
    got: list[tuple[int, str]] = []

    def cb(result: int, error: BaseException | None) -> None:
        got.append((result, threading.current_thread().name))
        if result % 3 == 0:
            raise RuntimeError(f"user callback {result} failed")
    for i in range(100):
        driven.post(driven.callbacks.put, cb, i, None)
    driven.call(lambda done: done(None, None), 5)  # returns once the callbacks before it ran
    assert [r for r, _ in got] == list(range(100))
    assert {name for _, name in got} == {"test-driven-callbacks"}
    assert "user callback 99 failed" in caplog.text


def test_window_places_come_back_once_per_hand_over_after_their_callbacks_are_queued(
        driven: _driven.DrivenLoop, caplog: pytest.LogCaptureFixture) -> None:
    """put_releasing (send_async's callbacks): every place is given back exactly once, in one
    release per hand-over, each only once its callbacks are queued; plain puts give none back,
    and callbacks of both kinds keep one order, a raising one stopping nothing."""
    got: list[int] = []
    releases: list[tuple[int, int]] = []  # (places given back, callbacks queued by then)

    def release(n: int) -> None:
        releases.append((n, driven.callbacks._put - len(driven.callbacks._batch)))
    driven.callbacks.release = release

    def cb(result: int, error: BaseException | None) -> None:
        got.append(result)
        if result % 7 == 0:
            raise RuntimeError(f"user callback {result} failed")
    for i in range(300):  # several turns (TURN_EVERY posts each), so several hand-overs
        put = driven.callbacks.put if i % 5 == 0 else driven.callbacks.put_releasing
        driven.post(put, cb, i, None)
    driven.call(lambda done: done(None, None), 5)  # returns once the callbacks before it ran
    assert got == list(range(300))
    assert sum(n for n, _ in releases) == 240
    assert len(releases) > 1 and all(n > 0 for n, _ in releases)
    assert all(queued == driven.callbacks._put for _, queued in releases[-1:])
    assert driven.callbacks._held == 0
    assert "user callback 294 failed" in caplog.text


def test_a_senders_own_turns_gather_callbacks_and_any_other_drive_hands_them_over(
        driven: _driven.DrivenLoop) -> None:
    """Callbacks of a sending thread's own turns (post) wait for more rather than waking the
    callback thread each turn; a call's drive hands them over, in order, places given back."""
    driven.grace_s = driven.poll_max_s = 3600.0  # the background thread never takes the loop here
    got: list[int] = []
    releases: list[int] = []
    driven.callbacks.release = releases.append
    n = 3 * _driven.TURN_EVERY  # three turns of the sender's own
    for i in range(n):
        driven.post(driven.callbacks.put_releasing, lambda r, e: got.append(r), i, None)
    assert releases == [] and got == []  # nothing crossed to the callback thread yet
    driven.call(lambda done: done(None, None), 5)
    assert got == list(range(n)) and releases == [n]


def test_a_window_place_is_given_back_even_when_the_callback_thread_cannot_start(
        driven: _driven.DrivenLoop, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand-over that fails (no thread for the callbacks) still gives its places back: a
    send_async waiting for one is never left waiting for ever."""
    given: list[int] = []
    driven.callbacks.release = given.append

    def no_thread(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(_driven.threading.Thread, "start", no_thread)
    driven.post(driven.callbacks.put_releasing, lambda r, e: None, 1, None)
    driven.post(driven.callbacks.put_releasing, lambda r, e: None, 2, None)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        driven.call(lambda done: done(None, None), 5)
    assert given == [2]
    monkeypatch.undo()
    driven.callbacks._thread = None  # (the thread that never started)


def test_close_runs_what_was_handed_over_and_refuses_after(driven: _driven.DrivenLoop) -> None:
    ran: list[int] = []
    for i in range(10):
        driven.post(ran.append, i)
    driven.close()
    assert ran == list(range(10))
    assert driven.loop.is_closed()
    with pytest.raises(_driven.Closed):
        driven.post(ran.append, 99)
    driven.close()  # twice: nothing more


def test_a_base_exception_in_handed_over_work_strands_nothing_after_it(driven: _driven.DrivenLoop) -> None:
    """A KeyboardInterrupt / SystemExit raised by one posted or handed-over call reaches the thread
    driving (this one, or the background thread, which logs it), and every call after it still
    runs (none left queued with no turn scheduled)."""
    ran: list[str] = []

    def interrupt() -> None:
        raise KeyboardInterrupt("in a posted call")

    def call_through(value: object) -> object:
        try:
            return driven.call(lambda cb: cb(value, None), 5)  # runs what was posted before it
        except KeyboardInterrupt:
            return driven.call(lambda cb: cb(value, None), 5)
    def post_through(fn: Any, *args: Any) -> None:
        # a post runs a turn itself once its first waiting call has waited the grace (a slow
        # machine), and then the interrupt reaches the thread driving in that post
        try:
            driven.post(fn, *args)
        except KeyboardInterrupt:
            pass
    for name in ("a", "b"):
        post_through(ran.append, name)
    post_through(interrupt)
    post_through(ran.append, "c")
    assert call_through("after") == "after"
    deadline = time.monotonic() + 5
    while ran != ["a", "b", "c"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran == ["a", "b", "c"]

    # handed over from another thread while one drives: the same through _run_crossed
    crossed: list[int] = []
    release = threading.Event()
    holding = threading.Event()

    def hold(cb: Any) -> None:  # keeps this call's drive going until the other thread handed over
        holding.set()
        driven.loop.call_soon(lambda: release.wait(5) and cb(None, None))
    def drive_held() -> None:
        try:
            driven.call(hold, 10)
        except KeyboardInterrupt:  # the handed-over interrupt, if this thread drove its turn
            pass
    worker = threading.Thread(target=drive_held)
    worker.start()
    assert holding.wait(5)
    driven.cross(crossed.append, 1)
    driven.cross(interrupt)
    driven.cross(crossed.append, 2)
    release.set()
    worker.join(10)
    # the interrupt surfaced in whichever thread drove; the loop still serves hand-overs
    deadline = time.monotonic() + 5
    while crossed != [1, 2] and time.monotonic() < deadline:
        call_through(None)
        time.sleep(0.01)
    assert crossed == [1, 2]
    assert call_through(3) == 3


def test_a_drive_refuses_a_loop_already_running(driven: _driven.DrivenLoop) -> None:
    """The lean drive keeps run_forever's check: a loop marked running elsewhere is not run twice."""
    loop = driven.loop
    assert driven.call(lambda cb: cb(1, None), 5) == 1
    if not driven._lean:
        pytest.skip("not asyncio's own loop: run_forever itself checks")
    loop._thread_id = -1  # type: ignore[attr-defined]  # as if another thread ran it
    try:
        assert driven._drive.acquire(timeout=5)
        try:
            with pytest.raises(RuntimeError, match="already running"):
                driven._run_until_stopped()
        finally:
            driven._drive.release()
    finally:
        loop._thread_id = None  # type: ignore[attr-defined]
    assert driven.call(lambda cb: cb(2, None), 5) == 2


def test_a_callback_raising_system_exit_does_not_end_the_callback_thread(driven: _driven.DrivenLoop) -> None:
    got: list[int] = []

    def cb(result: int, error: BaseException | None) -> None:
        if result == 1:
            raise SystemExit("from a user's callback")
        got.append(result)
    for i in range(3):
        driven.post(driven.callbacks.put, cb, i, None)
    driven.call(lambda done: done(None, None), 5)
    assert got == [0, 2]


# ------------------------------------------------------------------ the Producer, real processes


def _counting(want: int) -> tuple[list[Any], threading.Event, Any]:
    """(outcomes, set once ``want`` are in, a send callback appending each result or error)."""
    outcomes: list[Any] = []
    lock = threading.Lock()
    all_done = threading.Event()

    def on_sent(result: Any, error: BaseException | None) -> None:
        with lock:
            outcomes.append(error if error is not None else result)
            if len(outcomes) == want:
                all_done.set()
    return outcomes, all_done, on_sent


def _run_threads(targets: list[Any], timeout: float) -> list[threading.Thread]:
    """A thread per target, all started, then each joined for at most ``timeout`` s."""
    threads = [threading.Thread(target=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return threads


def test_many_threads_send_at_once(fastmq_cluster: EmbeddedCluster) -> None:
    """Eight threads each sending one at a time (one of them drives the loop, the others hand
    over to it) and two more with send_async: every send answered once, nothing lost."""
    with fastmq.Producer("PG_DRIVEN_THREADS", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        p.send(fastmq.Message("DrivenThreads", b"warm"))
        results: list[fastmq.SendResult] = []
        errors: list[BaseException] = []
        outcomes, all_done, on_sent = _counting(400)

        def sender() -> None:
            try:
                for _ in range(50):
                    results.append(p.send(fastmq.Message("DrivenThreads", b"s")))
            except BaseException as exc:  # reported to the test's thread
                errors.append(exc)

        def async_sender() -> None:
            for _ in range(200):
                p.send_async(fastmq.Message("DrivenThreads", b"a"), on_sent)
        _run_threads([sender] * 8 + [async_sender] * 2, 120)
        assert not errors, errors[:3]
        assert len(results) == 400 and all(r.status == fastmq.SendStatus.SEND_OK for r in results)
        assert len({r.msg_id for r in results}) == 400
        assert all_done.wait(60), len(outcomes)
        assert [getattr(o, "status", o) for o in outcomes] == [fastmq.SendStatus.SEND_OK] * 400
        offsets = {(r.message_queue.queue_id, r.queue_offset) for r in results}
        assert len(offsets) == 400  # 400 distinct places in the queues: none stored twice


def test_send_async_through_a_small_window_loses_nothing_and_gives_every_place_back(fastmq_cluster) -> None:
    """max_in_flight=3: 300 send_async wait for places the callbacks' hand-overs give back in
    batches; each is told once, and once the last callback ran the window is whole again."""
    with fastmq.Producer("PG_DRIVEN_WINDOW", namesrv_addr=fastmq_cluster.namesrv_addr, max_in_flight=3) as p:
        p.send(fastmq.Message("DrivenWindow", b"warm"))
        outcomes, all_done, on_sent = _counting(300)
        for i in range(300):
            p.send_async(fastmq.Message("DrivenWindow", b"w%d" % i), on_sent)
        assert all_done.wait(60), len(outcomes)
        p.send(fastmq.Message("DrivenWindow", b"last"))  # (returns once every callback before it ran)
        assert [getattr(o, "status", o) for o in outcomes] == [fastmq.SendStatus.SEND_OK] * 300
        assert p._window._free == 3


def test_send_async_refuses_a_bad_body_on_a_topic_already_sent_to(fastmq_cluster: EmbeddedCluster) -> None:
    """The facade's check before handing a send over takes a short cut for a topic it has sent to;
    a bad body there is still refused at the call, with 4.9's text, and takes no window place."""
    from fastmq.errors import MessageValidationError
    with fastmq.Producer("PG_DRIVEN_CHECK", namesrv_addr=fastmq_cluster.namesrv_addr, max_in_flight=2) as p:
        p.send(fastmq.Message("DrivenCheck", b"warm"))
        for body, text in [(b"", "length is zero"), (b"x" * (4 * 1024 * 1024 + 1), "over max value"),
                           ("text", "must be bytes")]:
            with pytest.raises(MessageValidationError, match=text):
                p.send_async(fastmq.Message("DrivenCheck", body), lambda r, e: None)  # type: ignore[arg-type]
        outcomes, all_done, on_sent = _counting(2)
        p.send_async(fastmq.Message("DrivenCheck", bytearray(b"ba")), on_sent)  # (bytes-like: accepted)
        p.send_async(fastmq.Message("DrivenCheck", b"ok"), on_sent)
        assert all_done.wait(30), outcomes
        assert [getattr(o, "status", o) for o in outcomes] == [fastmq.SendStatus.SEND_OK] * 2
        p.send(fastmq.Message("DrivenCheck", b"last"))
        assert p._window._free == 2


def test_callbacks_raising_and_a_blocking_call_from_a_callback(fastmq_cluster: EmbeddedCluster,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    with fastmq.Producer("PG_DRIVEN_CALLBACKS", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        p.send(fastmq.Message("DrivenCallbacks", b"warm"))
        seen: list[tuple[Any, str]] = []
        done = threading.Event()

        def raising(result: Any, error: BaseException | None) -> None:
            seen.append((error if error is not None else result.status, threading.current_thread().name))
            if len(seen) == 100:
                done.set()
            raise ValueError("callback failed on purpose")
        for _ in range(100):
            p.send_async(fastmq.Message("DrivenCallbacks", b"x"), raising)
        assert done.wait(30), len(seen)
        assert {s for s, _ in seen} == {fastmq.SendStatus.SEND_OK}
        assert {n for _, n in seen} == {"fastmq-producer-PG_DRIVEN_CALLBACKS-callbacks"}
        assert "callback failed on purpose" in caplog.text
        # the callback thread is not the loop: a callback may itself send and wait
        nested: list[Any] = []
        nested_done = threading.Event()

        def sends_again(result: Any, error: BaseException | None) -> None:
            try:
                nested.append(p.send(fastmq.Message("DrivenCallbacks", b"from a callback")).status)
            except BaseException as exc:  # reported to the test's thread
                nested.append(exc)
            nested_done.set()
        p.send_async(fastmq.Message("DrivenCallbacks", b"y"), sends_again)
        assert nested_done.wait(30) and nested == [fastmq.SendStatus.SEND_OK], nested
        assert p.send(fastmq.Message("DrivenCallbacks", b"after")).status == fastmq.SendStatus.SEND_OK


def test_a_selector_making_a_blocking_call_is_refused(fastmq_cluster: EmbeddedCluster) -> None:
    """send_orderly's selector runs inside the call, on the thread driving the loop: a blocking
    call from there could only wait for itself, so it raises at once."""
    with fastmq.Producer("PG_DRIVEN_SELECTOR", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        p.send(fastmq.Message("DrivenSelector", b"warm"))

        def selector(mqs: list[Any], msg: Any, arg: object) -> Any:
            p.send(fastmq.Message("DrivenSelector", b"inner"))
            return mqs[0]
        with pytest.raises(RuntimeError, match="from the fastmq loop itself"):
            p.send_orderly(fastmq.Message("DrivenSelector", b"outer"), selector, None)
        assert p.send(fastmq.Message("DrivenSelector", b"after")).status == fastmq.SendStatus.SEND_OK


def test_shutdown_with_sends_in_flight_tells_every_callback(fastmq_cluster: EmbeddedCluster) -> None:
    p = fastmq.Producer("PG_DRIVEN_SHUTDOWN", namesrv_addr=fastmq_cluster.namesrv_addr)
    p.start()
    p.send(fastmq.Message("DrivenShutdown", b"warm"))
    n = 3000
    outcomes, _, on_sent = _counting(n)
    for _ in range(n):
        p.send_async(fastmq.Message("DrivenShutdown", b"x" * 128), on_sent)
    p.shutdown()  # at once, with most sends unanswered
    assert len(outcomes) == n  # every callback ran once, before shutdown returned
    ok = [o for o in outcomes if not isinstance(o, BaseException)]
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert all(r.status == fastmq.SendStatus.SEND_OK for r in ok)
    assert all(isinstance(e, fastmq.FastMQError) for e in failed), failed[:3]
    assert not any(t.name.startswith("fastmq-producer-PG_DRIVEN_SHUTDOWN") for t in threading.enumerate())


def test_a_producer_shut_down_refuses_with_a_typed_error(fastmq_cluster: EmbeddedCluster) -> None:
    p = fastmq.Producer("PG_DRIVEN_CLOSED", namesrv_addr=fastmq_cluster.namesrv_addr)
    p.start()
    p.send(fastmq.Message("DrivenClosed", b"warm"))
    p.shutdown()
    p.shutdown()  # twice: nothing more
    with pytest.raises(ClientStateError, match="SHUTDOWN_ALREADY"):
        p.send(fastmq.Message("DrivenClosed", b"x"))
    with pytest.raises(ClientStateError, match="SHUTDOWN_ALREADY"):
        p.send_async(fastmq.Message("DrivenClosed", b"x"), lambda r, e: None)
    with pytest.raises(ClientStateError, match="SHUTDOWN_ALREADY"):
        p.send_batch([fastmq.Message("DrivenClosed", b"x")])
    with pytest.raises(ClientStateError, match="maybe started once"):
        p.start()


def test_sends_after_an_idle_pause_and_from_async_code(fastmq_cluster: EmbeddedCluster) -> None:
    """The background thread has the loop after a pause (a heartbeat's timer may be due); the
    next send takes it back. A caller inside its own asyncio loop is served by the background
    thread."""
    with fastmq.Producer("PG_DRIVEN_IDLE", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        assert p.send(fastmq.Message("DrivenIdle", b"1")).status == fastmq.SendStatus.SEND_OK
        time.sleep(0.2)
        assert p.send(fastmq.Message("DrivenIdle", b"2")).status == fastmq.SendStatus.SEND_OK

        async def from_async() -> Any:
            return p.send(fastmq.Message("DrivenIdle", b"3")).status
        assert asyncio.run(from_async()) == fastmq.SendStatus.SEND_OK


def test_threads_sending_at_once_with_a_thread_switch_at_every_chance_lose_nothing(fastmq_cluster) -> None:
    """The hand-over of the loop between callers, the background thread and the callback thread,
    stressed: threads calling send_async and send at once while the interpreter switches threads
    as often as it can (sys.setswitchinterval(1e-6)). Every send is answered once, within a bounded
    wait; a failure says how many callbacks are missing and who held the loop."""
    n_async, n_sync, rounds = 300, 30, 2
    with fastmq.Producer("PG_DRIVEN_STRESS", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        p.send(fastmq.Message("DrivenStress", b"warm"))
        previous = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            for r in range(rounds):
                outcomes, all_done, on_sent = _counting(3 * n_async)
                results: list[Any] = []
                errors: list[BaseException] = []

                def async_sender() -> None:
                    try:
                        for _ in range(n_async):
                            p.send_async(fastmq.Message("DrivenStress", b"a"), on_sent)
                    except BaseException as exc:  # reported to the test's thread
                        errors.append(exc)

                def sender() -> None:
                    try:
                        for _ in range(n_sync):
                            results.append(p.send(fastmq.Message("DrivenStress", b"s")).status)
                    except BaseException as exc:  # reported to the test's thread
                        errors.append(exc)
                threads = _run_threads([async_sender] * 3 + [sender] * 2, 60)
                finished = all_done.wait(30)
                d = p._driven
                state = (f"round {r}: {len(outcomes)} of {3 * n_async} callbacks; driver={d._driver} "
                         f"background={d._bg_driving} wanted={d._wanted} waiters={d._waiters} "
                         f"posted={len(d._posted)} crossed={len(d._crossed)} "
                         f"callbacks put/ran={d.callbacks._put}/{d.callbacks._ran}")
                assert not errors, (errors[:3], state)
                assert finished, state
                assert not any(t.is_alive() for t in threads), state
                assert results == [fastmq.SendStatus.SEND_OK] * (2 * n_sync), state
                assert [getattr(o, "status", o) for o in outcomes] == [fastmq.SendStatus.SEND_OK] * (3 * n_async)
        finally:
            sys.setswitchinterval(previous)


def test_a_loops_grace_is_its_own() -> None:
    """A lengthened grace on one producer's loop leaves the module's and other loops' as they were."""
    from fastmq import _driven
    a, b = _driven.DrivenLoop("grace-a"), _driven.DrivenLoop("grace-b")
    try:
        a.grace_s = a.poll_max_s = 3600.0
        assert (b.grace_s, b.poll_max_s) == (_driven.GRACE_S, _driven.POLL_MAX_S) == (0.001, 0.01)
    finally:
        a.close()
        b.close()
