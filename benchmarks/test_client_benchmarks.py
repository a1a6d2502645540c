"""The client end to end through the public API, against one fastmq broker; the official C++ client
(rocketmq 0.4.4) sending to the same broker is the peer to beat, and one-in-flight sends are also
timed beside the references of ``round_trips`` (an echo floor, redis-py when installed).

Real figures: ``.venv/bin/python -m pytest benchmarks/test_client_benchmarks.py --benchmark-only -s``.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from round_trips import RoundTrip, echo_round_trip, pinned, redis_client, time_round_trips

from fastmq.aio import Message, Producer
from fastmq.client.push_consumer import ConsumeStatus, PushConsumer
from fastmq.remoting.loop import run
from fastmq.testing import EmbeddedCluster

N_SYNC, N_ASYNC, N_BATCH = 2000, 20000, 100
#: A smoke run (timing disabled, as scripts/test.sh runs benchmarks) runs each path once, at a
#: tenth of the counts and one round: it checks that the benchmark runs, not its figures.
SMOKE_DIVISOR = 10


class Cluster(NamedTuple):
    ns: str
    tmp: Path
    broker_pid: int


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("client-bench")
    with EmbeddedCluster(tmp, broker_conf={"brokerName": "bench", "mappedFileSizeCommitLog": 268435456}) as c:
        assert c.brokers[0].proc is not None
        yield Cluster(c.namesrv_addr, tmp, c.brokers[0].proc.pid)


async def _sync_sends(ns: str, n: int) -> np.ndarray:
    async with Producer("PG_BENCH_SYNC", namesrv_addr=ns) as p:
        await p.send(Message("ClientBench", b"warm"))
        lat = np.empty(n)
        body = b"x" * 128
        for i in range(n):
            t0 = time.perf_counter()
            await p.send(Message("ClientBench", body))
            lat[i] = time.perf_counter() - t0
        return lat


def test_sync_send_latency(benchmark, cluster) -> None:
    ns = cluster.ns
    n = N_SYNC // SMOKE_DIVISOR if benchmark.disabled else N_SYNC
    out: list[np.ndarray] = []
    benchmark.pedantic(lambda: out.append(run(_sync_sends(ns, n))), rounds=1, iterations=1)
    lat = out[0] * 1e6
    p50, p99 = np.percentile(lat, 50), np.percentile(lat, 99)
    benchmark.extra_info.update(p50_us=round(p50, 1), p99_us=round(p99, 1))
    print(f"\nsync send, one in flight, 128 B: p50 {p50:.0f} us, p99 {p99:.0f} us over {n}")


async def _side_by_side(ns: str, tmp: Path, blocks: int, per_block: int) -> dict[str, np.ndarray]:
    """One-in-flight round trips of fastmq's sync send, of the echo floor and (when installed) of
    redis-py's XADD, in alternating blocks, so that every figure comes from the same stretches of
    this machine's fast and slow phases; latencies in µs per peer."""
    lat: dict[str, list[float]] = {"fastmq send": [], "asyncio echo": [], "redis-py XADD": []}
    body = b"x" * 128
    with contextlib.ExitStack() as stack:
        echo = await echo_round_trip(tmp, stack)
        rds = redis_client(tmp, stack)
        if rds is None:
            del lat["redis-py XADD"]
        async with Producer("PG_BENCH_SIDE", namesrv_addr=ns) as p:
            await p.send(Message("ClientBench", b"warm"))

            async def fastmq_send() -> None:
                await p.send(Message("ClientBench", body))

            async def xadd() -> None:
                rds.xadd("ClientBench", {"body": body})  # blocking: nothing else runs on this loop

            peers: dict[str, RoundTrip] = {
                "fastmq send": fastmq_send, "asyncio echo": echo, "redis-py XADD": xadd}
            for name in lat:  # each warmed once, untimed
                await peers[name]()
            names = list(lat)
            for b in range(blocks):
                for name in names[b % len(names):] + names[:b % len(names)]:
                    lat[name].extend(await time_round_trips(peers[name], per_block))
    return {name: np.array(v) for name, v in lat.items()}


