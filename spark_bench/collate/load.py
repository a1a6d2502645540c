"""Reading what ``fastmq-bench collate`` compares: ``result.json`` directories and pytest-benchmark files.

Every input becomes rows of one long table, one row per figure, so that a run of the Spark load
generator and a pytest-benchmark file land in the same DataFrame and are compared by the same
joins. Nothing here needs Spark: the files are small and local to the driver, and a bad input is
refused (``CollateError``) before the JVM is started.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..rocketmq_tools.result import ToolsResultError, find_summaries, read_summary

__all__ = ["FIELDS", "CollateError", "Inputs", "load_inputs", "read_pytest_benchmark", "read_result"]

# (name, python type) of each column; ``value`` is the only nullable number.
FIELDS: list[tuple[str, type]] = [
    ("source", str),    # "run" (a result.json) or "pytest" (a pytest-benchmark file)
    ("origin", str),    # the file the row comes from
    ("run_key", str),   # what "measured in the same run" means: run_id, or the pytest file
    ("when", str),      # ISO-8601 UTC start of the run / file
    ("commit", str),    # short git commit, "" when unknown
    ("env", str),       # what was measured on: version, compiled or pure, Python, Spark
    ("status", str),    # ok | failed | partial
    ("reason", str),
    ("baseline", bool),  # came from --baseline
    ("suite", str),     # run: workload name; pytest: benchmark group or module
    ("case", str),      # what is compared across commits (workload and shape; benchmark without its twin id)
    ("variant", str),   # run: driver; pytest: "c" / "py" twin or ""
    ("peer", str),      # pytest extra_info: whose figure ("fastmq send", "redis-py XADD"), or ""
    ("metric", str),
    ("value", float),
    ("unit", str),
    ("better", str),    # "higher", "lower", or "" (a count, not a performance figure)
    ("gate", bool),     # counts for regressions: throughput and p99 latency
]

PERCENTILES = ("p50", "p75", "p90", "p95", "p99", "p99.9", "max")
STATUSES = ("ok", "failed", "partial")
_TWIN_IDS = ("c", "py")


class CollateError(ValueError):
    """A bad input or option: the message names the file or the argument."""


@dataclass
class Inputs:
    """The rows of every input, and what was read (for the report's header)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    result_files: list[Path] = field(default_factory=list)
    pytest_files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # ``fastmq-bench rocketmq-tools`` summaries: reported in their own table, never compared as rows
    tool_summaries: list[dict[str, Any]] = field(default_factory=list)
    tool_files: list[Path] = field(default_factory=list)


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CollateError(f"{path}: cannot read: {e.strerror or e}") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CollateError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from e


def _num(v: Any) -> float | None:
    # bool is an int to Python but never a figure here
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _when(v: Any) -> str:
    """ISO-8601 in UTC, one format for every input, so that times order as strings."""
    if not v:
        return ""
    try:
        t = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return str(v)
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _short(commit: Any) -> str:
    return str(commit)[:10] if commit else ""


def _base(src: str, origin: Path, run_key: str, when: str, commit: str, env: str, status: str, reason: str,
          baseline: bool, suite: str, case: str, variant: str) -> dict[str, Any]:
    return {"source": src, "origin": str(origin), "run_key": run_key, "when": when, "commit": commit, "env": env,
            "status": status, "reason": reason, "baseline": baseline, "suite": suite, "case": case,
            "variant": variant, "peer": ""}


def _row(base: dict[str, Any], metric: str, value: float | None, unit: str, better: str = "",
         gate: bool = False, peer: str = "") -> dict[str, Any]:
    return {**base, "peer": peer or base["peer"], "metric": metric, "value": value, "unit": unit,
            "better": better, "gate": gate}


def _env_text(env: dict[str, Any]) -> str:
    parts = []
    if env.get("fastmq_version"):
        parts.append(f"fastmq {env['fastmq_version']}")
    if env.get("compiled") is True:
        parts.append("compiled")
    elif env.get("compiled") is False:
        parts.append("PURE PYTHON")
    else:   # null or missing: the tasks never said (a run that failed first); not a pure run
        parts.append("compiled: unknown")
    if env.get("python"):
        parts.append(f"Python {env['python']}")
    if env.get("spark_version"):
        parts.append(f"Spark {env['spark_version']}")
    if env.get("master"):
        parts.append(str(env["master"]))
    if env.get("executors") is not None and env.get("cores") is not None:
        parts.append(f"{env['executors']} executors, {env['cores']} cores")
    return ", ".join(parts)


def shape_text(doc: dict[str, Any]) -> str:
    """The run's shape as compared: the workload's content and how the cluster ran it.

    Two runs of one workload name are compared only when this text is equal: a 4-slot run is
    not a slower 16-slot run, nor one whose workload file changed. Older result.json files have
    no ``shape``: their slots and executors (env) are what is known; tasks unknown."""
    import hashlib
    raw = doc.get("workload")
    wl: dict[str, Any] = raw if isinstance(raw, dict) else {}
    body = {k: v for k, v in wl.items() if k not in ("file", "name", "tasks")}
    digest = hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:6] if body else "?"
    raw_env, raw_shape = doc.get("env"), doc.get("shape")
    env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
    sh: dict[str, Any] = raw_shape if isinstance(raw_shape, dict) else {}
    master = str(sh.get("master") or env.get("master") or "?")
    # local[2] and local[*] on two cores are one shape: the slots say how many
    kind = "local" if master.startswith("local") else master.split("://")[0] + " cluster"

    def n(v: Any) -> str:
        return "?" if v is None else str(v)
    return (f"workload {digest}, {n(sh.get('tasks'))} tasks x {n(sh.get('clients_per_task'))} clients, "
            f"{n(sh.get('slots', env.get('cores')))} slots, {n(sh.get('executors', env.get('executors')))} "
            f"executors, {kind}")


