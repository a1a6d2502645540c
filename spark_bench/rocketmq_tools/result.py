"""What RocketMQ's own benchmark tools print, and the figures and result files made from it.

``fastmq-bench rocketmq-tools`` (``spark_bench.rocketmq_tools``) runs Apache RocketMQ's
``org.apache.rocketmq.example.benchmark.Producer`` and ``Consumer`` against two brokers; this
module holds the parts that need no process: reading the tools' periodic lines, the per-run
figures, the medians over runs and the two JSON documents it writes, so that the collation
(``spark_bench.collate.tools``) and the tests read the same definitions.

The tools print one line every 10 s (4.9.x; ``Producer.doPrintStats`` / the Consumer's timer),
each a rate over the last 10 one-second snapshots::

    Current Time: 2026-11-26 08:16:17,281 Send TPS: 4686 Max RT(ms): 432 Average RT(ms):   3.409 Send Failed: 0 Response Failed: 0
    Current Time: 1795680554267 TPS: 2707 FAIL: 0 AVG(B2C) RT(ms):   9.117 AVG(S2C) RT(ms):   6.248 MAX(B2C) RT(ms): 134 MAX(S2C) RT(ms): 129

``Send Failed``, ``Response Failed`` and ``Max RT`` are totals since the tool started; an average
over a window with no message is printed as ``NaN``. The first line of a run covers the JVM's and
the client's start, so it is dropped; the broker's CPU is sampled when each line arrives.
"""
from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

__all__ = ["BROKERS", "RUN_SCHEMA", "SPARK_ALIASES", "SUMMARY_SCHEMA", "ConsumerLine", "ProducerLine", "Shape",
           "ToolsResultError", "WINDOW_S", "drain_figures", "find_summaries", "parse_consumer_line",
           "parse_producer_line", "parse_shape", "read_summary", "run_figures", "shape_load", "spark_figures",
           "summarize"]

RUN_SCHEMA = "fastmq-rocketmq-tools-run/1"
SUMMARY_SCHEMA = "fastmq-rocketmq-tools/1"
BROKERS = ("fastmq", "java")
WINDOW_S = 10.0   # the tools' printing period

_NUM = r"(\d+(?:\.\d+)?|NaN|-?Infinity)"
_PRODUCER = re.compile(r"^Current Time: .*?Send TPS: (\d+) Max RT\(ms\): (\d+) Average RT\(ms\):\s*" + _NUM
                       + r" Send Failed: (\d+) Response Failed: (\d+)\s*$")
_CONSUMER = re.compile(r"^Current Time: \S+ TPS: (\d+) FAIL: (\d+) AVG\(B2C\) RT\(ms\):\s*" + _NUM
                       + r" AVG\(S2C\) RT\(ms\):\s*" + _NUM + r" MAX\(B2C\) RT\(ms\): (\d+) MAX\(S2C\) RT\(ms\): (\d+)\s*$")
_SHAPE = re.compile(r"^w(\d+)-s(\d+)(-consumer)?$")
_DRAIN = re.compile(r"^drain(\d+)([km]?)-s(\d+)$")
_SPARK = re.compile(r"^spark-([a-z0-9][a-z0-9-]*)$")
#: short names of ``spark-NAME`` shapes; any other NAME is a shipped workload's name
SPARK_ALIASES = {"many-producers": "many-producers-1-in-flight"}
_SHAPE_FORMS = ("expected wTHREADS-sBYTES[-consumer], drainCOUNT[k|m]-sBYTES or spark-WORKLOAD, e.g. w16-s128, "
                "w16-s128-consumer, drain1m-s128 or spark-many-producers")


class ToolsResultError(ValueError):
    """A result document that cannot be read, with the reason."""


def _avg(text: str) -> float | None:
    v = float(text)
    return v if math.isfinite(v) else None


