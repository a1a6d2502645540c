"""The two shapes of ``fastmq-bench rocketmq-tools`` that are not the benchmark Producer's run:
a backlog drained by RocketMQ's benchmark Consumer, and a Spark workload (issue 18's rows
"backlog drain by RocketMQ's benchmark Consumer" and "the Spark workload with many producers
each one message in flight").

``drainCOUNT-sBYTES`` (e.g. ``drain1m-s128``), per run: a fresh topic with 1024 queues (as
``BenchmarkTest``), filled with exactly COUNT messages of BYTES random alphanumeric bytes by
fastmq's own asyncio producer in batches of 32 (SEND_BATCH_MESSAGE, 32 batches in flight; the
benchmark Producer's bounded mode ``-q`` sends one message per request, 15k-22k a second here;
the fill is the same bytes for both brokers; a batch the broker refuses, such as a cold Java
broker's SYSTEM_BUSY, is sent again), then RocketMQ's benchmark Consumer with its default flags
except ``-n -t`` (20 threads, group ``benchmark_consumer``, which has no offset on the new topic
and so starts at its first message). A warm-up drains a tenth of the count.
Its 10 s lines are read until one consumes under 100 msgs/s after the backlog; the drain rate is
the mean of the lines busy throughout (``result.drain_figures``), the broker's CPU per
message is counted over the same lines, and the group's committed offsets must reach COUNT.

``spark-WORKLOAD`` (e.g. ``spark-many-producers``): ``fastmq-bench run WORKLOAD --namesrv NS
--driver fastmq`` as a child process against the broker, the broker's CPU and put count sampled
beside it every 0.5 s; figures from its ``result.json`` (``result.spark_figures``), which is
kept as ``run-<shape>-<broker>-<n>-spark/``, and the broker's own pull rates over the same span.
"""
from __future__ import annotations

import asyncio
import json
import random
import string
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .peer import (Peer, RunPlan, _loadavg, _machine, _now, _pull_rates, _rss_mb, _tool, next_line,
                   peer_label, proc_cpu_s, runq_wait_s)
from .process import Managed
from .result import RUN_SCHEMA, Shape, drain_figures, parse_consumer_line, spark_figures

__all__ = ["DRAIN_GROUP", "DRAIN_QUEUES", "RUNS", "drain_run", "fill", "shape_line", "spark_run"]

DRAIN_QUEUES = 1024        # as BenchmarkTest on both brokers
DRAIN_GROUP = "benchmark_consumer"   # the benchmark Consumer's default group
_BATCH, _IN_FLIGHT = 32, 32


async def _fill(namesrv: str, topic: str, count: int, size: int, timeout_s: float) -> tuple[int, int, str]:
    from fastmq.aio import Message, Producer
    body = "".join(random.choices(string.ascii_letters + string.digits, k=size)).encode()
    p = Producer("fastmq_bench_fill", namesrv_addr=namesrv, send_msg_timeout=10_000)
    await p.start()
    sent = retried = 0
    last_error = ""
    left = count
    # a cold Java broker answers some sends SYSTEM_BUSY (its send queue's 200 ms wait): those are
    # sent again, so that exactly ``count`` are stored; a broker failing many more gives up the fill
    budget = 100 + count // _BATCH // 10
    window: dict[asyncio.Future[Any], int] = {}   # a batch in flight -> its messages

    async def settle(block: bool) -> None:
        nonlocal sent, retried, left, last_error
        done, _ = await asyncio.wait(window, return_when=asyncio.ALL_COMPLETED if block else asyncio.FIRST_COMPLETED)
        for fut in done:
            n = window.pop(fut)
            exc = fut.exception()
            if exc is None:
                sent += n
                continue
            retried += 1
            left += n
            last_error = f"{type(exc).__name__}: {exc}"
            if retried > budget:
                raise RuntimeError(f"{retried} batches failed, the last with {last_error}")
            await asyncio.sleep(0.05)
    try:
        async with asyncio.timeout(timeout_s):
            while left or window:
                while left and len(window) < _IN_FLIGHT:
                    n = min(_BATCH, left)
                    left -= n
                    window[await p.send_batch_async([Message(topic, body) for _ in range(n)])] = n
                await settle(not left)
    finally:
        for fut in window:
            fut.cancel()
        await p.shutdown()
    return sent, retried, last_error


