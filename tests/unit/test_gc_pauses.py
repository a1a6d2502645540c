"""The server commands' collector policy: survivors of full passes frozen, garbage still collected,
frozen objects thawed on a timer."""
from __future__ import annotations

import asyncio
import gc
import weakref

from fastmq.common.gc_pauses import freeze_survivors


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> "weakref.ref[_Node]":
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_survivors_frozen_and_new_cycles_still_collected() -> None:
    kept = [_Node() for _ in range(1000)]
    undo = freeze_survivors()
    try:
        assert gc.get_freeze_count() >= len(kept)  # what existed went out of the scans
        gone = _cycle()
        gc.collect()
        assert gone() is None  # a cycle made after the freeze is garbage as before
        more = [_Node() for _ in range(100)]
        frozen = gc.get_freeze_count()
        gc.collect()  # a full pass: its survivors join the frozen ones
        assert gc.get_freeze_count() >= frozen + len(more)
    finally:
        undo()
    assert gc.get_freeze_count() == 0
    assert all(cb.__name__ != "_after_full_pass" for cb in gc.callbacks)


def test_thaw_returns_frozen_objects_to_the_collector() -> None:
    async def main() -> tuple[int, int]:
        undo = freeze_survivors(asyncio.get_running_loop(), thaw_every_s=0.05)
        try:
            before = gc.get_freeze_count()
            for _ in range(100):  # bounded: the thaw is due after 50 ms
                await asyncio.sleep(0.01)
                if gc.get_freeze_count() == 0:
                    break
            return before, gc.get_freeze_count()
        finally:
            undo()

    before, after = asyncio.run(main())
    assert before > 0
    assert after == 0
