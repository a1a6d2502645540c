"""The comparisons of ``fastmq-bench collate``, as Spark joins over one DataFrame of figures.

Rows are those of ``load`` (one per figure). Four comparisons come out of it:

- drivers measured in the same run (same ``run_id`` and workload): each driver against the
  run's reference driver (``fastmq`` when it took part), as reference / other;
- compiled against pure twins in one pytest-benchmark file: speed-up = pure median / compiled;
- peers inside one benchmark's ``extra_info`` (fastmq beside redis-py, the Java broker, ...):
  the fastmq figure / the peer's;
- commits: the newest figure of each (case, driver or twin, peer, metric) against ``--baseline``
  when that has it, else against the newest older figure measured on another commit.

Only complete runs (``status`` ok) enter a comparison; failed and partial runs are reported apart.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .load import FIELDS, CollateError

__all__ = ["Comparison", "compare", "spark_session", "to_frame"]

_KEY = ["source", "case", "variant", "peer", "metric"]

# A collate joins a few hundred rows. Spark's defaults are for big data: 200 shuffle partitions
# (200 near-empty tasks a join), adaptive re-planning, and Java code generated and compiled for
# every query, which on a cold JVM of a busy 2-core machine took most of a minute; interpreted
# expressions answer these sizes at once. Set for the collate's queries only.
_SQL_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false",
             "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@dataclass
class Comparison:
    """What the report renders: plain dicts collected from Spark (all small)."""

    figures: list[dict[str, Any]] = field(default_factory=list)
    drivers: list[dict[str, Any]] = field(default_factory=list)
    twins: list[dict[str, Any]] = field(default_factory=list)
    peers: list[dict[str, Any]] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def regressions(self) -> list[dict[str, Any]]:
        return [c for c in self.changes if c["regression"]]


def spark_session(master: str) -> tuple[Any, bool]:
    """The active Spark session, or a new one on ``master``; True when this call made it.

    Raises:
        CollateError: pyspark is missing or the JVM did not start.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise CollateError("pyspark is not installed: pip install 'fastmq[spark]'") from e
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = (SparkSession.builder.master(master).appName("fastmq-bench-collate")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false"))
    if master.startswith("local"):
        # the driver does all the work in local mode, briefly: the quick JIT tier warms up sooner
        b = b.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        b = b.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    try:
        spark = b.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        return spark, True
    except Exception as e:  # the JVM's failures come as Py4J or runtime errors of many kinds
        first = (str(e).splitlines() or [repr(e)])[0]
        raise CollateError(f"Spark did not start on {master}: {first} (Spark needs Java 17 or 21 on PATH or "
                           "JAVA_HOME)") from e


def to_frame(spark: Any, rows: list[dict[str, Any]], scratch: Path) -> Any:
    """One DataFrame of every figure, columns as ``load.FIELDS``.

    The rows go through a JSON-lines file in ``scratch`` that the JVM reads itself: a DataFrame
    made from a Python list is an RDD that needs Python worker processes every time it is read.
    """
    from pyspark.sql.types import BooleanType, DoubleType, StringType, StructField, StructType

    types = {str: StringType(), float: DoubleType(), bool: BooleanType()}
    schema = StructType([StructField(n, types[t], n == "value") for n, t in FIELDS])
    path = scratch / "figures.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({n: r[n] for n, _ in FIELDS}) + "\n")
    return spark.read.schema(schema).json(str(path)).coalesce(1)


def _drivers(ok: Any, F: Any) -> Any:
    runs = ok.filter(F.col("source") == "run")
    # fastmq is the reference when it ran; otherwise the first driver by name
    refs = runs.groupBy("run_key", "suite").agg(
        F.min(F.concat(F.when(F.col("variant") == "fastmq", F.lit("0")).otherwise(F.lit("1")), F.col("variant")))
        .alias("r")).select("run_key", "suite", F.expr("substring(r, 2)").alias("ref"))
    a = runs.join(refs, ["run_key", "suite"]).filter(F.col("variant") == F.col("ref")).alias("a")
    b = runs.alias("b")
    j = a.join(b, (F.col("a.run_key") == F.col("b.run_key")) & (F.col("a.suite") == F.col("b.suite"))
               & (F.col("a.metric") == F.col("b.metric")) & (F.col("a.variant") != F.col("b.variant")))
    return j.select(F.col("a.run_key").alias("run_key"), F.col("a.when").alias("when"),
                    F.col("a.commit").alias("commit"), F.col("a.suite").alias("workload"),
                    F.col("a.metric").alias("metric"), F.col("a.better").alias("better"),
                    F.col("a.variant").alias("ref"), F.col("a.value").alias("ref_value"),
                    F.col("b.variant").alias("other"), F.col("b.value").alias("other_value"),
                    (F.col("a.value") / F.col("b.value")).alias("ratio"))


def _twins(df: Any, F: Any) -> Any:
    t = df.filter((F.col("source") == "pytest") & (F.col("peer") == "") & F.col("metric").isin("median", "ops")
                  & F.col("value").isNotNull() & (F.col("status") == "ok"))
    c, py = t.filter(F.col("variant") == "c").alias("c"), t.filter(F.col("variant") == "py").alias("p")
    j = c.join(py, [F.col(f"c.{k}") == F.col(f"p.{k}") for k in ("run_key", "case", "metric")])
    return (j.groupBy(F.col("c.run_key").alias("run_key"), F.col("c.when").alias("when"),
                      F.col("c.commit").alias("commit"), F.col("c.suite").alias("group"),
                      F.col("c.case").alias("case"))
            .agg(F.max(F.when(F.col("c.metric") == "median", F.col("c.value"))).alias("c_median"),
                 F.max(F.when(F.col("c.metric") == "ops", F.col("c.value"))).alias("c_ops"),
                 F.max(F.when(F.col("p.metric") == "median", F.col("p.value"))).alias("py_median"),
                 F.max(F.when(F.col("p.metric") == "ops", F.col("p.value"))).alias("py_ops"))
            .withColumn("speedup", F.col("py_median") / F.col("c_median")))


def _peers(ok: Any, F: Any) -> Any:
    p = ok.filter((F.col("source") == "pytest") & (F.col("peer") != ""))
    keys = ["run_key", "case", "variant", "metric"]
    refs = (p.filter(F.lower(F.col("peer")).contains("fastmq")).groupBy(*keys)
            .agg(F.min("peer").alias("ref")))
    a = p.join(refs, keys).filter(F.col("peer") == F.col("ref")).alias("a")
    b = p.alias("b")
    j = a.join(b, [F.col(f"a.{k}") == F.col(f"b.{k}") for k in keys] + [F.col("a.peer") != F.col("b.peer")])
    return j.select(F.col("a.run_key").alias("run_key"), F.col("a.when").alias("when"),
                    F.col("a.commit").alias("commit"), F.col("a.suite").alias("group"),
                    F.col("a.case").alias("case"), F.col("a.variant").alias("variant"),
                    F.col("a.metric").alias("metric"), F.col("a.better").alias("better"),
                    F.col("a.peer").alias("ref"), F.col("a.value").alias("ref_value"),
                    F.col("b.peer").alias("other"), F.col("b.value").alias("other_value"),
                    (F.col("a.value") / F.col("b.value")).alias("ratio"))


def _changes(ok: Any, F: Any, W: Any, flag_pct: float) -> Any:
    cur = (ok.filter(~F.col("baseline"))
           .withColumn("rn", F.row_number().over(W.partitionBy(*_KEY).orderBy(F.desc("when"), F.desc("origin"))))
           .filter(F.col("rn") == 1).drop("rn").alias("cur"))
    cand = ok.alias("prev")
    older_other_commit = (~F.col("prev.baseline") & (F.col("prev.when") < F.col("cur.when"))
                          & ((F.col("prev.commit") != F.col("cur.commit")) | (F.col("cur.commit") == "")))
    j = cur.join(cand, [F.col(f"cur.{k}") == F.col(f"prev.{k}") for k in _KEY]
                 + [F.col("prev.baseline") | older_other_commit])
    # the baseline, when it has the figure, wins over any earlier commit
    w = W.partitionBy(*[F.col(f"cur.{k}") for k in _KEY]).orderBy(
        F.desc(F.col("prev.baseline")), F.desc(F.col("prev.when")), F.desc(F.col("prev.origin")))
    j = j.withColumn("rn", F.row_number().over(w)).filter(F.col("rn") == 1)
    change = (F.col("cur.value") - F.col("prev.value")) / F.abs(F.col("prev.value")) * 100.0
    worse = (F.when(F.col("better") == "higher", -F.col("change_pct"))
             .otherwise(F.col("change_pct")))
    return (j.filter(F.col("prev.value") != 0)
            .select(*[F.col(f"cur.{k}").alias(k) for k in _KEY + ["suite", "better", "gate", "unit"]],
                    F.col("cur.value").alias("value"), F.col("cur.commit").alias("commit"),
                    F.col("cur.when").alias("when"), F.col("cur.origin").alias("origin"),
                    F.col("prev.value").alias("prev_value"), F.col("prev.commit").alias("prev_commit"),
                    F.col("prev.when").alias("prev_when"), F.col("prev.origin").alias("prev_origin"),
                    F.col("prev.baseline").alias("vs_baseline"), change.alias("change_pct"))
            .withColumn("worse_pct", worse)
            .withColumn("regression", F.col("gate") & (F.col("worse_pct") > F.lit(float(flag_pct)))))


def compare(df: Any, flag_pct: float) -> Comparison:
    """Every comparison of the report, computed by Spark and collected to the driver."""
    spark = df.sparkSession
    saved = {k: spark.conf.get(k, None) for k in _SQL_CONF}
    for k, v in _SQL_CONF.items():
        spark.conf.set(k, v)
    try:
        return _compare(df.cache(), flag_pct)
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


_ORDER = {
    "figures": ("source", "suite", "case", "variant", "when", "run_key", "metric"),
    "drivers": ("workload", "when", "run_key", "other", "metric"),
    "twins": ("when", "run_key", "group", "case"),
    "peers": ("when", "run_key", "case", "variant", "metric", "other"),
    "changes": ("source", "suite", "case", "variant", "peer", "metric"),
}


def _compare(df: Any, flag_pct: float) -> Comparison:
    from functools import reduce

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ok = df.filter((F.col("status") == "ok") & (F.col("better") != "") & F.col("value").isNotNull())
    parts = {"figures": df, "drivers": _drivers(ok, F), "twins": _twins(df, F), "peers": _peers(ok, F),
             "changes": _changes(ok, F, Window, flag_pct)}
    # one action for all five: each Spark job costs its own scheduling, and on a busy 2-core
    # machine that, not the few hundred rows, is what a collate spends its time on
    tagged = [d.select(F.lit(k).alias("k"), F.to_json(F.struct(*d.columns), {"ignoreNullFields": "false"})
                       .alias("j")) for k, d in parts.items()]
    got: dict[str, list[dict[str, Any]]] = {k: [] for k in parts}
    for r in reduce(lambda a, b: a.unionByName(b), tagged).collect():
        got[r["k"]].append(json.loads(r["j"]))
    for k, rows in got.items():
        rows.sort(key=lambda x, keys=_ORDER[k]: tuple(str(x.get(c) or "") for c in keys))
    df.unpersist()
    return Comparison(**got)
