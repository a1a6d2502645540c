"""The servers the redis comparisons (``test_blocking_vs_redis``, ``test_asyncio_vs_redis``) measure
side by side: fastmq's NameServer and one ASYNC_FLUSH broker, and a redis-server with AOF everysec
(the durability closest to ASYNC_FLUSH), started as a user would on loopback ports chosen now."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator, NamedTuple

from fastmq.testing import ServerProcess, broker_process, free_port, namesrv_process


class RedisPair(NamedTuple):
    ns: str  # the fastmq-namesrv, its one broker registered
    redis_port: int


@contextlib.contextmanager
def running(tmp: Path) -> Iterator[RedisPair]:
    """Both servers, their files under ``tmp``; stopped on the way out."""
    with contextlib.ExitStack() as stack:
        ns = namesrv_process(tmp).start()
        stack.callback(ns.stop)
        b = broker_process(tmp, ns.addr, brokerName="bench", flushDiskType="ASYNC_FLUSH",
                           mappedFileSizeCommitLog=268435456).start()
        stack.callback(b.stop)
        port = free_port()
        rdir = tmp / "redis"
        rdir.mkdir()
        stack.enter_context(ServerProcess(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
             "--appendfsync", "everysec", "--dir", str(rdir)], port, rdir))
        yield RedisPair(ns.addr, port)
