"""The group commit's wait-then-sync, pure-Python reference of ``sync_wait_c``.

:func:`wait_and_sync` is the body of one SYNC_FLUSH round for the common case, one commit-log
file holding every byte not yet flushed: wait until a requester writes the wake ``eventfd``
(or ``timeout_ms`` passes), read the offset the requesters asked for, and ``fdatasync`` the
file at once. The compiled twin does all of it without the GIL, so the sync starts the moment
it is asked for, while the event loop that asked still holds the GIL finishing its request;
this one takes the GIL between the steps (same results, later start).
"""
from __future__ import annotations

import os
import select
import time

import numpy as np
import numpy.typing as npt

__all__ = ["wait_and_sync", "TIMED_OUT", "PAST_LIMIT"]

TIMED_OUT = -1  # nothing asked within timeout_ms; nothing synced
PAST_LIMIT = -2  # asked for bytes past ``limit`` (another file): woken, nothing synced


def wait_and_sync(wake_fd: int, data_fd: int, target: npt.NDArray[np.int64], limit: int, done: int,
                  timeout_ms: int) -> tuple[int, int]:
    """Wait for a request on ``wake_fd`` (an eventfd, its count consumed), then sync ``data_fd``.

    ``target[0]``: the log offset the requesters need on disk (each writes it, then the
    eventfd). ``limit``: the log offset where ``data_fd``'s file ends; ``done``: the offset
    already known flushed (a target at or below it needs no sync).

    Returns:
        The target now covered (read before the sync began), :data:`TIMED_OUT` or
        :data:`PAST_LIMIT`; and the nanoseconds the fdatasync took (0 when none ran).

    Raises:
        OSError: the fdatasync failed (nothing is known durable), or the wait did.
    """
    p = select.poll()
    p.register(wake_fd, select.POLLIN)
    if not p.poll(timeout_ms):
        return TIMED_OUT, 0
    os.eventfd_read(wake_fd)
    t = int(target[0])
    if t > limit:
        return PAST_LIMIT, 0
    if t <= done:
        return t, 0
    t0 = time.perf_counter_ns()
    os.fdatasync(data_fd)
    return t, time.perf_counter_ns() - t0
