"""``fastmq-bench run`` end to end on a real local Spark (local[2], one session for the module)
against real fastmq-namesrv / fastmq-broker processes (and redis-server when installed)."""
from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from fastmq._ext import USING_EXTENSIONS
from spark_bench import cli
from spark_bench.run.task import KILL_HOOK

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

SMALL = """\
name: {name}
topics: 1
queues_per_topic: 4
message_size: 200
producers_per_topic: {producers}
consumer_groups_per_topic: 1
consumers_per_group: {consumers}
producer_rate: {rate}
send_mode: {mode}
in_flight: {in_flight}
warmup_s: 1
duration_s: {duration}
"""

KEYS = {"schema", "run_id", "started_at", "status", "reason", "workload", "driver", "env", "window_s", "target_rate",
        "sent_ok", "errors", "received", "duplicates", "lost", "broker", "publish", "e2e", "intervals"}
ENV_KEYS = {"fastmq_version", "commit", "compiled", "python", "spark_version", "master", "executors", "cores"}
PCTS = ["p50", "p75", "p90", "p95", "p99", "p99.9", "max"]
# the suite's pure pass (FASTMQ_NO_EXTENSIONS=1) reaches the executors too: measure it, saying so
PURE = [] if USING_EXTENSIONS else ["--allow-pure"]


def workload(tmp_path: Path, name: str = "small", producers: int = 1, rate: int = 400, mode: str = "async",
             in_flight: int = 16, duration: int = 3, consumers: int = 1, extra: str = "") -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(SMALL.format(name=name, producers=producers, rate=rate, mode=mode, in_flight=in_flight,
                              duration=duration, consumers=consumers) + extra)
    return f


@pytest.fixture(scope="module")
def spark():
    s = cli._spark("local[2]", [])
    try:
        yield s
    finally:
        s.stop()


def _result(out: Path, wl: str, driver: str) -> dict:
    return json.loads((out / f"{wl}-{driver}" / "result.json").read_text())


