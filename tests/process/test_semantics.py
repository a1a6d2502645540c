"""Names, refusals and honest answers, against real ``fastmq-namesrv`` / ``fastmq-broker`` processes.

Each test names the failure it guards against (issue 15, items 4, 6 and 8): a group name with
``../`` that wrote files outside the store; a long group name whose send-back blocked a delay
level for everyone; transactional half messages, SQL92 subscriptions, brokerPermission and
aclEnable that were answered with success but not done; a hash selector that differed per
process; a route with 2^31-1 queues that killed every client reading it.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastmq.errors import BadRouteError, NoRouteError
from fastmq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.heartbeat import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from fastmq.protocol.message import Message, decode_records
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster, ServerProcess, broker_process, namesrv_process
from tests.process.helpers import create_topic, send_request, update_broker_config

FAST_LEVELS = " ".join(["1s"] * 18)
pytestmark = pytest.mark.fastmq_cluster(broker_conf={"messageDelayLevel": FAST_LEVELS})
MARK = "zz9semantics"
TOPIC_CHARS = "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
TOPIC_LONG = "The specified topic is longer than topic max length."
GROUP_LONG = "the specified group is longer than group max length 255."


def group_chars(g: str) -> str:
    return f"the specified group[{g}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"


def pull_request(topic: str, queue_id: int = 0, offset: int = 0, *, group: str = "CG_SEM",
                 expr: str = "*", etype: str | None = None, with_sub: bool = True):
    f = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
         "sysFlag": 0x4 if with_sub else 0, "commitOffset": 0, "suspendTimeoutMillis": 0, "subVersion": 0,
         "subscription": expr}
    if etype is not None:
        f["expressionType"] = etype
    return create_request(RequestCode.PULL_MESSAGE, f)


def heartbeat(group: str, topic: str, *, etype: str = "TAG", producer: str | None = None) -> bytes:
    sub = SubscriptionData(topic, "a > 1" if etype != "TAG" else "*", [] if etype != "TAG" else ["*"], [], 1,
                           expression_type=etype)
    hb = HeartbeatData("127.0.0.1@sem", [ProducerData(producer)] if producer else [],
                       [ConsumerData(group, subscriptions=[sub])])
    return hb.to_json()


async def route(client: RemotingClient, ns_addr: str, topic: str):
    return await client.invoke(ns_addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)


async def poll(pred, seconds: float, every: float = 0.1):
    """Await ``pred()`` (a coroutine function) until truthy or ``seconds`` pass (bounded); its last value."""
    deadline = time.monotonic() + seconds
    while True:
        v = await pred()
        if v or time.monotonic() > deadline:
            return v
        await asyncio.sleep(every)


def escaped_files(root: Path) -> list[Path]:
    """Files or directories named with MARK anywhere under ``root`` or directly beside it."""
    hits = [p for p in root.rglob(f"*{MARK}*")]
    for up in (root.parent, root.parent.parent):
        hits += [p for p in up.glob(f"*{MARK}*")]
    return hits


# ------------------------------------------------------------------ names

HOSTILE_TOPICS = [(f"../../../{MARK}t1", TOPIC_CHARS), (f"a/{MARK}", TOPIC_CHARS), ("..", TOPIC_CHARS),
                  (f"{MARK} sp", TOPIC_CHARS), ("tópico", TOPIC_CHARS), ("x" * 128, TOPIC_LONG),
                  (f"%RETRY%../../../../{MARK}t2", TOPIC_CHARS)]
HOSTILE_GROUPS = [f"../../../../{MARK}g1", f"../../../{MARK}g2", f"a\\{MARK}", "g\n1", "g" * 256]


def group_remark(g: str) -> str:
    return GROUP_LONG if len(g) > 255 else group_chars(g)


async def test_hostile_names_refused_on_every_request_and_nothing_leaves_the_store(fastmq_cluster, client) -> None:
    """Guards: a group name with ``../`` wrote consume-queue files outside the store."""
    ns, broker = fastmq_cluster.namesrv, fastmq_cluster.brokers[0]
    root = broker.workdir  # the directory holding its store
    a = broker.addr
    for topic, remark in HOSTILE_TOPICS:
        for req in (send_request(topic), pull_request(topic),
                    create_request(RequestCode.QUERY_CONSUMER_OFFSET,
                                   {"consumerGroup": "CG_SEM", "topic": topic, "queueId": 0}),
                    create_request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                   {"consumerGroup": "CG_SEM", "topic": topic, "queueId": 0, "commitOffset": 5}),
                    create_request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": 0}),
                    create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1,
                        "perm": 6, "topicFilterType": "SINGLE_TAG"}),
                    create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})):
            r = await client.invoke(a, req, 5)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), (req.code, topic, r.remark)
        r = await client.invoke(a, create_request(RequestCode.HEART_BEAT, {}, heartbeat("CG_SEM", topic)), 5)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), topic
        body = json.dumps({"consumerGroup": "CG_SEM", "clientId": "c", "onlyThisBroker": True,
                           "mqSet": [{"topic": topic, "brokerName": "broker-a", "queueId": 0}]})
        r = await client.invoke(a, create_request(RequestCode.LOCK_BATCH_MQ, {}, body.encode()), 5)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), topic

    await create_topic(client, a, "SemNames")
    sent = await client.invoke(a, send_request("SemNames", b"victim"), 5)
    assert sent.code == ResponseCode.SUCCESS
    phys = int(sent.ext_fields["msgId"][-16:], 16)
    for g in HOSTILE_GROUPS:
        remark = group_remark(g)
        back = create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": phys, "group": g, "delayLevel": 1, "originMsgId": sent.ext_fields["msgId"],
            "originTopic": "SemNames", "unitMode": "false", "maxReconsumeTimes": 16})
        for req in (back, pull_request("SemNames", group=g), send_request("SemNames", group=g),
                    create_request(RequestCode.QUERY_CONSUMER_OFFSET,
                                   {"consumerGroup": g, "topic": "SemNames", "queueId": 0}),
                    create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": g}),
                    create_request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": g}),
                    create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                                   json.dumps({"groupName": g}).encode())):
            r = await client.invoke(a, req, 5)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), (req.code, g, r.remark)
        for code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
            body = json.dumps({"consumerGroup": g, "clientId": "c", "onlyThisBroker": True,
                               "mqSet": [{"topic": "SemNames", "brokerName": "broker-a", "queueId": 0}]})
            r = await client.invoke(a, create_request(code, {}, body.encode()), 5)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), (code, g, r.remark)
        for hb in (heartbeat(g, "SemNames"), heartbeat("CG_SEM", "SemNames", producer=g)):
            r = await client.invoke(a, create_request(RequestCode.HEART_BEAT, {}, hb), 5)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), g

    # the broker is still up, took nothing and lost nothing, and no file escaped the store
    p = await client.invoke(a, pull_request("SemNames"), 5)
    assert p.code == ResponseCode.SUCCESS and [m.body for m in decode_records(p.body)] == [b"victim"]
    assert escaped_files(root) == []
    config_dir = root / "store" / "config"
    # metadata is written in the background a moment after a change (coalesced): wait for it
    assert await poll(lambda: asyncio.sleep(0, (config_dir / "subscriptionGroup.json").exists()
                                            and (config_dir / "topics.json").exists()), 10)
    groups = json.loads((config_dir / "subscriptionGroup.json").read_text())
    assert not any(MARK in g or len(g) > 255 for g in groups["subscriptionGroupTable"])
    topics = json.loads((root / "store" / "config" / "topics.json").read_text())["topicConfigTable"]
    assert not any(MARK in t or len(t) > 127 for t in topics)


async def test_reserved_topics_are_refused(fastmq_cluster: EmbeddedCluster, client) -> None:
    """4.9's refusals for topics the broker writes itself, and for system topics by admin."""
    broker = fastmq_cluster.brokers[0]
    for topic in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC"):
        r = await client.invoke(broker.addr, send_request(topic), 5)
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
    for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_mine"):
        r = await create_topic(client, broker.addr, topic)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        r = await client.invoke(broker.addr, create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}), 5)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")