def fill(namesrv: str, topic: str, count: int, size: int, timeout_s: float) -> tuple[int, int, str]:
    """Send ``count`` messages of ``size`` bytes to ``topic`` in batches of 32, a failed batch
    again (a bounded number of times); (stored, batches sent again, the last failure's text).

    Raises:
        TimeoutError: not all stored within ``timeout_s``.
        RuntimeError: too many batches failed.
    """
    from fastmq.remoting.loop import run as run_loop
    got: tuple[int, int, str] = run_loop(_fill(namesrv, topic, count, size, timeout_s))
    return got


def _doc(plan: RunPlan, peer: Peer, shape: Shape, n: int, tag: str, log: Path, warmup: bool) -> dict[str, Any]:
    return {"schema": RUN_SCHEMA, "broker": peer.name, "shape": shape.name, "kind": shape.kind,
            "threads": shape.threads, "size": shape.size, "consumer": shape.consumer, "round": n, "warmup": warmup,
            "started_at": _now(), "namesrv": peer.namesrv, "loadavg_before": _loadavg(), "file": f"run-{tag}.json",
            "log": log.name, "peer": peer_label(peer)}


def _sample(peer: Peer, tool: Managed | None) -> dict[str, Any]:
    jiffies, idle = _machine()
    return {"broker_cpu_s": proc_cpu_s(peer.broker.pid), "tool_cpu_s": proc_cpu_s(tool.pid) if tool else 0.0,
            "machine_jiffies": jiffies, "machine_idle": idle, "broker_runq_s": runq_wait_s(peer.broker.pid)}


def _finish(plan: RunPlan, doc: dict[str, Any], reason: str, figures: dict[str, Any] | None,
            warmup: bool) -> dict[str, Any]:
    doc["loadavg_after"] = _loadavg()
    if not reason and figures is not None:
        doc["figures"] = figures
    doc["status"], doc["reason"] = ("failed", reason) if reason else ("ok", "")
    if not warmup:
        (plan.out / doc["file"]).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def _stored(admin: Any, topic: str, count: int, wait_s: float = 60.0) -> int:
    """The topic's stored count once it reaches ``count``, or at ``wait_s`` (a Java broker answers a
    send once the commit log has it and builds the queue entries after, so the count lags)."""
    from ..run.cluster import BenchError
    deadline = time.monotonic() + wait_s
    while True:
        try:
            got = int(admin.stored([topic]))
        except BenchError:
            got = -1
        if got >= count or time.monotonic() >= deadline:
            return got
        time.sleep(0.5)


