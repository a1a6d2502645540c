"""Reading a process's resident memory from /proc, and turning readings at growing counts into
per-unit figures (the memory benchmarks' shared arithmetic).

What is read (``/proc/<pid>/status``, KiB): ``VmRSS`` = ``RssAnon`` + ``RssFile`` + ``RssShmem``.
``RssAnon`` is the heap (Python objects, buffers); ``RssFile`` counts the pages of mapped files
(the store's commit log, consume queues and index) that this process has touched and not yet
given back; they are page cache the kernel may reclaim, but while mapped they are resident in
the broker's address space, so both are reported. ``VmPTE`` (page tables, kernel memory not in
RSS) is kept beside them: every mapped file touched costs at least one page-table page.
"""
from __future__ import annotations

import time
from pathlib import Path

__all__ = ["KEYS", "Point", "flat", "marginal", "memory_kib", "per_unit", "settled_kib"]

KEYS = ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmPTE")


def memory_kib(pid: int) -> dict[str, int]:
    """The :data:`KEYS` lines of ``/proc/<pid>/status`` in KiB (a key the kernel lacks is 0)."""
    out = dict.fromkeys(KEYS, 0)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in out:
            out[key] = int(rest.split()[0])
    return out


def settled_kib(pid: int, *, at_least_s: float = 0.0, max_s: float = 10.0, every_s: float = 0.2,
                band_kib: int = 64, calm: int = 3) -> dict[str, int]:
    """:func:`memory_kib` once ``VmRSS`` stopped moving: ``calm`` readings in a row within
    ``band_kib`` of each other, no sooner than ``at_least_s`` (for a store, the page release that
    runs once a second), no later than ``max_s`` (then the last reading, as it is)."""
    t0 = time.monotonic()
    last = memory_kib(pid)
    steady = 0
    while True:
        time.sleep(every_s)
        cur = memory_kib(pid)
        steady = steady + 1 if abs(cur["VmRSS"] - last["VmRSS"]) <= band_kib else 0
        last = cur
        waited = time.monotonic() - t0
        if (steady >= calm and waited >= at_least_s) or waited >= max_s:
            return cur


class Point:
    """A reading at a count of units (connections, queues, messages) against the base reading."""

    __slots__ = ("count", "kib", "base")

    def __init__(self, count: int, kib: dict[str, int], base: dict[str, int]) -> None:
        self.count = count
        self.kib = kib
        self.base = base

    def delta(self, key: str) -> int:
        """KiB of ``key`` gained since the base reading."""
        return self.kib[key] - self.base[key]


def per_unit(point: Point, key: str, unit: int = 1) -> float:
    """KiB of ``key`` gained per ``unit`` counted (``unit`` 10**6 for messages), 2 decimals."""
    return round(point.delta(key) / (point.count / unit), 2)


def marginal(points: list[Point], key: str, unit: int = 1) -> list[float]:
    """KiB of ``key`` per ``unit`` between each point and the one before it (the first: from the
    base). Free memory the base already held makes the first figures low; the marginal ones show
    what each further unit costs once that is used up."""
    out, prev_count, prev_kib = [], 0, None
    for p in points:
        before = p.base[key] if prev_kib is None else prev_kib
        out.append(round((p.kib[key] - before) / ((p.count - prev_count) / unit), 2))
        prev_count, prev_kib = p.count, p.kib[key]
    return out


def flat(points: list[Point], key: str, unit: int = 1, slack_kib: float = 0.0) -> bool:
    """Each per-unit figure no larger than the one at the smaller count before it, within what
    the readings can tell: each total is known to ``slack_kib`` (the allocator takes memory from
    the system a megabyte at a time), so a figure at ``n`` units is known to ``slack_kib / n``."""
    figs = [(p.count / unit, per_unit(p, key, unit)) for p in points]
    return all(b <= a + slack_kib / na + slack_kib / nb for (na, a), (nb, b) in zip(figs, figs[1:]))
