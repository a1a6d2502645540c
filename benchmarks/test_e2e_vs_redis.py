"""End-to-end latency, fastmq beside redis-py with hiredis (issue 33), producer and consumer in one
process and in two, at 1,000 and 10,000 msgs/s, for the blocking API (beside redis-py's blocking
client) and the asyncio one (beside ``redis.asyncio``). What each side runs:
:mod:`benchmarks.e2e_shapes`.

Each test alternates fastmq and Redis runs (A B B A ...) on the servers of
:mod:`benchmarks.redis_pair`, a new topic / stream and group each run, and keeps the p50 and p99 of
every peer's pooled window latencies in ``extra_info`` as ``"<peer> e2e_<rate>_<p>_us"``, with the
share of the window's messages received. Above ``ONE_IN_FLIGHT_MAX_RATE`` fastmq runs twice
beside each Redis run: ``fastmq waited`` sends as Redis's producer does (the comparison) and
``fastmq`` with ``send_async`` (:mod:`benchmarks.e2e_shapes` says why both). Skipped when
redis-server or redis-py is missing.

Real figures: ``.venv/bin/python -m pytest benchmarks/test_e2e_vs_redis.py --benchmark-only -s``.
"""
from __future__ import annotations

import asyncio
import itertools
from typing import Any, Callable

import pytest

from benchmarks import e2e_shapes
from benchmarks.redis_pair import RedisPair, check_hiredis, peers_info

RATES = (1_000, 10_000)
BLOCKS = 2  # runs per peer and rate, alternating
WARMUP_S, DURATION_S = 1.0, 3.0
_topics = itertools.count()

Run = Callable[[str, str, str, float, float, float], tuple[list[float], int, int]]


def _measure(benchmark: Any, pair: RedisPair, client: str, run: Run, separate: bool) -> None:
    info = peers_info(pair.redis_port, client)
    if not benchmark.disabled:
        check_hiredis(info)
    benchmark.extra_info.update(info)
    blocks, warmup, duration = (1, 0.2, 0.3) if benchmark.disabled else (BLOCKS, WARMUP_S, DURATION_S)
    # each program (e2e_shapes.PEERS) and the server it talks to
    targets = {"fastmq": pair.ns, "fastmq-waited": pair.ns, "redis": f"127.0.0.1:{pair.redis_port}"}
    out: dict[tuple[str, int], tuple[list[float], int, int]] = {}

    # A smoke run: both ways of sending (one at a time, and above ONE_IN_FLIGHT_MAX_RATE) at rates
    # a busy CI machine holds; the producer's process started once per peer (the second only).
    rates: tuple[int, ...] = (RATES[0], 3 * e2e_shapes.ONE_IN_FLIGHT_MAX_RATE // 2) if benchmark.disabled else RATES
    rates = rates[1:] if benchmark.disabled and separate else rates

    # the figures' peer names, and what each runs (e2e_shapes.PEERS)
    runs = {"fastmq": "fastmq", "fastmq waited": "fastmq-waited", client: "redis"}

    def all_runs() -> None:
        for rate in rates:
            arms = ["fastmq", client] if rate <= e2e_shapes.ONE_IN_FLIGHT_MAX_RATE else \
                ["fastmq", "fastmq waited", client]
            for i in range(blocks):
                for peer in (arms if i % 2 == 0 else arms[::-1]):
                    topic = f"E2E_{runs[peer].replace('-', '_')}_{next(_topics)}"
                    lat, expected, errors = run(runs[peer], targets[runs[peer]], topic, rate, warmup, duration)
                    got, exp, err = out.get((peer, rate), ([], 0, 0))
                    out[(peer, rate)] = (got + lat, exp + expected, err + errors)
    benchmark.pedantic(all_runs, rounds=1, iterations=1)
    lines = []
    for (peer, rate), (lat, expected, errors) in sorted(out.items(), key=lambda kv: (kv[0][1], kv[0][0] != "fastmq")):
        s = e2e_shapes.summary(lat, expected)
        k = f"{rate // 1000}k" if rate % 1000 == 0 else str(rate)
        benchmark.extra_info.update({f"{peer} e2e_{k}_p50_us": round(s["p50"], 1),
                                     f"{peer} e2e_{k}_p99_us": round(s["p99"], 1),
                                     f"{peer} e2e_{k}_received_share": round(len(lat) / max(expected, 1), 4),
                                     f"{peer} e2e_{k}_send_errors": errors})
        lines.append(f"{rate:>6} msgs/s {peer:>14}: p50 {s['p50']:8.0f} us  p99 {s['p99']:8.0f} us  "
                     f"({len(lat)}/{expected}, {errors} sends failed)")
        # A producer that cannot keep up shows in the figures (its sends time out: send_errors,
        # received_share); a smoke run, at a rate any machine holds, gets every message.
        assert len(lat) >= expected * (0.9 if benchmark.disabled else 0.5), (peer, rate, len(lat), expected, errors)
    print("\n" + "\n".join(lines))


@pytest.mark.parametrize("separate", [False, True], ids=["one_process", "two_processes"])
def test_blocking_e2e_vs_redis(benchmark: Any, fastmq_and_redis: RedisPair, separate: bool) -> None:
    """Blocking ``Producer`` + ``PushConsumer`` beside redis-py XADD + XREADGROUP/XACK threads."""
    def run(peer: str, target: str, topic: str, rate: float, warmup: float, duration: float
            ) -> tuple[list[float], int, int]:
        return e2e_shapes.run_blocking(peer, target, topic, rate, warmup, duration, separate)
    _measure(benchmark, fastmq_and_redis, "redis-py", run, separate)


@pytest.mark.parametrize("separate", [False, True], ids=["one_process", "two_processes"])
def test_asyncio_e2e_vs_redis(benchmark: Any, fastmq_and_redis: RedisPair, separate: bool) -> None:
    """``fastmq.aio`` Producer + PushConsumer on one loop beside ``redis.asyncio`` on one loop."""
    pytest.importorskip("redis.asyncio")

    def run(peer: str, target: str, topic: str, rate: float, warmup: float, duration: float
            ) -> tuple[list[float], int, int]:
        return asyncio.run(e2e_shapes.run_asyncio(peer, target, topic, rate, warmup, duration, separate))
    _measure(benchmark, fastmq_and_redis, "redis.asyncio", run, separate)
