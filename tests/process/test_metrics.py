"""Prometheus metrics (``metricsExporterType=PROM``) of a real ``fastmq-broker`` and
``fastmq-namesrv``, scraped with urllib; and the stats items rocketmq-exporter reads with
VIEW_BROKER_STATS_DATA (315), in 4.9.8's body shape.

One NameServer + broker pair, both with metrics on, serves the module.
"""
from __future__ import annotations

import asyncio
import json
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.heartbeat import ConsumerData, HeartbeatData, build_subscription
from fastmq.protocol.message import decode_offset_msg_id
from fastmq.remoting import RemotingClient
from fastmq.remoting.metrics_http import HEAD_TIMEOUT_S, MAX_CONNECTIONS
from fastmq.testing import ServerProcess, broker_process, free_port, namesrv_process
from tests.support import create_topic, pull_request, send_request

TOPIC = "MetricsTopic"
GROUP = "MetricsGroup"
DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class Servers:
    def __init__(self, ns: ServerProcess, broker: ServerProcess, ns_port: int, broker_port: int) -> None:
        self.ns, self.broker = ns, broker
        self.ns_url = f"http://127.0.0.1:{ns_port}/metrics"
        self.broker_url = f"http://127.0.0.1:{broker_port}/metrics"
        self.broker_port = broker_port


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    root = tmp_path_factory.mktemp("metrics")
    (root / "ns").mkdir()
    (root / "b").mkdir()
    ns_port, broker_port = free_port(), free_port()
    with namesrv_process(root / "ns", metricsExporterType="PROM", metricsPromExporterPort=ns_port) as ns:
        with broker_process(root / "b", ns.addr, brokerClusterName="MetricsCluster", metricsExporterType="PROM",
                            metricsPromExporterPort=broker_port, autoCreateTopicEnable="false",
                            timerPrecisionMs=100) as b:
            yield Servers(ns, b, ns_port, broker_port)


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The samples of one scrape: (name, labels) -> value; every line checked against the format."""
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = frozenset(_LABEL.findall(m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def value(samples: dict, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels``; 0 when there is none."""
    want = set(labels.items())
    found = [v for (n, ls), v in samples.items() if n == name and want <= ls]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else 0.0


