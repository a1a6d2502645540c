"""One (workload, driver) run on a Spark session: lay out the tasks, run them as one barrier
stage, check the figures against the broker's own counters, and build result.json's content.

Tasks: producers and consumers are dealt round-robin over the tasks (``--tasks``, default every
slot the cluster has, and no more tasks than clients), producers and consumers on separate tasks
when there are two or more. A run needing more tasks than the cluster has slots is refused
before it starts: Spark would otherwise wait and retry, or run the tasks in waves.
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cluster import BenchError
from .control import ControlServer
from .drivers import peer_info
from .histogram import LatencyHistogram
from .task import DRAIN_MAX_S
from .workload import Workload

__all__ = ["RunContext", "layout", "run_one", "slots_of", "AGREEMENT"]

#: the broker's count over the window and the reported throughput must agree this closely
AGREEMENT = 0.10
MB = 1_000_000


@dataclass
class RunContext:
    """What every run of one invocation shares."""

    spark: Any
    run_id: str
    started_at: str
    master: str
    target: dict[str, Any]          # namesrv / redis addresses, "run" (short id for names)
    admin: dict[str, Any]           # driver name -> RocketAdmin / RedisAdmin
    tasks: int | None = None
    interval_s: float = 1.0
    allow_pure: bool = False
    keep_topics: bool = False
    print: Any = print
    progress: bool = True           # print a line per interval while a run goes on
    notes: list[str] = field(default_factory=list)


def slots_of(sc: Any) -> int:
    """Task slots: what a barrier stage may use at once (defaultParallelism counts the cores of
    the registered executors, or the local threads)."""
    cpus = int(sc.getConf().get("spark.task.cpus", "1"))
    return max(1, int(sc.defaultParallelism) // cpus)


def layout(w: Workload, tasks: int) -> list[dict[str, Any]]:
    """Deal producers and consumers over ``tasks`` tasks (fewer when there are fewer clients)."""
    topics = [f"T{i}" for i in range(w.topics)]
    producers = [{"pid": i, "topic": topics[i // w.producers_per_topic]} for i in range(w.producers)]
    consumers = [{"cid": j, "topic": topics[t], "group": f"G{t}_{g}"}
                 for j, (t, g, _c) in enumerate((t, g, c) for t in range(w.topics)
                                                for g in range(w.consumer_groups_per_topic)
                                                for c in range(w.consumers_per_group))]
    if not consumers or tasks < 2:
        p_tasks, c_tasks = min(tasks, max(1, len(producers))), 0
    else:
        p_tasks = min(len(producers), max(1, tasks // 2))
        c_tasks = min(len(consumers), tasks - p_tasks)
    out = [{"producers": [], "consumers": []} for _ in range(p_tasks + c_tasks)]
    for i, p in enumerate(producers):
        out[i % p_tasks]["producers"].append(p)
    for j, c in enumerate(consumers):
        out[(p_tasks + j % c_tasks) if c_tasks else j % p_tasks]["consumers"].append(c)
    return out


def _or_marks(out: dict[int, np.ndarray], pid: int, packed: bytes) -> int:
    """OR one task's packed marks of producer ``pid`` into ``out``; how many marks it had."""
    bits = np.unpackbits(np.frombuffer(packed, dtype=np.uint8)).astype(bool)
    have = out.get(pid)
    if have is None:
        out[pid] = bits
    else:
        merged = np.zeros(max(have.size, bits.size), dtype=bool)
        merged[:have.size] |= have
        merged[:bits.size] |= bits
        out[pid] = merged
    return int(bits.sum())


def _merge_marks(results: list[dict[str, Any]], key: str) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for r in results:
        for pid, packed in r[key].items():
            _or_marks(out, pid, packed)
    return out


def _lost_and_cross_duplicates(results: list[dict[str, Any]], groups: list[str]
                               ) -> tuple[int, int, dict[str, tuple[int, list[str]]]]:
    """(lost, duplicates across tasks, lost per group): acknowledged messages no consumer of a
    group received; a message received by two tasks of one group counts as a duplicate."""
    acked = _merge_marks(results, "acked")
    lost_total, cross, per_group = 0, 0, {}
    examples: dict[str, list[str]] = {}
    for g in groups:
        union: dict[int, np.ndarray] = {}
        singles = 0
        for r in results:
            marks = r["seen"].get(g, {})
            for pid, packed in marks.items():
                singles += _or_marks(union, pid, packed)
        cross += singles - sum(int(b.sum()) for b in union.values())
        lost = 0
        for pid, a in acked.items():
            seen = union.get(pid, np.zeros(0, dtype=bool))
            n = a.size
            s = np.zeros(n, dtype=bool)
            s[:min(n, seen.size)] = seen[:n]
            missing = np.flatnonzero(a & ~s)
            lost += int(missing.size)
            if missing.size:
                examples.setdefault(g, []).extend(f"{pid}.{q}" for q in missing[:5])
        per_group[g] = lost
        lost_total += lost
    per_group = {g: (n, examples.get(g, [])[:5]) for g, n in per_group.items()}
    return lost_total, cross, per_group


