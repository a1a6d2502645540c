"""The stats items rocketmq-exporter reads with VIEW_BROKER_STATS_DATA (315), from fastmq's broker
and from Apache RocketMQ 4.9.8's, after the same traffic: the same answer codes, the same body
shape, the same refusal text (opt-in, as the other Java tests are): set ``FASTMQ_JAVA_NAMESRV``
to the NameServer of a running Apache cluster (see /work/java498/READY, or
``tests/interop/test_transaction_apache.py``).
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from fastmq.protocol.bodies import loads_lenient
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.message import decode_offset_msg_id
from fastmq.remoting import RemotingClient
from fastmq.testing import running_cluster
from tests.support import create_topic, pull_request, send_request

JAVA_NAMESRV = os.environ.get("FASTMQ_JAVA_NAMESRV", "")

pytestmark = [pytest.mark.java_rocketmq, pytest.mark.slow,
              pytest.mark.skipif(not JAVA_NAMESRV, reason="FASTMQ_JAVA_NAMESRV (an Apache RocketMQ cluster) not set")]


async def _broker_of(client: RemotingClient, namesrv: str) -> tuple[str, str]:
    """(the first master's address, its cluster name) from GET_BROKER_CLUSTER_INFO."""
    r = await client.invoke(namesrv, create_request(RequestCode.GET_BROKER_CLUSTER_INFO, {}), 10)
    assert r.code == ResponseCode.SUCCESS, r.remark
    body = loads_lenient(r.body)  # (fastjson writes the broker ids as bare numbers)
    cluster, names = next(iter(body["clusterAddrTable"].items()))
    addrs = body["brokerAddrTable"][sorted(names)[0]]["brokerAddrs"]
    return addrs.get("0") or addrs.get(0), cluster


async def _shape_after_traffic(client: RemotingClient, namesrv: str) -> dict[str, object]:
    """Each item's answer (code, and the body's keys per window, or the remark) after three sends,
    a pull and a send-back to the DLQ, on the cluster at ``namesrv``."""
    addr, cluster = await _broker_of(client, namesrv)
    topic, group = f"Exp_{uuid.uuid4().hex[:8]}", f"ExpG_{uuid.uuid4().hex[:8]}"
    await create_topic(client, addr, topic, queues=1)
    ids = []
    for i in range(3):
        r = await client.invoke(addr, send_request(topic, b"exporter %d" % i), 10)
        assert r.code == ResponseCode.SUCCESS, r.remark
        ids.append(r.ext_fields["msgId"])
    p = await client.invoke(addr, pull_request(topic, 0, 0, group=group), 10)
    assert p.code == ResponseCode.SUCCESS, p.remark
    _, _, offset = decode_offset_msg_id(ids[0])
    r = await client.invoke(addr, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": offset, "group": group, "delayLevel": -1, "originMsgId": ids[0], "originTopic": topic}), 10)
    assert r.code == ResponseCode.SUCCESS, r.remark
    out: dict[str, object] = {}
    for name, key in (("TOPIC_PUT_NUMS", topic), ("TOPIC_PUT_SIZE", topic), ("GROUP_GET_NUMS", f"{topic}@{group}"),
                      ("GROUP_GET_SIZE", f"{topic}@{group}"), ("SNDBCK_PUT_NUMS", f"{topic}@{group}"),
                      ("BROKER_PUT_NUMS", cluster), ("BROKER_GET_NUMS", cluster), ("GROUP_GET_SIZE", "No@Such")):
        r = await client.invoke(addr, create_request(RequestCode.VIEW_BROKER_STATS_DATA,
                                                     {"statsName": name, "statsKey": key}), 10)
        if r.code != ResponseCode.SUCCESS:
            out[f"{name} {key.split('@')[0] if key == 'No@Such' else ''}"] = (r.code, r.remark.replace(key, "<key>"))
            continue
        body = json.loads(r.body)
        # the windows' keys and each value's JSON type (sum a long, tps and avgpt doubles)
        out[name] = (r.code, {w: sorted((k, type(x).__name__) for k, x in v.items()) for w, v in sorted(body.items())})
    return out


async def test_the_exporters_stats_items_answer_as_apache_does(tmp_path: Path) -> None:
    client = RemotingClient()
    try:
        apache = await _shape_after_traffic(client, JAVA_NAMESRV)
        with running_cluster(tmp_path) as (ns, _broker):
            ours = await _shape_after_traffic(client, ns.addr)
    finally:
        await client.close()
    assert ours == apache


async def _runtime_keys(client: RemotingClient, namesrv: str) -> set[str]:
    addr, _ = await _broker_of(client, namesrv)
    r = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 10)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return set(json.loads(r.body)["table"])


async def test_runtime_info_has_every_key_apache_gives(tmp_path: Path) -> None:
    """GET_BROKER_RUNTIME_INFO (28), which the exporter parses without defaults for most keys:
    every key 4.9.8 gives but two fastmq does not measure (putLatency99/999, read by the exporter
    with a default) and the per-path disk ratio of a multi-path commit log."""
    client = RemotingClient()
    try:
        apache = await _runtime_keys(client, JAVA_NAMESRV)
        with running_cluster(tmp_path) as (ns, _broker):
            ours = await _runtime_keys(client, ns.addr)
    finally:
        await client.close()
    missing = {k for k in apache - ours if not k.startswith("commitLogDiskRatio_")}
    assert missing == {"putLatency99", "putLatency999"}
