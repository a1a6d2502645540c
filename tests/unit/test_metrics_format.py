"""The pieces of the metrics endpoint without processes: the text format, the RPC latency
buckets, the stats items fed from the store, and the Grafana dashboard reading only names the
servers serve (as listed in docs/metrics.md)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fastmq.broker.stats import (BROKER_PUT_NUMS, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, BrokerStatsManager)
from fastmq.common.prometheus import Exposition, labels
from fastmq.errors import ConfigError
from fastmq.remoting.metrics_http import check_exporter_keys, exporter_type
from fastmq.remoting.rpc_latency import BUCKETS_MS, RpcLatency

ROOT = Path(__file__).resolve().parents[2]


def test_label_values_are_escaped() -> None:
    assert labels({"a": 'x"y\\z\nw', "b": True, "c": 3}) == '{a="x\\"y\\\\z\\nw",b="true",c="3"}'
    assert labels({}) == ""


def test_histogram_buckets_are_cumulative_with_sum_and_count() -> None:
    out = Exposition({"node_type": "broker"})
    out.histogram("h", "help", (1.0, 10.0), [({"code": 1}, [2, 3, 1], 42.5)])
    lines = out.text().decode().splitlines()
    assert lines[:2] == ["# HELP h help", "# TYPE h histogram"]
    assert lines[2:] == ['h_bucket{node_type="broker",code="1",le="1.0"} 2',
                         'h_bucket{node_type="broker",code="1",le="10.0"} 5',
                         'h_bucket{node_type="broker",code="1",le="+Inf"} 6',
                         'h_sum{node_type="broker",code="1"} 42.5',
                         'h_count{node_type="broker",code="1"} 6']


def test_rpc_latency_puts_each_time_in_its_bucket() -> None:
    lat = RpcLatency()
    for ms in (0.2, 1.0, 2.0, 9.0, 50.0, 5000.0):
        lat.observe(310, 0, ms)
    lat.observe(310, 0, 4.0, n=16)  # a batch of 16 sends timed as one
    ((lbl, counts, total),) = lat.rows()
    assert lbl["request_code"] == 310 and lbl["response_code"] == 0 and lbl["result"] == "success"
    assert len(counts) == len(BUCKETS_MS) + 1
    assert counts == [2, 1, 16, 0, 1, 1, 0, 0, 0, 1]
    assert total == pytest.approx(0.2 + 1 + 2 + 9 + 50 + 5000 + 64)


def test_store_fed_items_take_running_totals_before_each_snapshot() -> None:
    now = [1000.0]
    totals = {TOPIC_PUT_SIZE: {"T": 0}, BROKER_PUT_NUMS: {"C": 0}}
    stats = BrokerStatsManager(clock=lambda: now[0], feed=lambda: totals)
    stats.topic_put("T", 0)
    stats.sample("minute")
    for _ in range(6):
        now[0] += 10
        stats.topic_put("T", 10)
        totals[TOPIC_PUT_SIZE]["T"] += 2000
        totals[BROKER_PUT_NUMS]["C"] += 10
        stats.sample("minute")
    size = stats.figures(TOPIC_PUT_SIZE, "T", "minute")
    assert size["sum"] == 12_000 and size["tps"] == pytest.approx(200.0)
    assert size["avgpt"] == pytest.approx(200.0)  # a call per message, as incTopicPutSize counts: the mean size
    assert stats.figures(BROKER_PUT_NUMS, "C", "minute")["sum"] == 60
    assert stats.figures(TOPIC_PUT_NUMS, "T", "minute")["sum"] == 60


def test_exporter_keys() -> None:
    class Cfg:
        metricsExporterType = "prom"
        metricsPromExporterPort = 5557
    check_exporter_keys(Cfg())
    assert exporter_type("2") == "PROM" and exporter_type("0") == "DISABLE"
    Cfg.metricsExporterType = "LOG"
    with pytest.raises(ConfigError, match="fastmq serves metrics only as PROM"):
        check_exporter_keys(Cfg())
    Cfg.metricsExporterType, Cfg.metricsPromExporterPort = "PROM", 70000
    with pytest.raises(ConfigError, match="metricsPromExporterPort=70000"):
        check_exporter_keys(Cfg())


def test_the_grafana_dashboard_reads_only_served_names() -> None:
    served = set(re.findall(r"`((?:rocketmq|fastmq)_[a-z_]+)`", (ROOT / "docs" / "metrics.md").read_text()))
    dash = json.loads((ROOT / "docs" / "grafana" / "fastmq.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 15
    used = {m for e in exprs for m in re.findall(r"\b((?:rocketmq|fastmq)_[a-z_]+)", e)}
    histogram_parts = {n for n in used if n.endswith(("_bucket", "_count", "_sum"))
                       and n.rsplit("_", 1)[0] in served}
    assert used - histogram_parts <= served, sorted(used - histogram_parts - served)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
