"""UNIQ_KEY: the id a producer gives each message before sending it (MessageClientIDSetter).

32 uppercase hex digits: the client's IPv4 address, its pid (16 bits), a random per-process
int32 (Java uses the class loader's hash), milliseconds since the start of the month (int32)
and a 16-bit counter. It is what ``SendResult.msg_id`` reports and what consumers see as the
message id, while the broker's offset id is ``offset_msg_id``.
"""
from __future__ import annotations

import calendar
import itertools
import os
import random
import socket
import threading
import time

from ..remoting.address import local_address

__all__ = ["create_uniq_id"]


def _month_start(ms: int) -> tuple[int, int]:
    t = time.gmtime(ms / 1000)
    start = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)) * 1000
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    return start, calendar.timegm((year, month, 1, 0, 0, 0)) * 1000


_FIX = (socket.inet_aton(local_address()) + (os.getpid() & 0xFFFF).to_bytes(2, "big")
        + random.getrandbits(32).to_bytes(4, "big")).hex().upper()
_counter = itertools.count()
_lock = threading.Lock()
_start, _next = _month_start(int(time.time() * 1000))


def create_uniq_id() -> str:
    """A new UNIQ_KEY (thread-safe)."""
    global _start, _next
    now = int(time.time() * 1000)
    with _lock:
        if now >= _next:
            _start, _next = _month_start(now)
        diff = (now - _start) & 0xFFFFFFFF
        count = next(_counter) & 0xFFFF
    return f"{_FIX}{diff:08X}{count:04X}"


def create_uniq_ids(n: int) -> list[str]:
    """``n`` new UNIQ_KEYs, as ``n`` calls of :func:`create_uniq_id` would make them, for one clock
    read and one lock (a batch send)."""
    global _start, _next
    now = int(time.time() * 1000)
    with _lock:
        if now >= _next:
            _start, _next = _month_start(now)
        head = f"{_FIX}{(now - _start) & 0xFFFFFFFF:08X}"
        counts = [next(_counter) & 0xFFFF for _ in range(n)]
    return [f"{head}{c:04X}" for c in counts]
