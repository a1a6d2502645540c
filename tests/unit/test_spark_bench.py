"""spark_bench without Spark: the mergeable histogram, workload files, the task layout, the
recorder's window, and the command's refusals that come before any Spark session."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_bench import cli
from spark_bench.run.histogram import LatencyHistogram
from spark_bench.run.recorder import Plan, Recorder
from spark_bench.run.runner import layout
from spark_bench.run.workload import Workload, WorkloadError, load_workload, shipped_workloads
from fastmq.testing import free_port
from tests.support import examples


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(st.integers(0, 10**10), min_size=1, max_size=300), st.lists(st.integers(0, 10**10), max_size=300))
def test_histogram_merge_and_percentiles(a, b) -> None:
    ha, hb, hall = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    ha.record_many(np.array(a))
    hb.record_many(np.array(b))
    hall.record_many(np.array(a + b))
    merged = LatencyHistogram.from_bytes(ha.to_bytes()).merge(LatencyHistogram.from_bytes(hb.to_bytes()))
    assert np.array_equal(merged.counts, hall.counts) and merged.total == len(a) + len(b)
    values = sorted(a + b)
    for p in (50, 75, 90, 95, 99, 99.9):
        exact = values[max(0, math.ceil(len(values) * p / 100) - 1)]
        got = merged.percentile(p)
        # never below the true value, and within 3 significant digits (1/2048) above it
        assert exact <= got <= exact + exact / 2048, (p, exact, got)
    assert merged.percentile(100) == values[-1] and merged.percentile(0) == values[0]


def test_histogram_reports_the_bucket_top_and_is_small_on_the_wire() -> None:
    h = LatencyHistogram()
    h.record_many(np.array([123456, 1000, 2047, 2048]))
    assert h.percentile(25) == 1000 and h.percentile(50) == 2047   # below 2048: exact
    assert h.percentile(75) == 2048 and h.percentile(100) == 123456
    h2 = LatencyHistogram()
    h2.record_many(np.array([123456, 200000]))
    assert 123456 <= h2.percentile(50) <= 123456 * (1 + 1 / 2048)
    big = LatencyHistogram()
    big.record_many(np.random.default_rng(1).integers(20_000, 2_000_000, 100_000))
    assert len(big.to_bytes()) < 200_000


def test_shipped_workloads_load() -> None:
    shipped = shipped_workloads()
    assert {"max-rate-128b", "max-rate-1kb", "rate-limited-latency", "backlog-drain",
            "many-producers-1-in-flight"} <= set(shipped)
    for name in shipped:
        w = load_workload(name)
        assert w.name == name and w.duration_s <= 30
    many = load_workload("many-producers-1-in-flight")
    assert many.producers == 16 and many.send_mode == "sync" and many.in_flight == 1
    for name, rate in (("e2e-latency-1k", 1000), ("e2e-latency-10k", 10000)):
        e2e = load_workload(name)
        assert e2e.producer_rate == rate and e2e.consumer_kind == "push" and e2e.listener == "plain"
        assert e2e.producers == 1 and e2e.consumers == 1   # one task each: separate processes
    assert load_workload("rate-limited-latency").listener == "async"   # the default


@pytest.mark.parametrize("text, words", [
    ("name: x\ntopicz: 1\n", ["unknown key 'topicz'"]),
    ("name: x\ntopics: 0\n", ["topics must be an integer >= 1"]),
    ("name: x\nsend_mode: fast\n", ["send_mode must be one of"]),
    ("name: x\nproducer_rate: -1\n", ["producer_rate"]),
    ("name: x\nsend_mode: sync\nin_flight: 8\n", ["in_flight"]),
    ("name: x\nlistener: blocking\n", ["listener must be one of async, plain"]),
    ("name: x\nconsumer_kind: pull\nlistener: plain\n", ["listener applies to consumer_kind push only"]),
    ("topics: 1\n", ["missing key 'name'"]),
    ("- a\n- b\n", ["YAML mapping"]),
    ("name: x\nbacklog: 10\nconsumer_groups_per_topic: 0\n", ["backlog"]),
    ("name: x\npayload_file: nope.bin\n", ["payload_file 'nope.bin'"]),
])
def test_bad_workloads_name_key_and_file(tmp_path: Path, text: str, words: list[str]) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(text)
    with pytest.raises(WorkloadError) as e:
        load_workload(f)
    assert str(f) in str(e.value) and all(w in str(e.value) for w in words), str(e.value)


def test_payload_file_sets_the_size(tmp_path: Path) -> None:
    (tmp_path / "p.bin").write_bytes(b"x" * 300)
    (tmp_path / "w.yaml").write_text("name: p\npayload_file: p.bin\n")
    w = load_workload(tmp_path / "w.yaml")
    assert w.message_size == 300 and w.payload == b"x" * 300


def test_unknown_key_is_refused_before_anything_starts(tmp_path: Path, capsys) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("name: bad\nproducers: 3\n")
    assert cli.main(["run", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'producers'" in err and str(f) in err
    assert not (tmp_path / "out").exists()


def test_unreachable_namesrv_fails_every_run(tmp_path: Path, capsys) -> None:
    port = free_port()
    assert cli.main(["run", "rate-limited-latency", "--out", str(tmp_path), "--namesrv", f"127.0.0.1:{port}"]) == 1
    r = json.loads((tmp_path / "rate-limited-latency-fastmq" / "result.json").read_text())
    assert r["status"] == "failed" and f"127.0.0.1:{port} unreachable" in r["reason"]
    assert r["publish"] is None and r["sent_ok"] is None
    assert "unreachable" in capsys.readouterr().err


def test_layout_deals_clients_over_tasks() -> None:
    w = Workload(name="x", topics=2, producers_per_topic=2, consumer_groups_per_topic=1, consumers_per_group=2)
    tasks = layout(w, 4)
    assert len(tasks) == 4
    assert [len(t["producers"]) for t in tasks] == [2, 2, 0, 0] and [len(t["consumers"]) for t in tasks] == [0, 0, 2, 2]
    assert len(layout(w, 32)) == 8                      # never more tasks than clients
    one = layout(Workload(name="y", producers_per_topic=16), 2)
    assert [len(t["producers"]) for t in one] == [16, 0] and [len(t["consumers"]) for t in one] == [0, 1]
    alone = layout(Workload(name="y", producers_per_topic=16, consumer_groups_per_topic=0), 2)
    assert [len(t["producers"]) for t in alone] == [8, 8]
    solo = layout(Workload(name="z"), 1)
    assert len(solo) == 1 and solo[0]["producers"] and solo[0]["consumers"]


def test_the_send_schedule_never_wakes_early_and_keeps_the_loop_running() -> None:
    """Issue 33: the schedule leaves the loop's millisecond timers for short naps and a spin, so
    it wakes on time; it must never wake before the slot, and the loop's other work (answers,
    consumers) must go on while it waits."""
    import asyncio
    import time

    from fastmq.remoting.loop import new_event_loop
    from spark_bench.run.task import wait_until

    async def main() -> tuple[list[int], int]:
        ticks = 0

        async def other() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)
        bg = asyncio.ensure_future(other())
        early = []
        t0 = time.time_ns() + 2_000_000
        for i in range(30):   # 30 slots of 0.7 ms: timer, nap and spin all used
            due = t0 + i * 700_000
            await wait_until(due)
            early.append(due - time.time_ns())
        await wait_until(time.time_ns() - 1)   # a slot already past: at once
        bg.cancel()
        return early, ticks

    loop = new_event_loop()
    try:
        early, ticks = loop.run_until_complete(main())
    finally:
        loop.close()
    assert max(early) <= 0, early
    assert ticks >= 30   # the other task ran while the schedule waited


def test_recorder_counts_only_the_window() -> None:
    s = 10**9
    rec = Recorder(Plan(0, 0, 0, s))
    rec.acked_one(0, 0, 1 * s, 1 * s + 5000)           # before the plan: counted, not in any window
    rec.set_plan(Plan(0, 2 * s, 4 * s, s))
    rec.acked_one(0, 1, 2 * s, 2 * s + 7000)           # interval 0
    rec.acked_one(0, 2, int(3.5 * s), int(3.5 * s) + 9000)  # interval 1
    rec.acked_one(0, 3, 4 * s, 4 * s + 1000)           # at the window's end: outside
    rec.received_one("g", 0, 1, 2 * s, 2 * s + 20_000)
    rec.received_one("g", 0, 1, 2 * s, 2 * s + 30_000)
    rec.error("X", int(2.5 * s))
    r = rec.result()
    assert r["sent_ok"] == 4 and r["publish_in_window"] == 2 and r["e2e_in_window"] == 2
    assert r["duplicates"] == 1 and r["errors"] == {"X": 1}
    assert [x["publish_msgs"] for x in r["interval_rows"]] == [1, 1] and r["interval_rows"][0]["errors"] == 1
    assert LatencyHistogram.from_bytes(r["publish_hist"]).max_ns == 9000
    acked = np.unpackbits(np.frombuffer(r["acked"][0], dtype=np.uint8))
    assert list(acked[:5]) == [1, 1, 1, 1, 0]


def test_unreachable_spark_master_fails_at_once_with_one_line(tmp_path: Path, capsys) -> None:
    """Issue 31 (5): a wrong master URL is one line and a failed result.json, before any server starts."""
    port = free_port()
    assert cli.main(["run", "rate-limited-latency", "--out", str(tmp_path), "--master",
                     f"spark://127.0.0.1:{port}"]) == 1
    r = json.loads((tmp_path / "rate-limited-latency-fastmq" / "result.json").read_text())
    assert r["status"] == "failed" and f"Spark master spark://127.0.0.1:{port} unreachable" in r["reason"]
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1


class _FakeJsc:
    def __init__(self, stopped: bool, executors: int) -> None:
        self.stopped, self.executors = stopped, executors

    def sc(self) -> "_FakeJsc":
        return self

    def isStopped(self) -> bool:
        return self.stopped

    def getExecutorMemoryStatus(self) -> "_FakeJsc":
        return self

    def size(self) -> int:
        return self.executors


class _FakeSc:
    master = "spark://10.200.0.1:7077"

    def __init__(self, stopped: bool = False, executors: int = 1) -> None:
        self._jsc = _FakeJsc(stopped, executors)


def test_a_master_without_workers_or_a_stopped_context_fails_within_the_wait() -> None:
    from spark_bench.run.cluster import BenchError
    with pytest.raises(BenchError, match=r"no executor registered with spark://10.200.0.1:7077 within 1s"):
        cli._wait_for_executors(_FakeSc(), 1.0)
    with pytest.raises(BenchError, match="Spark stopped the application"):
        cli._wait_for_executors(_FakeSc(stopped=True), 5.0)


def test_intervals_the_driver_cannot_see_fail_the_run(tmp_path: Path) -> None:
    """Issue 31 (2): executors that write intervals.parquet to their own disks must not leave an
    OK run with an empty file on the driver's side."""
    from spark_bench.run.report import write_outputs

    class _Writer:   # what a remote executor's write looks like from the driver: only the directory

        def __getattr__(self, name: str) -> object:
            return self

        def __call__(self, *args: object) -> "_Writer":
            if args and isinstance(args[0], str) and args[0].endswith("intervals.parquet"):
                Path(args[0]).mkdir(parents=True)
                (Path(args[0]) / "_SUCCESS").write_bytes(b"")
            return self

    class _Spark:
        def createDataFrame(self, rows: object, schema: str) -> _Writer:
            return _Writer()

    result = {"status": "ok", "reason": None, "intervals": [], "workload": {"name": "w"}, "driver": "fastmq",
              "run_id": "r", "started_at": "t", "env": {"fastmq_version": "0.1.0", "commit": "abc", "compiled": True,
                                                        "spark_version": "4", "master": "spark://x", "cores": 2},
              "window_s": 1, "target_rate": None, "sent_ok": 5, "received": 5, "lost": 0, "duplicates": 0,
              "errors": {}, "broker": None, "publish": None, "e2e": None}
    write_outputs(_Spark(), tmp_path / "o", result, [{"task": 0}])
    r = json.loads((tmp_path / "o" / "result.json").read_text())
    assert r["status"] == "failed" and "intervals.parquet" in r["reason"] and "share" in r["reason"]


