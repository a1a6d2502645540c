"""Held pulls: woken by arrivals on their queue and offset, by their deadline, and at shutdown."""
from __future__ import annotations

import asyncio

from fastmq.broker.long_polling import HeldPull, PullRequestHoldService


async def test_notify_wakes_only_matching_pulls() -> None:
    woken: list[tuple[str, bool]] = []
    svc = PullRequestHoldService(lambda h, timed_out: woken.append((h.context, timed_out)) or True)
    loop = asyncio.get_running_loop()
    far = loop.time() + 30
    svc.hold(HeldPull("T", 0, 5, far, "q0@5"))
    svc.hold(HeldPull("T", 1, 0, far, "q1@0"))
    svc.hold(HeldPull("T", 0, 9, far, "q0@9"))
    svc.hold(HeldPull("T", 0, 0, far, "tagged", tag_codes=frozenset({42})))
    svc.notify("T", 0, 6, tag_code=7)
    assert woken == [("q0@5", False)]
    svc.notify("T", 0, 10, tag_code=42)
    assert woken[1:] == [("q0@9", False), ("tagged", False)]
    assert len(svc) == 1
    svc.close()
    assert woken[-1] == ("q1@0", True) and len(svc) == 0


async def test_deadline_answers_the_pull() -> None:
    done = asyncio.Event()
    svc = PullRequestHoldService(lambda h, timed_out: done.set() or timed_out)
    svc.hold(HeldPull("T", 0, 0, asyncio.get_running_loop().time() + 0.05))
    await asyncio.wait_for(done.wait(), 5)
    assert len(svc) == 0


async def test_unanswered_wake_keeps_the_pull_held() -> None:
    calls = []

    def wake(h: HeldPull, timed_out: bool) -> bool:
        calls.append(timed_out)
        return timed_out  # nothing matched the filter until the deadline

    svc = PullRequestHoldService(wake)
    svc.hold(HeldPull("T", 0, 0, asyncio.get_running_loop().time() + 30))
    svc.notify("T", 0, 3)
    assert calls == [False] and len(svc) == 1
    svc.close()
    assert calls == [False, True]


async def test_a_failing_wake_does_not_break_others(caplog) -> None:
    seen = []

    def wake(h: HeldPull, timed_out: bool) -> bool:
        if h.context == "bad":
            raise RuntimeError("boom")
        seen.append(h.context)
        return True

    svc = PullRequestHoldService(wake)
    far = asyncio.get_running_loop().time() + 30
    svc.hold(HeldPull("T", 0, 0, far, "bad"))
    svc.hold(HeldPull("T", 0, 0, far, "good"))
    svc.notify("T", 0, 1)
    assert seen == ["good"] and len(svc) == 0 and "boom" in caplog.text


async def test_arrivals_wake_at_the_next_loop_turn_once_per_pull() -> None:
    """The store's arrivals only note the queue; one wake at the next turn serves them all."""
    woken: list[str] = []
    svc = PullRequestHoldService(lambda h, timed_out: woken.append(h.context) or True)
    far = asyncio.get_running_loop().time() + 30
    svc.hold(HeldPull("T", 0, 0, far, "q0"))
    svc.hold(HeldPull("T", 1, 0, far, "q1"))
    for off in range(1, 17):  # sixteen sends stored in one turn, over two queues
        svc.arrived("T", off % 2, off, tag_code=5)
    svc.arrived("Other", 0, 1)  # nobody waits there: not even noted
    assert woken == [] and len(svc) == 2
    await asyncio.sleep(0)
    assert sorted(woken) == ["q0", "q1"] and len(svc) == 0
    svc.arrived("T", 0, 20)  # no pull held any more: nothing to do, nothing scheduled
    await asyncio.sleep(0)
    assert sorted(woken) == ["q0", "q1"]


async def test_arrivals_merge_tags_and_offsets_of_one_turn() -> None:
    woken: list[str] = []
    svc = PullRequestHoldService(lambda h, timed_out: woken.append(h.context) or True)
    far = asyncio.get_running_loop().time() + 30
    svc.hold(HeldPull("T", 0, 0, far, "wants 42", tag_codes=frozenset({42})))
    svc.hold(HeldPull("T", 0, 0, far, "wants 43", tag_codes=frozenset({43})))
    svc.hold(HeldPull("T", 0, 3, far, "past 3"))
    svc.arrived("T", 0, 2, tag_code=7)
    svc.arrived("T", 0, 3, tag_code=42)
    await asyncio.sleep(0)
    assert woken == ["wants 42"]  # 43 matched nothing; max offset 3 does not reach "past 3"
    svc.arrived("T", 0, 4, tag_code=7)
    svc.arrived("T", 0, 5, tag_code=None)  # a tag code unknown: every filter may match
    await asyncio.sleep(0)
    assert woken == ["wants 42", "wants 43", "past 3"] and len(svc) == 0


