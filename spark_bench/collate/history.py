"""The compact history of every benchmark figure: one CSV line per figure per run.

``benchmarks/results/`` keeps only the latest run of each suite; what older runs measured lives
on in ``benchmarks/results/history.csv``, which ``fastmq-bench collate --history FILE`` extends
with the figures of its inputs (a line already there, same run, suite, figure and peer, is not
written twice). RESULTS.md draws its trends, noise bands and regressions from it
(``results_page``), and ``--prune`` then deletes the result files that are no longer the latest
of any suite.

What a line holds (``FIELDS``): when the run started (UTC), the commit measured, the run (its
file or directory below the results directory), the suite (pytest module or group, Spark
workload, ``rocketmq-tools``), the figure, its value and unit, whose figure it is (``peer``:
``fastmq`` or the peer's name, as the benchmark names it), which way is better for the figures
that count for regressions (throughput, p99 latency, instruction counts, the median time of a
many-round benchmark; empty otherwise), the machine's 1-minute load average when the run
recorded it (for a ``rocketmq-tools`` shape, the median over its runs as each started), a note
(``superseded: ...`` for figures no longer to be quoted), and for a Spark run the shape it ran in
(``load.shape_text``: the workload's content, tasks and clients, slots, executors, master), which
RESULTS.md groups a workload's runs by. A history written before the shape column is read with
an empty shape (unknown); a line re-extracted from a kept run fills its shape in.

Which figures: of a pytest-benchmark file, each benchmark's median time (when timed over enough
rounds to mean something) and every number of its ``extra_info``; of a ``fastmq-bench run``
``result.json``, publish and end-to-end throughput, p50 and p99; of a ``rocketmq-tools``
summary, each shape's medians for both brokers.
"""
from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Iterable

from ..rocketmq_tools.result import ToolsResultError, find_summaries, read_summary, shape_load
from .load import CollateError, _gate, read_pytest_benchmark, read_result, shape_text

__all__ = ["FIELDS", "SUPERSEDED", "append", "extract", "prune", "read", "superseded", "write"]

FIELDS = ("date", "commit", "run", "suite", "figure", "value", "unit", "peer", "better", "load", "note", "shape")
#: The columns before the shape was recorded: such a file is read with every shape unknown ("").
_FIELDS_BEFORE_SHAPE = FIELDS[:-1]

#: (peer pattern, measured before, note): figures whose measurement no longer stands. The Redis
#: peer was driven through redis-py without hiredis, a lone XADD going through a pipeline, until
#: the fixed reference driver; every Redis figure measured before then is kept, marked, not quoted.
#: The Java broker ran with a 256 MB heap until rocketmq-tools gave it runbroker.sh's heap. A
#: pattern ``suite:...`` matches the suite instead: the trace-overhead benchmark's rounds were
#: shorter, and counted a new producer's slower first side against whichever side ran first.
#: Read again with every history, so an entry added here marks lines written before it too.
SUPERSEDED: tuple[tuple[str, str, str], ...] = (
    (r"redis", "2026-12-02T00:00:00Z", "superseded: peer without hiredis, lone XADD through a pipeline"),
    (r"^Apache RocketMQ broker$", "2026-12-02T00:00:00Z",
     "superseded: Java broker at a 256m heap, not its runbroker.sh heap"),
    (r"suite:^test_trace_overhead$", "2026-12-04T16:00:00Z",
     "superseded: rounds without a warm-up side, the first side of a new producer counted against it"),
)

# a benchmark's extra_info key names whose figure it is when it names a system or a floor
_SYSTEM = re.compile(r"fastmq|redis|java|rocketmq|floor|echo|kafka|nats", re.I)
_RUN_METRICS = ("publish msgs/s", "publish p50", "publish p99", "e2e msgs/s", "e2e p50", "e2e p99")
_TOOLS_BETTER = {"tps": "higher", "cpu_us_per_msg": "lower", "consumer_tps": "higher", "fill_tps": "higher",
                 "send_p99_us": "lower", "e2e_p99_us": "lower"}
_TOOLS_PEER = {"fastmq": "fastmq broker", "java": "Apache RocketMQ broker"}


