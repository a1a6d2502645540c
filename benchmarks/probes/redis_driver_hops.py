"""Where does the ``redis-streams`` driver's e2e latency part from benchmarks/redis_reference.py's?

The same shape (one producer XADD at a steady rate, one consumer XREADGROUP BLOCK + XACK, hiredis)
run by variants, alternated, without Spark, every message stamped on its way: its intended send
time, the start of its XADD, the XADD's return and the consumer's wake-up (XREADGROUP's return).
The differences between them say which part moved: the schedule (start - intended), the round
trip (return - start) or the way to the consumer (wake-up - start).

- ``script1``: benchmarks/redis_reference.py's threads (its ``_sleep_until``, ``xadd``, its
  consumer loop), one process.
- ``script2``: the same two loops in two processes (the driver's layout: e2e-latency-1k deals
  its producer and consumer to two tasks).
- ``driver2``: the driver's own classes (``RedisSender`` through ``task._produce`` and
  ``task.wait_until`` on the task's event loop, ``RedisReceiver``'s thread), in two processes.
- ``driver1``: those in one process, on one loop.

A send the driver makes from its sender thread (behind schedule: a pipeline) is not stamped;
``unstamped`` says what share of the messages that was. ::

    python benchmarks/probes/redis_driver_hops.py --rounds 2 --seconds 6 [--variant script1 ...]
        [--out benchmarks/results/probes/redis-hops.json]

Timings on a shared machine are noisy: compare the variants within a round, and print the load.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.redis_reference import BLOCK_MS, DEFAULT_COUNT, _sleep_until, local_redis  # noqa: E402

VARIANTS = ("script1", "driver2", "script2", "driver1")
WARMUP_S = 3.0
W = {"send_mode": "async", "in_flight": 64, "consumer_kind": "push", "batch_size": 1}   # e2e-latency-1k's


def _client(addr: str) -> Any:
    import redis
    host, _, port = addr.rpartition(":")
    return redis.Redis(host=host, port=int(port))


def _script_producer(addr: str, stream: str, rate: float, start_ns: int, end_ns: int, out: str) -> None:
    r = _client(addr)
    payload, step, rows, i = b"x" * 128, 1e9 / rate, [], 0
    while (intended := start_ns + int(i * step)) < end_ns:
        _sleep_until(intended)
        t = time.time_ns()
        r.xadd(stream, {"b": payload, "i": f"0.{i}", "t": intended})
        rows.append((intended, t, time.time_ns()))
        i += 1
    r.close()
    np.save(out, np.array(rows, dtype=np.int64))


def _script_consumer(addr: str, stream: str, end_ns: int, out: str) -> None:
    r = _client(addr)
    rows = []
    while time.time_ns() < end_ns + 1_500_000_000:   # bounded: each read blocks BLOCK_MS at most
        got = r.xreadgroup("g", "c1", {stream: ">"}, count=DEFAULT_COUNT, block=BLOCK_MS)
        now = time.time_ns()
        entries = got[0][1] if got else []
        rows.extend((int(f[b"t"]), now) for _id, f in entries)
        if entries:
            r.xack(stream, "g", *[e[0] for e in entries])
    r.close()
    np.save(out, np.array(rows, dtype=np.int64))


def _driver(addr: str, stream: str, rate: float, start_ns: int, end_ns: int, outp: str | None,
            outc: str | None) -> None:
    from fastmq.remoting.loop import new_event_loop
    from spark_bench.run import drivers, task
    from spark_bench.run.recorder import Plan, Recorder
    plan = Plan(start_ns, start_ns, end_ns, 10**9)
    rec = Recorder(plan)
    prow: list[tuple[int, int, int]] = []
    crow: list[tuple[int, int]] = []

    async def main() -> None:
        started: list[Any] = []
        if outp:
            s = drivers.make_sender("redis-streams", rec, 0, stream, W, b"x" * 128, {"redis": addr})
            await s.start()
            started.append(s)
            xadd = s.r.xadd   # the lone sends on the loop's thread; the sender thread's pipelines are not stamped

            def stamped(name: str, fields: dict[str, Any]) -> Any:
                t = time.time_ns()
                out = xadd(name, fields)
                prow.append((int(fields["t"]), t, time.time_ns()))
                return out
            s.r.xadd = stamped   # type: ignore[method-assign]
        if outc:
            received = rec.received_one

            def stamp(group: str, pid: int, seq: int, intended_ns: int, now_ns: int) -> None:
                crow.append((intended_ns, now_ns))
                received(group, pid, seq, intended_ns, now_ns)
            rec.received_one = stamp   # type: ignore[method-assign]
            c = drivers.make_receiver("redis-streams", rec, 0, stream, "g", W, {"redis": addr})
            await c.start()
            started.append(c)
        await asyncio.sleep(max(0.0, (start_ns - time.time_ns()) / 1e9))
        if outp:
            await task._produce(s, rate, 1, plan, 0, end_ns)
            await s.window.drain(10)
        if outc:
            while time.time_ns() < end_ns + 1_500_000_000:
                await asyncio.sleep(0.1)
        for x in reversed(started):
            await x.stop()
    loop = new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    if outp:
        np.save(outp, np.array(prow, dtype=np.int64))
    if outc:
        np.save(outc, np.array(crow, dtype=np.int64))


def _pct(x: np.ndarray) -> dict[str, float]:
    return {f"p{q}": round(float(np.percentile(x, q)), 1) for q in (10, 25, 50, 75, 90, 99)}


def one(addr: str, variant: str, rate: float, seconds: float, tmp: Path) -> dict[str, Any]:
    """One run of ``variant`` on its own stream; the distributions of its parts, in µs."""
    admin = _client(addr)
    stream = f"hops-{uuid.uuid4().hex[:8]}"
    admin.xgroup_create(stream, "g", id="0", mkstream=True)
    outp, outc = str(tmp / f"{stream}-p.npy"), str(tmp / f"{stream}-c.npy")
    start_ns = time.time_ns() + 1_500_000_000   # processes started and connected by then
    window0 = start_ns + int(WARMUP_S * 1e9)
    end_ns = window0 + int(seconds * 1e9)
    load = os.getloadavg()[0]
    ctx = mp.get_context("fork")
    if variant == "script1":
        runners: list[Any] = [threading.Thread(target=_script_consumer, args=(addr, stream, end_ns, outc)),
                              threading.Thread(target=_script_producer, args=(addr, stream, rate, start_ns, end_ns,
                                                                               outp))]
    elif variant == "script2":
        runners = [ctx.Process(target=_script_consumer, args=(addr, stream, end_ns, outc)),
                   ctx.Process(target=_script_producer, args=(addr, stream, rate, start_ns, end_ns, outp))]
    elif variant == "driver2":
        runners = [ctx.Process(target=_driver, args=(addr, stream, rate, start_ns, end_ns, None, outc)),
                   ctx.Process(target=_driver, args=(addr, stream, rate, start_ns, end_ns, outp, None))]
    else:
        runners = [ctx.Process(target=_driver, args=(addr, stream, rate, start_ns, end_ns, outp, outc))]
    for x in runners:
        x.start()
    for x in runners:
        x.join(seconds + WARMUP_S + 60)
    admin.delete(stream)
    admin.close()
    sent = {int(r[0]): r for r in np.load(outp)}
    got = {int(r[0]): int(r[1]) for r in np.load(outc) if window0 <= r[0] < end_ns}
    a = np.array([(t, sent[t][1], sent[t][2], got[t]) for t in got if t in sent], dtype=np.int64).reshape(-1, 4)
    wake = a[:, 3]
    return {"variant": variant, "load": round(load, 2), "received": len(got),
            "unstamped": round(1 - len(a) / max(1, len(got)), 3),
            "e2e_all_us": _pct((np.array([w - t for t, w in got.items()])) / 1e3),
            "stamped_us": {"start-intended": _pct((a[:, 1] - a[:, 0]) / 1e3),
                           "xadd_rtt": _pct((a[:, 2] - a[:, 1]) / 1e3),
                           "wake-start": _pct((wake - a[:, 1]) / 1e3),
                           "e2e": _pct((wake - a[:, 0]) / 1e3)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", action="append", choices=VARIANTS, help=f"default: all ({', '.join(VARIANTS)})")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=6.0, help="measured seconds per run (after a 3 s warm-up)")
    p.add_argument("--rate", type=float, default=1000.0)
    p.add_argument("--redis", help="host:port; default: start a local redis-server (AOF everysec)")
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="redis-hops-") as d, contextlib.ExitStack() as stack:
        addr = a.redis or stack.enter_context(local_redis())
        for _ in range(a.rounds):
            for v in a.variant or VARIANTS:
                r = one(addr, v, a.rate, a.seconds, Path(d))
                runs.append(r)
                st = r["stamped_us"]
                print(f"{v:8s} load {r['load']:5.2f} e2e p50 {r['e2e_all_us']['p50']:7.1f} p99 "
                      f"{r['e2e_all_us']['p99']:8.1f} | p50 start-intended {st['start-intended']['p50']:5.1f} "
                      f"xadd {st['xadd_rtt']['p50']:5.1f} wake-start {st['wake-start']['p50']:5.1f} "
                      f"(unstamped {r['unstamped']:.0%})", flush=True)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