@dataclass(frozen=True)
class ProducerLine:
    """One periodic line of the benchmark Producer."""

    tps: int
    max_rt_ms: int            # since the tool started
    avg_rt_ms: float | None   # over the line's window; None where the tool printed NaN
    send_failed: int          # since the tool started
    response_failed: int      # since the tool started


@dataclass(frozen=True)
class ConsumerLine:
    """One periodic line of the benchmark Consumer."""

    tps: int
    fail: int
    avg_b2c_ms: float | None   # born (producer's clock) to consumed
    avg_s2c_ms: float | None   # stored (broker's clock) to consumed
    max_b2c_ms: int
    max_s2c_ms: int


def parse_producer_line(line: str) -> ProducerLine | None:
    """The figures of a Producer's periodic line; None for any other line (its banner, a log line,
    the ``[Complete]`` total it prints when it stops by itself)."""
    m = _PRODUCER.match(line.strip())
    if m is None:
        return None
    return ProducerLine(int(m[1]), int(m[2]), _avg(m[3]), int(m[4]), int(m[5]))


def parse_consumer_line(line: str) -> ConsumerLine | None:
    """The figures of a Consumer's periodic line; None for any other line."""
    m = _CONSUMER.match(line.strip())
    if m is None:
        return None
    return ConsumerLine(int(m[1]), int(m[2]), _avg(m[3]), _avg(m[4]), int(m[5]), int(m[6]))


@dataclass(frozen=True)
class Shape:
    """One benchmark shape. ``kind`` ``producer``: the benchmark Producer with ``-w`` threads and
    ``-s`` bytes, and with ``consumer`` the benchmark Consumer beside; ``drain``: a backlog of
    ``count`` messages of ``size`` bytes drained by the benchmark Consumer; ``spark``: the Spark
    workload ``workload`` (``fastmq-bench run``) against the broker."""

    threads: int
    size: int
    consumer: bool = False
    kind: str = "producer"
    count: int = 0
    workload: str = ""
    label: str = ""   # a spark shape's name as given (``spark-many-producers``)

    @property
    def name(self) -> str:
        if self.kind == "drain":
            n = self.count
            short = f"{n // 1_000_000}m" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)
            return f"drain{short}-s{self.size}"
        if self.kind == "spark":
            return self.label or f"spark-{self.workload}"
        return f"w{self.threads}-s{self.size}" + ("-consumer" if self.consumer else "")


def parse_shape(text: str) -> Shape:
    """``w16-s128``, ``w16-s128-consumer``, ``drain1m-s128`` (a backlog of 1,000,000 messages of
    128 B; ``k``: thousands) or ``spark-many-producers`` (``spark-`` and a shipped workload's name,
    or a short name of ``SPARK_ALIASES``).

    Raises:
        ValueError: naming the text and the forms expected.
    """
    t = text.strip()
    m = _SHAPE.match(t)
    if m is not None and int(m[1]) >= 1 and int(m[2]) >= 1:
        return Shape(int(m[1]), int(m[2]), bool(m[3]))
    d = _DRAIN.match(t)
    if d is not None:
        count = int(d[1]) * {"": 1, "k": 1000, "m": 1_000_000}[d[2]]
        if count >= 1 and int(d[3]) >= 1:
            return Shape(0, int(d[3]), True, "drain", count)
    sp = _SPARK.match(t)
    if sp is not None:
        return Shape(0, 0, True, "spark", workload=SPARK_ALIASES.get(sp[1], sp[1]), label=t)
    raise ValueError(f"shape {text!r}: {_SHAPE_FORMS}")