def _date(when: str) -> str:
    # load._when gives microseconds; a second is precise enough for a history line
    return when[:19] + "Z" if len(when) >= 19 else when


def _unit(metric: str) -> str:
    m = metric.lower().replace(" ", "_")
    if m.endswith(("msgs/s", "per_s", "/s", "tps")):
        return "/s"
    for suffix, unit in (("_us", "us"), ("_ms", "ms"), ("_ns", "ns"), ("_s", "s")):
        if m.endswith(suffix):
            return unit
    if m == "instructions":
        return "instructions"
    if "ratio" in m:
        return "x"
    return ""


def superseded(peer: str, date: str, suite: str = "") -> str:
    """The note of a figure of ``peer`` in ``suite`` measured at ``date`` (ISO, UTC) that is no
    longer quoted, else ``""``."""
    return _note(peer, date, suite)


def _note(peer: str, date: str, suite: str = "") -> str:
    for pattern, before, note in SUPERSEDED:
        subject = suite if pattern.startswith("suite:") else peer
        if re.search(pattern.removeprefix("suite:"), subject, re.I) and date < before:
            return note
    return ""


def _value(v: float) -> str:
    """Six significant digits, never in exponent form (a history is read by people too)."""
    text = format(Decimal(f"{v:.6g}"), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _commit(text: str) -> str:
    sha, dirty = (text[:-6], True) if text.endswith("+dirty") else (text, False)
    return sha[:7] + ("+dirty" if dirty else "")


def _line(date: str, commit: str, run: str, suite: str, figure: str, value: float, unit: str, peer: str,
          better: str, load: str, shape: str = "") -> dict[str, str]:
    return {"date": date, "commit": _commit(commit), "run": run, "suite": suite, "figure": figure,
            "value": _value(value), "unit": unit, "peer": peer, "better": better, "load": load,
            "note": _note(peer, date, suite), "shape": shape}


def _rel(path: Path, root: Path) -> str:
    try:
        name = path.resolve().relative_to(root.resolve())
    except ValueError:
        name = Path(path.name)
    return str(name.with_suffix("") if name.suffix == ".json" else name)


def _pytest_load(path: Path) -> str:
    """The 1-minute load average a pytest-benchmark file recorded (a benchmark's ``loadavg_1m``,
    else a ``loadN.NN`` tag in the file's name), or ''."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    for b in doc.get("benchmarks", []) if isinstance(doc, dict) else []:
        v = (b.get("extra_info") or {}).get("loadavg_1m") if isinstance(b, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return f"{v:.2f}"
    m = re.search(r"load(\d+(?:\.\d+)?)", path.name)
    return m.group(1) if m else ""


def pytest_lines(path: Path, root: Path) -> list[dict[str, str]]:
    """The history lines of one pytest-benchmark file."""
    run, load = _rel(path, root), _pytest_load(path)
    out = []
    for r in read_pytest_benchmark(path):
        if r["value"] is None or r["metric"] == "loadavg_1m":
            continue
        if r["metric"] in ("mean", "min", "stddev", "ops", "rounds") and not r["peer"]:
            continue
        if r["metric"] == "median" and not r["gate"]:
            continue   # one round of a whole workload: its time says nothing stable, its extras do
        test = r["case"].split("::")[-1]
        twin = f" [{r['variant']}]" if r["variant"] else ""
        peer = r["peer"] or ("fdatasync floor" if "floor" in test else "fastmq")
        if not _SYSTEM.search(peer):   # a dict of figures named by what they measure (RssAnon: {...})
            test, peer = f"{test} {peer}", "fastmq"
        figure = f"{test}{twin} {r['metric']}"
        unit = "s" if r["metric"] == "median" else _unit(r["metric"])
        better = r["better"] if r["gate"] else ""
        out.append(_line(_date(r["when"]), r["commit"], run, r["suite"], figure, r["value"], unit, peer, better,
                         load))
    return out


def result_lines(path: Path, root: Path) -> list[dict[str, str]]:
    """The history lines of one ``fastmq-bench run`` result.json (an ok run's figures only)."""
    run = _rel(path.parent.parent if path.parent.parent != root else path.parent, root)
    out = []
    rows = read_result(path)
    shape = shape_text(json.loads(path.read_text(encoding="utf-8")))  # (read_result read it already)
    # a workload sent at a fixed rate measures latency; its throughput is the rate it was given
    paced = any(r["metric"] == "target_rate" and r["value"] for r in rows)
    for r in rows:
        if r["status"] != "ok" or r["value"] is None or r["metric"] not in _RUN_METRICS:
            continue
        unit = "/s" if r["metric"].endswith("msgs/s") else "us"
        gated = r["gate"] and not (paced and unit == "/s")
        out.append(_line(_date(r["when"]), r["commit"], run, r["suite"], r["metric"], r["value"], unit,
                         r["variant"], r["better"] if gated else "", "", shape))
    return out


def summary_lines(path: Path, root: Path) -> list[dict[str, str]]:
    """The history lines of one ``rocketmq-tools`` summary.json: each shape's medians, both brokers."""
    doc = read_summary(path)
    run = _rel(path.parent, root)
    commit = str(doc.get("commit") or "")[:10] + ("+dirty" if doc.get("dirty") else "")
    when = str(doc.get("started_at") or "")
    out = []
    for shape in doc.get("shapes", []):
        load = shape_load(path, doc, shape)
        for broker, peer in _TOOLS_PEER.items():
            med = (shape.get(broker) or {}).get("median") or {}
            for metric, v in med.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    continue
                out.append(_line(when, commit, run, "rocketmq-tools", f"{shape['shape']} {metric}", float(v),
                                 _unit(metric), peer, _TOOLS_BETTER.get(metric, ""), load))
    return out


def extract(root: Path, dirs: Iterable[Path] = (), pytest_files: Iterable[Path] = ()) -> list[dict[str, str]]:
    """The history lines of every result below ``dirs`` and of ``pytest_files``.

    Inside ``dirs``: every ``result.json`` (except a rocketmq-tools run's own Spark shapes), every
    rocketmq-tools ``summary.json`` and every other JSON file that is a pytest-benchmark file.

    Raises:
        CollateError: a file that cannot be read as what it claims to be.
    """
    lines: list[dict[str, str]] = []
    seen: set[Path] = set()
    for d in dirs:
        d = Path(d)
        try:
            tools = find_summaries(d)
            for f in tools:
                lines.extend(summary_lines(f, root))
        except ToolsResultError as e:
            raise CollateError(str(e)) from e
        tool_dirs = {f.parent for f in tools}
        for f in sorted(d.rglob("*.json")):
            if tool_dirs & set(f.parents) or f.name == "summary.json":
                continue
            if f.name == "result.json":
                lines.extend(result_lines(f, root))
                continue
            try:
                doc = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue   # not a result (a probe's output, say): nothing to keep
            if isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list):
                seen.add(f.resolve())
                lines.extend(pytest_lines(f, root))
    for f in pytest_files:
        if Path(f).resolve() not in seen:
            seen.add(Path(f).resolve())
            lines.extend(pytest_lines(Path(f), root))
    return lines


def read(path: Path) -> list[dict[str, str]]:
    """Every line of a history file ([] when there is none yet).

    Raises:
        CollateError: a file whose header is not ``FIELDS``.
    """
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) not in (FIELDS, _FIELDS_BEFORE_SHAPE):
            raise CollateError(f"{path}: not a history file (header {reader.fieldnames}, expected {FIELDS})")
        # (a line of another width, as a text merge of an old and a new history may leave, keeps
        # the known columns: its missing shape is unknown, anything past the header dropped)
        return [{**{k: v or "" for k, v in r.items() if k is not None},
                 "note": r["note"] or _note(r["peer"] or "", r["date"] or "", r["suite"] or ""),
                 "shape": r.get("shape") or ""}
                for r in reader]