async def _send(client: RemotingClient, addr: str, n: int, body: bytes = b"m" * 100) -> list[str]:
    ids = []
    for i in range(n):
        r = await client.invoke(addr, send_request(TOPIC, body, queue_id=i % 2), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        ids.append(r.ext_fields["msgId"])
    return ids


async def test_traffic_lag_and_labels_move_with_sends_and_pulls(servers: Servers) -> None:
    client = RemotingClient()
    addr = servers.broker.addr
    try:
        await create_topic(client, addr, TOPIC, queues=2)
        await client.invoke(addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 0}), 5)
        before = scrape(servers.broker_url)
        await _send(client, addr, 6)
        after = scrape(servers.broker_url)
        common = {"cluster": "MetricsCluster", "node_type": "broker", "node_id": "broker-a"}
        t = {**common, "topic": TOPIC, "message_type": "normal", "is_system": "false"}
        assert value(after, "rocketmq_messages_in_total", **t) - value(before, "rocketmq_messages_in_total", **t) == 6
        grown = value(after, "rocketmq_throughput_in_total", **t) - value(before, "rocketmq_throughput_in_total", **t)
        assert 6 * 100 < grown < 6 * 400  # the stored records: bodies plus headers and properties
        g = {"topic": TOPIC, "consumer_group": GROUP, "is_retry": "false"}
        assert value(after, "rocketmq_consumer_lag_messages", **g) == 3  # queue 0's three, none consumed
        assert value(after, "rocketmq_consumer_lag_latency", **g) >= 0

        # in flight and ready count for a group online (a heartbeat), on the topics it subscribes to
        subs = [build_subscription(TOPIC, "*"), build_subscription(f"%RETRY%{GROUP}", "*")]
        hb = HeartbeatData("10.0.0.9@metrics", [], [ConsumerData(GROUP, subscriptions=subs)])
        assert (await client.invoke(addr, create_request(RequestCode.HEART_BEAT, body=hb.to_json()), 5)).code == 0
        online = scrape(servers.broker_url)
        assert value(online, "rocketmq_consumer_ready_messages", **g) == 3  # queue 0 (queue 1: no offset yet)
        assert value(online, "rocketmq_consumer_inflight_messages", **g) == 0
        assert value(online, "rocketmq_consumer_queueing_latency", **g) >= 0

        p = await client.invoke(addr, pull_request(TOPIC, 0, 0, group=GROUP), 5)
        assert p.code == ResponseCode.SUCCESS
        await client.invoke(addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 2}), 5)
        later = scrape(servers.broker_url)
        assert value(later, "rocketmq_consumer_inflight_messages", **g) == 1  # pulled to 3, committed 2
        assert value(later, "rocketmq_consumer_ready_messages", **g) == 0
        # queue 1, never pulled, waits from offset 0 (as in 5.x); its first message is that old
        assert value(later, "rocketmq_consumer_queueing_latency", **g) > 0
        # retry topics are not walked (5.x's lag calculator skips them for pull consumers)
        assert not [ls for n, ls in later if n == "rocketmq_consumer_inflight_messages"
                    and ("topic", f"%RETRY%{GROUP}") in ls]
        assert value(later, "rocketmq_messages_out_total", **g) == 3
        assert value(later, "rocketmq_throughput_out_total", **g) == len(p.body)
        assert value(later, "rocketmq_consumer_lag_messages", **g) == 1
        assert value(later, "rocketmq_topic_number", **common) >= 1
        assert value(later, "rocketmq_broker_permission", **common) == 6
        assert value(later, "fastmq_commitlog_size_bytes") > 0
        assert value(later, "fastmq_consumequeue_size_bytes") >= 6 * 20
        assert 0 <= value(later, "fastmq_disk_ratio", storage="commitlog") <= 1
        assert value(later, "rocketmq_storage_size", storage_type="local", storage_medium="disk") > 0
        # RPC latency per request code: the sends (SEND_MESSAGE_V2 310) and the pull (11)
        sends = value(later, "rocketmq_rpc_latency_count", request_code="310", response_code="0")
        assert sends >= 6
        assert value(later, "rocketmq_rpc_latency_bucket", request_code="310", response_code="0", le="+Inf") == sends
        assert value(later, "rocketmq_rpc_latency_count", request_code="11", response_code="0") >= 1
        names = {n for n, _ in later}
        for name in ("rocketmq_messages_in_total", "rocketmq_messages_out_total", "rocketmq_throughput_in_total",
                     "rocketmq_throughput_out_total", "rocketmq_consumer_lag_messages",
                     "rocketmq_consumer_lag_latency", "rocketmq_storage_flush_behind_bytes",
                     "rocketmq_storage_dispatch_behind_bytes", "rocketmq_storage_message_reserve_time",
                     "rocketmq_rpc_latency_sum", "rocketmq_consumer_group_number",
                     "rocketmq_consumer_inflight_messages", "rocketmq_consumer_ready_messages",
                     "rocketmq_consumer_queueing_latency"):
            assert name in names, name
        documented = set(re.findall(r"`((?:rocketmq|fastmq)_[a-z_]+)`", DOC.read_text()))
        undocumented = {re.sub(r"_(bucket|sum|count)$", "", n) for n in names} - documented
        assert not undocumented, sorted(undocumented)
    finally:
        await client.close()


