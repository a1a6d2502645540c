"""The benchmark history (``spark_bench.collate.history``) and RESULTS.md (``results_page``):
each Spark run's line records the shape it ran in, RESULTS.md groups a workload's runs by it and
compares only runs of one shape, a history written before the shape column still reads, and
pruning keeps the newest run of each shape (issue 31). No Spark is needed for any of it."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from spark_bench.collate import history, results_page


def _result(root: Path, stamp: str, *, slots: int, p99: float, executors: int = 1, tasks: int = 2,
            master: str = "local[2]", workload: str = "e2e-latency-1k", driver: str = "fastmq") -> Path:
    """A kept ``runs/<stamp>/<workload>-<driver>/result.json`` (schema 1), made-up figures."""
    d = root / "runs" / stamp / f"{workload}-{driver}"
    d.mkdir(parents=True)
    lat = {"p50": p99 / 4, "p75": p99 / 3, "p90": p99 / 2, "p95": p99 / 1.5, "p99": p99, "p99.9": p99 * 2,
           "max": p99 * 3}
    doc: dict[str, Any] = {
        "schema": 1, "run_id": stamp, "started_at": f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:"
                                                     f"{stamp[11:13]}:{stamp[13:15]}Z", "status": "ok", "reason": "",
        "workload": {"name": workload, "file": f"{workload}.yaml", "message_size": 1024, "producer_rate": 1000},
        "driver": driver,
        "env": {"fastmq_version": "0.1.0", "commit": stamp.split("-")[1], "compiled": True, "python": "3.11.7",
                "spark_version": "4.0.0", "master": master, "executors": executors, "cores": slots},
        "shape": {"master": master, "executors": executors, "slots": slots, "tasks": tasks, "tasks_from": "workload",
                  "clients_per_task": 1},
        "window_s": 10.0, "target_rate": 1000, "sent_ok": 10_000, "errors": {}, "received": 10_000,
        "duplicates": 0, "lost": 0, "broker": {"stored": 10_000, "consumed": 10_000},
        "publish": {"msgs_per_s": 1000, "mb_per_s": 1.0, "latency_us": lat},
        "e2e": {"msgs_per_s": 1000, "mb_per_s": 1.0, "latency_us": lat}, "intervals": []}
    (d / "result.json").write_text(json.dumps(doc))
    return d / "result.json"


def test_each_spark_line_records_its_shape(tmp_path: Path) -> None:
    _result(tmp_path, "20261201T010000Z-abcdef1", slots=4, p99=1000)
    lines = history.extract(tmp_path, [tmp_path])
    assert lines and all(x["suite"] == "e2e-latency-1k" for x in lines)
    assert {x["shape"] for x in lines} == {"workload " + lines[0]["shape"].split(" ")[1] +
                                           " 2 tasks x 1 clients, 4 slots, 1 executors, local"}


def test_a_history_without_the_shape_column_reads_and_its_kept_runs_get_their_shape(tmp_path: Path) -> None:
    res = _result(tmp_path, "20261201T010000Z-abcdef1", slots=2, p99=1000)
    new = history.extract(tmp_path, [tmp_path])
    hist = tmp_path / "history.csv"
    with hist.open("w", newline="") as f:   # as written before the shape was recorded
        w = csv.writer(f, lineterminator="\n")
        w.writerow(history.FIELDS[:-1])
        for x in new:
            w.writerow([x[k] for k in history.FIELDS[:-1]])
        w.writerow(["2026-11-01T00:00:00Z", "1234567", "runs/20261101T000000Z-1234567", "e2e-latency-1k",
                    "e2e p99", "900", "us", "fastmq", "lower", "", ""])   # a pruned run: shape unknown
    old = history.read(hist)
    assert len(old) == len(new) + 1 and all(x["shape"] == "" for x in old)

    assert history.append(hist, history.extract(tmp_path, [tmp_path])) == 0   # nothing new, shapes filled
    again = history.read(hist)
    with hist.open() as f:
        assert next(csv.reader(f))[-1] == "shape"
    shaped = [x for x in again if x["run"].startswith("runs/20261201")]
    assert shaped and all("2 slots" in x["shape"] for x in shaped)
    assert [x["shape"] for x in again if x["run"].startswith("runs/20261101")] == [""]
    def rest(lines: list[dict[str, str]]) -> list[dict[str, str]]:
        return sorted(({k: v for k, v in x.items() if k != "shape"} for x in lines), key=lambda x: sorted(x.items()))
    assert rest(again) == rest(old)   # nothing but the shape was touched
    assert res.exists()


def _history(root: Path, runs: list[tuple[str, int, float]]) -> list[dict[str, str]]:
    for stamp, slots, p99 in runs:
        _result(root, stamp, slots=slots, p99=p99)
    hist = root / "history.csv"
    history.append(hist, history.extract(root, [root]))
    return history.read(hist)


def test_results_md_groups_a_workloads_runs_by_shape_and_compares_only_within_one(tmp_path: Path) -> None:
    # four fast runs on 16 slots, then two slow ones on 2 slots: another cluster, not a regression
    runs = [(f"2026120{d}T010000Z-abcdef{d}", 16, 1000.0) for d in range(1, 5)]
    runs += [(f"2026120{d}T010000Z-abcdef{d}", 2, 9000.0) for d in range(5, 7)]
    page = results_page.render(_history(tmp_path, runs), tmp_path, "fastmq-bench collate ...")
    assert "### e2e-latency-1k [workload" in page and "16 slots" in page and " 2 slots" in page
    headings = [ln for ln in page.splitlines() if ln.startswith("### e2e-latency-1k")]
    assert len(headings) == 2, headings
    assert "None: no figure is worse" in page


def test_a_slower_run_of_the_same_shape_is_still_flagged(tmp_path: Path) -> None:
    runs = [(f"2026120{d}T010000Z-abcdef{d}", 2, 1000.0) for d in range(1, 5)]
    runs += [(f"2026120{d}T010000Z-abcdef{d}", 2, 9000.0) for d in range(5, 7)]
    regs = results_page.regressions(results_page._shaped(_history(tmp_path, runs)))
    assert any(r["key"][0].startswith("e2e-latency-1k [") and r["key"][1] == "e2e p99" for r in regs), regs


def test_prune_keeps_the_newest_run_of_each_shape(tmp_path: Path) -> None:
    a = _result(tmp_path, "20261201T010000Z-abcdef1", slots=16, p99=1000)
    b = _result(tmp_path, "20261202T010000Z-abcdef1", slots=16, p99=1000)
    c = _result(tmp_path, "20261203T010000Z-abcdef1", slots=2, p99=1000)
    (tmp_path / "history.csv").write_text(",".join(history.FIELDS) + "\n")
    history.prune(tmp_path)
    assert not a.exists() and b.exists() and c.exists()


def test_a_merged_history_of_both_widths_reads(tmp_path: Path) -> None:
    hist = tmp_path / "history.csv"
    hist.write_text(",".join(history.FIELDS) + "\n"
                    "2026-11-01T00:00:00Z,1234567,runs/a,e2e-latency-1k,e2e p99,900,us,fastmq,lower,,\n"
                    "2026-11-02T00:00:00Z,1234567,runs/b,e2e-latency-1k,e2e p99,800,us,fastmq,lower,,,s,extra\n")
    lines = history.read(hist)
    assert [x["shape"] for x in lines] == ["", "s"] and all(None not in x for x in lines)
    history.write(hist, lines)
    assert len(history.read(hist)) == 2


def test_results_md_lists_what_a_feature_costs_from_its_latest_run() -> None:
    def line(date: str, figure: str, value: str) -> dict[str, str]:
        return {"date": date, "commit": "abc1234", "run": f"pytest-{date}", "suite": "test_trace_overhead",
                "figure": f"test_sends_with_trace_on_beside_trace_off {figure}", "value": value, "unit": "",
                "peer": "fastmq", "note": "", "load": "", "shape": ""}
    rows = results_page._cost_rows([line("2026-12-01T00:00:00Z", "async_overhead_pct", "23.0"),
                                    line("2026-12-04T00:00:00Z", "async_overhead_pct", "6.9"),
                                    line("2026-12-04T00:00:00Z", "sync_overhead_pct", "3.8")])
    assert [r[1] for r in rows] == ["3.80", "6.90"] and all("2026-12-04" in r[2] for r in rows)


def test_a_suite_can_be_superseded_before_a_date() -> None:
    assert history.superseded("fastmq", "2026-12-03T17:26:48Z", "test_trace_overhead").startswith("superseded")
    assert history.superseded("fastmq", "2026-12-04T16:17:44Z", "test_trace_overhead") == ""
    assert history.superseded("fastmq", "2026-12-03T17:26:48Z", "test_acl_benchmarks") == ""
