"""The servers the redis comparisons (``test_blocking_vs_redis``, ``test_asyncio_vs_redis``) measure
side by side: fastmq's NameServer and one ASYNC_FLUSH broker, and a redis-server with AOF everysec
(the durability closest to ASYNC_FLUSH), started as a user would on loopback ports chosen now."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from fastmq.testing import ServerProcess, broker_process, free_port, namesrv_process


#: the broker's flushDiskType below, said beside the Redis peer's durability in every result
FASTMQ_DURABILITY = "ASYNC_FLUSH"


class RedisPair(NamedTuple):
    ns: str  # the fastmq-namesrv, its one broker registered
    redis_port: int


def peers_info(redis_port: int, client: str) -> dict[str, str]:
    """What a comparison's ``extra_info`` says of its two peers (issue 33): the Redis client (its
    API ``client``, e.g. "redis-py" or "redis.asyncio"), redis-py's version and reply parser, the
    server's version and durability, and fastmq's. Strings: ``fastmq-bench collate`` reads only
    numbers as figures."""
    import redis

    from spark_bench.run.drivers import redis_peer
    r = redis.Redis(host="127.0.0.1", port=redis_port)
    try:
        peer = redis_peer(r)
    finally:
        r.close()
    return {"redis client": f"{client} ({peer['client']})", "redis parser": peer["parser"],
            "redis server": peer["server"], "redis durability": peer["durability"],
            "fastmq durability": f"broker {FASTMQ_DURABILITY}"}


def check_hiredis(info: dict[str, Any]) -> None:
    """A real run (timed) refuses to measure the Redis peer without hiredis: that is not the peer a
    user picking Redis for speed runs (the ``spark`` extra installs it)."""
    if info["redis parser"] != "hiredis":
        raise RuntimeError("hiredis is not installed: pip install 'redis[hiredis]' (the spark extra)")


@contextlib.contextmanager
def running(tmp: Path) -> Iterator[RedisPair]:
    """Both servers, their files under ``tmp``; stopped on the way out."""
    with contextlib.ExitStack() as stack:
        ns = namesrv_process(tmp).start()
        stack.callback(ns.stop)
        b = broker_process(tmp, ns.addr, brokerName="bench", flushDiskType=FASTMQ_DURABILITY,
                           mappedFileSizeCommitLog=268435456).start()
        stack.callback(b.stop)
        port = free_port()
        rdir = tmp / "redis"
        rdir.mkdir()
        stack.enter_context(ServerProcess(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
             "--appendfsync", "everysec", "--dir", str(rdir)], port, rdir))
        yield RedisPair(ns.addr, port)
