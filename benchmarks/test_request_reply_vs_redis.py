"""Request-reply round trip, one request in flight, 128 B: fastmq's ``await Producer.request``
(through the broker to a responding PushConsumer and back) beside the same request/response built
on Redis with ``redis.asyncio`` (``XADD`` to a request stream naming a reply list, ``BLPOP`` on
that list; the responder reads with ``XREADGROUP BLOCK`` and answers with ``LPUSH`` + ``XACK``).

Both responders run in one other process (``benchmarks/rpc_responders.py``); the requests
alternate in blocks, A B A B, on one event loop. Broker ASYNC_FLUSH, Redis AOF everysec; the
Redis client uses hiredis (a timed run refuses the pure-Python parser). p50 and p99 of each
round trip, in µs, go to ``extra_info`` as ``"<peer> <metric>"`` (``fastmq-bench collate`` pairs them).

Real figures: ``.venv/bin/python -m pytest benchmarks/test_request_reply_vs_redis.py --benchmark-only -s``.
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fastmq.aio as aio
from benchmarks.redis_pair import RedisPair, check_hiredis, peers_info
from benchmarks.rpc_responders import STREAM, TOPIC
from fastmq.errors import RequestTimeoutError

ROOT = Path(__file__).resolve().parent.parent
BODY = b"x" * 128
BLOCKS = 6  # per peer, alternating
N_BLOCK = 300  # requests per block


@pytest.fixture(scope="module")
def peers(fastmq_and_redis: RedisPair) -> Any:
    pytest.importorskip("redis.asyncio")
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.rpc_responders", fastmq_and_redis.ns,
                             str(fastmq_and_redis.redis_port)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        yield fastmq_and_redis
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def test_request_reply_round_trip_vs_redis(benchmark: Any, peers: RedisPair) -> None:
    info = peers_info(peers.redis_port, "redis.asyncio")
    if not benchmark.disabled:
        check_hiredis(info)
    benchmark.extra_info.update(info)
    import redis.asyncio as aredis
    blocks, n = (1, 30) if benchmark.disabled else (BLOCKS, N_BLOCK)

    async def pair() -> tuple[list[float], list[float]]:
        rds: Any = aredis.Redis(host="127.0.0.1", port=peers.redis_port)
        reply_to = f"rpc:reply:{uuid.uuid4().hex}"
        async with aio.Producer("PG_RPC_BENCH_REQ", namesrv_addr=peers.ns) as p:
            # until the responder is placed on the topic's queues (a new topic: its first route poll)
            deadline = time.monotonic() + 90
            while True:
                try:
                    await p.request(aio.Message(TOPIC, b"warm"), timeout_ms=2000)
                    break
                except RequestTimeoutError:
                    if time.monotonic() > deadline:
                        raise

            async def fastmq_block() -> list[float]:
                lat = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    reply = await p.request(aio.Message(TOPIC, BODY), timeout_ms=5000)
                    lat.append((time.perf_counter() - t0) * 1e6)
                    assert reply.body == BODY
                return lat

            async def redis_block() -> list[float]:
                lat = []
                for i in range(n):
                    cid = f"{i}-{uuid.uuid4().hex[:8]}".encode()
                    t0 = time.perf_counter()
                    await rds.xadd(STREAM, {"body": BODY, "reply_to": reply_to, "cid": cid})
                    while True:  # (a reply to an earlier, timed-out request would be skipped)
                        got = await rds.blpop([reply_to], timeout=5)
                        assert got is not None, "no Redis reply in 5 s"
                        if got[1].startswith(cid + b":"):
                            break
                    lat.append((time.perf_counter() - t0) * 1e6)
                return lat
            await redis_block()  # warm, both
            fm: list[float] = []
            rd: list[float] = []
            try:
                for b in range(blocks):
                    order = [(fastmq_block, fm), (redis_block, rd)]
                    for fn, out in (order if b % 2 == 0 else order[::-1]):
                        out.extend(await fn())
            finally:
                await rds.aclose()
            return fm, rd
    out: list[tuple[list[float], list[float]]] = []
    benchmark.pedantic(lambda: out.append(asyncio.run(pair())), rounds=1, iterations=1)
    fm, rd = out[0]
    benchmark.extra_info.update({"fastmq request p50_us": round(_p(fm, 50), 1),
                                 "fastmq request p99_us": round(_p(fm, 99), 1),
                                 "redis.asyncio XADD+BLPOP p50_us": round(_p(rd, 50), 1),
                                 "redis.asyncio XADD+BLPOP p99_us": round(_p(rd, 99), 1)})
    print(f"\nrequest-reply, one in flight, 128 B: fastmq request p50 {_p(fm, 50):.0f} us (p99 {_p(fm, 99):.0f}), "
          f"redis.asyncio XADD + BLPOP p50 {_p(rd, 50):.0f} us (p99 {_p(rd, 99):.0f}) over {len(fm)} each; "
          f"fastmq / redis p50 {_p(fm, 50) / _p(rd, 50):.2f}x")