def test_clients_refuse_illegal_group_names() -> None:
    """The broadcast offset store keeps a directory per group on the client's disk."""
    from fastmq.aio import Producer, PushConsumer
    from fastmq.errors import MessageValidationError

    for make in (Producer, PushConsumer):
        with pytest.raises(MessageValidationError, match=r"the specified group\[\.\./x\] contains illegal"):
            make("../x", namesrv_addr="127.0.0.1:1")


async def test_long_legal_group_never_blocks_a_delay_level(fastmq_cluster: EmbeddedCluster, client) -> None:
    """Guards: a send-back for a group of 121+ characters parked a message whose %RETRY% topic
    the store could not take, and the delay level retried it for ever, holding everyone's."""
    ns, broker = fastmq_cluster.namesrv, fastmq_cluster.brokers[0]
    a = broker.addr
    long_group = "L" * 200  # legal (<= 255) but %RETRY%+group is 207 > 127 characters
    await create_topic(client, a, "SemDelay")
    # its consumers are served: a heartbeat naming the group and its retry topic is accepted
    r = await client.invoke(a, create_request(RequestCode.HEART_BEAT, {},
                                              heartbeat(long_group, f"%RETRY%{long_group}")), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    r = await client.invoke(a, pull_request(f"%RETRY%{long_group}", group=long_group), 5)
    assert r.code == ResponseCode.TOPIC_NOT_EXIST, r.remark

    sent = [await client.invoke(a, send_request("SemDelay", f"m{i}".encode()), 5) for i in range(2)]
    offs = [int(s.ext_fields["msgId"][-16:], 16) for s in sent]

    def back(group: str, off: int):
        return create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": off, "group": group, "delayLevel": 1, "originTopic": "SemDelay", "unitMode": "false",
            "maxReconsumeTimes": 16})

    r = await client.invoke(a, back(long_group, offs[0]), 5)
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    assert r.remark.startswith(f"the topic[%RETRY%{long_group}] of group[{long_group}] is longer than topic max "
                               "length 127")
    # the level goes on: an ordinary group's message sent back at the same level arrives
    r = await client.invoke(a, back("CG_SEM_OK", offs[1]), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark

    async def arrived():
        p = await client.invoke(a, pull_request("%RETRY%CG_SEM_OK", group="CG_SEM_OK"), 5)
        return p.code == ResponseCode.SUCCESS and [m.body for m in decode_records(p.body)]

    assert await poll(arrived, 15) == [b"m1"]


# ------------------------------------------------------------------ refusals

async def test_transactional_half_message_is_held_not_delivered(fastmq_cluster: EmbeddedCluster, client) -> None:
    """Guards: a half message got SEND_OK and was delivered at once, never committed nor rolled back.
    Now a half (TRAN_MSG=true, as 4.9 reads it) goes to the half topic and the real topic stays
    empty until END_TRANSACTION commits it; a prepared sysFlag without the property is refused."""
    broker = fastmq_cluster.brokers[0]
    a = broker.addr
    await create_topic(client, a, "SemTx")
    forbidden = "the broker[127.0.0.1] sending transaction message is forbidden"
    for req in (send_request("SemTx", props={"TRAN_MSG": "true", "PGROUP": "PG_SEM"}, sys_flag=0x4),
                send_request("SemTx", props={"TRAN_MSG": "TRUE", "PGROUP": "PG_SEM"})):  # the property alone
        r = await client.invoke(a, req, 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
    r = await client.invoke(a, send_request("SemTx", sys_flag=0x4), 5)  # the flag alone
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, forbidden)
    for q in range(4):
        r = await client.invoke(a, create_request(RequestCode.GET_MAX_OFFSET, {"topic": "SemTx", "queueId": q}), 5)
        assert r.ext_fields["offset"] == "0"  # nothing visible in the real topic
    end = create_request(RequestCode.END_TRANSACTION, {
        "producerGroup": "PG_SEM", "tranStateTableOffset": 0, "commitLogOffset": 1 << 40, "commitOrRollback": 8,
        "fromTransactionCheck": "false", "msgId": "X", "transactionId": "X"})
    r = await client.invoke(a, end, 5)  # no record there
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    # an ordinary message still goes through
    assert (await client.invoke(a, send_request("SemTx"), 5)).code == ResponseCode.SUCCESS


async def test_sql92_subscription_is_refused(fastmq_cluster: EmbeddedCluster, client) -> None:
    """Guards: a SQL92 subscription was answered by delivering every message unfiltered."""
    broker = fastmq_cluster.brokers[0]
    a = broker.addr
    await create_topic(client, a, "SemSql")
    assert (await client.invoke(a, send_request("SemSql", b"s"), 5)).code == ResponseCode.SUCCESS
    text = "The broker does not support consumer to filter message by SQL92"
    check = create_request(RequestCode.CHECK_CLIENT_CONFIG, {}, json.dumps({
        "clientId": "c", "group": "CG_SQL", "subscriptionData": {
            "topic": "SemSql", "subString": "a > 1", "expressionType": "SQL92", "tagsSet": [], "codeSet": []}}).encode())
    r = await client.invoke(a, check, 5)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, text)
    r = await client.invoke(a, pull_request("SemSql", group="CG_SQL", expr="a > 1", etype="SQL92"), 5)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, text)
    # 4.9 registers it at heartbeat; the pulls that use the registered subscription are refused
    r = await client.invoke(a, create_request(RequestCode.HEART_BEAT, {}, heartbeat("CG_SQL", "SemSql",
                                                                                   etype="SQL92")), 5)
    assert r.code == ResponseCode.SUCCESS
    r = await client.invoke(a, pull_request("SemSql", group="CG_SQL", with_sub=False), 5)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, text)
    # TAG subscriptions are unaffected
    r = await client.invoke(a, pull_request("SemSql", group="CG_SQL", etype="TAG"), 5)
    assert r.code == ResponseCode.SUCCESS