def read_result(path: Path, baseline: bool = False) -> list[dict[str, Any]]:
    """The rows of one ``result.json`` (schema 1 of the run side).

    A failed or partial run keeps its status on every row; its figures are read when present so
    that the report can show them as partial, and the comparisons leave them out.

    Raises:
        CollateError: the file is unreadable, not JSON, or lacks what schema 1 requires.
    """
    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise CollateError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != 1:
        raise CollateError(f"{path}: unknown result schema {doc.get('schema')!r} (this collate reads schema 1)")
    for key in ("run_id", "status", "workload", "driver"):
        if key not in doc:
            raise CollateError(f"{path}: result.json lacks {key!r}")
    status = str(doc["status"])
    if status not in STATUSES:
        raise CollateError(f"{path}: status {status!r} is not one of {', '.join(STATUSES)}")
    workload = doc["workload"]
    name = str(workload.get("name") if isinstance(workload, dict) else workload)
    env = doc.get("env") if isinstance(doc.get("env"), dict) else {}
    driver = str(doc["driver"])
    if env.get("compiled") is False:
        # a pure-Python measurement is another thing measured, not a slower commit of the same one
        driver += " (pure Python)"
    base = _base("run", path, str(doc["run_id"]), _when(doc.get("started_at")), _short(env.get("commit")),
                 _env_text(env), status, str(doc.get("reason") or ""), baseline, name,
                 f"{name} [{shape_text(doc)}]", driver)
    if status == "ok":
        for part in ("publish", "e2e"):
            if not isinstance(doc.get(part), dict):
                raise CollateError(f"{path}: an ok result lacks {part!r}")
    rows = [_row(base, "status", None, "")]   # the run shows up even with no figure at all
    for part in ("publish", "e2e"):
        sec = doc.get(part)
        if not isinstance(sec, dict):
            continue
        rows.append(_row(base, f"{part} msgs/s", _num(sec.get("msgs_per_s")), "msgs/s", "higher", True))
        rows.append(_row(base, f"{part} MB/s", _num(sec.get("mb_per_s")), "MB/s", "higher"))
        lat = sec.get("latency_us") if isinstance(sec.get("latency_us"), dict) else {}
        for p in PERCENTILES:
            rows.append(_row(base, f"{part} {p}", _num(lat.get(p)), "us", "lower", p == "p99"))
    broker = doc.get("broker") if isinstance(doc.get("broker"), dict) else {}
    errors = doc.get("errors") if isinstance(doc.get("errors"), dict) else {}
    counts = {"sent_ok": doc.get("sent_ok"), "received": doc.get("received"), "lost": doc.get("lost"),
              "duplicates": doc.get("duplicates"), "errors": sum(_num(v) or 0 for v in errors.values()),
              "broker stored": broker.get("stored"), "broker consumed": broker.get("consumed"),
              "window_s": doc.get("window_s"), "target_rate": doc.get("target_rate")}
    rows.extend(_row(base, k, _num(v), "") for k, v in counts.items() if _num(v) is not None)
    return rows


