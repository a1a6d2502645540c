"""When the blocking Producer's ``send_async`` frames leave (fastmq._driven.DrivenLoop.post): a
caller that keeps posting runs the loop's turns itself, and a turn writes what it ran.

The producer's broker is the far end of a socket pair the test holds (test_driven_lone's
:class:`FarEnd`): what that end can read says what was written, and when.
"""
from __future__ import annotations

import select
import time
from typing import Any

import fastmq
from fastmq import _driven
from tests.process.test_driven_lone import TOPIC, FarEnd, lone  # noqa: F401  (the fixture)


def _readable(far: FarEnd, timeout: float) -> bool:
    return bool(far._got) or bool(select.select([far.sock], [], [], timeout)[0])


def _restore(d: _driven.DrivenLoop) -> None:
    """The loop's own grace again, and its background thread woken to look (it may be asleep
    for the long interval a test's grace gave it)."""
    d.grace_s, d.poll_max_s = _driven.GRACE_S, _driven.POLL_MAX_S
    d._wake.set()


def _answer_all(far: FarEnd, n: int, done: list[Any]) -> None:
    """Answer ``n`` requests (in the order they come) and wait for their callbacks."""
    for _ in range(n):
        far.answer(far.request())
    deadline = time.monotonic() + 10
    while len(done) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(done) == n and all(e is None for _, e in done), done


def test_a_senders_own_turn_writes_the_frames_it_ran(lone: tuple[fastmq.Producer, FarEnd]) -> None:
    """The TURN_EVERY-th send_async runs a turn: every frame of the batch is on the socket when
    it returns (they used to wait, queued, for the next turn: another TURN_EVERY sends)."""
    p, far = lone
    d = p._driven
    d.grace_s = d.poll_max_s = 3600.0  # only the sender's own turns run the loop
    done: list[Any] = []
    n = _driven.TURN_EVERY
    for i in range(n):
        p.send_async(fastmq.Message(TOPIC, b"%d" % i), lambda r, e: done.append((r, e)))
    far.sock.settimeout(2)  # (no turn after the last post: what is not written by now never is)
    got = [far.request() for _ in range(n)]
    assert [bytes(r.body) for r in got] == [b"%d" % i for i in range(n)]
    far._got[:0] = got
    _restore(d)
    _answer_all(far, n, done)


def test_a_caller_posting_faster_than_the_grace_still_gets_a_turn_within_it(
        lone: tuple[fastmq.Producer, FarEnd]) -> None:
    """A send_async every grace_s / 10: the background thread never finds the loop idle for
    its grace, and fewer than TURN_EVERY sends come within it; the caller's own post runs a
    turn once the first send has waited grace_s, rather than at the TURN_EVERY-th."""
    p, far = lone
    d = p._driven
    d.grace_s = 0.2
    done: list[Any] = []
    n = 15  # ~0.3 s of posts: past the grace, well short of TURN_EVERY
    assert n < _driven.TURN_EVERY
    for i in range(n):
        p.send_async(fastmq.Message(TOPIC, b"%d" % i), lambda r, e: done.append((r, e)))
        time.sleep(d.grace_s / 10)
    # (looked at well within the grace after the last post: the background thread has not run)
    assert _readable(far, d.grace_s / 4)
    _restore(d)
    _answer_all(far, n, done)