async def test_broker_permission_is_honoured(fastmq_cluster: EmbeddedCluster, client) -> None:
    """Guards: brokerPermission 4 or 0 neither stopped sends nor reached the routes."""
    from fastmq.aio import Producer

    ns, broker = fastmq_cluster.namesrv, fastmq_cluster.brokers[0]
    a = broker.addr
    await create_topic(client, a, "SemPerm")
    await create_topic(client, a, "SemPermOrder", order=True)
    assert (await client.invoke(a, send_request("SemPerm", b"before"), 5)).code == ResponseCode.SUCCESS
    for _ in range(2):  # the second takes the send fast path, which must hear of the permission change
        assert (await client.invoke(a, send_request("SemPermOrder", b"before"), 5)).code == ResponseCode.SUCCESS
    await update_broker_config(client, a, brokerPermission=4)
    try:
        # 4.9's msgCheck: an order topic is refused; any other send that still arrives is stored
        r = await client.invoke(a, send_request("SemPermOrder", b"refused"), 5)
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION,
                                      "the broker[127.0.0.1] sending message is forbidden")
        r = await client.invoke(a, send_request("SemPerm", b"stale route"), 5)
        assert r.code == ResponseCode.SUCCESS

        async def perm_in_route():
            rt = await route(client, ns.addr, "SemPerm")
            return [q["perm"] for q in json.loads(rt.body)["queueDatas"]] == [4]

        assert await poll(perm_in_route, 10)
        # a client keeps away from a broker that may not be written
        async with Producer("PG_SEM_PERM", namesrv_addr=ns.addr, retry_times_when_send_failed=0) as p:
            with pytest.raises(NoRouteError, match="No route info of this topic"):
                await p.send(Message("SemPerm", b"nowhere"))
        p2 = await client.invoke(a, pull_request("SemPerm"), 5)  # reads go on
        assert p2.code == ResponseCode.SUCCESS and [m.body for m in decode_records(p2.body)] == [b"before",
                                                                                                b"stale route"]

        await update_broker_config(client, a, brokerPermission=2)
        r = await client.invoke(a, pull_request("SemPerm"), 5)
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION,
                                      "the broker[127.0.0.1] pulling message is forbidden")
    finally:
        await update_broker_config(client, a, brokerPermission=6)
    assert (await client.invoke(a, send_request("SemPerm", b"after"), 5)).code == ResponseCode.SUCCESS


