"""Request-reply round trip, 128 B: fastmq's ``await Producer.request`` (through the broker to a
responding PushConsumer and back) beside the same request/response built on Redis with
``redis.asyncio`` (``XADD`` to a request stream naming a reply list, ``BLPOP`` on that list; the
responder reads with ``XREADGROUP BLOCK`` and answers with ``LPUSH`` + ``XACK``), in two shapes:

- one request in flight;
- a steady rate (RATE requests a second, started on schedule whatever is in flight): fastmq's
  requests as tasks, Redis's requests answered through one reader task that BLPOPs the
  requester's reply list and completes each request's future by its correlation id.

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


async def _until_answered(p: Any) -> None:
    """Wait (90 s at most) until a request through ``p`` is answered: the responder has been
    placed on the topic's queues (a new topic: its first route poll)."""
    deadline = time.monotonic() + 90
    while True:
        try:
            await p.request(aio.Message(TOPIC, b"warm"), timeout_ms=2000)
            return
        except RequestTimeoutError:
            if time.monotonic() > deadline:
                raise


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
            await _until_answered(p)

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


RATE = 200  # requests a second, the steady shape
STEADY_S = 3.0  # seconds a block


def test_request_reply_steady_rate_vs_redis(benchmark: Any, peers: RedisPair) -> None:
    info = peers_info(peers.redis_port, "redis.asyncio")
    if not benchmark.disabled:
        check_hiredis(info)
    benchmark.extra_info.update(info)
    import redis.asyncio as aredis
    blocks, seconds = (1, 0.5) if benchmark.disabled else (4, STEADY_S)
    n = int(RATE * seconds)

    async def pair() -> tuple[list[float], list[float]]:
        rds: Any = aredis.Redis(host="127.0.0.1", port=peers.redis_port)
        reader: Any = aredis.Redis(host="127.0.0.1", port=peers.redis_port)  # BLPOP holds its connection
        reply_to = f"rpc:reply:{uuid.uuid4().hex}"
        waiting: dict[bytes, asyncio.Future[bytes]] = {}

        async def read_replies() -> None:
            while True:
                got = await reader.blpop([reply_to], timeout=0)
                cid, _, body = got[1].partition(b":")
                fut = waiting.pop(cid, None)
                if fut is not None and not fut.done():
                    fut.set_result(body)
        replies = asyncio.ensure_future(read_replies())
        async with aio.Producer("PG_RPC_BENCH_STEADY", namesrv_addr=peers.ns) as p:
            await _until_answered(p)

            async def one_fastmq(lat: list[float]) -> None:
                t0 = time.perf_counter()
                await p.request(aio.Message(TOPIC, BODY), timeout_ms=10_000)
                lat.append((time.perf_counter() - t0) * 1e6)

            async def one_redis(lat: list[float], i: int) -> None:
                cid = f"s{i}-{uuid.uuid4().hex[:8]}".encode()
                fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
                waiting[cid] = fut
                t0 = time.perf_counter()
                await rds.xadd(STREAM, {"body": BODY, "reply_to": reply_to, "cid": cid})
                assert await asyncio.wait_for(fut, 10) == BODY
                lat.append((time.perf_counter() - t0) * 1e6)

            async def steady(start: Any) -> list[float]:
                lat: list[float] = []
                tasks = []
                t0 = time.perf_counter()
                for i in range(n):
                    delay = t0 + i / RATE - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    tasks.append(asyncio.ensure_future(start(lat, i)))
                await asyncio.gather(*tasks)
                return lat
            fm: list[float] = []
            rd: list[float] = []
            try:
                for b in range(blocks):
                    order = [(lambda lat, i: one_fastmq(lat), fm), (one_redis, rd)]
                    for start, out in (order if b % 2 == 0 else order[::-1]):
                        out.extend(await steady(start))
            finally:
                replies.cancel()
                await rds.aclose()
                await reader.aclose()
            return fm, rd
    out: list[tuple[list[float], list[float]]] = []
    benchmark.pedantic(lambda: out.append(asyncio.run(pair())), rounds=1, iterations=1)
    fm, rd = out[0]
    benchmark.extra_info.update({"rate": f"{RATE} requests/s",  # (a string: not a figure)
                                 "fastmq request p50_us": round(_p(fm, 50), 1),
                                 "fastmq request p99_us": round(_p(fm, 99), 1),
                                 "redis.asyncio XADD+BLPOP p50_us": round(_p(rd, 50), 1),
                                 "redis.asyncio XADD+BLPOP p99_us": round(_p(rd, 99), 1)})
    print(f"\nrequest-reply at {RATE}/s, 128 B: fastmq request p50 {_p(fm, 50):.0f} us (p99 {_p(fm, 99):.0f}), "
          f"redis.asyncio XADD + BLPOP p50 {_p(rd, 50):.0f} us (p99 {_p(rd, 99):.0f}) over {len(fm)} each; "
          f"fastmq / redis p50 {_p(fm, 50) / _p(rd, 50):.2f}x")