def _key(line: dict[str, str]) -> tuple[str, str, str, str]:
    return line["run"], line["suite"], line["figure"], line["peer"]


def write(path: Path, lines: list[dict[str, str]]) -> None:
    """Write ``lines`` to ``path``, ordered by date, run, suite, figure and peer."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(sorted(lines, key=lambda x: (x["date"], x["run"], x["suite"], x["figure"], x["peer"])))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buf.getvalue(), encoding="utf-8")


def append(path: Path, lines: list[dict[str, str]]) -> int:
    """Add the ``lines`` not already in the history at ``path``; returns how many were added.

    A line already there without a shape (written before shapes were recorded) takes the shape
    of the same figure read again from its kept run; nothing else of a line is ever rewritten."""
    have = read(path)
    by_key = {_key(x): x for x in have}
    new = []
    filled = 0
    for x in lines:
        old = by_key.get(_key(x))
        if old is None:
            by_key[_key(x)] = x
            new.append(x)
        elif not old["shape"] and x.get("shape"):
            old["shape"] = x["shape"]
            filled += 1
    if new or filled or not path.is_file() or _header(path) != FIELDS:
        write(path, have + new)
    return len(new)


def _header(path: Path) -> tuple[str, ...]:
    with path.open(newline="", encoding="utf-8") as f:
        return tuple(next(csv.reader(f), []))


# ---------------------------------------------------------------- keeping only the latest runs


def _stamp(name: str) -> str:
    m = re.search(r"\d{8}T\d{6}Z", name)
    return m.group(0) if m else ""


def _pytest_suites(path: Path) -> set[str]:
    try:
        return {r["suite"] for r in read_pytest_benchmark(path)}
    except CollateError:
        return set()


def latest(root: Path) -> set[Path]:
    """What ``root`` (a results directory) keeps: for each pytest suite (module or group) the
    pytest-benchmark files of its newest stamp (both sides of an A/B pair), for each Spark
    workload, driver and shape the newest run directory holding it, for each rocketmq-tools shape the
    newest summary's directory holding it, and the history file."""
    keep: set[Path] = {root / "history.csv"}
    newest: dict[str, tuple[str, list[Path]]] = {}
    for f in sorted(root.glob("pytest-*.json")):
        for suite in _pytest_suites(f):
            stamp = _stamp(f.name)
            if suite not in newest or stamp > newest[suite][0]:
                newest[suite] = (stamp, [f])
            elif stamp == newest[suite][0]:
                newest[suite][1].append(f)
    for _, files in newest.values():
        keep.update(files)
    runs: dict[tuple[str, str], tuple[str, Path]] = {}
    for res in sorted((root / "runs").glob("*/*/result.json")):
        key, stamp = (res.parent.name, _result_shape(res)), _stamp(res.parent.parent.name)
        if stamp and (key not in runs or stamp > runs[key][0]):
            runs[key] = (stamp, res.parent)
    keep.update(p for _, p in runs.values())
    shapes: dict[str, tuple[str, Path]] = {}
    tools = root / "rocketmq-tools"
    for s in find_summaries(tools) if tools.is_dir() else []:
        doc = read_summary(s)
        for shape in doc.get("shapes", []):
            name, stamp = str(shape.get("shape")), str(doc.get("stamp") or _stamp(s.parent.name))
            ok = any((shape.get(b) or {}).get("ok_runs") for b in _TOOLS_PEER)
            if ok and (name not in shapes or stamp > shapes[name][0]):
                shapes[name] = (stamp, s.parent)
    keep.update(p for _, p in shapes.values())
    return keep


def _result_shape(path: Path) -> str:
    """A result.json's shape (``load.shape_text``), '' when it cannot be read."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    return shape_text(doc) if isinstance(doc, dict) else ""


def prune(root: Path, dry_run: bool = False) -> list[Path]:
    """Delete every file below ``root`` that ``latest`` does not keep (inside a kept run or
    summary directory: its JSON files are kept, logs, plots and Spark's parquet output are not);
    returns the deleted files."""
    keep = latest(root)
    keep_dirs = {p for p in keep if p.is_dir()}
    gone = []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        if f in keep:
            continue
        inside = next((d for d in keep_dirs if d in f.parents), None)
        if inside is not None and f.suffix == ".json" and f.parent == inside:
            continue
        gone.append(f)
        if not dry_run:
            f.unlink()
    if not dry_run:
        for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            if not any(d.iterdir()):
                d.rmdir()
    return gone