def run_to_exit(proc: ServerProcess, seconds: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(proc.argv, env=proc.env, cwd=proc.workdir, capture_output=True, text=True,
                          timeout=seconds)


def test_acl_file_that_does_not_parse_refuses_to_start(tmp_path: Path) -> None:
    """Guards: aclEnable=true was accepted and ignored (every request served unauthenticated);
    now a broker whose ACL file cannot be read does not start open."""
    bad = tmp_path / "plain_acl.yml"
    bad.write_text("accounts: [ {accessKey: short\n")
    proc = broker_process(tmp_path, "127.0.0.1:1", aclEnable="true", aclFile=bad)
    done = run_to_exit(proc)
    assert done.returncode != 0
    assert f"ACL file {bad}" in done.stderr + done.stdout
    assert not (tmp_path / "store" / "commitlog").exists()  # it stopped before touching the store


async def test_acl_admin_codes_refused_without_acl(fastmq_cluster: EmbeddedCluster, client) -> None:
    """Guards: ACL admin codes answered success with nothing checked or written."""
    addr = fastmq_cluster.brokers[0].addr
    r = await client.invoke(addr, create_request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
        "accessKey": "RocketMQ2", "secretKey": "12345678"}), 5)
    assert r.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED and "aclEnable=false" in r.remark
    r = await client.invoke(addr, create_request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}), 5)
    assert r.code == ResponseCode.SYSTEM_ERROR and "aclEnable=false" in r.remark