def run_figures(samples: list[dict[str, Any]], windows: int,
                consumer: Iterable[tuple[float, ConsumerLine]] = ()) -> dict[str, Any]:
    """The figures of one run from its samples, one per Producer line in arrival order.

    Each sample has ``t`` (monotonic seconds), the line's ``tps``, ``avg_rt_ms``, ``send_failed``,
    ``response_failed``, and what was read when it arrived: ``broker_cpu_s`` (the broker's
    utime+stime), ``tool_cpu_s`` (the Producer's), ``machine_jiffies`` and ``machine_idle``
    (/proc/stat). The first sample is dropped (it covers the tools' start) and is the base the CPU
    is counted from; the next ``windows`` are kept. Messages = mean kept TPS x the kept span (the
    tool prints rates, not counts), so CPU per message = broker CPU over the span / those messages.
    ``consumer``: (t, line) of a Consumer beside; its lines arriving half a period (5 s) after
    the span's ends are the ones covering it. Samples may also hold ``broker_runq_s`` (the
    broker's run-queue wait), ``consumer_cpu_s`` and the broker's ``pull_*_tps``: see
    ``_more_figures``.

    Raises:
        ValueError: fewer than two samples, or ``windows`` < 1.
    """
    if windows < 1:
        raise ValueError("windows must be at least 1")
    if len(samples) < 2:
        raise ValueError(f"{len(samples)} periodic line(s): at least 2 are needed (the first is dropped)")
    base, kept = samples[0], samples[1:1 + windows]
    span = float(kept[-1]["t"] - base["t"])
    tps = statistics.fmean(float(k["tps"]) for k in kept)
    weighted = [(float(k["tps"]), k["avg_rt_ms"]) for k in kept if k["avg_rt_ms"] is not None and k["tps"] > 0]
    # each window's average is over its own messages: weigh it by them
    avg_rt = (sum(n * rt for n, rt in weighted) / sum(n for n, _ in weighted)) if weighted else None
    msgs = tps * span
    cpu = float(kept[-1]["broker_cpu_s"] - base["broker_cpu_s"])
    tool_cpu = float(kept[-1]["tool_cpu_s"] - base["tool_cpu_s"])
    jiffies = kept[-1]["machine_jiffies"] - base["machine_jiffies"]
    idle = kept[-1]["machine_idle"] - base["machine_idle"]
    lag = span / len(kept) / 2   # a Consumer line covers the period before it: half a period late
    lo, hi = float(base["t"]) + lag, float(kept[-1]["t"]) + lag
    ctps = [c.tps for t, c in consumer if lo < t <= hi]
    more = _more_figures(base, kept, span, msgs)
    return {
        "windows": [int(k["tps"]) for k in kept],
        "dropped_tps": int(base["tps"]),
        "tps": tps,
        "avg_rt_ms": avg_rt,
        "max_rt_ms": int(kept[-1]["max_rt_ms"]) if "max_rt_ms" in kept[-1] else None,
        "span_s": span,
        "msgs": msgs,
        "broker_cpu_s": cpu,
        "cpu_us_per_msg": cpu / msgs * 1e6 if msgs > 0 else None,
        "broker_cpu_cores": cpu / span if span > 0 else None,
        "tool_cpu_cores": tool_cpu / span if span > 0 else None,
        "machine_busy": 1.0 - idle / jiffies if jiffies > 0 else None,
        "send_failed": int(kept[-1]["send_failed"] - base["send_failed"]),
        "response_failed": int(kept[-1]["response_failed"] - base["response_failed"]),
        "consumer_tps": statistics.fmean(ctps) if ctps else None,
        **more,
    }


