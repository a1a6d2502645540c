"""The blocking API (``fastmq.Producer``, ``fastmq.PushConsumer``) against redis-py's blocking
client on Redis streams, 128 B messages, in the three shapes of issue 18, each pair in one run:

- ``send``: one in flight, p50 latency, beside ``XADD`` (Redis AOF everysec, the broker ASYNC_FLUSH);
- ``send_async`` with a callback, every send awaited, msgs/s, beside pipelined ``XADD``;
- a ``PushConsumer`` with a plain function listener, msgs/s, beside ``XREADGROUP BLOCK`` (COUNT:
  fastmq's pull batch) + ``XACK``.

The Redis peer is redis-py's blocking client with hiredis parsing (a timed run refuses the pure-Python
parser); each result's ``extra_info`` says the client, its version and parser, and both durabilities.

Each test alternates fastmq and Redis blocks (A B A B ...) so both see the same stretches of a
shared machine's quiet and busy phases; the figures are medians over the blocks, kept in
``extra_info`` as ``"<peer> <metric>"`` (what ``fastmq-bench collate`` reads as a peer pair).
Skipped when redis-server or redis-py is missing.

Real figures: ``.venv/bin/python -m pytest benchmarks/test_blocking_vs_redis.py --benchmark-only -s``.
"""
from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np
import pytest

import fastmq
from benchmarks.redis_pair import RedisPair, check_hiredis, peers_info
from spark_bench.run.drivers import xreadgroup_count

BODY = b"x" * 128
BLOCKS = 6  # per peer, alternating
N_SYNC_BLOCK = 500  # sends per latency block
N_ASYNC = 20_000  # sends per throughput round
PIPELINE = 1_000  # XADDs per redis-py pipeline (the send_async shape has thousands in flight: it pipelines)
N_CONSUME = 100_000  # messages each consumer round reads
# XREADGROUP COUNT: the batch fastmq's PushConsumer pulls per request (its default pull_batch_size)
READ_COUNT = xreadgroup_count({"consumer_kind": "push"})


class Peers(NamedTuple):
    ns: str
    redis: Any  # redis.Redis
    redis_port: int


@pytest.fixture(scope="module")
def peers(fastmq_and_redis: RedisPair) -> Iterator[Peers]:
    import redis
    client = redis.Redis(host="127.0.0.1", port=fastmq_and_redis.redis_port)
    try:
        yield Peers(fastmq_and_redis.ns, client, fastmq_and_redis.redis_port)
    finally:
        client.close()


def _alternate(blocks: int, a: Callable[[], list[float]], b: Callable[[], list[float]]) -> tuple[list[float], list[float]]:
    """``blocks`` blocks of each, A B A B ... (B first on odd blocks, so neither always follows the other)."""
    ra: list[float] = []
    rb: list[float] = []
    for i in range(blocks):
        order = [(a, ra), (b, rb)] if i % 2 == 0 else [(b, rb), (a, ra)]
        for fn, out in order:
            out.extend(fn())
    return ra, rb