# ------------------------------------------------------------------ queue counts

async def test_broker_refuses_topic_queue_counts_out_of_range(fastmq_cluster: EmbeddedCluster, client) -> None:
    """Guards: a topic with 2^31-1 queues was created and registered."""
    ns, broker = fastmq_cluster.namesrv, fastmq_cluster.brokers[0]
    for n in (2 ** 31 - 1, 1025, 0, -1):
        r = await create_topic(client, broker.addr, "SemQueues", queues=n)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark == (f"the topic[SemQueues] readQueueNums {n} is out of range, allowing only 1..1024 "
                            "(the broker's maxTopicQueueNums)")
    assert (await route(client, ns.addr, "SemQueues")).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await create_topic(client, broker.addr, "SemQueues", queues=1024)).code == ResponseCode.SUCCESS
    # auto-creation on send: a client's huge count is clipped to TBW102's (8); none or fewer is refused
    for n, code in ((0, ResponseCode.SYSTEM_ERROR), (-3, ResponseCode.SYSTEM_ERROR),
                    (2 ** 31 - 1, ResponseCode.SUCCESS)):
        req = send_request(f"SemAuto{n}".replace("-", "m"))
        req.ext_fields["d"] = str(n)
        r = await client.invoke(broker.addr, req, 5)
        assert r.code == code, r.remark
        if code != ResponseCode.SUCCESS:
            assert r.remark == (f"the topic[SemAuto{n}] cannot be created with defaultTopicQueueNums {n}, "
                                "allowing only 1..1024").replace("SemAuto-", "SemAutom")
    async def auto_route():
        rt = await route(client, ns.addr, f"SemAuto{2 ** 31 - 1}")
        return rt.code == ResponseCode.SUCCESS and [q["writeQueueNums"] for q in json.loads(rt.body)["queueDatas"]]

    assert await poll(auto_route, 10) == [8]


_REGISTRATIONS = itertools.count(1)


def _register(topics: dict[str, TopicConfig], addr: str = "127.0.0.1:19911", name: str = "sem-fake"):
    # the counter moves the data version on every call: two registrations inside one millisecond
    # with equal versions are, rightly, "unchanged" to the NameServer, which then keeps the old topics
    body = RegisterBrokerBody(topics, DataVersion(int(time.time() * 1000), next(_REGISTRATIONS))).encode(False)
    return create_request(RequestCode.REGISTER_BROKER, {
        "brokerName": name, "brokerAddr": addr, "clusterName": "SemCluster", "haServerAddr": "127.0.0.1:19912",
        "brokerId": 0, "compressed": "false"}, body)