def _figures(hists: list[bytes], count: int, window_s: float, size: int) -> dict[str, Any]:
    h = LatencyHistogram()
    for b in hists:
        h.merge(LatencyHistogram.from_bytes(b))
    return {"msgs_per_s": round(count / window_s, 1), "mb_per_s": round(count * size / window_s / MB, 3),
            "latency_us": h.percentiles_us() if h.total else None, "_hist": h}


def run_one(ctx: RunContext, w: Workload, driver: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``w`` with ``driver``; (result.json content, intervals rows). Never raises for a run
    that failed: the result says ``failed`` and why."""
    sc = ctx.spark.sparkContext
    slots = slots_of(sc)
    want = ctx.tasks or w.tasks or slots
    result: dict[str, Any] = _skeleton(ctx, w, driver, slots)
    rows: list[dict[str, Any]] = []
    if want > slots:
        pinned = "" if ctx.tasks or not w.tasks else f" (the workload pins tasks: {w.tasks})"
        return _failed(result, f"the run needs {want} tasks at once but the cluster has {slots} task slots "
                               f"(executor cores / spark.task.cpus){pinned}: use --tasks {slots} or a bigger "
                               "cluster"), rows
    plan_tasks = layout(w, want)
    # what makes two runs comparable besides the workload: how its clients were spread
    result["shape"].update(tasks=len(plan_tasks), tasks_from="--tasks" if ctx.tasks else (
        "workload" if w.tasks else "slots"), clients_per_task=max(len(t["producers"]) + len(t["consumers"])
                                                                   for t in plan_tasks))
    run = ctx.target["run"]
    topic_names = {f"T{i}": f"bench-{w.name}-{run}-{i}" for i in range(w.topics)}
    group_names = {c["group"]: f"bench_{w.name}_{run}_{c['group']}" for t in plan_tasks for c in t["consumers"]}
    for t in plan_tasks:
        for p in t["producers"]:
            p["topic"] = topic_names[p["topic"]]
        for c in t["consumers"]:
            c["topic"] = topic_names[c["topic"]]
            c["group"] = group_names[c["group"]]
    topics = list(topic_names.values())
    pairs = sorted({(c["group"], c["topic"]) for t in plan_tasks for c in t["consumers"]})
    admin = ctx.admin[driver]
    try:
        if driver == "redis-streams":
            admin.create(topics, pairs)
        else:
            for t in topics:
                admin.create_topic(t, w.queues_per_topic)
    except BenchError as exc:
        return _failed(result, str(exc)), rows
    except Exception as exc:
        return _failed(result, f"cannot create the workload's topics: {type(exc).__name__}: {exc}"), rows
    out = (result, rows)
    try:
        out = _run_stage(ctx, w, driver, plan_tasks, topics, pairs, result, admin)
    finally:
        if not ctx.keep_topics:
            left = _remove(ctx, admin, topics, [g for g, _ in pairs], bool(result.get("unreachable")))
            if left:
                out[0]["left_behind"] = left
    return out


def _remove(ctx: RunContext, admin: Any, topics: list[str], groups: list[str], server_lost: bool) -> dict[str, Any]:
    """Delete the run's topics and groups; what is left behind and why ({} when all went).

    After a server was lost during the run, wait a little (bounded) for it to come back first."""
    tries = 10 if server_lost else 1
    for i in range(tries):
        try:
            admin.delete(topics, groups)
            return {}
        except Exception as exc:  # cleanup trouble is noted in the result, not fatal
            problem = f"{type(exc).__name__}: {exc}"
            if i + 1 < tries:
                time.sleep(3)
    ctx.print(f"note: the run's topics were left behind ({', '.join(topics)}): {problem}")
    return {"topics": topics, "groups": groups, "reason": problem}


def _skeleton(ctx: RunContext, w: Workload, driver: str, slots: int) -> dict[str, Any]:
    sc = ctx.spark.sparkContext
    try:
        executors = max(1, sc._jsc.sc().getExecutorMemoryStatus().size() - (0 if ctx.master.startswith("local") else 1))
    except Exception:
        executors = None
    from .task import task_env
    mine = task_env()   # the driver's: the tasks' replace it when they report (compiled stays unknown till then)
    return {"schema": 1, "run_id": ctx.run_id, "started_at": ctx.started_at, "status": "failed", "reason": None,
            "workload": w.to_json(), "driver": driver,
            "env": {"fastmq_version": mine["fastmq_version"], "commit": mine["commit"], "compiled": None,
                    "python": platform.python_version(),
                    "spark_version": sc.version, "master": ctx.master, "executors": executors, "cores": slots},
            "shape": {"master": ctx.master, "executors": executors, "slots": slots, "tasks": None,
                      "tasks_from": None, "clients_per_task": None},
            "window_s": w.duration_s, "target_rate": w.producer_rate or None, "sent_ok": None, "errors": {},
            "received": None, "duplicates": None, "lost": None, "broker": None, "publish": None, "e2e": None,
            "intervals": [],
            # the peer's client, version, parser and durability (issue 33): a comparison states them
            "peer": peer_info(driver, ctx.admin.get(driver))}


def _failed(result: dict[str, Any], reason: str, status: str = "failed") -> dict[str, Any]:
    result["status"], result["reason"] = status, reason
    return result


def _run_stage(ctx: RunContext, w: Workload, driver: str, plan_tasks: list[dict[str, Any]], topics: list[str],
               pairs: list[tuple[str, str]], result: dict[str, Any], admin: Any
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import base64

    from .task import KILL_HOOK
    sc = ctx.spark.sparkContext
    job_group = f"fastmq-bench-{ctx.run_id}-{w.name}-{driver}"
    advertise = sc.getConf().get("spark.driver.host", "127.0.0.1")
    server = ControlServer(len(plan_tasks), consumers=bool(pairs), warmup_s=w.warmup_s, duration_s=w.duration_s, interval_s=ctx.interval_s,
                           allow_pure=ctx.allow_pure, on_failure=lambda r: (ctx.print(f"FAILED: {r}"),
                                                                            sc.cancelJobGroup(job_group)),
                           print_fn=ctx.print, advertise=advertise, show_intervals=ctx.progress)
    payload = base64.b64encode(w.payload or bytes(w.message_size)).decode()
    wj = w.to_json()
    specs = [{"task": i, **t, "workload": wj, "driver": driver, "target": ctx.target, "payload": payload,
              "control": server.addr, "producers_total": w.producers,
              # the test hook travels in the spec: executors' environments are not the driver's
              "kill": os.environ.get(KILL_HOOK)} for i, t in enumerate(plan_tasks)]
    counters: dict[str, Any] = {}
    watcher = threading.Thread(target=_watch_broker, args=(server, admin, topics, counters), daemon=True)
    watcher.start()
    probe_stop = threading.Event()
    unreachable: dict[str, float] = {}
    prober = threading.Thread(target=_probe_servers, args=(server, _server_addrs(ctx, driver, admin), unreachable,
                                                           probe_stop), daemon=True)
    prober.start()
    ctx.print(f"== {w.name} / {driver}: {len(specs)} tasks ({w.producers} producers, {w.consumers} consumers), "
              f"warm-up {w.warmup_s:g}s, window {w.duration_s:g}s")
    try:
        stored0 = admin.stored(topics)
    except Exception as exc:
        server.close()
        return _failed(result, f"broker counters unavailable before the run: {exc}"), []
    results: list[dict[str, Any]] = []
    error = None
    try:
        sc.setJobGroup(job_group, f"fastmq-bench {w.name} {driver}", interruptOnCancel=True)
        rdd = sc.parallelize(specs, len(specs)).barrier().mapPartitions(_partition)
        results = rdd.collect()
    except Exception as exc:  # the job failed or was cancelled: the reason comes from the control socket first
        error = server.failure or _spark_error(exc)
    finally:
        server.close()
        probe_stop.set()
        watcher.join(5)
        prober.join(5)
    if error is None and server.failure:
        error = server.failure
    if unreachable:
        # a server gone during the run explains lost messages and dead tasks: say that, not them
        gone = "; ".join(f"{addr} unreachable since t={t:.1f}s" for addr, t in sorted(unreachable.items(),
                                                                                       key=lambda kv: kv[1]))
        result["unreachable"] = {addr: round(t, 1) for addr, t in unreachable.items()}
        error = gone + (f" (then: {error})" if error else "")
    if results:
        envs = [r["env"] for r in results]
        result["env"].update(fastmq_version=envs[0]["fastmq_version"], commit=envs[0]["commit"] or result["env"]["commit"],
                             compiled=all(e["compiled"] for e in envs))
        refused = [r["refused"] for r in results if "refused" in r]
        if refused:
            return _failed(result, refused[0]), []
    if error is not None:
        if len(results) == len(specs):
            # every task came back (a server was lost, not a task): the counts say what happened
            # before the failure; the figures are not the run's and stay out
            _collate(ctx, w, driver, results, result, admin, topics, pairs, stored0, counters)
            result.update(publish=None, e2e=None, intervals=[])
            result.pop("_hists", None)
        return _failed(result, error), []
    return _collate(ctx, w, driver, results, result, admin, topics, pairs, stored0, counters)


def _server_addrs(ctx: RunContext, driver: str, admin: Any) -> dict[str, str]:
    """address -> what it is ("broker", "NameServer", "redis"), for the reachability probe."""
    if driver == "redis-streams":
        return {ctx.target["redis"]: "redis"} if ctx.target.get("redis") else {}
    out = {a.strip(): "NameServer" for a in str(ctx.target.get("namesrv") or "").split(";") if a.strip()}
    out.update({a: "broker" for a in getattr(admin, "masters", {}).values()})
    return out


#: seconds between two probes of the servers, and a probe's connect timeout
PROBE_EVERY_S = 1.0
PROBE_TIMEOUT_S = 2.0


def _probe_servers(server: ControlServer, addrs: dict[str, str], unreachable: dict[str, float],
                   stop: threading.Event) -> None:
    """Connect to every server once a second from the plan's start until the run ends; the first
    failure of each is recorded as seconds into the window (negative: during the warm-up)."""
    import socket
    if not server.plan_set.wait(600) or server.plan is None:
        return
    start_ns = server.plan.window_start_ns
    while not stop.wait(PROBE_EVERY_S):
        for addr, what in addrs.items():
            key = f"{what} {addr}"
            if key in unreachable:
                continue
            host, _, port = addr.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
                    pass
            except (OSError, ValueError):
                unreachable[key] = (time.time_ns() - start_ns) / 1e9


def _partition(it: Any) -> Any:
    from pyspark import BarrierTaskContext

    from .task import run_task
    ctx = BarrierTaskContext.get()
    for spec in it:
        yield run_task(spec, ctx.barrier)


def _spark_error(exc: BaseException) -> str:
    text = str(exc)
    for line in text.splitlines():
        if "SPARK-24819" in line or "Exception:" in line or "Error:" in line:
            return f"the Spark job failed: {line.strip()[:500]}"
    return f"the Spark job failed: {type(exc).__name__}: {text[:500]}"


def _watch_broker(server: ControlServer, admin: Any, topics: list[str], counters: dict[str, Any]) -> None:
    """Read the broker's stored count at the window's start and end (absolute times)."""
    if not server.plan_set.wait(600) or server.plan is None:
        return
    for key, at in (("window_start", server.plan.window_start_ns), ("window_end", server.plan.window_end_ns)):
        time.sleep(max(0.0, (at - time.time_ns()) / 1e9))
        if server.failure:
            return
        try:
            counters[key] = admin.stored(topics)
        except Exception as exc:
            counters[key + "_error"] = str(exc)


def _collate(ctx: RunContext, w: Workload, driver: str, results: list[dict[str, Any]], result: dict[str, Any],
             admin: Any, topics: list[str], pairs: list[tuple[str, str]], stored0: int, counters: dict[str, Any]
             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    window_s = w.duration_s
    size = w.message_size
    sent_ok = sum(r["sent_ok"] for r in results)
    errors: dict[str, int] = {}
    for r in results:
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
    received = sum(r["received"] for r in results)
    groups = sorted({g for g, _ in pairs})
    lost, cross, lost_by_group = _lost_and_cross_duplicates(results, groups)
    duplicates = sum(r["duplicates"] for r in results) + cross
    pub_n = sum(r["publish_in_window"] for r in results)
    e2e_n = sum(r["e2e_in_window"] for r in results)
    publish = _figures([r["publish_hist"] for r in results], pub_n, window_s, size)
    e2e = _figures([r["e2e_hist"] for r in results], e2e_n, window_s, size)
    intervals = []
    n_int = len(results[0]["interval_rows"]) if results else 0
    for i in range(n_int):
        ph, eh = LatencyHistogram(), LatencyHistogram()
        for r in results:
            if i in r["publish_intervals"]:
                ph.merge(LatencyHistogram.from_bytes(r["publish_intervals"][i]))
            if i in r["e2e_intervals"]:
                eh.merge(LatencyHistogram.from_bytes(r["e2e_intervals"][i]))
        rows_i = [r["interval_rows"][i] for r in results]
        intervals.append({"t_s": round((i + 1) * ctx.interval_s, 3),
                          "publish_msgs_per_s": sum(x["publish_msgs"] for x in rows_i) / ctx.interval_s,
                          "e2e_msgs_per_s": sum(x["e2e_msgs"] for x in rows_i) / ctx.interval_s,
                          "publish_p99_us": ph.percentile(99) / 1000 if ph.total else None,
                          "e2e_p99_us": eh.percentile(99) / 1000 if eh.total else None,
                          "errors": sum(x["errors"] for x in rows_i)})
    rows = [{"run_id": ctx.run_id, "workload": w.name, "driver": driver, "task": r["task"], "host": r["env"]["host"],
             "interval": x["interval"], "t_s": float((x["interval"] + 1) * ctx.interval_s),
             "publish_msgs": x["publish_msgs"], "e2e_msgs": x["e2e_msgs"], "errors": x["errors"],
             "publish_p99_us": x["publish_p99_us"], "e2e_p99_us": x["e2e_p99_us"]}
            for r in results for x in r["interval_rows"]]
    result.update(sent_ok=sent_ok, errors=errors, received=received, duplicates=duplicates, lost=lost,
                  publish={k: v for k, v in publish.items() if k != "_hist"},
                  e2e={k: v for k, v in e2e.items() if k != "_hist"} if pairs else None,
                  intervals=intervals)
    result["_hists"] = {"publish": publish["_hist"], "e2e": e2e["_hist"]}
    problems: list[str] = []
    partial: list[str] = []
    try:
        stored = admin.stored(topics) - stored0
        consumed = admin.consumed(pairs) if pairs else None
        result["broker"] = {"stored": stored, "consumed": consumed,
                            "window": (counters["window_end"] - counters["window_start"])
                            if "window_end" in counters and "window_start" in counters else None}
    except Exception as exc:
        partial.append(f"the broker's counters could not be read at the finish ({exc}): stored/consumed unchecked")
        stored = consumed = None
    if lost and any(r.get("drain_cut") for r in results):
        problems.append(f"{lost} acknowledged message(s) not yet consumed when the consumers were stopped "
                        f"{DRAIN_MAX_S:.0f} s after the window (they could not keep up)")
    elif lost:
        problems.append(f"{lost} acknowledged message(s) never reached their consumer group "
                        f"({'; '.join(f'{g}: {n}, e.g. producer.sequence ' + ' '.join(ex) for g, (n, ex) in lost_by_group.items() if n)})")
    if stored is not None and stored < sent_ok:
        problems.append(f"the broker stored {stored} messages but {sent_ok} were acknowledged")
    if consumed is not None and stored is not None:
        per_topic_groups = len(pairs) / max(1, len(topics))
        if consumed < stored * per_topic_groups:
            problems.append(f"consumer offsets committed {consumed} of {int(stored * per_topic_groups)} stored "
                            "message(s) x groups")
    bw = (result.get("broker") or {}).get("window")
    if bw is None and driver != "redis-streams" and stored is not None:
        partial.append("the broker's count over the window is missing: throughput unconfirmed")
    elif bw is not None and pub_n and w.send_mode != "oneway":
        if abs(bw - pub_n) > AGREEMENT * pub_n:
            problems.append(f"the broker stored {bw} messages in the window but the tasks report {pub_n} "
                            f"acknowledgements (more than {AGREEMENT:.0%} apart)")
    elif bw is not None and not pub_n:
        problems.append("no message was acknowledged inside the measured window")
    if problems:
        return _failed(result, "; ".join(problems)), rows
    if partial:
        return _failed(result, "; ".join(partial), "partial"), rows
    result["status"], result["reason"] = "ok", None
    return result, rows


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
