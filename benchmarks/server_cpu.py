"""A server process's CPU to the nanosecond, for benchmarks that count a server's CPU per message."""
from __future__ import annotations

import glob

from fastmq.testing import ServerProcess

__all__ = ["server_cpu"]


def server_cpu(server: ServerProcess) -> float:
    """The process's CPU seconds so far, all its threads, to the nanosecond where the kernel keeps
    scheduler statistics (/proc/<pid>/task/*/schedstat); clock ticks (10 ms) otherwise."""
    total = 0
    for stat in glob.glob(f"/proc/{server.pid}/task/*/schedstat"):
        try:
            with open(stat) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return total / 1e9 if total else server.cpu_seconds()
