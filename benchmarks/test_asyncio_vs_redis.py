"""The asyncio API (``fastmq.aio``) against ``redis.asyncio`` on Redis streams, 128 B messages, in
the three shapes of ``test_blocking_vs_redis.py`` (issue 18: the asyncio API should stay well
ahead), each pair in one run, alternating A B A B on one event loop:

- ``await send``: one in flight, p50 latency, beside ``await xadd`` (Redis AOF everysec, the
  broker ASYNC_FLUSH);
- ``send_async`` with a callback, every send awaited, msgs/s, beside pipelines of ``XADD``;
- a ``PushConsumer`` with an ``async def`` listener, msgs/s, beside ``XREADGROUP BLOCK`` (COUNT:
  fastmq's pull batch) + ``XACK``.

The Redis peer is ``redis.asyncio`` with hiredis parsing (a timed run refuses the pure-Python
parser); each result's ``extra_info`` says the client, its version and parser, and both durabilities.

Figures go to ``extra_info`` as ``"<peer> <metric>"`` (what ``fastmq-bench collate`` reads as a
peer pair). Skipped when redis-server or redis-py is missing.

Real figures: ``.venv/bin/python -m pytest benchmarks/test_asyncio_vs_redis.py --benchmark-only -s``.
"""
from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any, Awaitable, Callable, Coroutine

import numpy as np
import pytest

import fastmq.aio as aio
from benchmarks.redis_pair import RedisPair, check_hiredis, peers_info
from spark_bench.run.drivers import xreadgroup_count

BODY = b"x" * 128
BLOCKS = 6  # per peer, alternating
N_SYNC_BLOCK = 500  # sends per latency block
N_ASYNC = 20_000  # sends per throughput round
PIPELINE = 1_000  # XADDs per pipeline (the send_async shape has thousands in flight: it pipelines)
N_CONSUME = 100_000  # messages each consumer round reads
# XREADGROUP COUNT: the batch fastmq's PushConsumer pulls per request (its default pull_batch_size)
READ_COUNT = xreadgroup_count({"consumer_kind": "push"})


@pytest.fixture(scope="module")
def peers(fastmq_and_redis: RedisPair) -> RedisPair:
    pytest.importorskip("redis.asyncio")
    return fastmq_and_redis


Round = Callable[[], Awaitable[list[float]]]


async def _alternate(blocks: int, a: Round, b: Round) -> tuple[list[float], list[float]]:
    """``blocks`` blocks of each, A B A B ... (B first on odd blocks)."""
    ra: list[float] = []
    rb: list[float] = []
    for i in range(blocks):
        order = [(a, ra), (b, rb)] if i % 2 == 0 else [(b, rb), (a, ra)]
        for fn, out in order:
            out.extend(await fn())
    return ra, rb


