"""The Spark driver: fan load generators out over the executors, collate what they measured.

    python -m spark_bench.job --namesrv 127.0.0.1:9876 --kind route --tasks 4 --requests 20000
    python -m spark_bench.job --master spark://host:7077 --broker 10.0.0.5:10911 --kind send ...

Prints a report and, with ``--json-out``, writes it as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .histogram import LatencyHistogram
from .load import KINDS, LoadSpec, run_partition

__all__ = ["collate", "main"]

ROOT = Path(__file__).resolve().parent.parent


def collate(results: list[dict[str, Any]], spec: LoadSpec) -> dict[str, Any]:
    """Merge the tasks' histograms and counts into one report."""
    hist = LatencyHistogram()
    errors: dict[str, int] = {}
    ok = 0
    for r in results:
        hist.merge(LatencyHistogram.from_bytes(r["hist"]))
        ok += r["ok"]
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
    wall = max((r["elapsed_s"] for r in results), default=0.0)
    return {"spec": spec.to_dict(), "tasks": len(results), "hosts": sorted({r["host"] for r in results}),
            "ok": ok, "errors": errors, "wall_s": round(wall, 4),
            "throughput_per_s": round(ok / wall, 1) if wall else 0.0,
            "latency_us": {name: round(hist.percentile(p) / 1000, 1)
                           for name, p in (("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9), ("max", 100))},
            "mean_us": round(hist.mean_ns / 1000, 1)}


def _spark(master: str):
    # Executors must import fastmq and spark_bench from this checkout with this interpreter.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master(master).appName("fastmq-spark-bench")
            .config("spark.ui.enabled", "false").config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
            .getOrCreate())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spark_bench.job", description=__doc__.split("\n")[0])
    p.add_argument("--master", default="local[*]")
    p.add_argument("--kind", choices=KINDS, default="route")
    p.add_argument("--namesrv", help="target of --kind route")
    p.add_argument("--broker", help="target of --kind send")
    p.add_argument("--topic", default="BenchTopic")
    p.add_argument("--tasks", type=int, default=2)
    p.add_argument("--requests", type=int, default=10_000, help="per task")
    p.add_argument("--depth", type=int, default=64)
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--body-size", type=int, default=128)
    p.add_argument("--json-out")
    a = p.parse_args(argv)
    target = a.namesrv if a.kind == "route" else a.broker
    if not target:
        p.error(f"--kind {a.kind} needs --{'namesrv' if a.kind == 'route' else 'broker'}")
    spec = LoadSpec(kind=a.kind, target=target, topic=a.topic, requests=a.requests, depth=a.depth,
                    connections=a.connections, body_size=a.body_size)
    spark = _spark(a.master)
    try:
        d = spec.to_dict()
        results = spark.sparkContext.parallelize(range(a.tasks), a.tasks).map(lambda i: run_partition(i, d)).collect()
    finally:
        spark.stop()
    report = collate(results, spec)
    print(json.dumps(report, indent=2))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(report, indent=2))
    return 0 if report["ok"] and not report["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