def _more_figures(base: dict[str, Any], kept: list[dict[str, Any]], span: float, msgs: float) -> dict[str, Any]:
    """The broker's run-queue wait and the Producer JVM's CPU per message; with a Consumer beside,
    its JVM's CPU per message and the broker's pull rates (each kept sample's 10 s figures,
    averaged): pulls per second and messages per pull that found some. Each only where the
    samples hold what it needs."""
    out: dict[str, Any] = {}
    if span > 0 and base.get("broker_runq_s") is not None and kept[-1].get("broker_runq_s") is not None:
        # the broker's threads waiting for a CPU while runnable, in cores (a single-threaded
        # broker that is not at 1.0 core is idle or waiting here)
        out["broker_runq_cores"] = float(kept[-1]["broker_runq_s"] - base["broker_runq_s"]) / span
    if msgs > 0:
        out["producer_cpu_us_per_msg"] = float(kept[-1]["tool_cpu_s"] - base["tool_cpu_s"]) / msgs * 1e6
        if base.get("consumer_cpu_s") is not None and kept[-1].get("consumer_cpu_s") is not None:
            out["consumer_cpu_us_per_msg"] = float(kept[-1]["consumer_cpu_s"] - base["consumer_cpu_s"]) / msgs * 1e6
            out["consumer_cpu_cores"] = float(kept[-1]["consumer_cpu_s"] - base["consumer_cpu_s"]) / span
    rates = [k for k in kept if "pull_found_tps" in k and "pull_miss_tps" in k and "pull_msgs_tps" in k]
    if rates:
        found = statistics.fmean(float(k["pull_found_tps"]) for k in rates)
        out["pulls_per_s"] = found + statistics.fmean(float(k["pull_miss_tps"]) for k in rates)
        out["found_pulls_per_s"] = found
        out["msgs_per_found_pull"] = (statistics.fmean(float(k["pull_msgs_tps"]) for k in rates) / found
                                      if found > 0 else None)
    return out


def drain_figures(samples: list[dict[str, Any]], count: int) -> dict[str, Any]:
    """The figures of one backlog drain from its samples, one per Consumer line in arrival order.

    Each sample has ``t``, the line's ``tps`` and ``fail``, and what was read when it arrived:
    ``broker_cpu_s``, ``tool_cpu_s`` (the Consumer's), ``machine_jiffies``, ``machine_idle`` and
    maybe ``broker_runq_s``. A line covers the 10 s before it, so only the lines between the first
    and the last that consumed (100 msgs/s or more) cover a span where the Consumer had a backlog
    all along: those are kept, and the first busy line is the base the CPU is counted from (as
    :func:`run_figures` drops the tools' first line). Drain TPS = mean TPS of the kept lines.

    Raises:
        ValueError: no line consumed anything, or the backlog was gone before one whole line
            (the count is too small for 10 s lines).
    """
    busy = [i for i, s in enumerate(samples) if s["tps"] >= 100]
    if not busy:
        raise ValueError(f"none of the Consumer's {len(samples)} line(s) consumed 100 msgs/s or more")
    first, last = busy[0], busy[-1]
    if last - first < 2:
        raise ValueError(f"the backlog of {count:,} was drained within {last - first + 1} busy line(s): no 10 s "
                         "window was busy throughout (give a larger count)")
    rows = [{**s, "avg_rt_ms": None, "send_failed": 0, "response_failed": 0} for s in samples[first:last]]
    f = run_figures(rows, last - first - 1)
    f.pop("max_rt_ms", None)
    # the tool here is the Consumer
    f["consumer_cpu_us_per_msg"], f["consumer_cpu_cores"] = f.pop("producer_cpu_us_per_msg", None), f.pop("tool_cpu_cores")
    return {**f, "consumer_tps": f["tps"], "count": count, "busy_lines": [int(s["tps"]) for s in samples[first:last + 1]],
            "consumer_fail": sum(int(s.get("fail", 0)) for s in samples)}