async def test_dlq_sends_and_the_exporters_stats_items(servers: Servers) -> None:
    """A message sent back with delayLevel -1 goes to the group's DLQ: counted per group and
    original topic; and every item rocketmq-exporter asks VIEW_BROKER_STATS_DATA for answers in
    4.9.8's shape, with 4.9.8's keys."""
    client = RemotingClient()
    addr = servers.broker.addr
    try:
        await create_topic(client, addr, TOPIC, queues=2)
        ids = await _send(client, addr, 1)
        _, _, offset = decode_offset_msg_id(ids[0])
        r = await client.invoke(addr, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": offset, "group": GROUP, "delayLevel": -1, "originMsgId": ids[0], "originTopic": TOPIC}), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        samples = scrape(servers.broker_url)
        assert value(samples, "rocketmq_send_to_dlq_messages_total", consumer_group=GROUP, topic=TOPIC) == 1
        p = await client.invoke(addr, pull_request(TOPIC, 0, 0, group=GROUP), 5)  # (queue 0: _send put it there)
        assert p.code == ResponseCode.SUCCESS

        async def stats(name: str, key: str) -> dict:
            resp = await client.invoke(addr, create_request(RequestCode.VIEW_BROKER_STATS_DATA,
                                                            {"statsName": name, "statsKey": key}), 5)
            assert resp.code == ResponseCode.SUCCESS, (name, key, resp.remark)
            body = json.loads(resp.body)
            assert set(body) == {"statsMinute", "statsHour", "statsDay"}
            for window in body.values():
                assert set(window) == {"sum", "tps", "avgpt"}
            return body
        for name, key in (("TOPIC_PUT_NUMS", TOPIC), ("TOPIC_PUT_SIZE", TOPIC),
                          ("GROUP_GET_NUMS", f"{TOPIC}@{GROUP}"), ("GROUP_GET_SIZE", f"{TOPIC}@{GROUP}"),
                          ("SNDBCK_PUT_NUMS", f"{TOPIC}@{GROUP}"), ("BROKER_PUT_NUMS", "MetricsCluster"),
                          ("BROKER_GET_NUMS", "MetricsCluster")):
            await stats(name, key)
        r = await client.invoke(addr, create_request(RequestCode.VIEW_BROKER_STATS_DATA,
                                                     {"statsName": "GROUP_GET_SIZE", "statsKey": "No@Such"}), 5)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <GROUP_GET_SIZE> <No@Such> not exist")
    finally:
        await client.close()


async def test_transactions_counted_on_every_path(servers: Servers) -> None:
    """Commits and rollbacks are counted per real topic whether the end is answered or oneway
    (the Java client's), which the broker serves on its batch path; the halves still waiting
    are what was stored less what was ended."""
    from fastmq.testing.txprobe import COMMIT, ROLLBACK, TxProbe
    topic = "MetricsTx"
    client = RemotingClient()
    probe = TxProbe(servers.broker.addr, "MetricsTxGroup")
    try:
        await create_topic(client, servers.broker.addr, topic, queues=2)
        await probe.heartbeat()
        before = scrape(servers.broker_url)
        for state, oneway in ((COMMIT, False), (COMMIT, True), (ROLLBACK, False), (ROLLBACK, True), (COMMIT, True)):
            half = await probe.send_half(topic, b"tx")
            r = await probe.end(half, state, oneway=oneway)
            assert oneway or (r is not None and r.code == ResponseCode.SUCCESS), r
        await probe.send_half(topic, b"left open")
        want = {"rocketmq_commit_messages_total": 3, "rocketmq_rollback_messages_total": 2,
                "rocketmq_half_messages": 1}
        got: dict[str, float] = {}
        for _ in range(50):  # the oneway ends land shortly after they are sent (bounded: 5 s)
            after = scrape(servers.broker_url)
            got = {n: value(after, n, topic=topic) - value(before, n, topic=topic) for n in want}
            if got == want:
                break
            await asyncio.sleep(0.1)
        assert got == want
    finally:
        await probe.close()
        await client.close()


async def test_timer_figures_follow_held_and_delivered_messages(servers: Servers) -> None:
    client = RemotingClient()
    addr = servers.broker.addr
    topic = "MetricsTimerTopic"
    local = {"storage_type": "local", "storage_medium": "disk"}
    t = {**local, "topic": topic}
    try:
        await create_topic(client, addr, topic, queues=1)
        for props in ({"TIMER_DELAY_MS": "1500"}, {"TIMER_DELAY_MS": "1500"}, {"TIMER_DELAY_SEC": "3000"}):
            r = await client.invoke(addr, send_request(topic, b"t", props), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark
        deadline = time.monotonic() + 10
        held = scrape(servers.broker_url)
        while value(held, "rocketmq_timer_enqueue_total", **t) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            held = scrape(servers.broker_url)
        assert value(held, "rocketmq_timer_enqueue_total", **t) == 3
        assert value(held, "rocketmq_timer_enqueue_lag", **local) == 0
        out = value(held, "rocketmq_timer_dequeue_total", **t)
        assert value(held, "rocketmq_timing_messages", **t) == 3 - out
        if not out:  # (read before the two short ones fell due, as it should be on any sane machine)
            assert value(held, "rocketmq_timer_dequeue_lag", **local) == 3
            assert value(held, "rocketmq_timer_message_snapshot", **local, timer_bound_s="5") == 2
        # (50 minutes ahead: inside the [900 s, 3600 s) band whatever the rounding; an hour ahead
        # sits on the band's edge, and a scrape within one precision of the send put it above)
        assert value(held, "rocketmq_timer_message_snapshot", **local, timer_bound_s="3600") == 1
        assert value(held, "rocketmq_timer_message_snapshot", **local, timer_bound_s="86400") == 0

        done = held
        while value(done, "rocketmq_timer_dequeue_total", **t) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            done = scrape(servers.broker_url)
        assert value(done, "rocketmq_timer_dequeue_total", **t) == 2
        assert value(done, "rocketmq_timing_messages", **t) == 1
        assert value(done, "rocketmq_timer_dequeue_lag", **local) == 1  # the long one
        assert value(done, "rocketmq_timer_dequeue_latency", **local) == 0
        assert value(done, "rocketmq_timer_enqueue_latency", **local) == 0
        assert value(done, "rocketmq_timer_message_snapshot", **local, timer_bound_s="5") == 0
        p = await client.invoke(addr, pull_request(topic, 0, 0, group=GROUP), 5)
        assert p.code == ResponseCode.SUCCESS  # delivered to the real topic
    finally:
        await client.close()


def test_namesrv_serves_brokers_topics_and_requests(servers: Servers) -> None:
    samples = scrape(servers.ns_url)
    documented = set(re.findall(r"`((?:rocketmq|fastmq)_[a-z_]+)`", DOC.read_text()))
    assert {re.sub(r"_(bucket|sum|count)$", "", n) for n, _ in samples} <= documented
    assert value(samples, "fastmq_namesrv_brokers", cluster="MetricsCluster", node_type="nameserver") == 1
    assert value(samples, "fastmq_namesrv_topics") >= 1
    # REGISTER_BROKER (103) served at least once
    assert value(samples, "rocketmq_rpc_latency_count", request_code="103", response_code="0") >= 1


def _raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_other_paths_methods_and_hostile_clients(servers: Servers) -> None:
    port = servers.broker_port
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/nope", timeout=10)
    assert e.value.code == 404
    e.value.close()
    assert _raw(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    head = _raw(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")
    assert _raw(port, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    # a huge header: refused, nothing buffered past the limit
    assert _raw(port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 1_000_000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431 ")
    # slowloris: a head that never ends is cut off after HEAD_TIMEOUT_S, and others are served meanwhile
    slow = socket.create_connection(("127.0.0.1", port), timeout=HEAD_TIMEOUT_S + 10)
    try:
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")
        began = time.monotonic()
        assert scrape(servers.broker_url)
        for _ in range(int(HEAD_TIMEOUT_S) * 2):
            try:
                slow.sendall(b"X-a: b\r\n")
            except OSError:
                break
            time.sleep(0.5)
        slow.settimeout(HEAD_TIMEOUT_S + 5)
        try:
            assert slow.recv(100) == b""
        except ConnectionResetError:
            pass
        assert time.monotonic() - began < HEAD_TIMEOUT_S + 5
    finally:
        slow.close()
    # a flood of idle connections: at most MAX_CONNECTIONS held, the rest closed at once
    flood = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(MAX_CONNECTIONS + 4)]
    try:
        time.sleep(0.5)
        closed = 0
        for s in flood:
            s.setblocking(False)
            try:
                closed += s.recv(1) == b""
            except BlockingIOError:
                pass
            except ConnectionResetError:
                closed += 1
        assert closed >= 4
    finally:
        for s in flood:
            s.close()
    # the broker itself stayed up and serves
    assert servers.broker.alive()
    deadline = time.monotonic() + HEAD_TIMEOUT_S + 5
    while True:  # (the flood's connections are let go once the server sees them close)
        try:
            assert scrape(servers.broker_url)
            break
        except (urllib.error.URLError, ConnectionError):
            assert time.monotonic() < deadline
            time.sleep(0.2)


def test_an_exporter_type_fastmq_does_not_serve_is_refused(tmp_path: Path) -> None:
    proc = broker_process(tmp_path, "127.0.0.1:1", metricsExporterType="OTLP_GRPC")
    with pytest.raises(Exception):
        proc.start(timeout=20)
    assert "metricsExporterType=OTLP_GRPC: fastmq serves metrics only as PROM" in proc.output()
    proc.stop()


#: the keys rocketmq-exporter's BrokerRuntimeStats reads from GET_BROKER_RUNTIME_INFO with no
#: default (a missing one fails that broker's whole runtime collection), and how it parses each
_EXPORTER_LONGS = ("msgPutTotalTodayNow", "sendThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills",
                   "msgGetTotalTodayNow", "queryThreadPoolQueueSize", "bootTimestamp", "msgPutTotalYesterdayMorning",
                   "msgGetTotalYesterdayMorning", "pullThreadPoolQueueSize", "commitLogMinOffset",
                   "pullThreadPoolQueueHeadWaitTimeMills", "dispatchMaxBuffer", "brokerVersion", "pageCacheLockTimeMills",
                   "commitLogMaxOffset", "getMessageEntireTimeMax", "msgPutTotalTodayMorning", "putMessageTimesTotal",
                   "msgGetTotalTodayMorning", "sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp",
                   "putMessageEntireTimeMax", "earliestMessageTimeStamp", "remainTransientStoreBufferNumbs",
                   "queryThreadPoolQueueCapacity", "dispatchBehindBytes", "putMessageSizeTotal",
                   "sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity")
_EXPORTER_DOUBLES = ("consumeQueueDiskRatio", "commitLogDiskRatio", "putMessageAverageSize")


async def test_runtime_info_parses_as_rocketmq_exporter_parses_it(servers: Servers) -> None:
    client = RemotingClient()
    try:
        await create_topic(client, servers.broker.addr, TOPIC, queues=2)
        await _send(client, servers.broker.addr, 2)
        await asyncio.sleep(11)  # the 10 s putTps window covered: the exporter parses each TPS figure as a double
        r = await client.invoke(servers.broker.addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5)
    finally:
        await client.close()
    t = json.loads(r.body)["table"]
    for key in _EXPORTER_LONGS:
        int(t[key])
    for key in _EXPORTER_DOUBLES:
        float(t[key])
    assert t["runtime"] and t["brokerVersionDesc"]
    number, unit = t["remainHowManyDataToFlush"].split(" ")  # "<n> <unit>", the unit's first letter in "BKMGTPE"
    float(number)
    assert unit[0] in "BKMGTPE"
    for bucket in t["putMessageDistributeTime"].split(" "):
        name, count = bucket.split(":")
        assert name.startswith("[") and int(count) >= 0
    arr = t["commitLogDirCapacity"].split(" ")  # "Total : 251.9 GiB, Free : 76.0 GiB."
    float(arr[2]), float(arr[6])
    for key in ("putTps", "getMissTps", "getTransferedTps", "getTotalTps", "getFoundTps"):
        float(t[key].split(" ")[0])
    for key, value in t.items():
        if key.startswith("scheduleMessageOffset"):
            first, second = value.split(",")
            int(first), int(second)