async def _xadd_pipelined(rds: Any, stream: str, n: int) -> None:
    """``n`` XADDs of BODY, PIPELINE to a pipeline (no MULTI), each pipeline's answers read
    before the next is sent."""
    for _ in range(n // PIPELINE):
        pipe = rds.pipeline(transaction=False)
        for _ in range(PIPELINE):
            pipe.xadd(stream, {"body": BODY})
        await pipe.execute()


def _say_peers(benchmark: Any, peers: RedisPair) -> None:
    """The peers' client, version, parser and durability into ``extra_info`` (hiredis required
    for a timed run)."""
    info = peers_info(peers.redis_port, "redis.asyncio")
    if not benchmark.disabled:
        check_hiredis(info)
    benchmark.extra_info.update(info)


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def _run_pair(benchmark: Any, make: Callable[[RedisPair], Coroutine[Any, Any, tuple[list[float], list[float]]]],
              peers: RedisPair) -> tuple[list[float], list[float]]:
    out: list[tuple[list[float], list[float]]] = []
    benchmark.pedantic(lambda: out.append(asyncio.run(make(peers))), rounds=1, iterations=1)
    return out[0]


def test_asyncio_send_p50_vs_xadd(benchmark: Any, peers: RedisPair) -> None:
    """(a) ``await Producer.send``, one in flight, against ``await xadd``; latencies in µs."""
    _say_peers(benchmark, peers)
    import redis.asyncio as aredis
    blocks, n = (1, 50) if benchmark.disabled else (BLOCKS, N_SYNC_BLOCK)

    async def pair(peers: RedisPair) -> tuple[list[float], list[float]]:
        rds: Any = aredis.Redis(host="127.0.0.1", port=peers.redis_port)
        async with aio.Producer("PG_ASYNCIO_VS_REDIS_SYNC", namesrv_addr=peers.ns) as p:
            await p.send(aio.Message("AsyncioBench", b"warm"))
            await rds.xadd("AsyncioBench", {"body": b"warm"})

            async def fastmq_block() -> list[float]:
                lat = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    await p.send(aio.Message("AsyncioBench", BODY))
                    lat.append((time.perf_counter() - t0) * 1e6)
                return lat

            async def redis_block() -> list[float]:
                lat = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    await rds.xadd("AsyncioBench", {"body": BODY})
                    lat.append((time.perf_counter() - t0) * 1e6)
                return lat
            try:
                return await _alternate(blocks, fastmq_block, redis_block)
            finally:
                await rds.aclose()
    fm, rd = _run_pair(benchmark, pair, peers)
    benchmark.extra_info.update({"fastmq await_send p50_us": round(_p(fm, 50), 1),
                                 "fastmq await_send p99_us": round(_p(fm, 99), 1),
                                 "redis.asyncio XADD p50_us": round(_p(rd, 50), 1),
                                 "redis.asyncio XADD p99_us": round(_p(rd, 99), 1)})
    print(f"\n(a) asyncio, one in flight, 128 B: fastmq send p50 {_p(fm, 50):.0f} us (p99 {_p(fm, 99):.0f}), "
          f"redis.asyncio XADD p50 {_p(rd, 50):.0f} us (p99 {_p(rd, 99):.0f}); fastmq / redis p50 "
          f"{_p(fm, 50) / _p(rd, 50):.2f}x")


def _rates(benchmark: Any, fm: list[float], rd: list[float], names: tuple[str, str], what: str) -> None:
    f, r = statistics.median(fm), statistics.median(rd)
    benchmark.extra_info.update({f"{names[0]} msgs/s": round(f), f"{names[1]} msgs/s": round(r)})
    print(f"\n{what}: {names[0]} {f:,.0f} msgs/s (rounds {min(fm):,.0f}-{max(fm):,.0f}), {names[1]} {r:,.0f} "
          f"msgs/s (rounds {min(rd):,.0f}-{max(rd):,.0f}); fastmq / redis {f / r:.2f}x")


def test_asyncio_send_async_vs_pipelined_xadd(benchmark: Any, peers: RedisPair) -> None:
    """(b) ``send_async`` with a callback, every send awaited, against ``redis.asyncio`` pipelines
    of PIPELINE XADDs (no MULTI); msgs/s of each round."""
    _say_peers(benchmark, peers)
    import redis.asyncio as aredis
    blocks, n = (1, 2_000) if benchmark.disabled else (BLOCKS, N_ASYNC)

    async def pair(peers: RedisPair) -> tuple[list[float], list[float]]:
        rds: Any = aredis.Redis(host="127.0.0.1", port=peers.redis_port)
        async with aio.Producer("PG_ASYNCIO_VS_REDIS_ASYNC", namesrv_addr=peers.ns) as p:
            await p.send(aio.Message("AsyncioBench", b"warm"))

            async def fastmq_round() -> list[float]:
                done = asyncio.get_running_loop().create_future()
                acked = [0, 0]  # acknowledged, failed

                def on_sent(result: object, error: BaseException | None) -> None:
                    acked[0] += 1
                    if error is not None:
                        acked[1] += 1
                    if acked[0] == n and not done.done():
                        done.set_result(None)
                t0 = time.perf_counter()
                for _ in range(n):
                    await p.send_async(aio.Message("AsyncioBench", BODY), on_sent)
                await asyncio.wait_for(done, 120)
                assert acked == [n, 0], acked
                return [n / (time.perf_counter() - t0)]

            async def redis_round() -> list[float]:
                t0 = time.perf_counter()
                await _xadd_pipelined(rds, "AsyncioBench", n)
                return [n / (time.perf_counter() - t0)]
            try:
                return await _alternate(blocks, fastmq_round, redis_round)
            finally:
                await rds.aclose()
    fm, rd = _run_pair(benchmark, pair, peers)
    _rates(benchmark, fm, rd, ("fastmq aio_send_async", "redis.asyncio pipelined_XADD"),
           f"(b) asyncio send_async + callback, {n} awaited, 128 B")


def test_asyncio_send_async_futures_vs_pipelined_xadd(benchmark: Any, peers: RedisPair) -> None:
    """(b') ``send_async`` with a per-message wait: each send's own future kept and awaited, PIPELINE
    at a time (``asyncio.gather``), against the same ``redis.asyncio`` pipelines of PIPELINE XADDs;
    msgs/s of each round."""
    _say_peers(benchmark, peers)
    import redis.asyncio as aredis
    blocks, n = (1, 2_000) if benchmark.disabled else (BLOCKS, N_ASYNC)

    async def pair(peers: RedisPair) -> tuple[list[float], list[float]]:
        rds: Any = aredis.Redis(host="127.0.0.1", port=peers.redis_port)
        async with aio.Producer("PG_ASYNCIO_VS_REDIS_FUTURES", namesrv_addr=peers.ns) as p:
            await p.send(aio.Message("AsyncioBench", b"warm"))

            async def fastmq_round() -> list[float]:
                t0 = time.perf_counter()
                for _ in range(n // PIPELINE):
                    futures = [await p.send_async(aio.Message("AsyncioBench", BODY)) for _ in range(PIPELINE)]
                    await asyncio.wait_for(asyncio.gather(*futures), 120)
                return [n / (time.perf_counter() - t0)]

            async def redis_round() -> list[float]:
                t0 = time.perf_counter()
                await _xadd_pipelined(rds, "AsyncioBench", n)
                return [n / (time.perf_counter() - t0)]
            try:
                return await _alternate(blocks, fastmq_round, redis_round)
            finally:
                await rds.aclose()
    fm, rd = _run_pair(benchmark, pair, peers)
    _rates(benchmark, fm, rd, ("fastmq aio_send_async_futures", "redis.asyncio pipelined_XADD"),
           f"(b') asyncio send_async, each future awaited {PIPELINE} at a time, {n} sends, 128 B")


def test_asyncio_push_consumer_vs_xreadgroup(benchmark: Any, peers: RedisPair) -> None:
    """(c) a ``PushConsumer`` with an ``async def`` listener (its defaults: one message a call), a
    new group each round over the same N_CONSUME messages, against a new Redis consumer group
    reading them with XREADGROUP COUNT READ_COUNT and one XACK per read; msgs/s from the first
    message received to the last, both."""
    _say_peers(benchmark, peers)
    import redis.asyncio as aredis
    blocks, n = (2, 10_000) if benchmark.disabled else (BLOCKS, N_CONSUME)
    topic = stream = "AsyncioConsume"
    from_start: tuple[list[float], list[float]] = ([], [])

    async def pair(peers: RedisPair) -> tuple[list[float], list[float]]:
        rds: Any = aredis.Redis(host="127.0.0.1", port=peers.redis_port)
        async with aio.Producer("PG_ASYNCIO_VS_REDIS_FILL", namesrv_addr=peers.ns) as p:
            for _ in range(n // 100):
                await p.send_batch([aio.Message(topic, BODY) for _ in range(100)])
        await _xadd_pipelined(rds, stream, n)
        rounds = [0]

        async def fastmq_round() -> list[float]:
            rounds[0] += 1
            done = asyncio.get_running_loop().create_future()
            seen = [0]
            first: list[float] = []

            async def listener(msgs: list[aio.MessageExt]) -> str:
                if not first:
                    first.append(time.perf_counter())
                seen[0] += len(msgs)
                if seen[0] >= n and not done.done():
                    first.append(time.perf_counter())
                    done.set_result(None)
                return aio.ConsumeStatus.CONSUME_SUCCESS
            c = aio.PushConsumer(f"GID_ASYNCIO_VS_REDIS_{rounds[0]}", namesrv_addr=peers.ns,
                                 consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            c.subscribe(topic)
            c.register_message_listener(listener)
            t_start = time.perf_counter()
            await c.start()
            try:
                await asyncio.wait_for(done, 300)
            finally:
                await c.shutdown()
            from_start[0].append(n / (first[1] - t_start))
            return [(n - 1) / (first[1] - first[0])]

        async def redis_round() -> list[float]:
            rounds[0] += 1
            group = f"g{rounds[0]}"
            t_start = time.perf_counter()
            await rds.xgroup_create(stream, group, id="0")
            seen, t0, deadline = 0, 0.0, time.monotonic() + 300
            while seen < n:
                assert time.monotonic() < deadline, seen
                got = await rds.xreadgroup(group, "c1", {stream: ">"}, count=READ_COUNT, block=1000)
                if not got:
                    continue
                ids = [mid for mid, _fields in got[0][1]]
                if not seen:
                    t0 = time.perf_counter()
                seen += len(ids)
                await rds.xack(stream, group, *ids)
            end = time.perf_counter()
            from_start[1].append(n / (end - t_start))
            # (the first read's own time is not counted, as fastmq's first delivery is not)
            return [(n - READ_COUNT) / (end - t0)]
        try:
            return await _alternate(blocks // 2, fastmq_round, redis_round)
        finally:
            await rds.aclose()
    fm, rd = _run_pair(benchmark, pair, peers)
    _rates(benchmark, fm, rd, ("fastmq aio_async_listener", "redis.asyncio XREADGROUP+XACK"),
           f"(c) asyncio consume {n} x 128 B (XREADGROUP COUNT {READ_COUNT})")
    _rates(benchmark, *from_start, ("fastmq aio_async_listener_from_start", "redis.asyncio XREADGROUP+XACK_from_start"),
           "(d) asyncio consume, timed from start()")
