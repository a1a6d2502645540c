"""Sends with message trace on beside trace off, one run, one real ``fastmq-broker``.

Two asyncio producers of one process against a NameServer and an ASYNC_FLUSH broker with
``traceTopicEnable=true``: one plain, one with ``enable_trace=True`` (a Pub record per answered
send, batched to ``RMQ_SYS_TRACE_TOPIC`` by its dispatcher, whose inner producer shares the loop).
Each round runs two shapes with 128 B bodies:

- ``sync``: N_SYNC ``await send()`` one after another (one in flight);
- ``async``: N_ASYNC ``send_async`` with a callback each, up to the producer's window in flight,
  until the last callback. Its side is long enough (about a quarter of a second) that one timer,
  collection or trace flush does not decide it.

Each producer first sends one untimed ``async`` side of its own: the first side a new producer
runs is slower (its buffers and tables grow), which would otherwise count against whichever
side ran first. Then each shape runs four timed sides, off, on, on, off (on, off, off, on in odd
rounds), and each side's figure is the mean of its two: a drift of the machine's speed within
the round, which on a shared VM is often 20%, then falls on both sides alike. After each side
the trace dispatcher is flushed and the broker left to settle, outside the timing.

Reported per shape (``extra_info``, medians over rounds): µs per message wall time, client CPU
(``time.process_time``: the process, the dispatcher's thread included) and the loop thread's CPU
(``time.thread_time`` on the loop: what the user's sends share their thread with) and the
broker's CPU (all its threads, from the shape's start until the trace messages it made are
stored) for off and on, and ``overhead_pct`` (on against off, wall, the median of the rounds'
ratios). The issue's goal: a few percent.

Run: ``PYTHONPATH=$PWD python -m pytest benchmarks/test_trace_overhead.py --benchmark-only -s``
"""
from __future__ import annotations

import asyncio
import statistics
import time
from typing import Iterator

import pytest

from fastmq.aio import Message, Producer
from fastmq.testing import EmbeddedCluster, ServerProcess

from benchmarks.server_cpu import server_cpu

N_SYNC = 2000
N_ASYNC = 20_000
ROUNDS = 16
#: after each side, outside its timing: the broker's dispatch of what was just stored
SETTLE_S = 0.1


@pytest.fixture(scope="module")
def trace_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    tmp = tmp_path_factory.mktemp("trace-bench")
    with EmbeddedCluster(tmp, broker_conf={"brokerName": "bench", "flushDiskType": "ASYNC_FLUSH",
                                           "traceTopicEnable": "true"}) as cluster:
        yield cluster


# µs per message: wall, the process's CPU, the loop thread's CPU (then the broker's CPU)
Row = tuple[float, ...]


def _per_msg(n: int, t0: float, c0: float, l0: float) -> Row:
    return ((time.perf_counter() - t0) / n * 1e6, (time.process_time() - c0) / n * 1e6,
            (time.thread_time() - l0) / n * 1e6)


async def _sync(p: Producer, topic: str) -> Row:
    body = b"x" * 128
    l0, c0, t0 = time.thread_time(), time.process_time(), time.perf_counter()
    for _ in range(N_SYNC):
        await p.send(Message(topic, body))
    return _per_msg(N_SYNC, t0, c0, l0)


async def _async(p: Producer, topic: str) -> Row:
    body = b"x" * 128
    done = asyncio.get_running_loop().create_future()
    left = [N_ASYNC]

    def on_sent(r: object, e: BaseException | None) -> None:
        assert e is None, e
        left[0] -= 1
        if not left[0]:
            done.set_result(None)
    l0, c0, t0 = time.thread_time(), time.process_time(), time.perf_counter()
    for _ in range(N_ASYNC):
        await p.send_async(Message(topic, body), on_sent)
    await asyncio.wait_for(done, 60)
    return _per_msg(N_ASYNC, t0, c0, l0)