# Where a one-in-flight exchange runs decides its cost on this VM more than either end's code:
# "scheduler" leaves placement to the kernel, "one vCPU" pins both ends (and the references) to
# one: what the exchange costs without cross-vCPU wake-ups (see test_round_trip_benchmarks.py).
@pytest.mark.parametrize("placement", ["scheduler", "one vCPU"])
def test_sync_send_latency_side_by_side(benchmark, cluster, placement: str) -> None:
    out: list[dict[str, np.ndarray]] = []
    blocks, per_block = (1, 300 // SMOKE_DIVISOR) if benchmark.disabled else (10, 300)

    def go() -> None:
        with pinned([0, cluster.broker_pid], min(os.sched_getaffinity(0))) if placement == "one vCPU" \
                else contextlib.nullcontext():
            out.append(run(_side_by_side(cluster.ns, cluster.tmp, blocks, per_block)))
    benchmark.pedantic(go, rounds=1, iterations=1)
    p50 = {name: float(np.percentile(v, 50)) for name, v in out[0].items()}
    benchmark.extra_info.update({f"{name} p50_us": round(v, 1) for name, v in p50.items()})
    for name, v in out[0].items():
        print(f"\n{name}, one in flight ({placement}): p50 {p50[name]:.0f} us, p99 {np.percentile(v, 99):.0f} us "
              f"over {len(v)}", end="")
    ratios = ", ".join(f"/ {name} {p50['fastmq send'] / v:.2f}" for name, v in p50.items() if name != "fastmq send")
    print(f"\np50 ratios ({placement}), fastmq send {ratios}")


async def _async_sends(ns: str, n: int, rounds: int, with_callback: bool) -> list[float]:
    """``rounds`` rounds of ``n`` send_async calls in flight; msgs/s of each round. Either every
    returned future is gathered, or (``with_callback``) the Java client's SendCallback style: a
    callback counts the acknowledgements and the round ends with the last one."""
    async with Producer("PG_BENCH_ASYNC", namesrv_addr=ns) as p:
        await p.send(Message("ClientBench", b"warm"))
        body = b"x" * 128
        rates = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            if with_callback:
                done = asyncio.get_running_loop().create_future()
                acked = 0

                def on_sent(result, error) -> None:
                    nonlocal acked
                    acked += 1
                    if error is not None and not done.done():
                        done.set_exception(error)
                    elif acked == n and not done.done():
                        done.set_result(None)
                for _ in range(n):
                    await p.send_async(Message("ClientBench", body), on_sent)
                await done
            else:
                futs = [await p.send_async(Message("ClientBench", body)) for _ in range(n)]
                await asyncio.gather(*futs)
            rates.append(n / (time.perf_counter() - t0))
        return rates


@pytest.mark.parametrize("style", ["gather", "callback"])
def test_async_pipelined_sends(benchmark, cluster, style: str) -> None:
    ns = cluster.ns
    rates: list[float] = []
    rounds = 1 if benchmark.disabled else 7
    benchmark.pedantic(lambda: rates.extend(run(_async_sends(ns, N_ASYNC, rounds, style == "callback"))), rounds=1,
                       iterations=1)
    med = sorted(rates)[len(rates) // 2]
    benchmark.extra_info["msgs_per_s"] = round(med)
    print(f"\nasync pipelined sends ({style}), 128 B, {N_ASYNC} in flight: median of {len(rates)} rounds "
          f"{med:,.0f} msgs/s (rounds {min(rates):,.0f}-{max(rates):,.0f})")


def test_blocking_facade_sends(benchmark, cluster) -> None:
    """The same sends through the blocking API (``fastmq.Producer``), whose calls cross from the
    caller's thread to the facade's loop thread and back: one in flight, and send_async with a
    callback from one thread."""
    import threading

    import fastmq

    out: dict[str, object] = {}

    def go() -> None:
        with fastmq.Producer("PG_BENCH_BLOCKING", namesrv_addr=cluster.ns) as p:
            p.send(fastmq.Message("ClientBench", b"warm"))
            body = b"x" * 128
            lat = np.empty(N_SYNC)
            for i in range(N_SYNC):
                t0 = time.perf_counter()
                p.send(fastmq.Message("ClientBench", body))
                lat[i] = time.perf_counter() - t0
            out["lat"] = lat * 1e6
            rates = []
            for _ in range(5):
                done = threading.Event()
                acked = [0]

                def on_sent(result, error) -> None:
                    acked[0] += 1
                    if error is not None or acked[0] == N_ASYNC:
                        done.set()
                t0 = time.perf_counter()
                for _ in range(N_ASYNC):
                    p.send_async(fastmq.Message("ClientBench", body), on_sent)
                assert done.wait(60) and acked[0] == N_ASYNC
                rates.append(N_ASYNC / (time.perf_counter() - t0))
            out["rates"] = rates
    benchmark.pedantic(go, rounds=1, iterations=1)
    lat, rates = out["lat"], sorted(out["rates"])  # type: ignore[arg-type]
    p50, p99, med = np.percentile(lat, 50), np.percentile(lat, 99), rates[len(rates) // 2]
    benchmark.extra_info.update(p50_us=round(p50, 1), p99_us=round(p99, 1), async_msgs_per_s=round(med))
    print(f"\nblocking facade: sync send p50 {p50:.0f} us, p99 {p99:.0f} us over {N_SYNC}; send_async with a "
          f"callback, median of {len(rates)} rounds {med:,.0f} msgs/s (rounds {rates[0]:,.0f}-{rates[-1]:,.0f})")


async def _batch_sends(ns: str, batches: int, rounds: int, pipelined: bool = False) -> list[float]:
    """``rounds`` rounds of ``batches`` batch sends in flight; msgs/s of each round. Either each
    ``send_batch`` is a task of its own, or (``pipelined``) each ``send_batch_async`` call returns
    its future once the batch is encoded and queued."""
    async with Producer("PG_BENCH_BATCH", namesrv_addr=ns) as p:
        msgs = [Message("ClientBench", b"x" * 128) for _ in range(N_BATCH)]
        await p.send_batch([Message("ClientBench", b"warm")])
        rates = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            futs = []
            for _ in range(batches):
                batch = [Message(m.topic, m.body) for m in msgs]  # the caller's own cost is counted too
                futs.append(await p.send_batch_async(batch) if pipelined
                            else asyncio.ensure_future(p.send_batch(batch)))
            await asyncio.gather(*futs)
            rates.append(batches * N_BATCH / (time.perf_counter() - t0))
        return rates


@pytest.mark.parametrize("style", ["send_batch", "send_batch_async"])
def test_batch_sends(benchmark, cluster, style: str) -> None:
    ns = cluster.ns
    rates: list[float] = []
    rounds = 1 if benchmark.disabled else 7
    benchmark.pedantic(lambda: rates.extend(run(_batch_sends(ns, 200, rounds, style == "send_batch_async"))),
                       rounds=1, iterations=1)
    med = sorted(rates)[len(rates) // 2]
    benchmark.extra_info["msgs_per_s"] = round(med)
    print(f"\nbatch sends ({style}), {N_BATCH} x 128 B per batch, 200 in flight: median of {len(rates)} rounds "
          f"{med:,.0f} msgs/s (rounds {min(rates):,.0f}-{max(rates):,.0f})")


async def _consume(ns: str, n: int, group: str, topic: str = "ConsumeBench", plain: bool = False,
                   orderly: bool = False) -> tuple[float, float]:
    """``n`` messages consumed by one new group: an ``async def`` listener taking batches of up to
    32, or (``plain``) what a blocking program writes: a plain function, one message a call (the
    default batch size), run on the consume threads; ``orderly``: queues locked on the broker,
    each consumed in order by one thread at a time."""
    count = 0
    first: list[tuple[float, int]] = []  # when the first batch arrived, and its size
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    lock = threading.Lock()

    async def listener(msgs):
        nonlocal count
        if not first:
            first.append((time.perf_counter(), len(msgs)))
        count += len(msgs)
        if count >= n:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    def plain_listener(msgs):
        nonlocal count
        with lock:
            if not first:
                first.append((time.perf_counter(), len(msgs)))
            count += len(msgs)
            if count >= n:
                loop.call_soon_threadsafe(done.set)
        return ConsumeStatus.CONSUME_SUCCESS
    c = PushConsumer(group, namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     consume_message_batch_max_size=1 if plain else 32, orderly=orderly)
    c.subscribe(topic)
    c.register_message_listener(plain_listener if plain else listener)
    t0 = time.perf_counter()
    await c.start()
    try:
        async with asyncio.timeout(120):
            await done.wait()
    finally:
        t1 = time.perf_counter()
        rate = count / (t1 - t0)
        # Without the start (heartbeat, rebalance, offset queries: tens of ms, a fixed cost that
        # would weigh on the whole-run rate): from the first batch to the last.
        steady = (count - first[0][1]) / (t1 - first[0][0]) if first and t1 > first[0][0] else 0.0
        await c.shutdown()
    return rate, steady


async def _produce_then_consume(ns: str, n: int, suffix: str = "", plain: bool = False,
                                orderly: bool = False) -> list[tuple[float, float]]:
    """n messages produced, then consumed by one group and then by a second one: the first reads
    right after the production, while the broker may still be busy with it (flushing it to disk),
    the second reads the same messages after."""
    async with Producer("PG_BENCH_CONS", namesrv_addr=ns) as p:
        for _ in range(n // N_BATCH):
            await p.send_batch([Message("ConsumeBench" + suffix, b"x" * 128) for _ in range(N_BATCH)])
    return [await _consume(ns, n, "GID_BENCH" + suffix, "ConsumeBench" + suffix, plain, orderly),
            await _consume(ns, n, "GID_BENCH_AGAIN" + suffix, "ConsumeBench" + suffix, plain, orderly)]


# 200,000 rather than 20,000: at ~500,000 msgs/s 20,000 messages take ~40 ms, and one scheduler
# hiccup or the first pulls' warm-up moved that figure by 2-4x from run to run.
N_CONSUME = 200_000


@pytest.mark.parametrize("listener", ["async", "plain", "plain orderly"])
def test_push_consumption(benchmark, cluster, listener: str) -> None:
    ns = cluster.ns
    rates: list[tuple[float, float]] = []
    plain, orderly = listener.startswith("plain"), listener.endswith("orderly")
    suffix = listener.title().replace(" ", "") if plain else ""
    n = N_CONSUME // SMOKE_DIVISOR if benchmark.disabled else N_CONSUME
    benchmark.pedantic(lambda: rates.extend(run(_produce_then_consume(ns, n, suffix, plain, orderly))),
                       rounds=1, iterations=1)
    (rate, steady), (_, again) = rates
    benchmark.extra_info.update(msgs_per_s=round(rate), steady_msgs_per_s=round(steady),
                                second_group_msgs_per_s=round(again))
    what = (f"a plain listener{', orderly' if orderly else ''}, one message a call" if plain
            else "an async listener, batches of 32")
    print(f"\npush consumption with offset commits ({what}), 128 B: {rate:,.0f} msgs/s "
          f"({steady:,.0f} msgs/s from the first delivery on; a second group over the same messages "
          f"{again:,.0f} msgs/s)")


@pytest.mark.cpp_client
def test_cpp_client_sync_sends_for_comparison(benchmark, cluster) -> None:
    pytest.importorskip("rocketmq.client")
    ns, tmp = cluster.ns, cluster.tmp
    peer = Path(__file__).resolve().parent.parent / "tests" / "interop" / "cpp_peer.py"
    out: list[dict] = []

    def go() -> None:
        proc = subprocess.run([sys.executable, str(peer), "produce", "--namesrv", ns, "--topic", "ClientBench",
                               "--count", str(N_SYNC), "--quiet", "--body", "x" * 120],
                              capture_output=True, text=True, timeout=300, env={"HOME": str(tmp), "PATH": "/usr/bin:/bin"})
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        assert line, proc.stdout[-2000:] + proc.stderr[-2000:]
        out.append(json.loads(line[-1][7:]))
    benchmark.pedantic(go, rounds=1, iterations=1)
    r = out[0]
    per = r["elapsed_s"] / max(1, r["ok"]) * 1e6
    benchmark.extra_info.update(cpp_mean_us=round(per, 1))
    print(f"\nC++ client send_sync, one in flight: mean {per:.0f} us over {r['ok']} sends")



# ------------------------------------------------------------------ beside Apache RocketMQ's own
# Opt-in, when the environment provides them (none can be installed from the registries CI
# reaches): FASTMQ_JAVA_NAMESRV, a running Apache RocketMQ 4.x cluster, and FASTMQ_JAVA_CLASSPATH,
# its Java client's jars (with javac). The same client workloads then run against its broker too,
# and the Java client sends to both.
JAVA_NAMESRV = os.environ.get("FASTMQ_JAVA_NAMESRV", "")
JAVA_CLASSPATH = os.environ.get("FASTMQ_JAVA_CLASSPATH", "")


async def _workloads(ns: str, suffix: str) -> dict[str, float]:
    lat = await _sync_sends(ns, N_SYNC) * 1e6
    callback = await _async_sends(ns, N_ASYNC, 5, True)
    batches = await _batch_sends(ns, 200, 5, True)
    (_, steady), _ = await _produce_then_consume(ns, N_CONSUME, suffix)
    return {"sync p50 us": float(np.percentile(lat, 50)), "sync p99 us": float(np.percentile(lat, 99)),
            "send_async callback msgs/s": sorted(callback)[2], "send_batch_async msgs/s": sorted(batches)[2],
            "push consumption msgs/s": steady}


@pytest.mark.skipif(not JAVA_NAMESRV, reason="FASTMQ_JAVA_NAMESRV (an Apache RocketMQ cluster) not set")
def test_fastmq_client_against_fastmq_and_java_brokers(benchmark, cluster) -> None:
    """The fastmq client's workloads against the fastmq broker and against a Java one, one after
    the other in the same run (medians of five rounds where there are rounds)."""
    suffix = f"_{os.getpid()}_{time.monotonic_ns() % 10**6}"
    out: dict[str, dict[str, float]] = {}

    def go() -> None:
        out["fastmq broker"] = run(_workloads(cluster.ns, suffix))
        out["java broker"] = run(_workloads(JAVA_NAMESRV, suffix))
    benchmark.pedantic(go, rounds=1, iterations=1)
    for target, figures in out.items():
        benchmark.extra_info[target] = {k: round(v) for k, v in figures.items()}
        print(f"\nfastmq client -> {target}: " + ", ".join(f"{k} {v:,.0f}" for k, v in figures.items()), end="")
    print()


@pytest.mark.skipif(not JAVA_CLASSPATH or shutil.which("javac") is None,
                    reason="FASTMQ_JAVA_CLASSPATH (RocketMQ's Java client) and javac not both set")
def test_java_client_sync_sends_for_comparison(benchmark, cluster, tmp_path) -> None:
    from fastmq.testing.java_peer import compile_java_peer, run_peer

    cp = compile_java_peer(tmp_path, JAVA_CLASSPATH)
    targets = {"fastmq broker": cluster.ns, **({"java broker": JAVA_NAMESRV} if JAVA_NAMESRV else {})}
    out: dict[str, float] = {}

    def go() -> None:
        for target, ns in targets.items():
            # 3,000 untimed sends first: the JVM compiles its send path meanwhile
            _, (result,), log = run_peer(cp, ["produce", ns, "ClientBench", str(N_SYNC), "size=128", "warm=3000"],
                                         300)
            assert result["ok"] == N_SYNC, log
            out[target] = result
    benchmark.pedantic(go, rounds=1, iterations=1)
    for target, r in out.items():
        benchmark.extra_info[f"java client -> {target}"] = {k: r[k] for k in ("p50_us", "p99_us", "elapsed_us")}
        print(f"\nJava client send (sync), one in flight -> {target}: p50 {r['p50_us']} us, p99 {r['p99_us']} us, "
              f"mean {r['elapsed_us'] / N_SYNC:.0f} us over {N_SYNC} after 3,000 untimed", end="")
    print()