def spark_figures(result: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one ``fastmq-bench run`` against a broker: its ``result.json`` (throughput
    and latency percentiles) and samples taken beside it, each with ``t``, ``broker_cpu_s``,
    ``puts`` (the broker's msgPutTotalTodayNow), ``machine_jiffies`` and ``machine_idle``, and
    maybe the broker's ``pull_*_tps`` (see ``_more_figures``).

    The Spark job starts, creates its topics and warms up before it sends, and the run's window
    is not visible from outside: the broker's CPU is counted over the span in which its put count
    grew (from the sample before the first growth to the one with the last), per message put in it.

    Raises:
        ValueError: a result that is not ok, or no publish figures.
    """
    if result.get("status") != "ok":
        raise ValueError(f"the Spark run is {result.get('status')}: {result.get('reason')}")
    pub, e2e = result.get("publish") or {}, result.get("e2e") or {}
    if not isinstance(pub.get("msgs_per_s"), (int, float)):
        raise ValueError("the Spark run's result has no publish rate")
    lat, elat = pub.get("latency_us") or {}, e2e.get("latency_us") or {}
    out: dict[str, Any] = {
        "tps": float(pub["msgs_per_s"]), "avg_rt_ms": None, "consumer_tps": e2e.get("msgs_per_s"),
        "send_p50_us": lat.get("p50"), "send_p99_us": lat.get("p99"), "send_p999_us": lat.get("p99.9"),
        "e2e_p50_us": elat.get("p50"), "e2e_p99_us": elat.get("p99"), "window_s": result.get("window_s"),
        "sent_ok": result.get("sent_ok"), "received": result.get("received"), "lost": result.get("lost"),
        "send_failed": sum(int(v) for v in (result.get("errors") or {}).values()),
        "response_failed": int(result.get("lost") or 0),
        "cpu_us_per_msg": None, "broker_cpu_cores": None, "machine_busy": None}
    grew = [i for i in range(1, len(samples)) if samples[i]["puts"] > samples[i - 1]["puts"]]
    if grew:
        a, b = samples[grew[0] - 1], samples[grew[-1]]
        puts, span = b["puts"] - a["puts"], float(b["t"] - a["t"])
        cpu = float(b["broker_cpu_s"] - a["broker_cpu_s"])
        jiffies, idle = b["machine_jiffies"] - a["machine_jiffies"], b["machine_idle"] - a["machine_idle"]
        out.update({"puts": puts, "span_s": span, "broker_cpu_s": cpu,
                    "cpu_us_per_msg": cpu / puts * 1e6 if puts > 0 else None,
                    "broker_cpu_cores": cpu / span if span > 0 else None,
                    "machine_busy": 1.0 - idle / jiffies if jiffies > 0 else None})
        # its run-queue wait and 10 s pull rates sampled within the span (the consumer's side)
        out.update(_more_figures(a, samples[grew[0]:grew[-1] + 1], span, 0.0))
    return out


_MEDIANS = ("tps", "avg_rt_ms", "cpu_us_per_msg", "broker_cpu_cores", "consumer_tps", "machine_busy",
            "broker_rss_mb", "producer_cpu_us_per_msg", "consumer_cpu_us_per_msg", "consumer_cpu_cores",
            "pulls_per_s", "found_pulls_per_s", "msgs_per_found_pull", "broker_runq_cores",
            "fill_tps", "send_p50_us", "send_p99_us", "e2e_p50_us", "e2e_p99_us")


def _median(values: Iterable[Any]) -> float | None:
    got = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    return statistics.median(got) if got else None


def summarize(runs: list[dict[str, Any]], shapes: list[Shape]) -> tuple[list[dict[str, Any]], str, str]:
    """Per shape, each broker's medians over its ok runs and fastmq / Java; and the overall
    (status, reason): ``ok`` when every run was ok, ``partial`` when some failed but every shape
    has an ok run of both brokers, ``failed`` otherwise.

    ``runs`` are run documents (``RUN_SCHEMA``): ``broker``, ``shape``, ``status``, ``file`` and,
    when ok, ``figures`` as :func:`run_figures` gives them.
    """
    out: list[dict[str, Any]] = []
    missing: list[str] = []
    failed = 0
    for shape in shapes:
        entry: dict[str, Any] = {"shape": shape.name, "threads": shape.threads, "size": shape.size,
                                 "consumer": shape.consumer, "kind": shape.kind}
        if shape.kind == "drain":
            entry["count"] = shape.count
        elif shape.kind == "spark":
            entry["workload"] = shape.workload
        for broker in BROKERS:
            mine = [r for r in runs if r["shape"] == shape.name and r["broker"] == broker]
            ok = [r for r in mine if r["status"] == "ok"]
            failed += len(mine) - len(ok)
            if not ok:
                missing.append(f"{broker} {shape.name}")
            entry[broker] = {
                "runs": [r["file"] for r in mine], "ok_runs": len(ok), "failed_runs": len(mine) - len(ok),
                "failed_reasons": [r.get("reason") or "" for r in mine if r["status"] != "ok"],
                "tps_runs": [r["figures"]["tps"] for r in ok],
                "send_failures": sum(int(r["figures"]["send_failed"]) + int(r["figures"]["response_failed"])
                                   for r in ok),
                "median": {k: _median(r["figures"].get(k) for r in ok) for k in _MEDIANS}}
        f, j = entry["fastmq"]["median"], entry["java"]["median"]
        entry["ratio"] = {k: (f[k] / j[k] if f[k] is not None and j[k] else None)
                          for k in ("tps", "cpu_us_per_msg", "avg_rt_ms")}
        out.append(entry)
    if missing:
        return out, "failed", "no ok run of " + ", ".join(missing)
    if failed:
        return out, "partial", f"{failed} run(s) failed (see each shape's failed_reasons)"
    return out, "ok", ""


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ToolsResultError(f"{path}: cannot read: {e.strerror or e}") from e
    except ValueError as e:
        raise ToolsResultError(f"{path}: not valid JSON: {e}") from e


def find_summaries(root: Path) -> list[Path]:
    """``summary.json`` files at or below ``root`` written by ``rocketmq-tools`` (others ignored).

    Raises:
        ToolsResultError: a ``summary.json`` that is not JSON.
    """
    found = [root / "summary.json"] if (root / "summary.json").is_file() else sorted(root.rglob("summary.json"))
    out = []
    for p in found:
        doc = _load(p)
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("fastmq-rocketmq-tools/"):
            out.append(p)
    return out


def read_summary(path: Path) -> dict[str, Any]:
    """A summary document, checked for what the collation reads.

    Raises:
        ToolsResultError: naming the file and what is wrong.
    """
    doc = _load(path)
    if not isinstance(doc, dict) or doc.get("schema") != SUMMARY_SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ToolsResultError(f"{path}: unknown rocketmq-tools schema {got!r} (this collate reads {SUMMARY_SCHEMA})")
    for key in ("stamp", "commit", "status", "shapes", "settings", "env"):
        if key not in doc:
            raise ToolsResultError(f"{path}: summary lacks {key!r}")
    if not isinstance(doc["shapes"], list):
        raise ToolsResultError(f"{path}: 'shapes' is not a list")
    for i, s in enumerate(doc["shapes"]):
        if not isinstance(s, dict) or not all(isinstance(s.get(b), dict) and isinstance(s[b].get("median"), dict)
                                              for b in BROKERS):
            raise ToolsResultError(f"{path}: shape #{i} lacks the medians of {' and '.join(BROKERS)}")
    return doc


def shape_load(summary: Path, doc: dict[str, Any], shape: dict[str, Any]) -> str:
    """The machine's 1-minute load while ``shape`` of the summary ``doc`` (read from ``summary``) ran:
    the median of its run files' ``loadavg_before`` (both brokers), which is what its figures saw; else
    the load when the command started (``env.loadavg_start``, what older summaries name only)."""
    loads = []
    for broker in BROKERS:
        for name in (shape.get(broker) or {}).get("runs") or []:
            try:
                run = json.loads((summary.parent / str(name)).read_text(encoding="utf-8"))
                loads.append(float(str(run.get("loadavg_before") or "").split()[0]))
            except (OSError, ValueError, IndexError, AttributeError):
                continue
    if loads:
        return f"{statistics.median(loads):.2f}"
    env = doc.get("env")
    return str(env.get("loadavg_start") or "").split(" ")[0] if isinstance(env, dict) else ""