def drain_run(plan: RunPlan, peer: Peer, shape: Shape, n: int, warmup: int = 0) -> dict[str, Any]:
    """One backlog drain against ``peer`` (see the module's text); its run document, written to
    ``plan.out`` unless it is a warm-up (whose backlog is a tenth of the count: it only has to
    warm the JVMs' and the broker's paths)."""
    from ..run.cluster import BenchError, RocketAdmin
    tag = f"{shape.name}-{peer.name}-{'warmup' if warmup else n}"
    log = plan.out / f"run-{tag}.log" if not warmup else plan.client_home / f"run-{tag}.log"
    doc = _doc(plan, peer, shape, n, tag, log, bool(warmup))
    count = max(1, shape.count // 10) if warmup else shape.count
    topic = f"BenchmarkDrain_{tag.replace('-', '_')}_{int(time.time())}"
    doc.update({"topic": topic, "count": count, "queues": DRAIN_QUEUES, "group": DRAIN_GROUP})
    lines: list[dict[str, Any]] = []
    reason = ""
    figures: dict[str, Any] | None = None
    cons: Managed | None = None
    try:
        admin = RocketAdmin(peer.namesrv)
        try:
            admin.connect()
            admin.create_topic(topic, DRAIN_QUEUES)
        except BenchError as e:
            return _finish(plan, doc, f"cannot make the drain topic: {e}", None, bool(warmup))
        t0 = time.monotonic()
        try:
            stored, retried, last_error = fill(peer.namesrv, topic, count, shape.size, plan.drain_timeout)
        except Exception as e:   # (TimeoutError included) any failure of the fill is the run's failure, with its text
            return _finish(plan, doc, f"the fill failed: {type(e).__name__}: {e}", None, bool(warmup))
        fill_s = time.monotonic() - t0
        doc["fill"] = {"stored": stored, "batches_sent_again": retried, "last_error": last_error,
                       "seconds": round(fill_s, 3),
                       "tps": stored / fill_s if fill_s > 0 else None, "broker_stored": _stored(admin, topic, count)}
        if stored != count or doc["fill"]["broker_stored"] != count:
            return _finish(plan, doc, f"the fill stored {doc['fill']['broker_stored']:,} of {count:,} by the "
                                      f"broker's count ({stored:,} answered stored)", None, bool(warmup))
        cons = _tool(plan, "org.apache.rocketmq.example.benchmark.Consumer", ["-n", peer.namesrv, "-t", topic],
                     f"consumer-{tag}", log)
        deadline = time.monotonic() + plan.tool_start_timeout + plan.drain_timeout
        busy = False
        while time.monotonic() < deadline:
            if not peer.broker.alive():
                reason = f"the {peer.name} broker exited with {peer.broker.proc.returncode} during the drain"
                break
            got = next_line(cons, "Consumer")
            if isinstance(got, str):
                reason = got
                break
            if got is None:
                continue
            t, text = got
            c = parse_consumer_line(text)
            if c is None:
                continue
            lines.append({"t": t, "tps": c.tps, "fail": c.fail, **_sample(peer, cons)})
            if c.tps >= 100:
                busy = True
            elif busy:
                break
        else:
            reason = f"the backlog was not drained within {plan.tool_start_timeout + plan.drain_timeout:.0f}s"
        consumed = 0
        if not reason:   # the Consumer commits its offsets every 5 s: it runs on until they reach the count
            until = time.monotonic() + 20.0
            while time.monotonic() < until:
                try:
                    consumed = admin.consumed([(DRAIN_GROUP, topic)])
                except BenchError:
                    consumed = -1
                if consumed >= count:
                    break
                time.sleep(1.0)
            doc["committed"] = consumed
            if consumed < count:
                reason = f"the group's committed offsets reached {consumed:,} of {count:,} after the drain"
        if not reason and warmup:   # a tenth of the backlog may drain within one line: nothing to measure
            figures = {"consumer_lines": [s["tps"] for s in lines]}
        elif not reason:
            try:
                figures = {**drain_figures(lines, count), "fill_tps": doc["fill"]["tps"],
                           "broker_rss_mb": _rss_mb(peer.broker.pid)}
            except ValueError as e:
                reason = str(e)
    finally:
        if cons is not None:
            cons.stop(timeout=15.0)
    t0 = lines[0]["t"] if lines else 0.0
    doc["consumer_lines"] = [{**s, "t": round(s["t"] - t0, 3)} for s in lines]
    return _finish(plan, doc, reason, figures, bool(warmup))


def spark_run(plan: RunPlan, peer: Peer, shape: Shape, n: int, warmup: int = 0) -> dict[str, Any]:
    """One ``fastmq-bench run WORKLOAD`` against ``peer`` (see the module's text); its run document."""
    tag = f"{shape.name}-{peer.name}-{'warmup' if warmup else n}"
    where = plan.client_home if warmup else plan.out
    log, out = where / f"run-{tag}.log", where / f"run-{tag}-spark"
    doc = _doc(plan, peer, shape, n, tag, log, bool(warmup))
    doc.update({"workload": shape.workload, "spark_dir": out.name})
    addr = str(peer.info.get("broker_addr", ""))
    samples: list[dict[str, Any]] = []
    stop = threading.Event()

    def sample_once() -> bool:
        counters = _pull_rates(addr, puts=True)
        if counters:   # a lost sample narrows the span, it does not stop the run
            samples.append({"t": time.monotonic(), **counters, **_sample(peer, None)})
        return bool(counters)

    def sample() -> None:
        while not stop.is_set():
            sample_once()
            stop.wait(0.5)
    # The span the broker's puts are counted over must start before the run's first send: a
    # sampler whose first answers came late once began its span thousands of messages in.
    for _ in range(20):
        if sample_once():
            break
        time.sleep(0.25)
    argv = [sys.executable, "-m", "spark_bench", "run", shape.workload, "--namesrv", peer.namesrv,
            "--driver", "fastmq", "--out", str(out)]
    doc["argv"] = argv[1:]
    run = Managed(argv, f"spark-{tag}", log, plan.client_home, pipe=True)
    sampler = threading.Thread(target=sample, name=f"sample-{tag}", daemon=True)
    sampler.start()
    reason = ""
    figures: dict[str, Any] | None = None
    try:
        try:
            run.proc.wait(plan.tool_start_timeout + plan.drain_timeout + 120.0)
        except Exception:   # subprocess.TimeoutExpired: stopped below, the run failed
            reason = "the Spark run did not finish in time"
        if not reason and not peer.broker.alive():
            reason = f"the {peer.name} broker exited with {peer.broker.proc.returncode} during the run"
    finally:
        stop.set()
        sampler.join(10.0)
        run.stop(timeout=30.0)
    results = sorted(out.glob("*/result.json"))
    if not reason and not results:
        reason = f"the Spark run exited with {run.proc.returncode} and wrote no result.json: {run.output(800)}"
    if not reason:
        result = json.loads(results[0].read_text())
        doc["result"] = str(results[0].relative_to(where))
        try:
            figures = {**spark_figures(result, samples), "broker_rss_mb": _rss_mb(peer.broker.pid)}
        except ValueError as e:
            reason = str(e)
    t0 = samples[0]["t"] if samples else 0.0
    doc["samples"] = [{**s, "t": round(s["t"] - t0, 3)} for s in samples]
    return _finish(plan, doc, reason, figures, bool(warmup))


def _num(v: Any, digits: int = 0) -> str:
    return "-" if not isinstance(v, (int, float)) else f"{v:,.{digits}f}"


def shape_line(doc: dict[str, Any]) -> str:
    """The progress line of an ok drain or Spark run (``rocketmq_tools`` prints the head)."""
    f = doc["figures"]
    if doc.get("warmup"):
        return "ok (warm-up)"
    cpu = f"broker CPU {_num(f.get('cpu_us_per_msg'), 1)} us/msg ({_num(f.get('broker_cpu_cores'), 2)} cores)"
    if doc.get("kind") == "drain":
        return (f"drain TPS {_num(f.get('tps'))} over {len(f.get('windows') or [])} whole line(s) of "
                f"{f.get('count', 0):,}  {cpu}  fill {_num(f.get('fill_tps'))}/s")
    return (f"TPS {_num(f.get('tps'))}  send p50/p99 {_num(f.get('send_p50_us'))}/{_num(f.get('send_p99_us'))} us  "
            f"e2e p99 {_num(f.get('e2e_p99_us'))} us  {cpu}")


RUNS: dict[str, Callable[[RunPlan, Peer, Shape, int, int], dict[str, Any]]] = {"drain": drain_run, "spark": spark_run}
