"""``fastmq-bench median``: several pytest-benchmark files of one commit become one, case by case.

    fastmq-bench median RUN1.json RUN2.json [...] --out MERGED.json

A benchmark run on this shared machine is one sample of its noise; ``scripts/bench_ab.sh`` runs
two commits alternately (A B A B) and keeps, per commit, the median of its runs. For every case
that is in all the files: ``median``, ``mean``, ``stddev``, ``iqr`` and every number in
``extra_info`` become the median of the runs' values; ``min`` the smallest, ``max`` the largest,
``rounds`` the sum; ``ops`` follows the merged mean. The merged file is a pytest-benchmark file like
any other, so ``fastmq-bench collate`` reads it; ``merged_from`` lists its inputs.

Exit status: 0 written, 2 a bad input (unreadable, not pytest-benchmark, files of different
commits, no case common to all).
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
from pathlib import Path
from typing import Any

__all__ = ["MedianError", "add_arguments", "merge", "run"]


class MedianError(ValueError):
    """A file that cannot be merged, with the reason."""


_MEDIAN_STATS = ("median", "mean", "stddev", "iqr", "q1", "q3")


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise MedianError(f"{path}: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise MedianError(f"{path}: not a pytest-benchmark file (no 'benchmarks' list)")
    return doc


def _commit(doc: dict[str, Any]) -> tuple[str, bool]:
    ci = doc.get("commit_info") if isinstance(doc.get("commit_info"), dict) else {}
    return str(ci.get("id") or ""), bool(ci.get("dirty"))


def _median_extra(extras: list[Any]) -> Any:
    """The runs' ``extra_info`` values: numbers become their median, dicts are merged key by key,
    anything else is the first run's."""
    first = extras[0]
    if isinstance(first, dict):
        keys = [k for k in first if all(isinstance(e, dict) and k in e for e in extras)]
        return {k: _median_extra([e[k] for e in extras]) for k in keys}
    if isinstance(first, (int, float)) and not isinstance(first, bool) \
            and all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in extras):
        return statistics.median(extras)
    return first


def _merge_case(cases: list[dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(cases[0])
    stats = [c["stats"] for c in cases]
    merged = out["stats"]
    for key in _MEDIAN_STATS:
        values = [s[key] for s in stats if isinstance(s.get(key), (int, float))]
        if len(values) == len(stats):
            merged[key] = statistics.median(values)
    for key, pick in (("min", min), ("max", max)):
        values = [s[key] for s in stats if isinstance(s.get(key), (int, float))]
        if len(values) == len(stats):
            merged[key] = pick(values)
    if all(isinstance(s.get("rounds"), int) for s in stats):
        merged["rounds"] = sum(s["rounds"] for s in stats)
    if isinstance(merged.get("mean"), (int, float)) and merged["mean"] > 0:
        merged["ops"] = 1.0 / merged["mean"]
    merged.pop("data", None)
    out["extra_info"] = _median_extra([c.get("extra_info") or {} for c in cases])
    return out


def merge(paths: list[Path]) -> dict[str, Any]:
    """One pytest-benchmark document from the runs in ``paths`` (all of one commit).

    Raises:
        MedianError: a file is unreadable or of another commit, or no case is in every file.
    """
    if not paths:
        raise MedianError("no file to merge")
    docs = [_load(p) for p in paths]
    commits = {_commit(d) for d in docs}
    if len(commits) != 1:
        listed = ", ".join(f"{p.name}: {c[0][:10] or '?'}{'+dirty' if c[1] else ''}"
                           for p, c in zip(paths, map(_commit, docs)))
        raise MedianError(f"the files are of different commits ({listed}); merge one commit's runs at a time")
    by_name = [{str(b.get("fullname") or b.get("name")): b for b in d["benchmarks"]} for d in docs]
    common = [name for name in by_name[0] if all(name in runs for runs in by_name[1:])]
    if not common:
        raise MedianError("no benchmark case is in every file")
    out = copy.deepcopy(docs[0])
    out["benchmarks"] = [_merge_case([runs[name] for runs in by_name]) for name in common]
    # the latest run's time: in an A B A B sequence the later commit's merged file is the newer
    out["datetime"] = max(str(d.get("datetime") or "") for d in docs)
    out["merged_from"] = [p.name for p in paths]
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="pytest-benchmark JSON files of one commit")
    p.add_argument("--out", required=True, help="the merged pytest-benchmark JSON file to write")


def run(a: argparse.Namespace) -> int:
    try:
        doc = merge([Path(f) for f in a.files])
    except MedianError as e:
        print(f"fastmq-bench median: {e}", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"fastmq-bench median: {len(doc['benchmarks'])} case(s) from {len(a.files)} run(s) -> {out}",
          file=sys.stderr)
    return 0