def _better(metric: str) -> str:
    m = metric.lower().replace(" ", "_")
    if m.endswith(("per_s", "/s")) or m == "ops":
        return "higher"
    if re.search(r"(^|_)(us|ms|ns)$", m) or m == "instructions":
        return "lower"
    return ""


def _gate(metric: str, better: str) -> bool:
    m = metric.lower().replace(" ", "_")
    # instruction counts (benchmarks/instructions.py) do not wander with the machine's load: gated too
    return (better == "higher" and m != "ops") or (better == "lower" and "p99" in m and "p99." not in m
                                                    and "p99_9" not in m) or m == "instructions"


def _extra_figures(extra: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(peer, metric, value) of the numbers in a benchmark's ``extra_info``.

    ``{"fastmq send p50_us": 80}`` is peer "fastmq send", metric "p50_us";
    ``{"java broker": {"sync p50 us": 140}}`` is peer "java broker", metric "sync p50 us".
    """
    out: list[tuple[str, str, float]] = []
    for key, v in extra.items():
        if isinstance(v, dict):
            out.extend((str(key), str(k), n) for k, n in ((k, _num(x)) for k, x in v.items()) if n is not None)
            continue
        n = _num(v)
        if n is None:
            continue
        head, _, tail = str(key).rpartition(" ")
        if head and ("_" in tail or "/" in tail):
            out.append((head, tail, n))
        else:
            out.append(("", str(key), n))
    return out


def _twin(bench: dict[str, Any]) -> tuple[str, str]:
    """(case, variant): the benchmark without its compiled/pure parameter, and which twin it is."""
    fullname = str(bench.get("fullname") or bench.get("name") or "?")
    params = bench.get("params") if isinstance(bench.get("params"), dict) else None
    if not params:
        return fullname, ""
    twin_keys = [k for k, v in params.items() if v in _TWIN_IDS]
    if len(twin_keys) != 1:
        return fullname, ""
    rest = [f"{k}={v}" for k, v in params.items() if k != twin_keys[0]]
    stem = fullname.split("[", 1)[0]
    return (f"{stem}[{', '.join(rest)}]" if rest else stem), str(params[twin_keys[0]])


def read_pytest_benchmark(path: Path, baseline: bool = False) -> list[dict[str, Any]]:
    """The rows of one pytest-benchmark JSON file (``--benchmark-json`` or autosave).

    Raises:
        CollateError: the file is unreadable, not JSON, or not a pytest-benchmark file.
    """
    doc = _read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise CollateError(f"{path}: not a pytest-benchmark file (no 'benchmarks' list)")
    ci = doc.get("commit_info") if isinstance(doc.get("commit_info"), dict) else {}
    mi = doc.get("machine_info") if isinstance(doc.get("machine_info"), dict) else {}
    commit = _short(ci.get("id")) + ("+dirty" if ci.get("dirty") and ci.get("id") else "")
    env = ", ".join(x for x in (f"{mi.get('python_implementation', '')} {mi.get('python_version', '')}".strip(),
                                str(mi.get("node") or "")) if x)
    merged = doc.get("merged_from") if isinstance(doc.get("merged_from"), list) else []
    rows: list[dict[str, Any]] = []
    for i, b in enumerate(doc["benchmarks"]):
        stats = b.get("stats") if isinstance(b, dict) else None
        if not isinstance(stats, dict):
            raise CollateError(f"{path}: benchmark #{i} has no 'stats'")
        case, variant = _twin(b)
        fullname = str(b.get("fullname") or b.get("name") or "?")
        module = Path(fullname.split("::", 1)[0]).stem
        base = _base("pytest", path, str(path), _when(doc.get("datetime")), commit, env, "ok", "", baseline,
                     str(b.get("group") or module), case, variant)
        # A benchmark of one round (the client suite times a whole workload once) has a time that
        # says nothing stable; its figures are in extra_info, and only those are gated.
        many = (_num(stats.get("rounds")) or 0) >= 5
        # the median is what is compared; the others are shown (ops is 1/mean, stddev is noise).
        # A merge of three or more alternated runs (scripts/bench_ab.sh) compares its min too: the
        # best of every round of every run, the figure this VM's noise moves least (it flips whole
        # runs between two speeds, which a median of three does not outvote).
        best_of = many and len(merged) >= 3
        for key in ("median", "mean", "min", "stddev"):
            gated = (key == "median" and many) or (key == "min" and best_of)
            rows.append(_row(base, key, _num(stats.get(key)), "s", "lower" if gated or key == "median" else "",
                             gated))
        ops = _num(stats.get("ops"))
        if ops is None and (_num(stats.get("mean")) or 0) > 0:
            ops = 1.0 / float(stats["mean"])   # 2.x files have no ops
        rows.append(_row(base, "ops", ops, "ops/s"))
        rows.append(_row(base, "rounds", _num(stats.get("rounds")), ""))
        extra = b.get("extra_info") if isinstance(b.get("extra_info"), dict) else {}
        for peer, metric, value in _extra_figures(extra):
            better = _better(metric)
            rows.append(_row(base, metric, value, "", better, _gate(metric, better), peer=peer))
    return rows


def _find_results(d: Path) -> list[Path]:
    if (d / "result.json").is_file():
        return [d / "result.json"]
    return sorted(p for p in d.rglob("result.json") if p.is_file())


def _pytest_files_in(d: Path) -> list[Path]:
    """JSON files under ``d`` that are pytest-benchmark files (a baseline directory holds both kinds)."""
    out = []
    for p in sorted(d.rglob("*.json")):
        if p.name == "result.json":
            continue
        doc = _read_json(p)
        if isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list):
            out.append(p)
    return out


def load_inputs(dirs: list[str], pytest_files: list[str], baseline: str | None = None) -> Inputs:
    """Every row of every input; refuses a missing directory or file, or nothing to collate at all.

    Raises:
        CollateError: naming the bad path.
    """
    got = Inputs()
    for d in dirs:
        p = Path(d)
        if not p.is_dir():
            raise CollateError(f"{d}: no such result directory" if not p.exists() else f"{d}: not a directory")
        try:
            tools = find_summaries(p)
            got.tool_summaries.extend(read_summary(f) for f in tools)
        except ToolsResultError as e:
            raise CollateError(str(e)) from e
        # a rocketmq-tools run keeps the result.json of its Spark shapes beside its summary: they
        # are that table's (one of them ran against the Java broker), not runs of their own
        tool_dirs = {f.parent for f in tools}
        found = [f for f in _find_results(p) if f.parent == p or not tool_dirs & set(f.parents)]
        got.tool_files.extend(tools)
        if not found and not tools:
            got.warnings.append(f"{d}: no result.json in it or below it")
        for f in found:
            got.rows.extend(read_result(f))
            got.result_files.append(f)
    seen: set[Path] = set()
    for f in pytest_files:
        p = Path(f)
        if not p.is_file():
            raise CollateError(f"{f}: no such pytest-benchmark file")
        if p.resolve() in seen:
            continue
        seen.add(p.resolve())
        got.rows.extend(read_pytest_benchmark(p))
        got.pytest_files.append(p)
    if baseline is not None:
        b = Path(baseline)
        if not b.is_dir():
            raise CollateError(f"--baseline {baseline}: no such directory")
        found = _find_results(b)
        ptb = _pytest_files_in(b)
        if not found and not ptb:
            raise CollateError(f"--baseline {baseline}: no result.json or pytest-benchmark file in it")
        for f in found:
            got.rows.extend(read_result(f, baseline=True))
        for f in ptb:
            got.rows.extend(read_pytest_benchmark(f, baseline=True))
    if not got.result_files and not got.pytest_files and not got.tool_files:
        raise CollateError("nothing to collate: no result.json or rocketmq-tools summary.json under "
                           f"{', '.join(dirs) or '(no directory)'} and no --pytest-benchmark file")
    return got
