"""spark_bench: the mergeable histogram, and a small end-to-end run on a local Spark."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_bench.histogram import LatencyHistogram
from spark_bench.job import collate
from spark_bench.load import LoadSpec, run_partition
from tests.support import broker_process, namesrv_process

ROOT = Path(__file__).resolve().parent.parent


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 10**10), min_size=1, max_size=300), st.lists(st.integers(0, 10**10), max_size=300))
def test_histogram_merge_and_percentiles(a, b) -> None:
    ha, hb, hall = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    ha.record_many(np.array(a))
    hb.record_many(np.array(b))
    hall.record_many(np.array(a + b))
    merged = LatencyHistogram.from_bytes(ha.to_bytes()).merge(LatencyHistogram.from_bytes(hb.to_bytes()))
    assert np.array_equal(merged.counts, hall.counts) and merged.total == len(a) + len(b)
    values = sorted(a + b)
    for p in (50, 90, 99):
        exact = values[max(0, int(np.ceil(len(values) * p / 100)) - 1)]
        got = merged.percentile(p)
        assert got <= exact and exact - got <= exact / 64 + 1   # within one log-linear bucket
    assert merged.percentile(100) == values[-1] and merged.percentile(0) == values[0]


def test_histogram_wire_form_is_small() -> None:
    h = LatencyHistogram()
    h.record_many(np.random.default_rng(1).integers(20_000, 2_000_000, 100_000))
    assert len(h.to_bytes()) < 16_000


@pytest.fixture
def namesrv_with_route(tmp_path):
    proc = namesrv_process(tmp_path).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_load_generator_without_spark(namesrv_with_route) -> None:
    spec = LoadSpec(kind="route", target=namesrv_with_route.addr, topic="NoSuchTopic", requests=200, depth=8)
    r = run_partition(0, spec.to_dict())
    # An unknown topic is answered TOPIC_NOT_EXIST: counted by code, every request answered.
    assert r["ok"] == 0 and r["errors"] == {"code 17": 200}
    report = collate([r], spec)
    assert report["errors"] == {"code 17": 200} and report["latency_us"]["p50"] > 0


@pytest.mark.spark
@pytest.mark.slow
def test_spark_job_local(namesrv_with_route, tmp_path) -> None:
    """The small end-to-end run: local[2], two tasks, collated by the driver."""
    from fastmq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig
    from fastmq.protocol.codes import RequestCode
    from fastmq.protocol.command import create_request
    from fastmq.remoting import RemotingClient
    from fastmq.remoting.loop import run

    async def register_and_run() -> dict:
        c = RemotingClient()
        try:
            body = RegisterBrokerBody({"BenchTopic": TopicConfig("BenchTopic", 4, 4)}, DataVersion())
            await c.invoke(namesrv_with_route.addr, create_request(RequestCode.REGISTER_BROKER, {
                "brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "brokerId": 0}, body.encode()), 5)
            out = tmp_path / "report.json"
            proc = subprocess.run([sys.executable, "-m", "spark_bench.job", "--master", "local[2]", "--kind", "route",
                                   "--namesrv", namesrv_with_route.addr, "--tasks", "2", "--requests", "500",
                                   "--depth", "16", "--json-out", str(out)],
                                  cwd=ROOT, capture_output=True, text=True, timeout=240)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            return json.loads(out.read_text())
        finally:
            await c.close()

    report = run(register_and_run())
    assert report["tasks"] == 2 and report["ok"] == 1000 and report["errors"] == {}
    assert report["throughput_per_s"] > 0 and report["latency_us"]["p99"] >= report["latency_us"]["p50"] > 0


def test_send_load_against_a_real_broker(tmp_path) -> None:
    ns = namesrv_process(tmp_path).start()
    broker = broker_process(tmp_path, ns.addr, brokerName="sb").start()
    try:
        spec = LoadSpec(kind="send", target=broker.addr, topic="SparkSend", requests=300, depth=16)
        r = run_partition(1, spec.to_dict())
        assert r["ok"] == 300 and r["errors"] == {}
        assert collate([r], spec)["throughput_per_s"] > 0
    finally:
        broker.stop()
        ns.stop()
