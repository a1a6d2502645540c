"""PullRequestHoldService: pulls that found nothing wait here until a message arrives or time runs out.

A consumer's pull on a caught-up queue is held for up to its ``suspendTimeoutMillis`` (15 s from
the Java push consumer). RocketMQ re-checks held pulls every 5 s and is woken early by the
dispatcher's ``notifyMessageArriving``; we keep one timer per held pull for the deadline and are
woken by the store's arrival callback (:meth:`PullRequestHoldService.arrived`).

The wake does not run inside the put that stored the message: a put only notes which queues
got new entries (and up to where, with which tag codes), and the first note of a loop turn
schedules one wake for the next turn (``loop.call_soon``). Every held pull of every queue touched
in between is then re-run once. So a send answers its producer first, and a consumer caught up
on a queue busy with many producers gets what all their sends of one turn stored in one answer,
rather than one answer (and one pull round trip) per message; nothing waits longer than the
loop's next turn.

What "answer" means is the caller's business: ``wake(request)`` re-runs the pull and answers it.
The caller may also pass ``flush``: then ``wake`` may keep its answers back, and ``flush()`` runs
after every round of wakes (all pulls woken by one loop turn's arrivals, one timeout, shutdown)
to write them. A consumer caught up on many queues (RocketMQ's push consumer keeps one pull held
per queue, over one connection) then gets every answer of a round in one socket write, instead
of one write, and one wake-up of its reading thread, per queue.

A request that matched nothing (its tag filter rejected the new messages) goes back on hold, as
RocketMQ's ``notifyMessageArriving`` does when the message filter says no.

A held pull keeps its request (and what it references) until it is answered, so the pulls of a
connection that goes away are dropped at once (:meth:`PullRequestHoldService.release`) instead of
at their deadline: a client may ask to be held for as long as it likes.

Deadlines: pulls held for the same time (a push consumer always asks for 15 s) reach their
deadlines in the order they were held. So they wait in one insertion-ordered line per wait
(rounded to 0.1 s), and one timer per line, armed for its first deadline, answers whatever is
due when it fires and re-arms for the next. A pull answered early just leaves its line (a dict
delete) instead of cancelling a timer of its own: a timer per held pull cost a timer made and
cancelled per message. A pull whose deadline would come before the last one of its line (a
clock step, a wait of a different length rounded alike) gets a timer of its own, as before.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Collection

__all__ = ["HeldPull", "PullRequestHoldService"]

log = logging.getLogger("fastmq.broker")

# A line's timer may fire this early (uvloop rounds to whole milliseconds): what falls due within
# it is answered then, rather than the timer armed again for a millisecond
_EARLY = 0.002


@dataclass(eq=False, slots=True)
class HeldPull:
    topic: str
    queue_id: int
    offset: int                       # the offset the consumer asked for
    deadline: float                   # loop time at which the pull is answered whatever happens
    context: Any = None               # what ``wake`` needs to re-run the pull (request, connection...)
    tag_codes: frozenset[int] | None = None   # None: every tag matches
    owner: Any = None                 # what it is dropped with (the connection), or None
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)  # its own deadline timer, if any
    line: int | None = field(default=None, repr=False)  # else the deadline line it waits in


class PullRequestHoldService:
    """Held pulls by (topic, queue id).

    ``wake(held, timed_out)`` re-runs a pull; it returns True when it answered the consumer and
    False when there was still nothing to send (then the pull stays held until its deadline).
    """

    def __init__(self, wake: Callable[[HeldPull, bool], bool], flush: Callable[[], None] | None = None) -> None:
        self._wake = wake
        self._flush = flush
        self._table: dict[tuple[str, int], list[HeldPull]] = {}
        self._by_owner: dict[Any, set[HeldPull]] = {}
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop pulls are held on
        # queues that got messages since the last wake: key -> (max offset, tag codes or None: any)
        self._arrivals: dict[tuple[str, int], tuple[int, set[int] | None]] = {}
        # held pulls by wait (0.1 s units), each line in deadline order, and the timer of each line
        # (armed no later than its first deadline; see the module doc)
        self._lines: dict[int, dict[HeldPull, None]] = {}
        self._line_timers: dict[int, asyncio.TimerHandle] = {}
        # the latest deadline each line was given (none in it is later): `next(reversed(line))`
        # costs a reversed iterator made per held pull
        self._tails: dict[int, float] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._table.values())

    def hold(self, held: HeldPull) -> None:
        if self._closed:
            self._wake(held, True)
            self._flush_answers()
            return
        loop = self._loop = asyncio.get_running_loop()
        key = (held.topic, held.queue_id)
        lst = self._table.get(key)  # (not setdefault: that makes a container every time)
        if lst is None:
            self._table[key] = [held]
        else:
            lst.append(held)
        owner = held.owner
        if owner is not None:
            mine = self._by_owner.get(owner)
            if mine is None:
                self._by_owner[owner] = {held}
            else:
                mine.add(held)
        deadline = held.deadline
        # (rounded half up by hand: the round() builtin's __round__ lookup costs several times more)
        wait = int((deadline - loop.time()) * 10 + 0.5)
        line = self._lines.get(wait)
        if line is None:
            self._lines[wait] = {held: None}
            self._tails[wait] = deadline
            self._line_timers[wait] = loop.call_at(deadline, self._expire_line, wait)
        elif not line or self._tails[wait] <= deadline:
            line[held] = None  # the line's timer fires no later than its first deadline: still true
            self._tails[wait] = deadline
        else:
            held.timer = loop.call_at(held.deadline, self._expire, held)
            return
        held.line = wait

    def _untime(self, held: HeldPull) -> None:
        """Answered or dropped before its deadline: no deadline left to keep."""
        if held.timer is not None:
            held.timer.cancel()
        elif held.line is not None:
            line = self._lines.get(held.line)
            if line is not None:
                line.pop(held, None)
            held.line = None

    def _forget_owner(self, held: HeldPull) -> None:
        if held.owner is None:
            return
        mine = self._by_owner.get(held.owner)
        if mine is not None:
            mine.discard(held)
            if not mine:
                del self._by_owner[held.owner]

    def release(self, owner: Any) -> int:
        """Drop, unanswered, every pull held for ``owner`` (its connection is gone: nobody is left
        to answer); returns how many."""
        mine = self._by_owner.pop(owner, None)
        if not mine:
            return 0
        for held in mine:
            self._untime(held)
            held.owner = None  # already out of _by_owner
            self._remove(held)
            held.context = None
        return len(mine)

    def _remove(self, held: HeldPull) -> None:
        key = (held.topic, held.queue_id)
        lst = self._table.get(key)
        if lst is None:
            return
        try:
            lst.remove(held)
        except ValueError:
            return
        if not lst:
            del self._table[key]

    def _expire(self, held: HeldPull) -> None:
        self._answer_expired(held)
        self._flush_answers()

    def _answer_expired(self, held: HeldPull) -> None:
        """A held pull whose deadline came: out of the tables, answered as it stands."""
        self._remove(held)
        self._forget_owner(held)
        try:
            self._wake(held, True)
        except Exception:  # a failing answer must not kill the timer machinery of everyone else
            log.exception("answering a timed-out held pull failed")

    def _expire_line(self, key: int) -> None:
        """A line's timer: answer its pulls whose deadline came, and arm it for the next one."""
        line = self._lines.get(key)
        if line is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time() + _EARLY
        due: list[HeldPull] = []
        for held in line:
            if held.deadline > now:
                break
            due.append(held)
        for held in due:
            del line[held]
            held.line = None
        if line:
            self._line_timers[key] = loop.call_at(next(iter(line)).deadline, self._expire_line, key)
        else:
            del self._lines[key], self._line_timers[key], self._tails[key]
        for held in due:
            self._answer_expired(held)
        self._flush_answers()

    def _flush_answers(self) -> None:
        if self._flush is not None:
            try:
                self._flush()
            except Exception:
                log.exception("writing the answers of woken pulls failed")

    def arrived(self, topic: str, queue_id: int, max_offset: int, tag_code: int | None = None) -> None:
        """The store's arrival callback: messages up to ``max_offset`` (exclusive) are in the
        queue, with tag code ``tag_code`` (None: unknown, so any filter may match). Their pulls are woken at the
        loop's next turn, together with those of every other queue that gets messages meanwhile."""
        key = (topic, queue_id)
        if key not in self._table:  # nobody waits here: a pull that comes later finds the messages
            return
        seen = self._arrivals.get(key)
        if seen is None:
            if not self._arrivals and self._loop is not None:
                self._loop.call_soon(self._wake_arrivals)
            self._arrivals[key] = (max_offset, None if tag_code is None else {tag_code})
            return
        top, tags = seen
        if tags is not None:
            if tag_code is None:
                tags = None
            else:
                tags.add(tag_code)
        self._arrivals[key] = (top if top > max_offset else max_offset, tags)

    def _wake_arrivals(self) -> None:
        arrivals, self._arrivals = self._arrivals, {}
        try:
            for (topic, queue_id), (max_offset, tags) in arrivals.items():
                self._wake_queue((topic, queue_id), max_offset, tags)
        finally:
            self._flush_answers()

    def notify(self, topic: str, queue_id: int, max_offset: int, tag_code: int | None = None) -> None:
        """New messages up to ``max_offset`` (exclusive) are in the queue: wake the pulls they serve now."""
        try:
            self._wake_queue((topic, queue_id), max_offset, None if tag_code is None else (tag_code,))
        finally:
            self._flush_answers()

    def _wake_queue(self, key: tuple[str, int], max_offset: int, tags: Collection[int] | None) -> None:
        """Re-run the pulls held on ``key`` that messages up to ``max_offset`` with tag codes
        ``tags`` (None: any) serve; a pull they do not serve (past them, or filtered out by tag
        code, as 4.9's ``isMatchedByConsumeQueue``) stays held."""
        lst = self._table.get(key)
        if not lst:
            return
        keep: list[HeldPull] = []
        for held in lst:
            if held.offset >= max_offset:
                keep.append(held)
                continue
            if tags is not None and held.tag_codes is not None and held.tag_codes.isdisjoint(tags):
                keep.append(held)
                continue
            try:
                answered = self._wake(held, False)
            except Exception:
                log.exception("answering a held pull failed")
                answered = True
            if answered:
                self._untime(held)
                if held.owner is not None:  # (tested here: this runs once per message a consumer gets)
                    self._forget_owner(held)
            else:
                keep.append(held)
        if keep:
            self._table[key] = keep
        else:
            self._table.pop(key, None)

    def close(self) -> None:
        """Answer every held pull now (at shutdown), so no consumer waits on a dead broker."""
        self._closed = True
        table, self._table = self._table, {}
        self._by_owner.clear()
        for timer in self._line_timers.values():
            timer.cancel()
        self._lines.clear()
        self._line_timers.clear()
        self._tails.clear()
        for lst in table.values():
            for held in lst:
                if held.timer is not None:
                    held.timer.cancel()
                try:
                    self._wake(held, True)
                except Exception:
                    log.exception("answering a held pull at shutdown failed")
        self._flush_answers()
