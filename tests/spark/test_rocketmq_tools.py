"""``fastmq-bench rocketmq-tools``: RocketMQ's own benchmark tools against fastmq's broker and the
Java broker, as kept result files, and their collation into RESULTS.md.

Without Java: the tools' lines are parsed from a sample in their real format, the figures and
medians are checked by hand-made samples, and the whole command runs against a stand-in ``java``
(tests/spark/rocketmq_tools_fake_java.py: the NameServer and broker classes start fastmq's servers, the
Producer and Consumer print canned lines), so the process handling, the files and the collation are
exercised for real. With ``FASTMQ_ROCKETMQ_HOME`` (and ``FASTMQ_ROCKETMQ_CLASSPATH`` unless HOME/lib
holds the jars), one short run against the real Java broker and tools.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from spark_bench import collate
from spark_bench.cli import main as bench_main
from spark_bench.collate.load import CollateError, load_inputs
from spark_bench.rocketmq_tools.command import _jar_version, _retrying
from spark_bench.rocketmq_tools.process import Managed, PortTaken, ToolsError, wait_ready
from spark_bench.rocketmq_tools.result import (SUMMARY_SCHEMA, ConsumerLine, Shape, drain_figures,
                                               parse_consumer_line, parse_producer_line, parse_shape, read_summary,
                                               run_figures, spark_figures, summarize)

FAKE_JAVA = Path(__file__).resolve().parent / "rocketmq_tools_fake_java.py"

# The tools' output as 4.9.8 prints it (banner, periodic lines, a NaN window, the client's own
# noise, the total printed when the Producer stops by itself), typed from a real run's log.
PRODUCER_OUT = """\
topic: BenchmarkTest threadCount: 16 messageSize: 128 keyEnable: false propertySize: 0 tagCount: 0 traceEnable: false aclEnable: false messageQuantity: 0
delayEnable: false delayLevel: 1
asyncEnable: false
Current Time: 2026-11-26 08:16:07,280 Send TPS: 4012 Max RT(ms): 432 Average RT(ms):   3.988 Send Failed: 0 Response Failed: 0
Current Time: 2026-11-26 08:16:17,281 Send TPS: 4686 Max RT(ms): 432 Average RT(ms):   3.409 Send Failed: 0 Response Failed: 0
RocketMQLog:WARN No appenders could be found for logger (io.netty.util.internal.PlatformDependent0).
Current Time: 2026-11-26 08:16:27,281 Send TPS: 0 Max RT(ms): 432 Average RT(ms):     NaN Send Failed: 3 Response Failed: 1
Current Time: 2026-11-26 08:16:37,280 Send TPS: 12351 Max RT(ms): 1400 Average RT(ms):  11.359 Send Failed: 3 Response Failed: 1
Current Time: 2026-11-26 08:16:37,280 Send TPS: 12351 Max RT(ms): 1400 Average RT(ms):  11.3
[Complete] Send Total: 160000 Send TPS: 4625 Max RT(ms): 1400 Average RT(ms):   3.476 Send Failed: 3 Response Failed: 1
"""
CONSUMER_OUT = """\
topic: BenchmarkTest, threadCount 20, group: benchmark_consumer, suffix: false, filterType: null, expression: null, msgTraceEnable: false, aclEnable: false
Consumer Started.
Current Time: 1795680534266 TPS: 7 FAIL: 0 AVG(B2C) RT(ms): 37877.632 AVG(S2C) RT(ms): 37874.059 MAX(B2C) RT(ms): 39141 MAX(S2C) RT(ms): 39137
Current Time: 1795680544268 TPS: 1228 FAIL: 0 AVG(B2C) RT(ms):  13.421 AVG(S2C) RT(ms):   8.811 MAX(B2C) RT(ms): 132 MAX(S2C) RT(ms): 111
Current Time: 1795680554267 TPS: 0 FAIL: 0 AVG(B2C) RT(ms):     NaN AVG(S2C) RT(ms):     NaN MAX(B2C) RT(ms): 0 MAX(S2C) RT(ms): 0
"""


def test_producer_lines_are_read_and_everything_else_is_not() -> None:
    got = [p for p in map(parse_producer_line, PRODUCER_OUT.splitlines()) if p is not None]
    assert [p.tps for p in got] == [4012, 4686, 0, 12351]
    assert got[0].max_rt_ms == 432 and got[0].avg_rt_ms == pytest.approx(3.988)
    assert got[2].avg_rt_ms is None and (got[2].send_failed, got[2].response_failed) == (3, 1)
    assert got[3].avg_rt_ms == pytest.approx(11.359)
    # a consumer's line is not a producer's, nor the reverse
    assert all(parse_producer_line(ln) is None for ln in CONSUMER_OUT.splitlines())


def test_consumer_lines_are_read_nan_included() -> None:
    got = [c for c in map(parse_consumer_line, CONSUMER_OUT.splitlines()) if c is not None]
    assert [c.tps for c in got] == [7, 1228, 0]
    assert got[1] == ConsumerLine(1228, 0, 13.421, 8.811, 132, 111)
    assert got[2].avg_b2c_ms is None and got[2].avg_s2c_ms is None
    assert all(parse_consumer_line(ln) is None for ln in PRODUCER_OUT.splitlines())


def test_shapes_parse_and_bad_ones_are_refused() -> None:
    assert parse_shape("w16-s128") == Shape(16, 128, False)
    assert parse_shape(" w64-s1024-consumer ").name == "w64-s1024-consumer"
    for bad in ("w0-s128", "16-128", "w16-s128-consumers", "w16", "", "drain0-s128", "drain1g-s128", "drain5k-s0",
                "drain5k", "spark-", "spark-Many", "spark-../x"):
        with pytest.raises(ValueError, match="expected wTHREADS-sBYTES.*drainCOUNT.*spark-WORKLOAD"):
            parse_shape(bad)


def test_drain_and_spark_shapes_parse_and_keep_their_names() -> None:
    d = parse_shape("drain1m-s128")
    assert (d.kind, d.count, d.size, d.name) == ("drain", 1_000_000, 128, "drain1m-s128")
    assert parse_shape("drain250k-s1024").count == 250_000 and parse_shape("drain250000-s1024").name == "drain250k-s1024"
    assert parse_shape("drain1500-s128").name == "drain1500-s128"
    sp = parse_shape("spark-many-producers")
    assert (sp.kind, sp.workload, sp.name) == ("spark", "many-producers-1-in-flight", "spark-many-producers")
    # any shipped workload by its own name
    assert parse_shape("spark-e2e-latency-1k").workload == "e2e-latency-1k"
    assert parse_shape("w16-s128").kind == "producer"


def _sample(t: float, tps: int, rt: float | None, cpu: float, *, failed: int = 0, jiffies: int = 0,
            idle: int = 0, tool: float = 0.0) -> dict[str, Any]:
    return {"t": t, "tps": tps, "max_rt_ms": 50, "avg_rt_ms": rt, "send_failed": failed, "response_failed": 0,
            "broker_cpu_s": cpu, "tool_cpu_s": tool, "machine_jiffies": jiffies, "machine_idle": idle}


def test_run_figures_drop_the_first_line_and_count_cpu_per_message() -> None:
    samples = [_sample(100.0, 50, 90.0, 7.0, jiffies=1000, idle=500),       # the tools' start: dropped
               _sample(110.0, 1000, 2.0, 10.0, jiffies=3000, idle=700),
               _sample(120.0, 3000, 4.0, 14.0, failed=2, jiffies=5000, idle=900, tool=3.0),
               _sample(130.0, 9999, 1.0, 99.0)]                               # past --windows 2: unused
    cons = [(103.0, ConsumerLine(5, 0, None, None, 0, 0)),      # before the span (+5 s): not counted
            (111.0, ConsumerLine(900, 0, 1.0, 1.0, 1, 1)), (124.0, ConsumerLine(2900, 0, 1.0, 1.0, 1, 1)),
            (126.0, ConsumerLine(1, 0, 1.0, 1.0, 1, 1))]         # after the span (+5 s): not counted
    f = run_figures(samples, 2, cons)
    assert f["windows"] == [1000, 3000] and f["dropped_tps"] == 50
    assert f["tps"] == 2000 and f["span_s"] == 20 and f["msgs"] == 40_000
    # broker CPU 14 - 7 = 7 s over 40,000 messages
    assert f["broker_cpu_s"] == 7 and f["cpu_us_per_msg"] == pytest.approx(175.0)
    assert f["broker_cpu_cores"] == pytest.approx(0.35) and f["tool_cpu_cores"] == pytest.approx(0.15)
    # each window's average RT weighs by its messages: (1000*2 + 3000*4) / 4000
    assert f["avg_rt_ms"] == pytest.approx(3.5)
    assert f["machine_busy"] == pytest.approx(1 - 400 / 4000)
    assert f["send_failed"] == 2 and f["response_failed"] == 0
    assert f["consumer_tps"] == pytest.approx(1900)


def test_run_figures_with_a_consumer_count_each_jvm_the_pulls_and_the_run_queue() -> None:
    samples = [_sample(100.0, 50, 9.0, 7.0, tool=1.0), _sample(110.0, 1000, 2.0, 10.0, tool=2.0),
               _sample(120.0, 3000, 4.0, 14.0, tool=3.0)]
    for s, cons_cpu, runq, rates in zip(samples, (5.0, 6.0, 9.0), (1.0, 4.0, 13.0),
                                        ((10.0, 10.0, 10.0), (1000.0, 900.0, 1500.0), (3000.0, 3100.0, 4500.0))):
        s.update({"consumer_cpu_s": cons_cpu, "broker_runq_s": runq, "pull_found_tps": rates[0],
                  "pull_miss_tps": rates[1], "pull_msgs_tps": rates[2]})
    f = run_figures(samples, 2)
    # 40,000 messages over 20 s: the Producer's 2 s and the Consumer's 4 s of CPU, the broker's 12 s waiting
    assert f["producer_cpu_us_per_msg"] == pytest.approx(50.0) and f["consumer_cpu_us_per_msg"] == pytest.approx(100.0)
    assert f["consumer_cpu_cores"] == pytest.approx(0.2) and f["broker_runq_cores"] == pytest.approx(0.6)
    # the kept samples' rates, averaged: 2000 found + 2000 missed a second, 3000 messages in the found ones
    assert f["found_pulls_per_s"] == 2000 and f["pulls_per_s"] == 4000 and f["msgs_per_found_pull"] == 1.5
    # a producer-alone run has none of the consumer's figures, and runs without the samples none either
    plain = run_figures([_sample(0, 10, 1.0, 1.0), _sample(10, 10, 1.0, 2.0)], 1)
    assert not {"consumer_cpu_us_per_msg", "pulls_per_s", "broker_runq_cores"} & set(plain)
    assert plain["producer_cpu_us_per_msg"] == 0.0


def test_pull_rates_and_run_queue_of_a_real_broker(tmp_path) -> None:
    """The broker's own pull counters over GET_BROKER_RUNTIME_INFO, and its run-queue wait in /proc;
    nothing (not an error) from an address where no broker answers."""
    import time

    from spark_bench.rocketmq_tools.peer import _pull_rates, runq_wait_s
    from fastmq.testing import free_port, running_cluster
    with running_cluster(tmp_path) as (_, broker):
        deadline, rates = time.monotonic() + 40, {}
        while not rates and time.monotonic() < deadline:   # the 10 s figure needs 10 s of samples
            rates = _pull_rates(broker.addr)
            time.sleep(0.5)
        assert set(rates) == {"pull_found_tps", "pull_miss_tps", "pull_msgs_tps"}
        assert all(v >= 0 for v in rates.values())
        assert runq_wait_s(broker.proc.pid) >= 0.0
    assert _pull_rates(f"127.0.0.1:{free_port()}") == {}
    assert runq_wait_s(2 ** 22 + 1) == 0.0   # (above pid_max's default: no such process)


def test_run_figures_with_nan_windows_and_too_few_lines() -> None:
    f = run_figures([_sample(0, 10, None, 1.0), _sample(10, 0, None, 1.0)], 1)
    assert f["tps"] == 0 and f["avg_rt_ms"] is None and f["cpu_us_per_msg"] is None and f["consumer_tps"] is None
    with pytest.raises(ValueError, match="1 periodic line"):
        run_figures([_sample(0, 10, 1.0, 1.0)], 3)
    with pytest.raises(ValueError, match="windows must be at least 1"):
        run_figures([_sample(0, 10, 1.0, 1.0)] * 3, 0)


# A drain's Consumer lines as 4.9.8 prints them (typed from a real run's log): the JVM's start and
# rebalance, the backlog going, partly in the first busy line and the last, then nothing.
DRAIN_OUT = """\
Consumer Started.
Current Time: 1795680534266 TPS: 0 FAIL: 0 AVG(B2C) RT(ms):     NaN AVG(S2C) RT(ms):     NaN MAX(B2C) RT(ms): 0 MAX(S2C) RT(ms): 0
Current Time: 1795680544266 TPS: 31012 FAIL: 0 AVG(B2C) RT(ms): 41877.632 AVG(S2C) RT(ms): 41874.059 MAX(B2C) RT(ms): 49141 MAX(S2C) RT(ms): 49137
Current Time: 1795680554266 TPS: 80000 FAIL: 0 AVG(B2C) RT(ms): 52877.632 AVG(S2C) RT(ms): 52874.059 MAX(B2C) RT(ms): 59141 MAX(S2C) RT(ms): 59137
Current Time: 1795680564266 TPS: 90000 FAIL: 0 AVG(B2C) RT(ms): 61877.632 AVG(S2C) RT(ms): 61874.059 MAX(B2C) RT(ms): 69141 MAX(S2C) RT(ms): 69137
Current Time: 1795680574266 TPS: 12000 FAIL: 1 AVG(B2C) RT(ms): 70877.632 AVG(S2C) RT(ms): 70874.059 MAX(B2C) RT(ms): 79141 MAX(S2C) RT(ms): 79137
Current Time: 1795680584266 TPS: 0 FAIL: 0 AVG(B2C) RT(ms):     NaN AVG(S2C) RT(ms):     NaN MAX(B2C) RT(ms): 0 MAX(S2C) RT(ms): 0
"""


def _drain_samples(out: str) -> list[dict[str, Any]]:
    lines = [c for c in map(parse_consumer_line, out.splitlines()) if c is not None]
    # the broker's CPU grows 4 s a line while it serves the backlog; the Consumer's 2 s
    return [{"t": 100.0 + 10 * i, "tps": c.tps, "fail": c.fail, "broker_cpu_s": 50.0 + 4 * i, "tool_cpu_s": 2.0 * i,
             "machine_jiffies": 1000 * i, "machine_idle": 100 * i} for i, c in enumerate(lines)]


def test_drain_figures_keep_the_lines_busy_throughout() -> None:
    f = drain_figures(_drain_samples(DRAIN_OUT), 2_130_000)
    # busy: lines 1..4; the first and the last were busy only part of their 10 s: 80,000 and 90,000 kept
    assert f["windows"] == [80_000, 90_000] and f["tps"] == 85_000 and f["consumer_tps"] == 85_000
    assert f["busy_lines"] == [31_012, 80_000, 90_000, 12_000] and f["dropped_tps"] == 31_012
    # 8 s of broker CPU over 20 s x 85,000 msgs/s; the Consumer's 4 s likewise
    assert f["span_s"] == 20 and f["cpu_us_per_msg"] == pytest.approx(8 / 1_700_000 * 1e6)
    assert f["consumer_cpu_us_per_msg"] == pytest.approx(4 / 1_700_000 * 1e6) and f["consumer_cpu_cores"] == 0.2
    assert f["count"] == 2_130_000 and f["consumer_fail"] == 1 and f["avg_rt_ms"] is None
    assert f["machine_busy"] == pytest.approx(0.9) and "producer_cpu_us_per_msg" not in f


def test_drain_figures_refuse_a_backlog_too_small_or_never_consumed() -> None:
    samples = _drain_samples(DRAIN_OUT)
    short = [samples[0], samples[1], samples[4], samples[5]]   # busy in two lines only: none busy throughout
    with pytest.raises(ValueError, match="backlog of 300,000 was drained within 2 busy line.*larger count"):
        drain_figures(short, 300_000)
    with pytest.raises(ValueError, match="none of the Consumer's 2 line"):
        drain_figures([samples[0], samples[5]], 10)


SPARK_RESULT = {"status": "ok", "reason": None, "window_s": 15.0, "sent_ok": 60_000, "received": 60_000, "lost": 0,
                "errors": {"FLUSH_DISK_TIMEOUT": 2},
                "publish": {"msgs_per_s": 3_600.5, "latency_us": {"p50": 4_100.0, "p99": 9_800.0, "p99.9": 20_000.0}},
                "e2e": {"msgs_per_s": 3_590.0, "latency_us": {"p50": 5_000.0, "p99": 12_000.0}}}


def test_spark_figures_from_the_result_and_the_span_the_broker_stored_in() -> None:
    samples = [{"t": 0.0, "puts": 10, "broker_cpu_s": 1.0, "machine_jiffies": 0, "machine_idle": 0},
               {"t": 1.0, "puts": 10, "broker_cpu_s": 1.5, "machine_jiffies": 100, "machine_idle": 90},   # Spark starts
               {"t": 2.0, "puts": 5_010, "broker_cpu_s": 2.5, "machine_jiffies": 200, "machine_idle": 100},
               {"t": 3.0, "puts": 20_010, "broker_cpu_s": 4.5, "machine_jiffies": 300, "machine_idle": 110},
               {"t": 4.0, "puts": 20_010, "broker_cpu_s": 4.6, "machine_jiffies": 400, "machine_idle": 200}]  # after
    f = spark_figures(SPARK_RESULT, samples)
    assert f["tps"] == 3_600.5 and f["send_p50_us"] == 4_100 and f["send_p99_us"] == 9_800 and f["e2e_p99_us"] == 12_000
    assert f["consumer_tps"] == 3_590 and f["send_failed"] == 2 and f["response_failed"] == 0
    # from the sample before the first growth (t 1) to the last growth (t 3): 3 s of CPU over 20,000 puts
    assert f["puts"] == 20_000 and f["span_s"] == 2 and f["cpu_us_per_msg"] == pytest.approx(150.0)
    assert f["broker_cpu_cores"] == 1.5 and f["machine_busy"] == pytest.approx(0.9)
    assert spark_figures(SPARK_RESULT, samples[:2])["cpu_us_per_msg"] is None   # no put seen: no CPU figure
    assert "pulls_per_s" not in f and "broker_runq_cores" not in f
    # with the broker's pull rates and run-queue wait sampled: their means within the span
    for s, found, miss, runq in zip(samples, (0, 0, 100, 300, 0), (9, 9, 50, 150, 9), (0, 0, 0.5, 1.5, 2.0)):
        s.update({"pull_found_tps": found, "pull_miss_tps": miss, "pull_msgs_tps": 4 * found, "broker_runq_s": runq})
    f = spark_figures(SPARK_RESULT, samples)
    assert f["found_pulls_per_s"] == 200 and f["pulls_per_s"] == 300 and f["msgs_per_found_pull"] == 4
    assert f["broker_runq_cores"] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="the Spark run is failed: the Spark job failed"):
        spark_figures({**SPARK_RESULT, "status": "failed", "reason": "the Spark job failed"}, samples)
    with pytest.raises(ValueError, match="no publish rate"):
        spark_figures({**SPARK_RESULT, "publish": None}, samples)


def test_summary_of_drain_and_spark_shapes() -> None:
    shapes = [parse_shape("drain1m-s128"), parse_shape("spark-many-producers")]
    runs = []
    for broker, tps, p50 in (("java", 90_000.0, 3_000.0), ("fastmq", 45_000.0, 2_000.0)):
        runs.append({"broker": broker, "shape": "drain1m-s128", "status": "ok", "file": f"run-d-{broker}-1.json",
                     "figures": {**drain_figures(_drain_samples(DRAIN_OUT), 1_000_000), "tps": tps}})
        runs.append({"broker": broker, "shape": "spark-many-producers", "status": "ok",
                     "file": f"run-s-{broker}-1.json",
                     "figures": {**spark_figures(SPARK_RESULT, []), "send_p50_us": p50}})
    entries, status, _ = summarize(runs, shapes)
    assert status == "ok"
    d, sp = entries
    assert (d["kind"], d["count"], d["ratio"]["tps"]) == ("drain", 1_000_000, 0.5)
    assert (sp["kind"], sp["workload"]) == ("spark", "many-producers-1-in-flight")
    assert sp["fastmq"]["median"]["send_p50_us"] == 2_000 and sp["java"]["median"]["send_p99_us"] == 9_800
    assert sp["java"]["send_failures"] == 2 and d["java"]["send_failures"] == 0


def _run_doc(broker: str, shape: str, n: int, tps: float, cpu: float, status: str = "ok") -> dict[str, Any]:
    doc: dict[str, Any] = {"broker": broker, "shape": shape, "status": status, "file": f"run-{shape}-{broker}-{n}.json",
                           "reason": "" if status == "ok" else "the Producer exited with 1"}
    if status == "ok":
        doc["figures"] = {"tps": tps, "avg_rt_ms": 2.0, "cpu_us_per_msg": cpu, "broker_cpu_cores": 0.5,
                          "consumer_tps": None, "machine_busy": 0.9, "broker_rss_mb": 100.0,
                          "send_failed": 1, "response_failed": 0}
    return doc


def test_summary_takes_medians_of_ok_runs_and_the_ratio() -> None:
    s = [Shape(16, 128), Shape(16, 128, True)]
    runs = [_run_doc("java", "w16-s128", 1, 10_000, 50), _run_doc("fastmq", "w16-s128", 1, 3_000, 180),
            _run_doc("java", "w16-s128", 2, 12_000, 40), _run_doc("fastmq", "w16-s128", 2, 5_000, 160),
            _run_doc("java", "w16-s128", 3, 11_000, 45), _run_doc("fastmq", "w16-s128", 3, 0, 0, "failed"),
            _run_doc("java", "w16-s128-consumer", 1, 4_000, 130), _run_doc("fastmq", "w16-s128-consumer", 1, 1_000, 400)]
    entries, status, reason = summarize(runs, s)
    assert status == "partial" and "1 run(s) failed" in reason
    e = entries[0]
    assert e["java"]["median"]["tps"] == 11_000 and e["java"]["median"]["cpu_us_per_msg"] == 45
    # two ok fastmq runs: the median is their mean; the failed one is listed, not counted
    assert e["fastmq"]["median"]["tps"] == 4_000 and e["fastmq"]["median"]["cpu_us_per_msg"] == 170
    assert e["fastmq"]["ok_runs"] == 2 and e["fastmq"]["failed_runs"] == 1
    assert e["fastmq"]["failed_reasons"] == ["the Producer exited with 1"]
    assert e["fastmq"]["runs"][-1] == "run-w16-s128-fastmq-3.json" and e["java"]["send_failures"] == 3
    assert e["ratio"]["tps"] == pytest.approx(4_000 / 11_000)
    assert e["ratio"]["cpu_us_per_msg"] == pytest.approx(170 / 45)
    assert e["fastmq"]["median"]["consumer_tps"] is None
    assert entries[1]["ratio"]["tps"] == pytest.approx(0.25)
    # a shape with no ok run of one broker fails the whole summary, and its ratio is unknown
    entries, status, reason = summarize(runs[:4], s)
    assert status == "failed" and reason == "no ok run of fastmq w16-s128-consumer, java w16-s128-consumer"
    assert entries[1]["ratio"]["tps"] is None and entries[1]["java"]["median"]["tps"] is None
    assert summarize(runs[:4], s[:1])[1:] == ("ok", "")


# ---------------------------------------------------------------- the whole command, a stand-in java


def _home(tmp: Path) -> Path:
    home = tmp / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    for name in ("logback_broker.xml", "logback_namesrv.xml"):
        (home / "conf" / name).write_text("<configuration/>\n")
    return home


def _our_processes(marker: str) -> list[str]:
    """Command lines of live processes naming ``marker`` (this test's temp dir)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            out.append(f"{p.name}: {cmd[:200]}")
    return out


def _fake_run(tmp_path: Path, *extra: str, out_arg: str | None = None) -> tuple[int, Path]:
    """rocketmq-tools with the stand-in java; ``out_arg``: the --out given (default: absolute)."""
    java = tmp_path / "java"
    java.write_text(f"#!{sys.executable}\n" + FAKE_JAVA.read_text())
    java.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "results"
    rc = bench_main(["rocketmq-tools", "--rocketmq-home", str(_home(tmp_path)), "--rocketmq-classpath", "unused",
                     "--java", str(java), "--out", out_arg or str(out), "--work-dir", str(work), *extra])
    assert Managed.live == []
    assert _our_processes(str(tmp_path)) == []
    assert list(work.iterdir()) == [], "the temporary stores were not removed"
    [run_dir] = list(out.iterdir())
    return rc, run_dir


@pytest.mark.slow
def test_alternating_runs_give_kept_files_and_a_collated_table(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_JAVA_TPS", "50,1000,3000,2000")
    rc, run_dir = _fake_run(tmp_path, "--shapes", "w16-s128,w16-s128-consumer", "--rounds", "2", "--windows", "2",
                            "--warmup-windows", "1")
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert run_dir.name.split("-")[0].endswith("Z")
    files = sorted(p.name for p in run_dir.iterdir())
    for shape in ("w16-s128", "w16-s128-consumer"):
        for broker in ("fastmq", "java"):
            for n in (1, 2):
                assert f"run-{shape}-{broker}-{n}.json" in files and f"run-{shape}-{broker}-{n}.log" in files
    assert "run-w16-s128-consumer-java-1-consumer.log" in files
    assert not any("warmup" in f for f in files)
    doc = json.loads((run_dir / "run-w16-s128-java-1.json").read_text())
    assert doc["status"] == "ok" and doc["figures"]["windows"] == [1000, 3000]
    assert doc["peer"]["version"] == "V4_9_8" and doc["peer"]["flush"] == "ASYNC_FLUSH" and doc["peer"]["heap"]
    assert doc["figures"]["dropped_tps"] == 50 and doc["figures"]["tps"] == 2000
    assert doc["figures"]["cpu_us_per_msg"] >= 0 and doc["figures"]["broker_rss_mb"] > 10
    assert "Send TPS: 3000" in (run_dir / doc["log"]).read_text()
    cons = json.loads((run_dir / "run-w16-s128-consumer-fastmq-2.json").read_text())
    assert cons["figures"]["consumer_tps"] == 777
    summary = read_summary(run_dir / "summary.json")
    assert summary["status"] == "ok" and summary["settings"]["order"] == ["java", "fastmq"]
    assert summary["env"]["java"]["version"] == "V4_9_8"      # asked of the broker (here fastmq's stand-in)
    assert summary["env"]["fastmq"]["extensions"] in ("compiled", "pure")
    s = summary["shapes"][0]
    assert s["shape"] == "w16-s128" and s["fastmq"]["median"]["tps"] == 2000 and s["ratio"]["tps"] == 1.0
    assert s["fastmq"]["runs"] == ["run-w16-s128-fastmq-1.json", "run-w16-s128-fastmq-2.json"]
    # the order was alternating: java 1, fastmq 1, java 2, fastmq 2
    started = [json.loads((run_dir / f"run-w16-s128-{b}-{n}.json").read_text())["started_at"]
               for n in (1, 2) for b in ("java", "fastmq")]
    assert started == sorted(started)
    # collation: the tools' table alone needs no Spark
    out = tmp_path / "collated"
    md_file = tmp_path / "RESULTS.md"
    assert collate.main([str(tmp_path / "results"), "--out", str(out), "--write-md", str(md_file)]) == 0
    md = md_file.read_text()
    assert "## RocketMQ's benchmark tools: fastmq's broker beside Apache RocketMQ's" in md
    row = next(ln for ln in md.splitlines() if ln.startswith(f"| {summary['stamp']} |") and "| w16-s128 |" in ln)
    assert "| 2 / 2 | 2,000 | 2,000 | 1.00x |" in row
    assert "1 rocketmq-tools run(s) (summary.json)" in md


def test_a_shapes_load_is_the_median_of_its_runs_else_the_start(tmp_path) -> None:
    from spark_bench.rocketmq_tools.result import shape_load
    for name, load in (("a.json", "9.50 2.0 1.0 1/2 3"), ("b.json", "3.25 1 1 1/2 3"), ("c.json", "4.00 1 1 1/2 3")):
        (tmp_path / name).write_text(json.dumps({"loadavg_before": load}))
    doc = {"env": {"loadavg_start": "1.87 2.04 2.77 6/184 24947"}}
    shape = {"fastmq": {"runs": ["a.json", "b.json"]}, "java": {"runs": ["c.json", "gone.json"]}}
    assert shape_load(tmp_path / "summary.json", doc, shape) == "4.00"
    assert shape_load(tmp_path / "summary.json", doc, {"fastmq": {"runs": ["gone.json"]}}) == "1.87"
    assert shape_load(tmp_path / "summary.json", {}, {}) == ""


def test_the_broker_version_falls_back_to_the_broker_jar_on_the_classpath(tmp_path) -> None:
    (tmp_path / "lib").mkdir()
    for name in ("rocketmq-common-4.9.8.jar", "rocketmq-broker-4.9.8.jar"):
        (tmp_path / "lib" / name).write_text("")
    assert _jar_version(os.pathsep.join([str(tmp_path / "conf"), str(tmp_path / "lib" / "*")])) == "4.9.8"
    assert _jar_version(str(tmp_path / "x" / "rocketmq-broker-5.3.3.jar")) == "5.3.3"
    assert _jar_version(str(tmp_path / "conf")) == ""


@pytest.mark.slow
def test_a_failing_tool_fails_the_run_and_the_command(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_JAVA_PRODUCER", "die")
    rc, run_dir = _fake_run(tmp_path, "--shapes", "w16-s128", "--rounds", "1", "--windows", "1",
                            "--warmup-windows", "0")
    assert rc == 1
    doc = json.loads((run_dir / "run-w16-s128-fastmq-1.json").read_text())
    assert doc["status"] == "failed" and doc["reason"] == "the Producer exited with 3" and "figures" not in doc
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and "no ok run of fastmq w16-s128, java w16-s128" in summary["reason"]
    assert "FAILED: the Producer exited with 3" in capsys.readouterr().out


@pytest.mark.slow
def test_a_drain_shape_fills_a_backlog_and_the_consumer_drains_it(tmp_path, capsys) -> None:
    """A drain run end to end against real fastmq servers (both "brokers"): the fill stores the exact
    count in a fresh 1024-queue topic, the (stand-in) Consumer drains it with fastmq's push consumer,
    the group's committed offsets reach the count, and the figures and the collated row follow."""
    rc, run_dir = _fake_run(tmp_path, "--shapes", "drain3k-s100", "--rounds", "1", "--warmup-windows", "0")
    printed = capsys.readouterr()
    assert rc == 0, printed.out + printed.err
    for broker in ("java", "fastmq"):
        doc = json.loads((run_dir / f"run-drain3k-s100-{broker}-1.json").read_text())
        assert doc["status"] == "ok", doc["reason"]
        assert doc["kind"] == "drain" and doc["count"] == 3000 and doc["queues"] == 1024
        assert doc["topic"].startswith("BenchmarkDrain_drain3k_s100_" + broker)
        assert doc["fill"]["stored"] == 3000 and doc["fill"]["broker_stored"] == 3000 and doc["committed"] == 3000
        f = doc["figures"]
        assert f["tps"] > 0 and f["tps"] == f["consumer_tps"] and f["windows"] and f["count"] == 3000
        assert f["cpu_us_per_msg"] is not None and f["cpu_us_per_msg"] >= 0 and f["fill_tps"] > 0
        assert "Consumer Started." in (run_dir / doc["log"]).read_text()
    summary = read_summary(run_dir / "summary.json")
    [entry] = summary["shapes"]
    assert summary["status"] == "ok" and entry["kind"] == "drain" and entry["count"] == 3000
    assert "drain3k-s100" in printed.out and "drain TPS" in printed.out
    out = tmp_path / "collated"
    assert collate.main([str(tmp_path / "results"), "--out", str(out)]) == 0
    row = next(ln for ln in (out / "collated.md").read_text().splitlines() if "| drain3k-s100 |" in ln)
    assert "| 1 / 1 |" in row


@pytest.mark.slow
@pytest.mark.spark
def test_a_spark_shape_runs_the_workload_against_each_broker(tmp_path, capsys, monkeypatch) -> None:
    """spark-many-producers end to end: ``fastmq-bench run`` (a real local Spark) against each
    "broker" (fastmq's servers for both here), its result.json kept beside the run, the broker's
    CPU per message over the span its put count grew; the collation tables it as a tools row only.
    --out is relative, as a user types it: the Spark runs start in another directory."""
    monkeypatch.chdir(tmp_path)
    rc, run_dir = _fake_run(tmp_path, "--shapes", "spark-many-producers", "--rounds", "1", "--warmup-windows", "0",
                            out_arg="results")
    printed = capsys.readouterr()
    assert rc == 0, printed.out + printed.err
    for broker in ("java", "fastmq"):
        doc = json.loads((run_dir / f"run-spark-many-producers-{broker}-1.json").read_text())
        assert doc["status"] == "ok", doc["reason"]
        assert doc["kind"] == "spark" and doc["workload"] == "many-producers-1-in-flight"
        result = json.loads((run_dir / doc["result"]).read_text())
        f = doc["figures"]
        assert f["tps"] == result["publish"]["msgs_per_s"] > 0 and f["send_p99_us"] >= f["send_p50_us"] > 0
        # every message the run sent was put within the span the CPU is counted over
        assert f["puts"] == result["sent_ok"] and f["cpu_us_per_msg"] > 0 and f["pulls_per_s"] > 0
        assert "many-producers-1-in-flight / fastmq" in (run_dir / doc["log"]).read_text()
    summary = read_summary(run_dir / "summary.json")
    assert summary["status"] == "ok" and summary["shapes"][0]["workload"] == "many-producers-1-in-flight"
    inputs = load_inputs([str(tmp_path / "results")], [])
    assert inputs.rows == [] and len(inputs.tool_files) == 1


def test_a_port_taken_meanwhile_is_tried_again_in_a_fresh_directory(tmp_path, capsys) -> None:
    # a server that lost its port says so and exits: that is a PortTaken, anything else is not
    for text, kind in (("java.net.BindException: Address already in use", PortTaken), ("no such class", ToolsError)):
        proc = Managed([sys.executable, "-c", f"print({text!r}); raise SystemExit(1)"], "server",
                       tmp_path / "server.log", tmp_path)
        with pytest.raises(ToolsError, match="server exited with 1 before it was ready") as e:
            wait_ready(lambda: False, proc, "server", 30.0)
        assert type(e.value) is kind
        proc.stop()
        (tmp_path / "server.log").unlink()
    tried: list[str] = []

    def start(d: Path) -> Any:
        tried.append(d.name)
        if len(tried) < 2:
            raise PortTaken("the Java broker exited with 255 before it was ready: Address already in use")
        return "peer"
    assert _retrying(start, tmp_path) == "peer" and tried == ["try1", "try2"]
    assert "trying other ports" in capsys.readouterr().err
    tried.clear()

    def always(d: Path) -> Any:
        tried.append(d.name)
        raise PortTaken("taken")
    with pytest.raises(PortTaken):
        _retrying(always, tmp_path)
    assert tried == ["try1", "try2", "try3"]


@pytest.mark.parametrize("case", ["no home", "no conf", "no lib", "bad shape", "no java", "bad rounds", "bad heap"])
def test_bad_options_are_refused_before_anything_starts(tmp_path, capsys, monkeypatch, case: str) -> None:
    monkeypatch.delenv("FASTMQ_ROCKETMQ_HOME", raising=False)
    monkeypatch.delenv("FASTMQ_ROCKETMQ_CLASSPATH", raising=False)
    home = str(_home(tmp_path))
    base = ["rocketmq-tools", "--out", str(tmp_path / "out")]
    argv, want = {
        "no home": (base, "no RocketMQ build: give --rocketmq-home (or FASTMQ_ROCKETMQ_HOME)"),
        "no conf": (base + ["--rocketmq-home", str(tmp_path)], "no conf/logback_broker.xml"),
        "no lib": (base + ["--rocketmq-home", home], "no lib/*.jar; give --rocketmq-classpath"),
        "bad shape": (base + ["--rocketmq-home", home, "--shapes", "w16-s128,x"], "shape 'x': expected"),
        "no java": (base + ["--rocketmq-home", home, "--rocketmq-classpath", "cp", "--java", str(tmp_path / "nope")],
                    "no java: give --java"),
        "bad rounds": (base + ["--rocketmq-home", home, "--rounds", "0"], "--rounds must be at least 1"),
        "bad heap": (base + ["--rocketmq-home", home, "--java-broker-heap", "lots"], "expected a size such as 256m"),
    }[case]
    assert bench_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fastmq-bench rocketmq-tools: ") and want in err, err
    assert not (tmp_path / "out").exists()


def _summary(stamp: str, **over: Any) -> dict[str, Any]:
    entries, status, reason = summarize([_run_doc("java", "w16-s128", 1, 12_000, 50.0),
                                         _run_doc("fastmq", "w16-s128", 1, 4_000, 170.0)], [Shape(16, 128)])
    doc = {"schema": SUMMARY_SCHEMA, "stamp": stamp, "commit": "abc1234", "dirty": False, "status": status,
           "reason": reason, "shapes": entries, "settings": {"rounds": 1, "windows": 3, "order": ["java", "fastmq"],
                                                              "warmup_windows": 1},
           "env": {"cpus": 2, "loadavg_start": "1.00 1.00 1.00 1/100 1",
                   "java": {"version": "V4_9_8", "java": 'openjdk version "17.0.15"', "heap": "256m"},
                   "fastmq": {"version": "fastmq 0.1.0", "extensions": "compiled"}}}
    doc.update(over)
    return doc


def test_collation_of_kept_dirs_newest_first(tmp_path) -> None:
    root = tmp_path / "results"
    for stamp in ("20261126T110000Z", "20261126T120000Z"):
        d = root / "rocketmq-tools" / f"{stamp}-abc1234"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(_summary(stamp)))
    (root / "other").mkdir()
    (root / "other" / "summary.json").write_text('{"someone": "else"}')   # not ours: ignored
    inputs = load_inputs([str(root)], [])
    assert len(inputs.tool_files) == 2 and inputs.rows == []
    out = tmp_path / "out"
    assert collate.main([str(root), "--out", str(out)]) == 0
    md = (out / "collated.md").read_text()
    rows = [ln for ln in md.splitlines() if ln.startswith("| 20261126T")]
    assert [r.split("|")[1].strip() for r in rows] == ["20261126T120000Z", "20261126T110000Z"]
    cells = [c.strip() for c in rows[0].split("|")[1:-1]]
    assert cells[:10] == ["20261126T120000Z", "abc1234", "w16-s128", "1 / 1", "4,000", "12,000", "0.33x",
                          "170.0", "50.0", "3.40x"]
    assert "`20261126T120000Z` at `abc1234`: Java broker V4_9_8, openjdk version \"17.0.15\", heap 256m" in md
    assert "<td>0.33x</td>" in (out / "collated.html").read_text()


def test_collation_of_drain_and_spark_rows_beside_a_producer_row(tmp_path) -> None:
    shapes = [Shape(16, 128), parse_shape("drain1m-s128"), parse_shape("spark-many-producers")]
    runs = [_run_doc("java", "w16-s128", 1, 12_000, 50.0), _run_doc("fastmq", "w16-s128", 1, 4_000, 170.0)]
    for broker, tps, cpu, p50 in (("java", 90_000.0, 20.0, 3_000.0), ("fastmq", 45_000.0, 60.0, 2_000.0)):
        runs.append({"broker": broker, "shape": "drain1m-s128", "status": "ok", "file": f"run-d-{broker}-1.json",
                     "figures": {**drain_figures(_drain_samples(DRAIN_OUT), 1_000_000), "tps": tps,
                                 "consumer_tps": tps, "cpu_us_per_msg": cpu}})
        runs.append({"broker": broker, "shape": "spark-many-producers", "status": "ok",
                     "file": f"run-s-{broker}-1.json",
                     "figures": {**spark_figures(SPARK_RESULT, []), "send_p50_us": p50, "cpu_us_per_msg": cpu}})
    entries, status, reason = summarize(runs, shapes)
    d = tmp_path / "r" / "20261127T000000Z-abc1234"
    (d / "run-spark-many-producers-java-1-spark" / "many-producers-1-in-flight-fastmq").mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(_summary("20261127T000000Z", shapes=entries, status=status)))
    # the Spark shape's own result.json, kept beside: the tools' table's, not a load run of its own
    # (this one is not even readable as one: it would fail the collation if it were read)
    (d / "run-spark-many-producers-java-1-spark" / "many-producers-1-in-flight-fastmq" / "result.json").write_text("{}")
    inputs = load_inputs([str(tmp_path / "r")], [])
    assert inputs.rows == [] and inputs.result_files == [] and len(inputs.tool_files) == 1
    out = tmp_path / "out"
    assert collate.main([str(tmp_path / "r"), "--out", str(out)]) == 0
    md = (out / "collated.md").read_text()
    rows = {ln.split("|")[3].strip(): [c.strip() for c in ln.split("|")[1:-1]]
            for ln in md.splitlines() if ln.startswith("| 20261127T")}
    # the producer row as before, with no latency figures
    assert rows["w16-s128"][3:10] == ["1 / 1", "4,000", "12,000", "0.33x", "170.0", "50.0", "3.40x"]
    assert rows["w16-s128"][-1] == "—"
    assert rows["drain1m-s128"][3:10] == ["1 / 1", "45,000", "90,000", "0.50x", "60.0", "20.0", "3.00x"]
    assert rows["drain1m-s128"][11] == "45,000 / 90,000" and rows["drain1m-s128"][10] == "—"
    assert rows["spark-many-producers"][4:7] == ["3,600", "3,600", "1.00x"]
    assert rows["spark-many-producers"][-1] == "2,000 / 9,800; 3,000 / 9,800"
    assert "`drainN-sB` rows" in md and "`spark-W` rows" in md


@pytest.mark.parametrize("case", ["corrupt", "schema", "no shapes", "shape without medians"])
def test_a_bad_summary_is_refused_with_its_reason(tmp_path, capsys, case: str) -> None:
    d = tmp_path / "r"
    d.mkdir()
    text, want = {
        "corrupt": ('{"schema": "fastmq-rocketmq-tools/1",', "summary.json: not valid JSON"),
        "schema": (json.dumps(_summary("s", schema="fastmq-rocketmq-tools/9")),
                   "unknown rocketmq-tools schema 'fastmq-rocketmq-tools/9'"),
        "no shapes": (json.dumps({k: v for k, v in _summary("s").items() if k != "shapes"}), "summary lacks 'shapes'"),
        "shape without medians": (json.dumps(_summary("s", shapes=[{"shape": "w16-s128", "java": {}}])),
                                  "shape #0 lacks the medians of fastmq and java"),
    }[case]
    (d / "summary.json").write_text(text)
    with pytest.raises(CollateError, match="summary.json"):
        load_inputs([str(d)], [])
    assert collate.main([str(d), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fastmq-bench collate: error: ") and want in err, err


# ---------------------------------------------------------------- against the real Java build

JAVA_HOME_DIR = os.environ.get("FASTMQ_ROCKETMQ_HOME", "")


@pytest.mark.java_rocketmq
@pytest.mark.slow
@pytest.mark.skipif(not JAVA_HOME_DIR, reason="FASTMQ_ROCKETMQ_HOME (a built Apache RocketMQ 4.x) not set")
def test_one_short_run_against_the_java_broker_and_tools(tmp_path, capsys) -> None:
    out = tmp_path / "results"
    rc = bench_main(["rocketmq-tools", "--out", str(out), "--shapes", "w16-s128", "--rounds", "1",
                     "--windows", "1", "--warmup-windows", "0", "--work-dir", str(tmp_path)])
    printed = capsys.readouterr()
    [run_dir] = list(out.iterdir())
    summary = read_summary(run_dir / "summary.json")
    assert rc == 0 and summary["status"] == "ok", printed.out + printed.err
    s = summary["shapes"][0]
    for b in ("fastmq", "java"):
        assert s[b]["median"]["tps"] > 0 and s[b]["median"]["cpu_us_per_msg"] > 0
        assert math.isfinite(s[b]["median"]["avg_rt_ms"])
    assert summary["env"]["java"]["version"].startswith("V4_")
    assert Managed.live == [] and _our_processes(str(tmp_path)) == []


def test_consumer_shape_report_reads_run_files_and_the_loop_threads_samples(tmp_path) -> None:
    """benchmarks/probes/consumer_shape_report: a row per kept run (pulls per message derived, S2C over
    the kept span only), and py-spy's folded stacks of the loop thread alone."""
    from benchmarks.probes.consumer_shape_report import fold_summary, report, run_rows
    d = tmp_path / "20260101T000000Z-abc"
    d.mkdir()
    figures = {"tps": 5000.0, "span_s": 30.0, "pulls_per_s": 10000.0, "msgs_per_found_pull": 1.0,
               "cpu_us_per_msg": 80.0, "broker_runq_cores": 0.5}
    lines = [{"t": -20.0, "avg_s2c_ms": 900.0}, {"t": 10.0, "avg_s2c_ms": 4.0}, {"t": 30.0, "avg_s2c_ms": 8.0},
             {"t": 20.0, "avg_s2c_ms": None}]
    (d / "run-w16-s128-consumer-fastmq-1.json").write_text(json.dumps(
        {"started_at": "2026-01-01T00:00:01Z", "loadavg_before": "1.0 2.0 3.0 1/2 3", "figures": figures,
         "consumer_lines": lines}))
    (d / "run-w16-s128-consumer-java-1.json").write_text(json.dumps(
        {"started_at": "2026-01-01T00:00:00Z", "status": "failed", "figures": None}))   # failed: no row
    rows = run_rows(d)
    assert [r["run"] for r in rows] == ["w16-s128-consumer-fastmq-1"]
    assert rows[0]["pulls_per_msg"] == 2.0 and rows[0]["s2c_ms"] == 6.0
    (d / "run-w16-s128-consumer-fastmq-1-pyspy.folded").write_text(
        "<module> (fastmq-broker:6);Runner.run (asyncio/runners.py:118) 10\n"
        "<module> (fastmq-broker:6);Runner.run (asyncio/runners.py:118);Connection.wrote (c.py:1) 30\n"
        "Thread._bootstrap (threading.py:1);Condition.wait (threading.py:331) 500\n"
        "garbage line\n")
    text = "\n".join(fold_summary(d / "run-w16-s128-consumer-fastmq-1-pyspy.folded"))
    assert "main thread 40 samples (other threads 500); 25.0% in the loop's poll" in text
    assert "75.0%  Connection.wrote (c.py:1)" in text
    assert "1.0 2.0 3.0" in report([d]) and "5,000" in report([d])