def _xadd_pipelined(rds: Any, stream: str, n: int) -> None:
    """``n`` XADDs of BODY, PIPELINE to a pipeline (no MULTI), each pipeline's answers read
    before the next is sent."""
    for _ in range(n // PIPELINE):
        pipe = rds.pipeline(transaction=False)
        for _ in range(PIPELINE):
            pipe.xadd(stream, {"body": BODY})
        pipe.execute()


def _xadd_round(rds: Any, n: int) -> Callable[[], list[float]]:
    """A round of ``n`` pipelined XADDs, its msgs/s."""
    def redis_round() -> list[float]:
        t0 = time.perf_counter()
        _xadd_pipelined(rds, "BlockingBench", n)
        return [n / (time.perf_counter() - t0)]
    return redis_round


def _rate_pair(benchmark: Any, blocks: int, fastmq_round: Callable[[], list[float]],
               redis_round: Callable[[], list[float]], names: tuple[str, str], what: str) -> None:
    """Alternate the two for ``blocks`` rounds each; keep and print the median msgs/s of each
    (``names``: their peer names in extra_info) and their ratio."""
    out: list[tuple[list[float], list[float]]] = []
    benchmark.pedantic(lambda: out.append(_alternate(blocks, fastmq_round, redis_round)), rounds=1, iterations=1)
    fm, rd = out[0]
    f, r = statistics.median(fm), statistics.median(rd)
    benchmark.extra_info.update({f"{names[0]} msgs/s": round(f), f"{names[1]} msgs/s": round(r)})
    print(f"\n{what}: {names[0]} {f:,.0f} msgs/s (rounds {min(fm):,.0f}-{max(fm):,.0f}), {names[1]} {r:,.0f} "
          f"msgs/s (rounds {min(rd):,.0f}-{max(rd):,.0f}); fastmq / redis {f / r:.2f}x")


def _say_peers(benchmark: Any, peers: Peers) -> None:
    """The peers' client, version, parser and durability into ``extra_info`` (hiredis required
    for a timed run)."""
    info = peers_info(peers.redis_port, "redis-py")
    if not benchmark.disabled:
        check_hiredis(info)
    benchmark.extra_info.update(info)
    # the machine's load as the pair starts (RESULTS.md prints it beside the ratio)
    benchmark.extra_info["loadavg_1m"] = round(os.getloadavg()[0], 2)


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def test_blocking_send_p50_vs_xadd(benchmark: Any, peers: Peers) -> None:
    """(a) ``Producer.send``, one in flight, against ``XADD``; latencies in µs."""
    _say_peers(benchmark, peers)
    rds = peers.redis
    blocks, n = (1, 50) if benchmark.disabled else (BLOCKS, N_SYNC_BLOCK)  # (a smoke run: scripts/test.sh)
    with fastmq.Producer("PG_BLOCKING_VS_REDIS_SYNC", namesrv_addr=peers.ns) as p:
        p.send(fastmq.Message("BlockingBench", b"warm"))
        rds.xadd("BlockingBench", {"body": b"warm"})

        def fastmq_block() -> list[float]:
            lat = []
            for _ in range(n):
                t0 = time.perf_counter()
                p.send(fastmq.Message("BlockingBench", BODY))
                lat.append((time.perf_counter() - t0) * 1e6)
            return lat

        def redis_block() -> list[float]:
            lat = []
            for _ in range(n):
                t0 = time.perf_counter()
                rds.xadd("BlockingBench", {"body": BODY})
                lat.append((time.perf_counter() - t0) * 1e6)
            return lat
        out: list[tuple[list[float], list[float]]] = []
        benchmark.pedantic(lambda: out.append(_alternate(blocks, fastmq_block, redis_block)), rounds=1, iterations=1)
    fm, rd = out[0]
    benchmark.extra_info.update({"fastmq send p50_us": round(_p(fm, 50), 1), "fastmq send p99_us": round(_p(fm, 99), 1),
                                 "redis-py XADD p50_us": round(_p(rd, 50), 1),
                                 "redis-py XADD p99_us": round(_p(rd, 99), 1)})
    print(f"\n(a) one in flight, 128 B: fastmq send p50 {_p(fm, 50):.0f} us (p99 {_p(fm, 99):.0f}), redis-py XADD "
          f"p50 {_p(rd, 50):.0f} us (p99 {_p(rd, 99):.0f}); fastmq / redis p50 {_p(fm, 50) / _p(rd, 50):.2f}x")


def test_blocking_send_async_vs_pipelined_xadd(benchmark: Any, peers: Peers) -> None:
    """(b) ``send_async`` with a callback from one thread, every send awaited, against redis-py
    pipelines of PIPELINE XADDs (no MULTI); msgs/s of each round."""
    _say_peers(benchmark, peers)
    rds = peers.redis
    blocks, n = (1, 2_000) if benchmark.disabled else (BLOCKS, N_ASYNC)
    with fastmq.Producer("PG_BLOCKING_VS_REDIS_ASYNC", namesrv_addr=peers.ns) as p:
        p.send(fastmq.Message("BlockingBench", b"warm"))

        def fastmq_round() -> list[float]:
            done = threading.Event()
            acked = [0, 0]  # acknowledged, failed

            def on_sent(result: object, error: BaseException | None) -> None:
                acked[0] += 1
                if error is not None:
                    acked[1] += 1
                if acked[0] == n:
                    done.set()
            t0 = time.perf_counter()
            for _ in range(n):
                p.send_async(fastmq.Message("BlockingBench", BODY), on_sent)
            assert done.wait(120) and acked == [n, 0], acked
            return [n / (time.perf_counter() - t0)]

        redis_round = _xadd_round(rds, n)
        _rate_pair(benchmark, blocks, fastmq_round, redis_round, ("fastmq send_async", "redis-py pipelined_XADD"),
                   f"(b) send_async + callback, {n} awaited, 128 B")


def test_blocking_send_async_semaphore_vs_pipelined_xadd(benchmark: Any, peers: Peers) -> None:
    """(b') ``send_async`` with a per-message wait, as a user bounding what is in flight writes it:
    a ``threading.Semaphore`` of PIPELINE places taken before each send and given back by its
    callback, against the same redis-py pipelines of PIPELINE XADDs; msgs/s of each round."""
    _say_peers(benchmark, peers)
    rds = peers.redis
    blocks, n = (1, 2_000) if benchmark.disabled else (BLOCKS, N_ASYNC)
    with fastmq.Producer("PG_BLOCKING_VS_REDIS_SEMAPHORE", namesrv_addr=peers.ns) as p:
        p.send(fastmq.Message("BlockingBench", b"warm"))

        def fastmq_round() -> list[float]:
            places = threading.Semaphore(PIPELINE)
            failed = [0]

            def on_sent(result: object, error: BaseException | None) -> None:
                if error is not None:
                    failed[0] += 1
                places.release()
            t0 = time.perf_counter()
            for _ in range(n):
                assert places.acquire(timeout=60)
                p.send_async(fastmq.Message("BlockingBench", BODY), on_sent)
            for _ in range(PIPELINE):   # every send answered
                assert places.acquire(timeout=60)
            assert failed == [0], failed
            return [n / (time.perf_counter() - t0)]

        redis_round = _xadd_round(rds, n)
        _rate_pair(benchmark, blocks, fastmq_round, redis_round, ("fastmq send_async_semaphore",
                   "redis-py pipelined_XADD"), f"(b') send_async + semaphore of {PIPELINE}, {n} awaited, 128 B")


def test_blocking_push_consumer_vs_xreadgroup(benchmark: Any, peers: Peers) -> None:
    """(c) a ``PushConsumer`` with a plain function listener (its defaults: one message a call),
    a new group each round over the same N_CONSUME messages, against a new Redis consumer group
    reading them with XREADGROUP COUNT READ_COUNT and acknowledging each read with one XACK;
    msgs/s from the first message received to the last, both, and from ``start()`` (route lookup
    and rebalance included) / from the group's creation to the last."""
    _say_peers(benchmark, peers)
    rds = peers.redis
    blocks, n = (2, 10_000) if benchmark.disabled else (BLOCKS, N_CONSUME)
    topic, stream = "BlockingConsume", "BlockingConsume"
    with fastmq.Producer("PG_BLOCKING_VS_REDIS_FILL", namesrv_addr=peers.ns) as p:
        for _ in range(n // 100):
            p.send_batch([fastmq.Message(topic, BODY) for _ in range(100)])
    _xadd_pipelined(rds, stream, n)
    rounds = [0]
    from_start: tuple[list[float], list[float]] = ([], [])

    def fastmq_round() -> list[float]:
        rounds[0] += 1
        lock = threading.Lock()
        done = threading.Event()
        seen = [0]
        first: list[float] = []

        def listener(msgs: list[fastmq.MessageExt]) -> str:
            with lock:
                if not first:
                    first.append(time.perf_counter())
                seen[0] += len(msgs)
                if seen[0] >= n:
                    first.append(time.perf_counter())
                    done.set()
            return fastmq.ConsumeStatus.CONSUME_SUCCESS
        c = fastmq.PushConsumer(f"GID_BLOCKING_VS_REDIS_{rounds[0]}", namesrv_addr=peers.ns,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        c.subscribe(topic)
        c.register_message_listener(listener)
        t_start = time.perf_counter()
        c.start()
        try:
            assert done.wait(300), seen
        finally:
            c.shutdown()
        from_start[0].append(n / (first[1] - t_start))
        return [(n - 1) / (first[1] - first[0])]

    def redis_round() -> list[float]:
        rounds[0] += 1
        group = f"g{rounds[0]}"
        t_start = time.perf_counter()
        rds.xgroup_create(stream, group, id="0")
        seen, t0, deadline = 0, 0.0, time.monotonic() + 300
        while seen < n:
            assert time.monotonic() < deadline, seen
            got = rds.xreadgroup(group, "c1", {stream: ">"}, count=READ_COUNT, block=1000)
            if not got:
                continue
            ids = [mid for mid, _fields in got[0][1]]
            if not seen:
                t0 = time.perf_counter()
            seen += len(ids)
            rds.xack(stream, group, *ids)
        end = time.perf_counter()
        from_start[1].append(n / (end - t_start))
        # (the first read's own time is not counted, as fastmq's first delivery is not)
        return [(n - READ_COUNT) / (end - t0)]
    _rate_pair(benchmark, blocks // 2, fastmq_round, redis_round,
               ("fastmq plain_listener", "redis-py XREADGROUP+XACK"),
               f"(c) consume {n} x 128 B (XREADGROUP COUNT {READ_COUNT})")
    _from_start(benchmark, from_start, ("fastmq plain_listener_from_start", "redis-py XREADGROUP+XACK_from_start"))


def _from_start(benchmark: Any, rates: tuple[list[float], list[float]], names: tuple[str, str]) -> None:
    """The consumer rounds' msgs/s timed from ``start()`` (the Redis side: from creating its
    group), medians into ``extra_info``."""
    f, r = statistics.median(rates[0]), statistics.median(rates[1])
    benchmark.extra_info.update({f"{names[0]} msgs/s": round(f), f"{names[1]} msgs/s": round(r)})
    print(f"(d) timed from start(): {names[0]} {f:,.0f} msgs/s, {names[1]} {r:,.0f} msgs/s; fastmq / redis "
          f"{f / r:.2f}x")
