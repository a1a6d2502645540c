"""``fastmq-bench collate`` (spark_bench.collate): result directories and pytest-benchmark files
compared in one Spark DataFrame, regressions flagged, bad inputs refused.

One local[2] Spark session serves the module (collate reuses an active session); the bad-input
tests fail before Spark is needed, and one of them runs the real command as a process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from spark_bench import collate
from spark_bench.collate.load import load_inputs, read_pytest_benchmark

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def write_result(d: Path, run_id: str, driver: str, commit: str, rate: float, p99: float, *,
                 status: str = "ok", reason: str = "", started: str = "2026-11-26T04:00:00Z",
                 workload: str = "max-rate-128") -> Path:
    """A result.json as the run side writes it (schema 1), with made-up figures."""
    d.mkdir(parents=True, exist_ok=True)

    def lat(scale: float) -> dict[str, float]:
        return {"p50": 100 * scale, "p75": 120 * scale, "p90": 150 * scale, "p95": 180 * scale,
                "p99": p99 * scale, "p99.9": 2 * p99 * scale, "max": 5 * p99 * scale}
    n = int(rate * 10)
    doc: dict[str, Any] = {
        "schema": 1, "run_id": run_id, "started_at": started, "status": status, "reason": reason,
        "workload": {"name": workload, "file": f"{workload}.yaml", "message_size": 128}, "driver": driver,
        "env": {"fastmq_version": "0.9.0", "commit": commit, "compiled": True, "python": "3.11.7",
                "spark_version": "4.0.0", "master": "local[2]", "executors": 1, "cores": 2},
        "window_s": 10.0, "target_rate": 0, "sent_ok": n, "errors": {"code 17": 0}, "received": n,
        "duplicates": 0, "lost": 0, "broker": {"stored": n, "consumed": n},
        "publish": {"msgs_per_s": rate, "mb_per_s": rate * 128 / 1e6, "latency_us": lat(1)},
        "e2e": {"msgs_per_s": rate, "mb_per_s": rate * 128 / 1e6, "latency_us": lat(2)},
        "intervals": [{"t_s": 1, "publish_msgs_per_s": rate, "e2e_msgs_per_s": rate, "publish_p99_us": p99,
                       "e2e_p99_us": 2 * p99, "errors": 0}],
        "an_extra_key": "tolerated"}
    (d / "result.json").write_text(json.dumps(doc))
    return d


TINY_BENCH = textwrap.dedent('''
    import pytest

    def work(n):
        return sum(range(n))

    # the repo's twin convention: a "kind" parameter with ids py and c
    @pytest.mark.parametrize("kind", ["py", "c"])
    def test_sum(benchmark, kind):
        benchmark(work, 400 if kind == "py" else 40)

    def test_peers(benchmark):
        benchmark(work, 10)
        benchmark.extra_info.update({"fastmq send p50_us": 80.0, "redis-py XADD p50_us": 40.0, "msgs_per_s": 1000})
''')


@pytest.fixture(scope="module")
def spark():
    from spark_bench.collate.compare import spark_session

    session, made = spark_session("local[2]")
    try:
        yield session
    finally:
        if made:
            session.stop()


@pytest.fixture(scope="module")
def pytest_json(tmp_path_factory) -> Path:
    """A real pytest-benchmark file of a trivial benchmark module (a few rounds each)."""
    d = tmp_path_factory.mktemp("ptb")
    (d / "pytest.ini").write_text("[pytest]\n")
    (d / "bench_tiny.py").write_text(TINY_BENCH)
    out = d / "tiny.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(d / "bench_tiny.py"), "-q", "-p", "no:cacheprovider",
                           "-c", str(d / "pytest.ini"), "--rootdir", str(d), "--benchmark-json", str(out),
                           "--benchmark-min-rounds=5", "--benchmark-max-time=0.02"],
                          capture_output=True, text=True, timeout=120, cwd=d)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _collate(argv: list[str], capsys) -> tuple[int, str]:
    rc = collate.main([*argv, "--master", "local[2]"])
    return rc, capsys.readouterr().err


def test_two_runs_give_their_ratio_failed_shown_pytest_read(spark, tmp_path, pytest_json, capsys) -> None:
    runs = tmp_path / "runs"
    write_result(runs / "one" / "fastmq", "run-1", "fastmq", "aaaaaaa111", 100_000, 900)
    write_result(runs / "one" / "redis", "run-1", "redis-streams", "aaaaaaa111", 40_000, 600)
    # a later commit, 20% slower: flagged in the table (5%), but under the --fail-on-regression given
    write_result(runs / "two", "run-2", "fastmq", "bbbbbbb222", 80_000, 900, started="2026-11-26T05:00:00Z")
    # a failed run of the same workload: its (partial) figures must enter no comparison
    write_result(runs / "three", "run-3", "fastmq", "ccccccc333", 5_000, 90_000, status="failed",
                 reason="broker 127.0.0.1:1 went away", started="2026-11-26T06:00:00Z")
    # the same benchmarks on an older commit, 20% faster: the current file is flagged against it
    older = json.loads(pytest_json.read_text())
    older["commit_info"]["id"], older["datetime"] = "0123456789abcdef", "2026-11-01T00:00:00+00:00"
    for b in older["benchmarks"]:
        b["stats"]["median"] *= 0.8
        if "msgs_per_s" in b["extra_info"]:
            b["extra_info"]["msgs_per_s"] = 1250
    older_json = tmp_path / "older.json"
    older_json.write_text(json.dumps(older))
    out = tmp_path / "out"
    rc, err = _collate([str(runs), "--pytest-benchmark", str(pytest_json), str(older_json), "--out", str(out),
                        "--fail-on-regression", "50"], capsys)
    assert rc == 0, err
    md = (out / "collated.md").read_text()
    html = (out / "collated.html").read_text()
    for png in ("runs_throughput.png", "runs_latency.png", "pytest_speedup.png", "history.png"):
        assert (out / png).stat().st_size > 1000, png
        assert png in md and png in html
    # drivers of one run: fastmq / redis-streams = 100,000 / 40,000
    row = next(line for line in md.splitlines() if line.startswith("| max-rate-128 | run-1 | fastmq | redis-streams"))
    assert "2.50x (100,000 / 40,000)" in row and "1.50x (900 µs / 600 µs)" in row
    # between commits: run-2 against run-1 (run-3 failed, so it is not "the newest")
    regs = [line for line in md.splitlines() if "**REGRESSION**" in line]
    assert any("publish msgs/s" in line and "100,000" in line and "80,000" in line and "-20.0%" in line
               for line in regs), md
    assert not any("5,000" in line for line in regs)
    assert "--fail-on-regression 50: passed." in md
    # the failed run is listed as failed with its reason, no figure beside it
    failed = next(line for line in md.splitlines() if line.startswith("| run-3 |"))
    assert "**FAILED**: broker 127.0.0.1:1 went away" in failed and "5,000" not in failed
    assert "<b>FAILED</b>" in html
    # the pytest-benchmark file: twin speed-up and the peer ratio from extra_info
    assert "bench_tiny" in md
    twin = next(line for line in md.splitlines() if line.startswith("| test_sum |"))
    assert float(twin.split("|")[6].strip().rstrip("x")) > 1.5, twin
    peer = next(line for line in md.splitlines() if "| redis-py XADD |" in line)
    assert "p50_us" in peer and "2.00x" in peer
    # between commits in pytest-benchmark files: the median per call, and extra_info's throughput
    assert any(line.startswith("| test_sum [c] median |") and "+25.0%" in line and "0123456789" in line
               for line in regs), md
    assert any(line.startswith("| test_peers msgs_per_s | 1,250 |") and "1,000" in line and "-20.0%" in line
               for line in regs), md
    assert md.startswith("# fastmq benchmark results") and "Generated, do not edit." in md


def test_regression_against_baseline_fails_the_command(spark, tmp_path, capsys) -> None:
    base = write_result(tmp_path / "base" / "r", "run-b", "fastmq", "aaaaaaa111", 100_000, 1000)
    cur = write_result(tmp_path / "cur" / "r", "run-c", "fastmq", "bbbbbbb222", 99_000, 1300,
                       started="2026-11-26T05:00:00Z")
    out = tmp_path / "out"
    md_file = tmp_path / "doc" / "RESULTS.md"
    rc, err = _collate([str(cur), "--baseline", str(base.parent), "--out", str(out), "--fail-on-regression", "10",
                        "--write-md", str(md_file), "--note", "a note for the header"], capsys)
    assert rc == 1, err
    # p99 rose 30% (named); throughput fell 1%, under 10: not named
    assert "regression: max-rate-128 [fastmq] publish p99: 1000 -> 1300 (+30.0%, against baseline aaaaaaa111)" in err
    assert "msgs/s" not in err.split("regression:", 1)[1]
    md = md_file.read_text()
    assert md.startswith("<!-- generated by fastmq-bench collate, do not edit -->")
    assert "Generated, do not edit. Made by `python -m spark_bench.collate " in md
    assert "a note for the header" in md and "](../out/runs_latency.png)" in md
    assert "(baseline)" in md


def _write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


@pytest.mark.parametrize("case", ["missing dir", "corrupt result", "old schema", "bad status", "corrupt pytest",
                                  "not pytest", "missing pytest", "nothing", "missing baseline", "bad pct"])
def test_bad_input_is_refused_with_its_reason(tmp_path, capsys, case: str) -> None:
    out = str(tmp_path / "out")
    good = write_result(tmp_path / "good", "r", "fastmq", "a", 1, 1)
    empty = tmp_path / "empty"
    empty.mkdir()
    argv, want = {
        "missing dir": ([str(tmp_path / "nope"), "--out", out], "nope: no such result directory"),
        "corrupt result": ([str(_write(tmp_path / "bad" / "result.json", '{"schema": 1,').parent), "--out", out],
                           "result.json: not valid JSON: Expecting property name enclosed in double quotes at line 1"),
        "old schema": ([str(_write(tmp_path / "s" / "result.json", '{"schema": 7}').parent), "--out", out],
                       "unknown result schema 7"),
        "bad status": ([str(_write(tmp_path / "st" / "result.json", json.dumps(
            {"schema": 1, "run_id": "x", "status": "great", "workload": {"name": "w"}, "driver": "d"})).parent),
            "--out", out], "status 'great' is not one of ok, failed, partial"),
        "corrupt pytest": ([str(good), "--pytest-benchmark", str(_write(tmp_path / "p.json", "[1, 2")), "--out", out],
                           "p.json: not valid JSON"),
        "not pytest": (["--pytest-benchmark", str(_write(tmp_path / "q.json", '{"a": 1}')), "--out", out],
                       "q.json: not a pytest-benchmark file"),
        "missing pytest": (["--pytest-benchmark", str(tmp_path / "none.json"), "--out", out],
                           "none.json: no such pytest-benchmark file"),
        "nothing": ([str(empty), "--out", out], "nothing to collate"),
        "missing baseline": ([str(good), "--baseline", str(tmp_path / "gone"), "--out", out],
                             "gone: no such directory"),
        "bad pct": ([str(good), "--out", out, "--fail-on-regression", "-3"], "a percentage must be"),
    }[case]
    if case == "bad pct":
        with pytest.raises(SystemExit) as e:
            collate.main(argv)
        assert e.value.code == 2 and want in capsys.readouterr().err
        return
    assert collate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fastmq-bench collate: error: ") and want in err, err
    assert not (tmp_path / "out" / "collated.md").exists()


def test_every_kept_pytest_result_file_is_read() -> None:
    """``scripts/bench.sh --collate-only`` reads every ``benchmarks/results/pytest-*.json``: a
    summary of another shape kept under that name (session 16 had two) stops the whole collation,
    so such files live in ``benchmarks/results/profiles/``."""
    kept = sorted((ROOT / "benchmarks" / "results").glob("pytest-*.json"))
    assert kept
    for path in kept:
        assert read_pytest_benchmark(path), path


def test_the_command_exits_non_zero_on_a_corrupt_file(tmp_path) -> None:
    d = _write(tmp_path / "r" / "x" / "result.json", "not json").parent.parent
    proc = subprocess.run([sys.executable, "-m", "spark_bench.collate", str(d), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    assert f"{d}/x/result.json: not valid JSON: Expecting value at line 1 column 1" in proc.stderr


def test_no_java_is_a_clear_error(tmp_path) -> None:
    d = write_result(tmp_path / "r", "r", "fastmq", "a", 1, 1)
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}
    proc = subprocess.run([sys.executable, "-m", "spark_bench.collate", str(d), "--out", str(tmp_path / "o"),
                           "--master", "local[1]"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert proc.returncode == 2
    assert "fastmq-bench collate: error: Spark did not start on local[1]: [JAVA_GATEWAY_EXITED]" in proc.stderr
    assert not (tmp_path / "o" / "collated.md").exists()


def test_inputs_are_tolerant_and_failed_runs_keep_their_status(tmp_path, pytest_json) -> None:
    write_result(tmp_path / "a", "r1", "fastmq", "abc", 10, 10, status="partial", reason="1 of 2 tasks lost")
    pure = write_result(tmp_path / "b", "r2", "fastmq", "abc", 10, 10)
    doc = json.loads((pure / "result.json").read_text())
    doc["env"]["compiled"] = False
    (pure / "result.json").write_text(json.dumps(doc))
    rows = load_inputs([str(tmp_path)], [str(pytest_json)]).rows
    run_rows = [r for r in rows if r["source"] == "run" and r["run_key"] == "r1"]
    assert {r["status"] for r in run_rows} == {"partial"} and run_rows[0]["reason"] == "1 of 2 tasks lost"
    # a pure-Python run is never compared with a compiled one as if it were the same driver
    pure_rows = [r for r in rows if r["source"] == "run" and r["run_key"] == "r2"]
    assert {r["variant"] for r in pure_rows} == {"fastmq (pure Python)"} and "PURE PYTHON" in pure_rows[0]["env"]
    ptb = read_pytest_benchmark(pytest_json)
    sums = {r["variant"] for r in ptb if r["case"].endswith("test_sum")}
    assert sums == {"c", "py"}
    peers = {(r["peer"], r["metric"]) for r in ptb if r["peer"]}
    assert peers == {("fastmq send", "p50_us"), ("redis-py XADD", "p50_us")}
    gated = {r["metric"] for r in ptb if r["gate"]}
    assert gated == {"median", "msgs_per_s"}


# ------------------------------------------------------------------ fastmq-bench median

def _variant(src: Path, dst: Path, scale: float, commit: str | None = None, when: str | None = None) -> Path:
    """A copy of a real pytest-benchmark file with every time and extra figure scaled."""
    doc = json.loads(src.read_text())
    for b in doc["benchmarks"]:
        for k in ("median", "mean", "min", "max"):
            b["stats"][k] *= scale
        b["extra_info"] = {k: v * scale if isinstance(v, (int, float)) else v for k, v in b["extra_info"].items()}
    if commit:
        doc["commit_info"]["id"] = commit
    if when:
        doc["datetime"] = when
    dst.write_text(json.dumps(doc))
    return dst


def test_median_merges_one_commits_runs(tmp_path, pytest_json) -> None:
    from spark_bench import cli

    runs = [_variant(pytest_json, tmp_path / f"r{i}.json", s, when=f"2026-01-0{i}T00:00:00+00:00")
            for i, s in enumerate((1.0, 3.0, 2.0), 1)]
    out = tmp_path / "merged.json"
    assert cli.main(["median", *map(str, runs), "--out", str(out)]) == 0
    merged = json.loads(out.read_text())
    src = {b["fullname"]: b for b in json.loads(pytest_json.read_text())["benchmarks"]}
    assert merged["merged_from"] == ["r1.json", "r2.json", "r3.json"]
    assert merged["datetime"] == "2026-01-03T00:00:00+00:00"
    assert len(merged["benchmarks"]) == len(src)
    for b in merged["benchmarks"]:
        s = src[b["fullname"]]["stats"]
        assert b["stats"]["median"] == pytest.approx(2.0 * s["median"])   # the middle run
        assert b["stats"]["min"] == pytest.approx(s["min"]) and b["stats"]["max"] == pytest.approx(3.0 * s["max"])
        assert b["stats"]["rounds"] == 3 * s["rounds"]
        assert b["stats"]["ops"] == pytest.approx(1.0 / b["stats"]["mean"])
    peers = next(b for b in merged["benchmarks"] if b["name"] == "test_peers")
    assert peers["extra_info"]["fastmq send p50_us"] == pytest.approx(160.0)
    # the merged file is a pytest-benchmark file collate reads like any other; being a merge of
    # three runs, its min (best of all their rounds) is compared as well as its median
    gated = {r["metric"] for r in read_pytest_benchmark(out) if r["gate"] and r["case"].endswith("::test_sum")}
    assert gated == {"median", "min"}
    single = {r["metric"] for r in read_pytest_benchmark(pytest_json) if r["gate"] and r["case"].endswith("::test_sum")}
    assert single == {"median"}


def test_median_refuses_mixed_commits_and_bad_files(tmp_path, pytest_json, capsys) -> None:
    from spark_bench import cli

    a = _variant(pytest_json, tmp_path / "a.json", 1.0, commit="a" * 40)
    b = _variant(pytest_json, tmp_path / "b.json", 1.0, commit="b" * 40)
    out = tmp_path / "m.json"
    assert cli.main(["median", str(a), str(b), "--out", str(out)]) == 2
    assert "different commits (a.json: aaaaaaaaaa, b.json: bbbbbbbbbb)" in capsys.readouterr().err
    bad = _write(tmp_path / "bad.json", '{"no": "benchmarks"}')
    assert cli.main(["median", str(a), str(bad), "--out", str(out)]) == 2
    assert "bad.json: not a pytest-benchmark file" in capsys.readouterr().err
    assert not out.exists()


def _reshape(d: Path, **env: Any) -> Path:
    doc = json.loads((d / "result.json").read_text())
    doc["env"].update(env)
    (d / "result.json").write_text(json.dumps(doc))
    return d


def test_runs_of_other_shapes_are_shown_not_compared(spark, tmp_path, capsys) -> None:
    """Issue 31 (6): a 4-slot run against a 16-slot run of unknown commits is no regression;
    both are listed, with the reason they are not compared; compiled null reads as unknown."""
    small = _reshape(write_result(tmp_path / "runs" / "a", "run-a", "fastmq", "", 100_000, 1000), cores=4)
    big = _reshape(write_result(tmp_path / "runs" / "b", "run-b", "fastmq", "", 40_000, 9000,
                                started="2026-11-26T05:00:00Z"), cores=16, compiled=None)
    out = tmp_path / "out"
    rc, err = _collate([str(small), str(big), "--out", str(out), "--fail-on-regression", "10"], capsys)
    assert rc == 0, err
    md = (out / "collated.md").read_text()
    assert "None flagged." in md or "Nothing to compare" in md
    assert "Not compared with each other: these runs of max-rate-128 differ in shape" in md
    assert "4 slots" in md and "16 slots" in md
    assert "compiled: unknown" in md and "PURE PYTHON" not in md
    page = (out / "collated.html").read_text()
    assert "class='tw'" in page      # tables scroll within themselves
