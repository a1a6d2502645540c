"""Keep the garbage collector's full passes short in a server process.

CPython's oldest generation is scanned whole on each full collection, and a broker's long-lived
objects are many: every consume queue brings about twenty (its mapped file, mapping, buffers,
paths), so a broker with 10^4 queues holds over 200,000 and a full pass stops its loop for a
hundred milliseconds or more. Full passes come whenever a quarter as many objects again have
survived into that generation, which a scrape of 10^4 queues' figures or a burst of new groups
does every few seconds: each unlucky request waits out the pause.

Those objects are not garbage and will not become garbage soon, so after each full pass the
survivors are frozen (:func:`gc.freeze`): later passes scan only what was made since. Right after a
full pass no cyclic garbage is left, so freezing then holds nothing that was already garbage. What
becomes garbage later while frozen (a cycle through a deleted queue's objects) would be held until
thawed, so every ``thaw_every_s`` the frozen objects are returned to the oldest generation: the next
full pass scans them once, collects such cycles and freezes the rest again.

Only the server commands install this; a client library must not change its user's collector.
"""
from __future__ import annotations

import asyncio
import gc
from typing import Any, Callable

__all__ = ["freeze_survivors", "THAW_EVERY_S"]

#: how often frozen objects go back to the collector (one full pass over them, then frozen again)
THAW_EVERY_S = 3600.0


def _after_full_pass(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


def freeze_survivors(loop: asyncio.AbstractEventLoop | None = None,
                     thaw_every_s: float = THAW_EVERY_S) -> Callable[[], None]:
    """Freeze what survives each full collection from now on, starting with what exists now.

    With ``loop``, the frozen objects are thawed every ``thaw_every_s`` seconds (see the module's
    text). Returns a function that undoes all of it (the callback, the timer, the freeze).
    """
    gc.collect()
    gc.freeze()
    if _after_full_pass not in gc.callbacks:
        gc.callbacks.append(_after_full_pass)
    handle: asyncio.TimerHandle | None = None

    def thaw() -> None:
        nonlocal handle
        gc.unfreeze()
        if loop is not None:
            handle = loop.call_later(thaw_every_s, thaw)

    if loop is not None:
        handle = loop.call_later(thaw_every_s, thaw)

    def undo() -> None:
        if handle is not None:
            handle.cancel()
        if _after_full_pass in gc.callbacks:
            gc.callbacks.remove(_after_full_pass)
        gc.unfreeze()

    return undo
