"""Reference peers for one-in-flight latency: an echo server (the floor under any request/answer
exchange between two Python processes here), redis-server through redis-py, and CPU pinning.

They are references, not dependencies: redis-server (Debian's package) and redis-py (PyPI's
``redis``) are used when installed and skipped otherwise.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import numpy as np

from fastmq.testing import ServerProcess, free_port

# Written with the loop the broker runs on (uvloop when installed); answers each frame after
# ``argv[2]`` µs of busy work, 0 for the floor.
_ECHO_SERVER = """
import asyncio, socket, sys, time
from fastmq.remoting.loop import run
work = float(sys.argv[2]) / 1e6
class Echo(asyncio.Protocol):
    def connection_made(self, t):
        t.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.t = t
    def data_received(self, d):
        end = time.perf_counter() + work
        while time.perf_counter() < end:
            pass
        self.t.write(d)
async def main():
    await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", int(sys.argv[1]))
    await asyncio.Event().wait()
run(main())
"""
ECHO_FRAME = b"x" * 400  # about a SEND_MESSAGE_V2 request carrying 128 B

RoundTrip = Callable[[], Awaitable[None]]


async def echo_round_trip(tmp: Path, stack: contextlib.ExitStack, work_us: float = 0.0,
                          server_cpu: int | None = None) -> RoundTrip:
    """One round trip to an echo server started here, as a coroutine function; ``server_cpu``
    pins the server to that CPU."""
    loop = asyncio.get_running_loop()
    port = free_port()
    argv = [Path(sys.executable).name, "-c", _ECHO_SERVER, str(port), str(work_us)]  # (this venv's python)
    echo = stack.enter_context(ServerProcess(argv, port, tmp))
    if server_cpu is not None:
        assert echo.proc is not None
        os.sched_setaffinity(echo.proc.pid, {server_cpu})
    answered: list[asyncio.Future] = []

    class EchoClient(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:  # a 400 B echo arrives in one read on loopback
            answered.pop().set_result(None)

    transport, _ = await loop.create_connection(EchoClient, "127.0.0.1", port)
    transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    stack.callback(transport.close)

    async def round_trip() -> None:
        fut = loop.create_future()
        answered.append(fut)
        transport.write(ECHO_FRAME)
        await fut
    return round_trip


def redis_client(tmp: Path, stack: contextlib.ExitStack) -> Any:
    """A redis-py client of a redis-server started here (no persistence), or None when either
    is not installed."""
    try:
        import redis
    except ImportError:
        return None
    if shutil.which("redis-server") is None:
        return None
    port = free_port()
    stack.enter_context(ServerProcess(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--dir", str(tmp)], port, tmp))
    client = redis.Redis(host="127.0.0.1", port=port)
    stack.callback(client.close)
    return client


def _threads(pid: int) -> list[int]:
    """The thread ids of process ``pid`` (0: this one); affinity is per thread on Linux."""
    return [int(t) for t in os.listdir(f"/proc/{pid or os.getpid()}/task")]


@contextlib.contextmanager
def pinned(pids: list[int], cpu: int) -> Iterator[None]:
    """Every thread of ``pids`` (0: this process) on ``cpu`` alone, and afterwards every thread
    they then have (those started meanwhile too) back on the CPUs the process had; processes
    started meanwhile from this one inherit the pin."""
    before = {pid: os.sched_getaffinity(pid) for pid in pids}
    try:
        for pid in pids:
            for tid in _threads(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.sched_setaffinity(tid, {cpu})
        yield
    finally:
        for pid, cpus in before.items():
            with contextlib.suppress(FileNotFoundError):
                for tid in _threads(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.sched_setaffinity(tid, cpus)


async def time_round_trips(one: RoundTrip, n: int) -> np.ndarray:
    """Latencies of ``n`` round trips one after another, in µs."""
    lat = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        await one()
        lat[i] = time.perf_counter() - t0
    return lat * 1e6
