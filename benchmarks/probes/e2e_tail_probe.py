"""The e2e-latency-1k workload's shape without Spark, with every process probed (turn_probe.py):
where does the slowest 1% come from?

A NameServer and a broker (ASYNC_FLUSH, as the workload's), one producer process sending 128 B
messages with ``send_async`` at a steady rate (latency counted from each message's intended send
time, 64 in flight at most) and one push-consumer process with a plain-function listener (run on
the consume threads, as a blocking PushConsumer's is), intended send time to listener. Each
message is stamped on its way (send call, broker store time, pull answer decoded, listener) for a
hop-by-hop account of the slowest 1%, and each process records what turn_probe.py records; this
script joins it all, for the sending window only, into one JSON file::

    python benchmarks/probes/e2e_tail_probe.py --seconds 20 --out benchmarks/results/probes/X.json

``--stacks`` also samples the loop thread's stack in each stall (costs a watchdog thread);
``--no-ticks`` leaves the probe's 1 ms timer out (clean wake-up counts); ``--write-site`` and
``--from-dir`` probe a ``fastmq-bench run`` instead (see docs/performance.md).
Timings on a shared machine are noisy: the counts are the evidence.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOPIC = "TailProbe"
GROUP = "tail_probe_group"


def _write_site(site: Path) -> None:
    (site / "sitecustomize.py").write_text(
        f"import sys\nsys.path.insert(0, {str(HERE)!r})\nimport turn_probe\nturn_probe.install()\n")


def _pct(xs: list[int], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))] / 1e3 if xs else 0.0


async def _produce(ns: str, rate: float, seconds: float, out: str) -> None:
    from fastmq.aio import Message, Producer
    from fastmq.client.instance import ClientConfig
    p = Producer("tail_probe_p", client_config=ClientConfig(namesrv_addr=ns), max_in_flight=0)
    await p.start()
    payload = b"x" * 128
    lat: list[int] = []
    window = asyncio.Semaphore(64)
    errors = 0
    await asyncio.sleep(1.0)
    t0 = time.time_ns()
    n = int(rate * seconds)
    step = 1e9 / rate
    for i in range(n):
        intended = t0 + int(i * step)
        now = time.time_ns()
        if intended > now:
            await asyncio.sleep((intended - now) / 1e9)
        await window.acquire()

        def answered(result: Any, error: BaseException | None, intended: int = intended) -> None:
            nonlocal errors
            window.release()
            if error is None:
                lat.append(time.time_ns() - intended)
            else:
                errors += 1
        await p.send_async(Message(TOPIC, payload, properties={"bench_t": str(intended),
                                                               "bench_s": str(time.time_ns())}), answered)
    for _ in range(500):
        if len(lat) + errors >= n:
            break
        await asyncio.sleep(0.01)
    await p.shutdown()
    Path(out).write_text(json.dumps({"sent": n, "errors": errors, "lat_ns": sorted(lat),
                                     "window": [t0 / 1e9, (t0 + n * step) / 1e9]}))


async def _consume(ns: str, expect: int, out: str) -> None:
    from fastmq.aio import ConsumeStatus, PushConsumer
    from fastmq.client.instance import ClientConfig
    import fastmq.client.pull_service as ps
    hops: list[tuple[int, int, int, int, int]] = []
    decoded: dict[str, int] = {}
    decode = getattr(ps, "decode_pull_body")

    def stamped(buf: Any) -> Any:
        # when each pull answer reached the consumer's loop (one stamp for all its messages)
        msgs = decode(buf)
        t = time.time_ns()
        for m in msgs:
            decoded[m.properties["bench_t"]] = t
        return msgs
    setattr(ps, "decode_pull_body", stamped)  # (the pull loop looks it up in its module each time)

    def plain(msgs: list[Any]) -> str:
        # Kept on the consume thread (list.extend is atomic under the GIL): a hop to the loop per
        # batch here would wake the loop itself and hide the consumer's own wake-ups.
        now = time.time_ns()
        hops.extend([(int(m.properties["bench_t"]), int(m.properties["bench_s"]), m.store_timestamp,
                      decoded.get(m.properties["bench_t"], 0), now) for m in msgs])
        return ConsumeStatus.CONSUME_SUCCESS
    c = PushConsumer(GROUP, client_config=ClientConfig(namesrv_addr=ns), consume_message_batch_max_size=32,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC)
    c.register_message_listener(plain)
    await c.start()
    Path(out + ".ready").write_text("")
    deadline = time.monotonic() + expect / 500 + 60
    while len(hops) < expect and time.monotonic() < deadline:
        await asyncio.sleep(0.2)  # (5 wake-ups a second, against the 1,000 being counted)
    await c.shutdown()
    lat = [now - t for t, _, _, _, now in hops]
    Path(out).write_text(json.dumps({"received": len(lat), "lat_ns": sorted(lat), "hops": hops}))


def _hops(hops: list[list[int]], start: float, end: float) -> dict[str, Any]:
    """Where the time of the slowest 1% went, hop by hop: the producer's timer (intended -> send
    call), producer to store (send call -> the broker's store timestamp, ms resolution), store to
    the consumer's loop (store timestamp -> pull answer decoded), and the hand-over to the
    listener's thread (decoded -> listener). The two middle hops share the store timestamp's
    millisecond rounding; their sum is exact."""
    rows = [h for h in hops if start * 1e9 <= h[0] <= end * 1e9 and h[3]]
    if not rows:
        return {}
    rows.sort(key=lambda h: h[4] - h[0])
    names = ("timer", "to_store", "store_to_consumer_loop", "to_listener_thread")

    def seg(h: list[int]) -> tuple[float, ...]:
        t, sent, store_ms, dec, now = h
        return ((sent - t) / 1e3, (store_ms * 1e6 - sent) / 1e3, (dec - store_ms * 1e6) / 1e3, (now - dec) / 1e3)

    def describe(rs: list[list[int]]) -> dict[str, Any]:
        segs = [seg(h) for h in rs]
        out: dict[str, Any] = {"n": len(rs)}
        for i, name in enumerate(names):
            xs = sorted(x[i] for x in segs)
            out[name + "_us"] = {"mean": round(sum(xs) / len(xs), 1), "p50": round(xs[len(xs) // 2], 1)}
        worst = [max(range(4), key=lambda i: x[i]) for x in segs]
        out["largest_hop_counts"] = {names[i]: worst.count(i) for i in range(4)}
        return out
    k = max(1, len(rows) // 100)
    return {"all": describe(rows), "slowest_1pct": describe(rows[-k:]),
            "slowest_1pct_threshold_us": (rows[-k][4] - rows[-k][0]) / 1e3}


def _per_message(snaps: list[dict[str, Any]], start: float, end: float) -> dict[str, Any]:
    """Wake-ups, preemptions and CPU per message sent, by thread, between the first and the last
    once-a-second snapshot inside the sending window (at the configured rate)."""
    inside = [s for s in snaps if start <= s["t"] <= end]
    if len(inside) < 2:
        return {}
    a, b = inside[0], inside[-1]
    return {"seconds": round(b["t"] - a["t"], 2), "per_1000_msgs_at_rate": {
        name: {k: round((b[name][k] - a.get(name, {}).get(k, 0)) / (b["t"] - a["t"]), 1)
               for k in ("wakeups", "preempted", "cpu_ms")}
        for name in b if name != "t"},
        "threads_at_start_and_end": {name: [a.get(name, {}).get("threads", 0), b[name]["threads"]]
                                     for name in b if name != "t"}}


def _summary(probe_dir: Path, start: float, end: float) -> dict[str, Any]:
    """Each process's GC pauses and late loop ticks while messages were being sent."""
    procs = {}
    files = sorted(probe_dir.glob("*.json"))
    kinds = [f.stem.rsplit("-", 1)[0] for f in files]
    for f, kind in zip(files, kinds):
        d = json.loads(f.read_text())
        key = kind if kinds.count(kind) == 1 else f.stem  # (Spark's forked workers: one file each)
        gcs = [g for g in d["gc_long"] if start <= g["t"] <= end]
        late = [x for x in d["lag_long"] if start <= x["t"] <= end]
        buckets: dict[str, int] = {}
        for x in late:
            b = next((f"{lo}-{hi}ms" for lo, hi in ((1, 2), (2, 5), (5, 10), (10, 20), (20, 50), (50, 100))
                      if x["ms"] < hi), ">=100ms")
            buckets[b] = buckets.get(b, 0) + 1
        stacks = {k: sum(start <= t <= end for t in v.get("t", [])) for k, v in d["stacks"].items()}
        procs[key] = {
            "gc_all_run": d["gc"], "gc_frozen": d["gc_frozen"],
            "gc_pauses_ge_1ms": len(gcs), "gc_pause_ms_ge_1ms_total": round(sum(g["ms"] for g in gcs), 3),
            "gc_long": gcs[:40],
            "late_ticks": dict(sorted(buckets.items())),
            "late_ge_2ms": sum(x["ms"] >= 2 for x in late), "late_ms_ge_2ms_total": round(sum(x["ms"] for x in late
                                                                                            if x["ms"] >= 2), 3),
            "late_longest": sorted(late, key=lambda x: -x["ms"])[:15],
            # a late tick whose interval the loop thread spent on the CPU: our own long turn, not
            # the machine (an idle process's late ticks, the NameServer's, are the machine's)
            "busy_turns_ge_2ms": sum(x.get("cpu_ms", 0) >= 2 for x in late),
            "busy_turns_longest": sorted((x for x in late if x.get("cpu_ms", 0) >= 2), key=lambda x: -x["cpu_ms"])[:15],
            "timers": d.get("timers", {}),
            "per_message": _per_message(d.get("thread_snaps", []), start, end),
            # how many threads of each name the once-a-second snapshots saw (a pool growing under traffic)
            "thread_counts_seen": {name: sorted({s[name]["threads"] for s in d.get("thread_snaps", [])
                                                 if name in s and start <= s["t"] <= end})
                                   for name in {n for s in d.get("thread_snaps", []) for n in s if n != "t"}},
            "stacks": dict(sorted(((k, n) for k, n in stacks.items() if n), key=lambda kv: -kv[1])[:15]),
        }
    return procs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--stacks", action="store_true")
    ap.add_argument("--no-ticks", action="store_true",
                    help="no 1 ms probe timer on the loops: wake-up counts are then the processes' own")
    ap.add_argument("--label", default="")
    ap.add_argument("--consumer-switch-interval", type=float, metavar="S",
                    help="sys.setswitchinterval(S) in the consumer process (the interpreter's default is 0.005): "
                         "does a consume thread wait for the GIL held by the loop?")
    ap.add_argument("--out")
    ap.add_argument("--write-site", metavar="DIR",
                    help="only write DIR/sitecustomize.py, which probes any Python process started with DIR first "
                         "on PYTHONPATH and FASTMQ_PROBE_DIR set (a fastmq-bench run's servers and Spark tasks)")
    ap.add_argument("--from-dir", metavar="PROBE_DIR",
                    help="only summarise the probe files a run left in PROBE_DIR (all of each process's life)")
    ap.add_argument("--role", choices=["produce", "consume"], help=argparse.SUPPRESS)
    ap.add_argument("--ns", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.write_site:
        Path(a.write_site).mkdir(parents=True, exist_ok=True)
        _write_site(Path(a.write_site))
        return 0
    if not a.out:
        ap.error("--out is required")
    if a.from_dir:
        summary = _summary(Path(a.from_dir), 0.0, 1e12)
        kept = {"label": a.label, "probe_dir": a.from_dir, "processes": summary}
        Path(a.out).write_text(json.dumps(kept, indent=1) + "\n")
        for k, v in summary.items():
            print(k, "gc>=1ms", v["gc_pauses_ge_1ms"], v["gc_pause_ms_ge_1ms_total"],
                  {g: (x["n"], round(x["total_ms"], 1), round(x["max_ms"], 2)) for g, x in v["gc_all_run"].items()})
        return 0
    if a.role:
        from fastmq.remoting.loop import run
        if a.role == "produce":
            run(_produce(a.ns, a.rate, a.seconds, a.file))
        else:
            if a.consumer_switch_interval:
                sys.setswitchinterval(a.consumer_switch_interval)
            run(_consume(a.ns, int(a.rate * a.seconds), a.file))
        return 0

    sys.path.insert(0, str(ROOT))
    from spark_bench.run.cluster import RocketAdmin, start_fastmq
    base = Path(tempfile.mkdtemp(prefix="e2etail-"))
    try:
        probe = base / "probe"
        probe.mkdir()
        site = base / "site"
        site.mkdir()
        _write_site(site)
        env = dict(os.environ, FASTMQ_PROBE_DIR=str(probe),
                   PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", str(ROOT))]))
        if a.stacks:
            env["FASTMQ_PROBE_STACKS"] = "1"
        if a.no_ticks:
            env["FASTMQ_PROBE_TICKS"] = "0"
        saved = dict(os.environ)
        os.environ.update(env)  # the servers start_fastmq launches inherit it
        procs: list[subprocess.Popen[bytes]] = []
        ns = broker = None
        try:
            ns, broker = start_fastmq(base)
            os.environ.clear()
            os.environ.update(saved)
            admin = RocketAdmin(ns.addr)
            admin.connect()
            admin.create_topic(TOPIC, 4)
            me = [sys.executable, str(Path(__file__).resolve()), "--out", "-", "--ns", ns.addr,
                  "--rate", str(a.rate), "--seconds", str(a.seconds)]
            cfile, pfile = base / "consumer.json", base / "producer.json"
            switch = (["--consumer-switch-interval", str(a.consumer_switch_interval)]
                      if a.consumer_switch_interval else [])
            procs.append(subprocess.Popen(me + ["--role", "consume", "--file", str(cfile)] + switch, env=env))
            for _ in range(600):
                if Path(str(cfile) + ".ready").exists():
                    break
                time.sleep(0.1)
            time.sleep(3.0)  # the consumer's first rebalance and pulls held
            procs.append(subprocess.Popen(me + ["--role", "produce", "--file", str(pfile)], env=env))
            for p in procs:
                p.wait(timeout=a.seconds * 3 + 120)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for s in (broker, ns):
                if s is not None:
                    s.stop()
            os.environ.clear()
            os.environ.update(saved)
        c = json.loads(cfile.read_text())
        pr = json.loads(pfile.read_text())
        e2e, pub = c["lat_ns"], pr["lat_ns"]
        qs = (0.5, 0.9, 0.99, 0.999)
        result = {
            "label": a.label, "consumer_switch_interval": a.consumer_switch_interval, "rate": a.rate,
            "seconds": a.seconds, "stacks_sampled": a.stacks, "ticks": not a.no_ticks,
            "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip(),
            "load_avg": os.getloadavg(),
            "sent": pr["sent"], "send_errors": pr["errors"], "received": c["received"],
            "e2e_us": {f"p{q * 100:g}": _pct(e2e, q) for q in qs} | {"max": _pct(e2e, 1.0)},
            "publish_us": {f"p{q * 100:g}": _pct(pub, q) for q in qs} | {"max": _pct(pub, 1.0)},
            "window_s": pr["window"][1] - pr["window"][0],
            "hops": _hops(c["hops"], *pr["window"]),
            "processes": _summary(probe, *pr["window"]),
        }
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps({k: result[k] for k in ("e2e_us", "publish_us", "received", "load_avg")}))
        print(json.dumps(result["hops"], indent=1))
        for k, v in result["processes"].items():
            print(k, "gc>=1ms", v["gc_pauses_ge_1ms"], v["gc_pause_ms_ge_1ms_total"], "late>=2ms", v["late_ge_2ms"],
                  v["late_ms_ge_2ms_total"], "busy>=2ms", v["busy_turns_ge_2ms"], v["late_ticks"],
                  {g: (x["n"], round(x["max_ms"], 2)) for g, x in v["gc_all_run"].items()})
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