async def _round(ns: str, broker: ServerProcess, tag: int) -> dict[str, Row]:
    out: dict[str, Row] = {}
    async with Producer(f"PG_TRACE_OFF{tag}", namesrv_addr=ns) as off, \
            Producer(f"PG_TRACE_ON{tag}", namesrv_addr=ns, enable_trace=True) as on:
        topic = f"BenchTrace{tag}"
        for p in (off, on):  # routes, connections and the trace topic's route out of the timing
            await p.send(Message(topic, b"warm"))
        assert on.trace_dispatcher is not None
        for p in (off, on):  # (each producer's first, slower, side: untimed)
            await _async(p, topic)
            await on.trace_dispatcher.flush()
        await asyncio.sleep(SETTLE_S)
        order = [("off", off), ("on", on), ("on", on), ("off", off)]
        if tag % 2:
            order.reverse()
        for shape, run, n in (("sync", _sync, N_SYNC), ("async", _async, N_ASYNC)):
            sums = {"off": [0.0] * 4, "on": [0.0] * 4}
            for side, p in order:
                b0 = server_cpu(broker)
                row = await run(p, topic)
                await on.trace_dispatcher.flush()  # (its sends out of the next timing, in the broker's CPU)
                await asyncio.sleep(SETTLE_S)
                for i, v in enumerate((*row, (server_cpu(broker) - b0) / n * 1e6)):
                    sums[side][i] += v / 2
            out[f"{shape}_off"], out[f"{shape}_on"] = tuple(sums["off"]), tuple(sums["on"])
        out["discarded"] = (float(on.trace_dispatcher.discarded), 0.0, 0.0)  # reported, not failed on
    return out


def test_sends_with_trace_on_beside_trace_off(benchmark, trace_cluster: EmbeddedCluster) -> None:
    rows: list[dict[str, Row]] = []

    def one_round() -> None:
        rows.append(asyncio.run(_round(trace_cluster.namesrv_addr, trace_cluster.brokers[0], len(rows))))

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    info: dict[str, float] = {"messages_per_round": N_SYNC, "async_messages_per_round": N_ASYNC}
    for shape in ("sync", "async"):
        off_wall = statistics.median(r[f"{shape}_off"][0] for r in rows)
        on_wall = statistics.median(r[f"{shape}_on"][0] for r in rows)
        off_cpu = statistics.median(r[f"{shape}_off"][1] for r in rows)
        on_cpu = statistics.median(r[f"{shape}_on"][1] for r in rows)
        off_loop = statistics.median(r[f"{shape}_off"][2] for r in rows)
        on_loop = statistics.median(r[f"{shape}_on"][2] for r in rows)
        off_broker = statistics.median(r[f"{shape}_off"][3] for r in rows)
        on_broker = statistics.median(r[f"{shape}_on"][3] for r in rows)
        # per round, on against the off run beside it: the drift of a noisy machine cancels out
        pct = statistics.median((r[f"{shape}_on"][0] / r[f"{shape}_off"][0] - 1) * 100 for r in rows)
        info.update({f"{shape}_off_us_per_msg": round(off_wall, 1), f"{shape}_on_us_per_msg": round(on_wall, 1),
                     f"{shape}_off_client_cpu_us_per_msg": round(off_cpu, 1),
                     f"{shape}_on_client_cpu_us_per_msg": round(on_cpu, 1),
                     f"{shape}_off_loop_cpu_us_per_msg": round(off_loop, 1),
                     f"{shape}_on_loop_cpu_us_per_msg": round(on_loop, 1),
                     f"{shape}_off_broker_cpu_us_per_msg": round(off_broker, 1),
                     f"{shape}_on_broker_cpu_us_per_msg": round(on_broker, 1),
                     f"{shape}_overhead_pct": round(pct, 1)})
        print(f"\n{shape}: trace off {off_wall:.1f} us/msg (client CPU {off_cpu:.1f}, loop {off_loop:.1f}), trace on "
              f"{on_wall:.1f} us/msg (client CPU {on_cpu:.1f}, loop {on_loop:.1f}): {pct:+.1f}% (median of per-round "
              f"ratios); broker CPU off {off_broker:.1f}, on {on_broker:.1f} us/msg")
    info["traces_dropped"] = sum(r["discarded"][0] for r in rows)
    benchmark.extra_info.update(info)