async def test_namesrv_drops_insane_queue_counts_and_keeps_the_broker(tmp_path: Path) -> None:
    """Guards: a NameServer accepted a topic with 2^31-1 queues and every client reading it died."""
    ns = namesrv_process(tmp_path).start()
    c = RemotingClient()
    try:
        huge = TopicConfig("SemHuge", 2 ** 31 - 1, 2 ** 31 - 1, 6)
        r = await c.invoke(ns.addr, _register({"SemHuge": huge, "SemSane": TopicConfig("SemSane", 4, 4, 6)}), 5)
        assert r.code == ResponseCode.SUCCESS
        assert (await route(c, ns.addr, "SemHuge")).code == ResponseCode.TOPIC_NOT_EXIST
        ok = await route(c, ns.addr, "SemSane")
        assert ok.code == ResponseCode.SUCCESS
        assert json.loads(ok.body)["brokerDatas"][0]["brokerName"] == "sem-fake"
        # a later registration that fixes the topic is taken; one that breaks it again drops it
        r = await c.invoke(ns.addr, _register({"SemHuge": TopicConfig("SemHuge", 8, 8, 6)}), 5)
        assert (await route(c, ns.addr, "SemHuge")).code == ResponseCode.SUCCESS
        r = await c.invoke(ns.addr, _register({"SemHuge": TopicConfig("SemHuge", 8, -5, 6)}), 5)
        assert r.code == ResponseCode.SUCCESS
        assert (await route(c, ns.addr, "SemHuge")).code == ResponseCode.TOPIC_NOT_EXIST
        info = await c.invoke(ns.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO, {}), 5)
        assert "sem-fake" in info.body.decode()
    finally:
        await c.close()
        assert ns.stop() == 0
    assert "outside 0..1024 (maxTopicQueueNums)" in (tmp_path / "ns.log").read_text()


async def test_client_refuses_a_route_with_too_many_queues(tmp_path: Path) -> None:
    """Guards: a Producer reading a route with billions of queues died of MemoryError."""
    from fastmq.aio import Producer

    # this NameServer accepts up to 65535 queues; the client's own bound (1024) must hold
    ns = namesrv_process(tmp_path, maxTopicQueueNums=65535).start()
    c = RemotingClient()
    try:
        r = await c.invoke(ns.addr, _register({"SemWide": TopicConfig("SemWide", 60000, 60000, 6),
                                               "SemNarrow": TopicConfig("SemNarrow", 2, 2, 6)}), 5)
        assert r.code == ResponseCode.SUCCESS
        async with Producer("PG_SEM_ROUTE", namesrv_addr=ns.addr, retry_times_when_send_failed=0,
                            send_msg_timeout=1000) as p:
            with pytest.raises(BadRouteError, match=r"gives broker sem-fake 60000 read and 60000 write queues, "
                                                    r"outside 0..1024 \(max_topic_queue_nums\)"):
                await p.send(Message("SemWide", b"x"))
            # the client stays healthy: another topic's route is used (its fake broker is not
            # there, so the send itself fails on connecting, not on the route)
            with pytest.raises(Exception) as exc:
                await p.send(Message("SemNarrow", b"x"))
            assert not isinstance(exc.value, (BadRouteError, MemoryError))
    finally:
        await c.close()
        assert ns.stop() == 0


# ------------------------------------------------------------------ client

#: (value, Java's hashCode of it, the queue SelectMessageQueueByHash picks out of 8)
JAVA_HASHES = [("hello", 99162322, 2), ("Hello World", -862545276, 4), ("abc", 96354, 2), ("", 0, 0),
               ("polygenelubricants", -2147483648, 0), ("ORDER-10086", None, None), (42, 42, 2), (-7, -7, 7),
               (2 ** 40, 256, 0), (-1 << 40, -256, 0), (True, 1231, 7), ("顺序", 1234261, 5)]


@pytest.mark.parametrize("value, java, index", JAVA_HASHES)
def test_hash_selector_is_javas(value, java, index) -> None:
    """Guards: the hash selector used Python's per-process hash(): two producers sent one key to
    different queues and ordering broke."""
    from fastmq.client.producer import hash_selector, java_hash_code
    from fastmq.protocol.message_queue import MessageQueue

    if java is None:  # computed with Java's rule by hand: h = 31*h + c over UTF-16
        h = 0
        for ch in value:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        java = h - (1 << 32) if h & 0x80000000 else h
        jmod = abs(java) % 8
        index = jmod
    assert java_hash_code(value) == java
    mqs = [MessageQueue("T", "b", i) for i in range(8)]
    assert hash_selector(mqs, Message("T", b""), value).queue_id == index


