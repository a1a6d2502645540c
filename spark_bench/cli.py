"""``fastmq-bench`` (also ``python -m spark_bench``): run workloads on Spark, collate results.

    fastmq-bench run max-rate-128b rate-limited-latency --out results/ [--driver fastmq --driver redis-streams]
    fastmq-bench run my.yaml --out results/ --master spark://host:7077 --namesrv 10.0.0.5:9876
    fastmq-bench collate results/* --out table/
    fastmq-bench median run1.json run2.json --out merged.json   (scripts/bench_ab.sh uses it)
    fastmq-bench rocketmq-tools --rocketmq-home DIR --out benchmarks/results/rocketmq-tools
        (RocketMQ's own benchmark Producer/Consumer against fastmq's and Apache's broker; no Spark)

Exit status of ``run``: 0 when every (workload, driver) run is ``ok``; 1 when one failed or is
partial; 2 for bad input found before anything started.
"""
from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from fastmq.common.progress import on_terminal
from fastmq.version import add_version_option

__all__ = ["main"]


def _run_args(p: argparse.ArgumentParser) -> None:
    from .run.drivers import DRIVERS
    p.add_argument("workloads", nargs="+", metavar="WORKLOAD",
                   help="workload YAML files, or names of the shipped ones (spark_bench/run/workloads/)")
    p.add_argument("--out", required=True, help="results go to OUT/<workload>-<driver>/")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--namesrv", help="a RocketMQ 4.x NameServer (a;b for several); default: start a local "
                                     "fastmq-namesrv and fastmq-broker for the run")
    p.add_argument("--driver", action="append", choices=DRIVERS, help="repeatable; default fastmq")
    p.add_argument("--redis", help="host:port of a Redis for redis-streams; default: start a local redis-server")
    p.add_argument("--tasks", type=int, help="Spark tasks per run (default: every task slot, at most one per client)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds per reporting interval (default 1)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="print a line per interval while a run goes on (default: only when stdout is a terminal)")
    p.add_argument("--allow-pure", action="store_true",
                   help="run even where fastmq's compiled extensions are missing (the report says so)")
    p.add_argument("--keep-topics", action="store_true", help="leave the run's topics on the cluster")
    p.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH",
                   help="the embedded broker's flushDiskType (Redis's AOF fsync is matched to it)")
    p.add_argument("--executor-wait", type=float, default=120.0, metavar="SECONDS",
                   help="on a cluster, fail the run when no executor registered within this long (default 120)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark configuration")


def _spark(master: str, confs: list[str], executor_wait_s: float = 120.0) -> Any:
    # executors use this interpreter (and so the fastmq and spark_bench installed in it)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    b = (SparkSession.builder.master(master).appName("fastmq-bench")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         # a barrier stage that does not fit must fail at once, not after 40 retries 15 s apart
         .config("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "1")
         # a failed task must fail the run, not re-run the whole load
         .config("spark.task.maxFailures", "1")
         .config("spark.stage.maxConsecutiveAttempts", "1")
         .config("spark.dynamicAllocation.enabled", "false"))
    for kv in confs:
        k, _, v = kv.partition("=")
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not master.startswith("local"):
        try:
            _wait_for_executors(spark.sparkContext, executor_wait_s)
        except BaseException:
            spark.stop()
            raise
    return spark


def _check_master(master: str, timeout_s: float = 5.0) -> None:
    """A spark:// master that does not accept connections fails the run at once: Spark itself
    retries for a minute and then stops the context under the caller (a traceback)."""
    import socket

    from .run.cluster import BenchError
    if not master.startswith("spark://"):
        return
    for hostport in master[len("spark://"):].split(","):
        host, _, port = hostport.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port or 7077)), timeout=timeout_s):
                return
        except (OSError, ValueError) as exc:
            problem = f"{hostport}: {exc}"
    raise BenchError(f"Spark master {master} unreachable ({problem}): check --master")


def _wait_for_executors(sc: Any, timeout_s: float = 120.0) -> None:
    """A cluster's executors register a while after the session starts: the slot count (and the
    barrier stage's own check) must not be taken before they have. None within ``timeout_s``
    (a master without workers, or one that refused the application) fails the run."""
    import time

    from .run.cluster import BenchError
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sc._jsc.sc().isStopped():
            raise BenchError(f"Spark stopped the application: the master {sc.master} refused it or stopped "
                             "answering (see the Spark log above)")
        if sc._jsc.sc().getExecutorMemoryStatus().size() > 1:   # the driver is one entry
            time.sleep(2)   # the others of a multi-worker cluster come within moments
            return
        time.sleep(0.5)
    raise BenchError(f"no executor registered with {sc.master} within {timeout_s:.0f}s: the master has no "
                     "worker with enough free cores and memory (--executor-wait to wait longer)")