def test_fastmq_and_raw_run_agree_with_the_broker(spark, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    wl = workload(tmp_path, rate=400, consumers=2)   # two consumers of one group in one task
    rc = cli.main(["run", str(wl), "--out", str(out), "--master", "local[2]", "--driver", "fastmq",
                   "--driver", "fastmq-raw", "--progress", *PURE], spark=spark)  # (captured: not a terminal)
    cap = capsys.readouterr()
    text = cap.out
    assert rc == 0, text + cap.err   # (the reason of a failed run is on stderr)
    assert "publish" in text and "msgs/s" in text and "[   1.0s]" in text   # the progress line
    a, b = _result(out, "small", "fastmq"), _result(out, "small", "fastmq-raw")
    assert a["run_id"] == b["run_id"]
    for r in (a, b):
        assert KEYS <= set(r) and ENV_KEYS <= set(r["env"]) and r["schema"] == 1
        assert r["status"] == "ok" and r["reason"] is None, r["reason"]
        assert r["env"]["compiled"] is USING_EXTENSIONS and r["env"]["cores"] == 2 and r["env"]["fastmq_version"]
        assert r["workload"]["name"] == "small" and r["workload"]["producer_rate"] == 400
        # every acknowledged message stored and consumed once
        assert r["sent_ok"] > 0 and r["errors"] == {}
        assert r["sent_ok"] == r["broker"]["stored"] == r["broker"]["consumed"] == r["received"]
        assert r["lost"] == 0 and r["duplicates"] == 0
        # the broker's own count over the window agrees with the reported throughput (10 %)
        in_window = r["publish"]["msgs_per_s"] * r["window_s"]
        assert abs(r["broker"]["window"] - in_window) <= 0.1 * in_window
        assert 300 <= r["publish"]["msgs_per_s"] <= 500 and r["target_rate"] == 400
        for k in ("publish", "e2e"):
            lat = r[k]["latency_us"]
            assert list(lat) == PCTS and all(lat[p] <= lat[q] for p, q in zip(PCTS, PCTS[1:])) and lat["p50"] > 0
        assert len(r["intervals"]) == 3 and {"t_s", "publish_msgs_per_s", "e2e_msgs_per_s", "publish_p99_us",
                                             "e2e_p99_us", "errors"} == set(r["intervals"][0])
        d = out / f"small-{r['driver']}"
        for f in ("throughput.png", "percentiles.png", "cdf.png", "report.html"):
            assert (d / f).stat().st_size > 0
        rows = spark.read.parquet(str(d / "intervals.parquet")).collect()
        assert len(rows) == 2 * 3 and {x.task for x in rows} == {0, 1}
        assert sum(x.publish_msgs for x in rows) == round(r["publish"]["msgs_per_s"] * r["window_s"])


def test_plain_listener_receives_everything_once(spark, tmp_path: Path) -> None:
    """``listener: plain``: the push consumer's listener is a plain function on its consume
    threads (what a blocking PushConsumer runs); receipts still reach the recorder, each once."""
    out = tmp_path / "out"
    rc = cli.main(["run", str(workload(tmp_path, name="plain", extra="listener: plain\n")), "--out", str(out),
                   "--driver", "fastmq", *PURE], spark=spark)
    r = _result(out, "plain", "fastmq")
    assert rc == 0, r["reason"]
    assert r["workload"]["listener"] == "plain" and r["status"] == "ok"
    assert r["sent_ok"] > 0 and r["sent_ok"] == r["received"] == r["broker"]["stored"] == r["broker"]["consumed"]
    assert r["lost"] == 0 and r["duplicates"] == 0 and r["e2e"]["latency_us"]["p50"] > 0


def test_more_tasks_than_slots_is_refused(spark, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    rc = cli.main(["run", str(workload(tmp_path, producers=4)), "--out", str(out), "--tasks", "3", *PURE], spark=spark)
    assert rc == 1
    r = _result(out, "small", "fastmq")
    assert r["status"] == "failed" and "needs 3 tasks at once but the cluster has 2 task slots" in r["reason"]
    assert r["publish"] is None and r["sent_ok"] is None
    assert "needs 3 tasks" in capsys.readouterr().out


def test_a_task_killed_mid_run_fails_the_run(spark, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv(KILL_HOOK, "0:1")
    out = tmp_path / "out"
    rc = cli.main(["run", str(workload(tmp_path, duration=4)), "--out", str(out), *PURE], spark=spark)
    assert rc == 1
    r = _result(out, "small", "fastmq")
    assert r["status"] == "failed" and "ended before finishing its load" in r["reason"], r["reason"]
    # the dead task is named with where it ran (issue 31): its host, address and process
    assert r["reason"].startswith(f"task 0 ({socket.gethostname()}, ") and ", pid " in r["reason"], r["reason"]
    assert r["publish"] is None          # partial figures are not reported as the run's
    assert r["env"]["compiled"] is None and r["env"]["commit"]   # unknown, not pure; the driver's commit
    assert r["shape"]["tasks"] == 2 and r["shape"]["slots"] == 2 and r["shape"]["tasks_from"] == "slots"
    assert "ended before finishing" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed "
                    "(apt-get install redis-server): the redis-streams driver starts one locally")
def test_redis_streams_end_to_end(spark, tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = cli.main(["run", str(workload(tmp_path, mode="sync", in_flight=1, rate=300)), "--out", str(out),
                   "--driver", "redis-streams", *PURE], spark=spark)
    r = _result(out, "small", "redis-streams")
    assert rc == 0, r["reason"]
    assert r["status"] == "ok" and r["sent_ok"] == r["received"] == r["broker"]["stored"] == r["broker"]["consumed"]
    assert r["lost"] == 0 and r["publish"]["latency_us"]["p50"] > 0 and r["e2e"]["latency_us"]["p99"] > 0


def test_broker_gone_mid_run_is_not_ok(spark, tmp_path: Path, capsys) -> None:
    """The cluster's only broker is killed during the window: the run ends, not ``ok``, with the
    reason, and the command exits non-zero."""
    import threading
    import time

    from fastmq.testing import broker_process, namesrv_process
    ns = namesrv_process(tmp_path).start()
    broker = broker_process(tmp_path, ns.addr, brokerName="gone").start()
    try:
        def kill_later() -> None:
            # killed once the run's topic exists and load has begun (bounded wait)
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and "[   1.0s]" not in capsys.readouterr().out:
                time.sleep(0.2)
            broker.kill()
        killer = threading.Thread(target=kill_later, daemon=True)
        killer.start()
        out = tmp_path / "out"
        rc = cli.main(["run", str(workload(tmp_path, duration=4)), "--out", str(out), "--namesrv", ns.addr,
                       "--progress", *PURE], spark=spark)  # (the killer waits for a progress line)
        killer.join(10)
        r = _result(out, "small", "fastmq")
        assert rc == 1 and r["status"] in ("failed", "partial") and r["reason"], r
        assert sum(r["errors"].values()) > 0 or "broker" in r["reason"]
    finally:
        broker.stop()
        ns.stop()


def test_a_broker_killed_mid_run_is_named_not_reported_as_loss(spark, tmp_path: Path, capsys, monkeypatch) -> None:
    """Issue 31 (3): the broker gone during the window is the reason, with when; not 'lost' messages."""
    import signal

    from spark_bench.run import cluster, control

    started, progress = cluster.start_fastmq, control.ControlServer._print
    brokers = []

    def start_and_keep(base: Path, flush: str = "ASYNC_FLUSH"):  # type: ignore[no-untyped-def]
        ns, broker = started(base, flush)
        brokers.append(broker)
        return ns, broker

    def kill_at_first_interval(self, i: int) -> None:  # type: ignore[no-untyped-def]
        progress(self, i)
        if i == 0:   # 1 s into the window
            brokers[0].stop(sig=signal.SIGKILL)
    monkeypatch.setattr(cluster, "start_fastmq", start_and_keep)
    monkeypatch.setattr(control.ControlServer, "_print", kill_at_first_interval)
    out = tmp_path / "out"
    rc = cli.main(["run", str(workload(tmp_path, duration=4)), "--out", str(out), "--progress", *PURE],
                  spark=spark)  # (the kill rides on the first progress line)
    assert rc == 1
    r = _result(out, "small", "fastmq")
    assert r["status"] == "failed" and "broker 127.0.0.1:" in r["reason"] and "unreachable since t=" in r["reason"], \
        r["reason"]
    assert "never reached their consumer group" not in r["reason"]
    assert r["left_behind"]["topics"] and "unreachable" in capsys.readouterr().out