def test_hash_selector_same_in_every_process() -> None:
    code = ("from fastmq.client.producer import hash_selector;from fastmq.protocol.message_queue import MessageQueue;"
            "from fastmq.protocol.message import Message;"
            "print([hash_selector([MessageQueue('T','b',i) for i in range(16)], Message('T', b''), f'key-{k}')"
            ".queue_id for k in range(50)])")
    outs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                timeout=60, check=True).stdout)
    assert len(outs) == 1


async def test_listener_returning_none_is_an_error_with_the_fix(fastmq_cluster: EmbeddedCluster, caplog) -> None:
    """Guards: a listener that forgot its return had every message retried with no warning."""
    from fastmq.aio import ConsumeStatus, Producer, PushConsumer
    from fastmq.client import consume_service as pc

    ns, broker = fastmq_cluster.namesrv, fastmq_cluster.brokers[0]
    calls: list[int] = []

    def listener(msgs):
        calls.append(len(msgs))
        if len(calls) > 6:
            return ConsumeStatus.CONSUME_SUCCESS
        return None  # the bug under test

    pc._bad_status["logged_at"] = -pc._BAD_STATUS_LOG_INTERVAL  # a fresh window for this test
    caplog.set_level(logging.ERROR, logger="fastmq.client")
    consumer = PushConsumer("CG_SEM_NONE", namesrv_addr=ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe("SemNone")
    consumer.register_message_listener(listener)
    async with Producer("PG_SEM_NONE", namesrv_addr=ns.addr) as p:
        for i in range(3):
            await p.send(Message("SemNone", f"n{i}".encode()))
        await consumer.start()
        try:
            deadline = time.monotonic() + 30
            while len(calls) < 5 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        finally:
            await consumer.shutdown()
    assert len(calls) >= 3
    errors = [r.getMessage() for r in caplog.records if "not a ConsumeStatus" in r.getMessage()]
    assert len(errors) == 1, errors  # once per minute, not once per batch
    assert "returned None" in errors[0] and "Return ConsumeStatus.CONSUME_SUCCESS" in errors[0]


async def test_producers_avoid_a_read_only_broker_set_in_its_config(tmp_path: Path, client) -> None:
    """Guards: brokerPermission=4 in broker.conf was not in the routes, so producers kept sending."""
    from fastmq.aio import Producer

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ns = namesrv_process(tmp_path).start()
    try:
        rw = broker_process(tmp_path / "a", ns.addr, brokerName="sem-rw").start()
        ro = broker_process(tmp_path / "b", ns.addr, brokerName="sem-ro", brokerPermission=4).start()
        try:
            async def registered():  # (the brokers' first registrations done: each routes its own name)
                return all([(await route(client, ns.addr, n)).code == ResponseCode.SUCCESS
                            for n in ("sem-rw", "sem-ro")])

            assert await poll(registered, 15)
            for b in (rw, ro):
                assert (await create_topic(client, b.addr, "SemTwo")).code == ResponseCode.SUCCESS

            async def both_in_route():
                rt = await route(client, ns.addr, "SemTwo")
                datas = sorted((q["brokerName"], q["perm"]) for q in json.loads(rt.body)["queueDatas"]) \
                    if rt.code == ResponseCode.SUCCESS else []
                return len(datas) == 2 and datas  # (each broker registers the new topic on its own)

            assert await poll(both_in_route, 15) == [("sem-ro", 4), ("sem-rw", 6)]
            async with Producer("PG_SEM_TWO", namesrv_addr=ns.addr) as p:
                results = [await p.send(Message("SemTwo", f"t{i}".encode())) for i in range(20)]
            assert {r.message_queue.broker_name for r in results} == {"sem-rw"}
            r = await client.invoke(ro.addr, send_request("SemTwo"), 5)
            assert r.code == ResponseCode.SUCCESS  # a send that still arrives is stored, as on 4.9
        finally:
            assert ro.stop() == 0 and rw.stop() == 0
    finally:
        ns.stop()