async def test_a_pull_held_after_the_arrivals_is_not_woken_by_them() -> None:
    woken: list[str] = []
    svc = PullRequestHoldService(lambda h, timed_out: woken.append(h.context) or True)
    far = asyncio.get_running_loop().time() + 30
    svc.hold(HeldPull("T", 0, 0, far, "early"))
    svc.arrived("T", 0, 1)
    svc.hold(HeldPull("T", 0, 1, far, "late"))  # it read offset 0 itself: waits for offset 1
    await asyncio.sleep(0)
    assert woken == ["early"] and len(svc) == 1
    svc.close()
    assert woken == ["early", "late"]


async def test_answers_of_a_round_are_flushed_once_after_its_wakes() -> None:
    events: list[object] = []
    svc = PullRequestHoldService(lambda h, timed_out: events.append(h.context) or True,
                                 lambda: events.append("flush"))
    loop = asyncio.get_running_loop()
    far = loop.time() + 30
    for q in range(3):
        svc.hold(HeldPull("T", q, 0, far, f"q{q}"))
    svc.hold(HeldPull("T", 9, 0, far, "q9"))
    for q in range(3):
        svc.arrived("T", q, 1)
    assert events == []  # woken at the loop's next turn, not inside the put
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert events == ["q0", "q1", "q2", "flush"]
    svc.hold(HeldPull("T", 5, 0, loop.time() + 0.05, "late"))
    done = loop.create_future()
    loop.call_later(2, done.set_result, None)
    while events[-1] != "flush" or "late" not in events:
        assert not done.done(), "the timed-out pull was not answered"
        await asyncio.sleep(0.02)
    assert events[-2:] == ["late", "flush"]  # a timeout is a round of its own
    svc.close()
    assert events[-2:] == ["q9", "flush"]


async def test_a_failing_flush_is_logged_and_holding_goes_on(caplog) -> None:
    woken: list[object] = []

    def flush() -> None:
        raise RuntimeError("boom")

    svc = PullRequestHoldService(lambda h, timed_out: woken.append(h.context) or True, flush)
    far = asyncio.get_running_loop().time() + 30
    svc.hold(HeldPull("T", 0, 0, far, "a"))
    svc.notify("T", 0, 1)
    assert woken == ["a"] and "writing the answers of woken pulls failed" in caplog.text
    svc.hold(HeldPull("T", 0, 1, far, "b"))
    svc.notify("T", 0, 2)
    assert woken == ["a", "b"] and len(svc) == 0


async def test_deadlines_of_mixed_waits_each_come_in_time() -> None:
    """Pulls wait in one deadline line per wait (one timer a line): waits of different lengths,
    held in any order, and a pull whose deadline comes before the last of its line (it gets its
    own timer) are each answered at their own deadline, in deadline order."""
    done: list[str] = []
    svc = PullRequestHoldService(lambda h, timed_out: done.append(h.context) or timed_out)
    loop = asyncio.get_running_loop()
    now = loop.time()
    svc.hold(HeldPull("T", 0, 0, now + 0.30, "long"))
    svc.hold(HeldPull("T", 1, 0, now + 0.05, "short"))
    svc.hold(HeldPull("T", 2, 0, now + 0.31, "long, later"))
    early = HeldPull("T", 3, 0, now + 0.29, "same line, earlier")  # rounds to the 0.3 s line, before its tail
    svc.hold(early)
    assert early.timer is not None and early.line is None
    assert len(svc._lines) == 2 and len(svc) == 4
    stop = loop.time() + 5
    while len(done) < 4:
        assert loop.time() < stop, f"only {done} timed out"
        await asyncio.sleep(0.01)
    assert done == ["short", "same line, earlier", "long", "long, later"]
    assert len(svc) == 0 and not svc._lines and not svc._line_timers


async def test_a_line_answered_before_its_deadline_leaves_no_timeout() -> None:
    """Pulls answered by arrivals leave their line: its timer, when it fires, answers nothing
    and goes away with the emptied line."""
    calls: list[tuple[str, bool]] = []
    svc = PullRequestHoldService(lambda h, timed_out: calls.append((h.context, timed_out)) or True)
    loop = asyncio.get_running_loop()
    svc.hold(HeldPull("T", 0, 0, loop.time() + 0.05, "a"))
    svc.hold(HeldPull("T", 1, 0, loop.time() + 0.05, "b"))
    svc.notify("T", 0, 1)
    svc.notify("T", 1, 1)
    assert calls == [("a", False), ("b", False)]
    stop = loop.time() + 5
    while svc._lines:
        assert loop.time() < stop, "the emptied line was never dropped"
        await asyncio.sleep(0.02)
    assert calls == [("a", False), ("b", False)] and not svc._line_timers