@pytest.mark.parametrize("shown", [True, False])
def test_interval_lines_show_on_a_terminal_only(shown: bool) -> None:
    """Issue 30: a run prints its interval lines on a terminal and nothing when piped (the
    command decides with on_terminal(sys.stdout, --progress/--no-progress))."""
    import argparse
    import io

    from fastmq.common.progress import on_terminal
    from spark_bench.run.control import ControlServer

    class _Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert on_terminal(_Tty()) and not on_terminal(io.StringIO())
    assert on_terminal(io.StringIO(), True) and not on_terminal(_Tty(), False)
    p = argparse.ArgumentParser()
    cli._run_args(p)
    assert p.parse_args(["w", "--out", "o"]).progress is None
    assert p.parse_args(["w", "--out", "o", "--progress"]).progress is True
    assert p.parse_args(["w", "--out", "o", "--no-progress"]).progress is False

    lines: list[str] = []
    server = ControlServer(1, consumers=False, warmup_s=0, duration_s=1, interval_s=1, allow_pure=False,
                           on_failure=lines.append, print_fn=lines.append, bind="127.0.0.1", show_intervals=shown)
    try:
        server._interval({"type": "interval", "task": 0, "i": 0, "publish": 10, "e2e": 0, "errors": 0})
    finally:
        server.close()
    assert len(server.intervals[0]) == 1  # kept either way
    assert (len(lines) == 1 and lines[0].startswith("[   1.0s] publish")) if shown else lines == []