def run(a: argparse.Namespace, spark: Any = None) -> int:
    """The ``run`` subcommand; ``spark``: a session to use (and leave running) instead of a new one."""
    from .run.cluster import BenchError, RedisAdmin, RocketAdmin, start_fastmq, start_redis, temp_base
    from .run.report import summary_line, write_outputs
    from .run.runner import RunContext, now_iso, run_one
    from .run.workload import WorkloadError, load_workload

    try:
        workloads = [load_workload(w) for w in a.workloads]
    except WorkloadError as exc:
        print(f"fastmq-bench: {exc}", file=sys.stderr)
        return 2
    if a.tasks is not None and a.tasks < 1:
        print("fastmq-bench: --tasks must be at least 1", file=sys.stderr)
        return 2
    drivers = a.driver or ["fastmq"]
    run_id = secrets.token_hex(8)
    started_at = now_iso()
    out = Path(a.out)
    embedded: list[Any] = []
    base = temp_base()
    target: dict[str, Any] = {"run": run_id[:8]}
    admin: dict[str, Any] = {}
    failures = 0
    own_spark = spark is None

    def failed_record(w: Any, d: str, reason: str) -> dict[str, Any]:
        from .run.runner import _failed
        return _failed({"schema": 1, "run_id": run_id, "started_at": started_at, "workload": w.to_json(),
                        "driver": d, "env": {"master": a.master}, "window_s": w.duration_s,
                        "target_rate": w.producer_rate or None, "sent_ok": None, "errors": {},
                        "received": None, "duplicates": None, "lost": None, "broker": None,
                        "publish": None, "e2e": None, "intervals": []}, reason)

    def fail_all(reason: str) -> int:
        import json
        for w in workloads:
            for d in drivers:
                r = failed_record(w, d, reason)
                d_out = out / f"{w.name}-{d}"
                d_out.mkdir(parents=True, exist_ok=True)
                (d_out / "result.json").write_text(json.dumps(r, indent=2) + "\n")
        print(f"fastmq-bench: FAILED: {reason}", file=sys.stderr)
        return 1
    try:
        try:
            if spark is None:
                _check_master(a.master)   # before any server starts: a typo costs seconds, not minutes
            if any(d != "redis-streams" for d in drivers):
                if a.namesrv:
                    target["namesrv"] = a.namesrv
                else:
                    ns, broker = start_fastmq(base, a.flush)
                    embedded += [broker, ns]
                    target["namesrv"] = ns.addr
                    print(f"fastmq-bench: started fastmq-namesrv {ns.addr} and fastmq-broker {broker.addr} "
                          f"({a.flush}) under {base}")
                rocket = RocketAdmin(target["namesrv"])
                rocket.connect()
                admin.update({d: rocket for d in drivers if d != "redis-streams"})
            if "redis-streams" in drivers:
                if a.redis:
                    target["redis"] = a.redis
                else:
                    rs = start_redis(base, a.flush)
                    embedded.append(rs)
                    target["redis"] = rs.addr
                    print(f"fastmq-bench: started redis-server {rs.addr} (AOF, "
                          f"appendfsync {'always' if a.flush == 'SYNC_FLUSH' else 'everysec'})")
                admin["redis-streams"] = RedisAdmin(target["redis"])
        except BenchError as exc:
            return fail_all(str(exc))
        if spark is None:
            try:
                spark = _spark(a.master, a.conf, a.executor_wait)
            except BenchError as exc:
                return fail_all(str(exc))
            except Exception as exc:  # Spark refused the session (a bad URL, a bad --conf): one line
                return fail_all(f"Spark did not start on {a.master}: {type(exc).__name__}: "
                                f"{(str(exc).strip().splitlines() or [''])[0][:300]}")
        ctx = RunContext(spark=spark, run_id=run_id, started_at=started_at, master=a.master, target=target,
                         admin=admin, tasks=a.tasks, interval_s=a.interval, allow_pure=a.allow_pure,
                         keep_topics=a.keep_topics, progress=on_terminal(sys.stdout, a.progress))
        for w in workloads:
            for d in drivers:
                try:
                    result, rows = run_one(ctx, w, d)
                except Exception as exc:  # e.g. Spark stopped under the run: one line, not a traceback
                    result, rows = failed_record(w, d, f"the run stopped: {type(exc).__name__}: "
                                                       f"{(str(exc).strip().splitlines() or [''])[0][:300]}"), []
                gone = [p.what for p in embedded if not p.alive()]
                if gone and result["status"] == "ok":
                    result["status"], result["reason"] = "failed", f"{', '.join(gone)} exited during the run"
                elif gone:
                    result["reason"] = f"{result['reason']} ({', '.join(gone)} exited during the run)"
                d_out = out / f"{w.name}-{d}"
                write_outputs(spark, d_out, result, rows)
                print(summary_line(result))
                print(f"  -> {d_out}/result.json")
                if result["status"] != "ok":
                    failures += 1
    finally:
        if spark is not None and own_spark:
            spark.stop()
        for p in embedded:
            p.stop()
        import shutil
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failures else 0


def main(argv: list[str] | None = None, spark: Any = None) -> int:
    """The ``fastmq-bench`` command (``spark``: an existing session for ``run``, kept running)."""
    p = argparse.ArgumentParser(prog="fastmq-bench", description=__doc__.split("\n")[0])
    add_version_option(p)
    sub = p.add_subparsers(dest="command", required=True)
    _run_args(sub.add_parser("run", help="run workloads on Spark against fastmq, RocketMQ or Redis"))
    from . import collate as c  # its heavy imports (Spark, matplotlib) wait inside c.run

    c.add_arguments(sub.add_parser("collate", help="collate result directories and pytest-benchmark files"))
    from .run import median as m

    m.add_arguments(sub.add_parser("median", help="merge several pytest-benchmark runs of one commit into "
                                                  "their medians"))
    from . import rocketmq_tools as rt

    rt.add_arguments(sub.add_parser("rocketmq-tools", help="RocketMQ's benchmark Producer and Consumer against "
                                                           "fastmq's broker and Apache RocketMQ's, alternately"))
    a = p.parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        # a terminated run still stops the servers it started (the finally blocks run)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.command == "run":
        return run(a, spark)
    if a.command == "median":
        return m.run(a)
    if a.command == "rocketmq-tools":
        return rt.run(a)
    return int(c.run(a))


if __name__ == "__main__":
    raise SystemExit(main())
