"""GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY (``mqadmin consumerStatus`` and
``mqadmin queryMsgById -g -d``): the bodies, the client's consumption stats, and the whole path
admin tool → fastmq-broker → consumer, with fastmq consumers and the official C++ consumer."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.consumer_stats import CONSUME_OK_TPS, ConsumerStatsManager, QueueCounters
from fastmq.client.push_consumer import ConsumeStatus, PullConsumer, PushConsumer
from fastmq.errors import RemotingCommandError
from fastmq.protocol.bodies import loads_mq_keyed, mq_map_json
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.consumer_running_info import (CMResult, ConsumeMessageDirectlyResult, ConsumerRunningInfo, ProcessQueueInfo,
                                                   TopicConsumeStatus as TopicStatus)
from fastmq.protocol.heartbeat import build_subscription
from fastmq.protocol.message_queue import MessageQueue
from fastmq.remoting import RemotingClient
from fastmq.common.stats_item import StatsItemSet
from fastmq.testing import EmbeddedCluster
from tests.support import wait_until
from tests.process.helpers import admin_request as _ask

pytestmark = pytest.mark.fastmq_cluster(broker_conf={"mappedFileSizeCommitLog": 16777216})

PEERS = Path(__file__).resolve().parents[1] / "interop"  # the official C++ client peers
MQ0, MQ1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)


# ---------------------------------------------------------------- bodies

def test_mq_keyed_maps_round_trip_and_refuse_what_is_not_one() -> None:
    text = mq_map_json([(MQ1, {"x": [1, {"y": None}]}), (MQ0, 5)])
    assert text == ('{{"brokerName":"b","queueId":1,"topic":"T"}:{"x":[1,{"y":null}]},'
                    '{"brokerName":"b","queueId":0,"topic":"T"}:5}')
    assert loads_mq_keyed(f'{{"t": {text}, "n": {{0: "a"}}}}') == {"t": {MQ1: {"x": [1, {"y": None}]}, MQ0: 5},
                                                                 "n": {"0": "a"}}
    for bad in ("{", '{"a":}', '{{"topic":"T"}:1}', '{{"topic":"T","brokerName":"b","queueId":"x"}:1}', "[1,2",
                '{"a":1} x', b"\xff", "[" * 300 + "]" * 300, ""):
        with pytest.raises(RemotingCommandError):
            loads_mq_keyed(bad)


def _info() -> ConsumerRunningInfo:
    return ConsumerRunningInfo(
        {"consumerGroup": "G", "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"},
        [build_subscription("T", "a || b", 7), build_subscription("%RETRY%G", "*", 7)],
        {MQ1: ProcessQueueInfo(commit_offset=9, locked=True), MQ0: ProcessQueueInfo(cached_msg_count=3)},
        {"T": TopicStatus(pull_rt=1.5, consume_ok_tps=2.0, consume_failed_msgs=4)})


def test_running_info_is_written_as_fastjson_writes_it() -> None:
    obj_text = _info().to_json().decode()
    # fields sorted, no jstack when None, queues in TreeMap order, subscriptions in TreeSet order
    assert obj_text.startswith('{"mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"cachedMsgCount":3,')
    assert obj_text.index('"queueId":0') < obj_text.index('"queueId":1')
    assert '"droped":false' in obj_text and '"cachedMsgSizeInMiB":0' in obj_text
    assert obj_text.index('"topic":"%RETRY%G"') < obj_text.index('"subString":"a || b"')
    assert '"statusTable":{"T":{"consumeFailedMsgs":4,"consumeFailedTPS":0.0,"consumeOKTPS":2.0,' in obj_text
    back = ConsumerRunningInfo.from_json(obj_text)
    assert back.mq_table == _info().mq_table and back.status_table == _info().status_table
    assert back.properties == _info().properties and back.jstack is None
    assert {s.topic for s in back.subscriptions} == {"T", "%RETRY%G"}
    with_stack = ConsumerRunningInfo(jstack="Thread: main\n")
    assert with_stack.to_json().startswith(b'{"jstack":"Thread: main\\n","mqTable":{}')


def test_running_info_as_the_cpp_client_writes_it() -> None:
    """Recorded from rocketmq 0.4.4 through fastmq-broker (one queue of four kept): jsoncpp's
    spacing inside the key objects, 64-bit fields as strings, timestamps it never set, "flase"."""
    body = ('{"mqTable":{{\n   "brokerName" : "broker-a",\n   "queueId" : 0,\n   "topic" : "TC"\n}:{\n'
            '   "cachedMsgCount" : 0,\n   "cachedMsgMaxOffset" : "0",\n   "cachedMsgMinOffset" : "0",\n'
            '   "commitOffset" : "1",\n   "droped" : false,\n   "lastConsumeTimestamp" : "8031081608758567539",\n'
            '   "lastLockTimestamp" : "94350655480544",\n   "lastPullTimestamp" : "1795487825133",\n'
            '   "locked" : false,\n   "transactionMsgCount" : 0,\n   "transactionMsgMaxOffset" : "0",\n'
            '   "transactionMsgMinOffset" : "0",\n   "tryUnlockTimes" : 0\n}\n},"jstack":"","properties":'
            '{"PROP_CLIENT_VERSION":"V3_1_8","PROP_CONSUMEORDERLY":"flase","PROP_CONSUMER_START_TIMESTAMP":'
            '"1795487825126","PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_NAMESERVER_ADDR":"127.0.0.1:50721",'
            '"PROP_THREADPOOL_CORE_SIZE":"1"},"subscriptionSet":[{"subString":"*","subVersion":"1795487825127",'
            '"topic":"%RETRY%GC"},{"subString":"*","subVersion":"1795487825127","topic":"TC"}]}\n')
    info = ConsumerRunningInfo.from_json(body.encode())
    pq = info.mq_table[MessageQueue("TC", "broker-a", 0)]
    assert (pq.commit_offset, pq.last_pull_timestamp, pq.locked) == (1, 1795487825133, False)
    assert info.properties["PROP_CONSUMEORDERLY"] == "flase" and info.jstack == ""
    assert [s.sub_version for s in info.subscriptions] == [1795487825127] * 2
    for bad in ('{"mqTable":[]}', '{"mqTable":{"T":{}}}', '{"mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:'
                '{"commitOffset":"soon"}}}', '{"mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:'
                '{"locked":"maybe"}}}', '{"statusTable":{"T":{"pullRT":[]}}}', "[]"):
        with pytest.raises(RemotingCommandError):
            ConsumerRunningInfo.from_json(bad)


def test_consume_message_directly_result_body() -> None:
    r = ConsumeMessageDirectlyResult(consume_result=CMResult.CR_THROW_EXCEPTION, remark="ValueError: no",
                                     spent_time_mills=3)
    assert r.to_json() == (b'{"autoCommit":true,"consumeResult":"CR_THROW_EXCEPTION","order":false,'
                           b'"remark":"ValueError: no","spentTimeMills":3}')
    assert ConsumeMessageDirectlyResult.from_json(r.to_json()) == r
    assert ConsumeMessageDirectlyResult().to_json() == b'{"autoCommit":true,"order":false,"spentTimeMills":0}'
    with pytest.raises(RemotingCommandError):
        ConsumeMessageDirectlyResult.from_json('{"spentTimeMills":"x"}')


# ---------------------------------------------------------------- stats

def test_a_window_starts_one_interval_before_its_first_snapshot() -> None:
    """As RocketMQ's StatsItem: what was counted before the first snapshot is spread over one
    interval, not over the instant between the item's creation and that snapshot."""
    now = [1000.0]
    stats = StatsItemSet(["N"], clock=lambda: now[0])
    now[0] += 9.999
    stats.add("N", "k", 50)
    stats.sample("minute")
    assert stats.figures("N", "k", "minute") == {"avgpt": 50.0, "sum": 50, "tps": 5.0}
    assert stats.figures("N", "k", "hour") == {"avgpt": 0.0, "sum": 0, "tps": 0.0}   # never sampled yet
    assert stats.figures("N", "other", "minute") == {"avgpt": 0.0, "sum": 0, "tps": 0.0}


def test_consumer_stats_fold_queue_counters() -> None:
    now = [0.0]
    stats = ConsumerStatsManager(clock=lambda: now[0])
    c = QueueCounters()
    for _ in range(6):                 # a minute: every 10 s, 2 pulls of 16 messages, 20 consumed, 4 failed
        now[0] += 10
        c.pulls += 2
        c.pull_rt_ms += 2 * 30
        c.pulled += 32
        c.consumes += 24
        c.consume_rt_ms += 24 * 5
        c.consumed_ok += 20
        c.consumed_failed += 4
        stats.fold("G", "T", c)
        stats.sample("minute")
    assert c == QueueCounters()        # folded and zeroed
    s = stats.consume_status("G", "T")
    assert (s.pull_rt, s.pull_tps, s.consume_rt) == (30.0, 3.2, 5.0)
    assert (s.consume_ok_tps, s.consume_failed_tps, s.consume_failed_msgs) == (2.0, 0.4, 0)  # no hour sample yet
    stats.sample("hour")
    now[0] += 600
    stats.sample("hour")
    assert stats.consume_status("G", "T").consume_failed_msgs == 24
    assert stats.get(CONSUME_OK_TPS, "T@G").times == 6 * 24


# ---------------------------------------------------------------- through a real broker

_until = wait_until


async def test_admin_requests_reach_a_fastmq_push_consumer(fastmq_cluster: EmbeddedCluster) -> None:
    ns, broker = fastmq_cluster.namesrv_addr, fastmq_cluster.broker_addr
    got: list[bytes] = []

    async def listener(msgs):
        if msgs[0].body == b"boom":
            raise ValueError("listener says no")
        if msgs[0].body == b"odd":
            return 42  # neither status: RocketMQ leaves the result unnamed
        got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("GID_RUNINFO", namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe("RunInfoTopic", "*")
    c.register_message_listener(listener)
    admin = RemotingClient()
    async with Producer("PG_RUNINFO", namesrv_addr=ns) as p:
        sent = [await p.send(Message("RunInfoTopic", f"m{i}".encode())) for i in range(8)]
        special = {b: await p.send(Message("RunInfoTopic", b)) for b in (b"boom", b"odd")}
        await c.start()
        try:
            assert await _until(lambda: len(got) == 8, 20), got
            cid = c.instance.client_id
            c.instance.sample_consumer_stats("minute")  # what the 10 s timer does

            r = await admin.invoke(broker, _ask(RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup="GID_RUNINFO",
                                                clientId=cid, jstackEnable="true"), 15)
            assert r.code == ResponseCode.SUCCESS, r.remark
            info = ConsumerRunningInfo.from_json(r.body)
            props = info.properties
            assert (props["consumerGroup"], props["PROP_CONSUME_TYPE"], props["PROP_CONSUMEORDERLY"]) == \
                   ("GID_RUNINFO", "CONSUME_PASSIVELY", "false")
            assert props["PROP_NAMESERVER_ADDR"] == f"{ns};" and props["PROP_CLIENT_VERSION"] == "V4_9_8"
            assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) <= int(time.time() * 1000)
            assert {s.topic for s in info.subscriptions} == {"RunInfoTopic", "%RETRY%GID_RUNINFO"}
            mine = {mq: pq for mq, pq in info.mq_table.items() if mq.topic == "RunInfoTopic"}
            assert len(mine) == 4 and sum(pq.commit_offset for pq in mine.values()) == 10
            assert all(pq.cached_msg_count == 0 and pq.last_pull_timestamp > 0 for pq in mine.values())
            status = info.status_table["RunInfoTopic"]
            assert status.consume_ok_tps > 0 and status.pull_tps > 0 and status.consume_failed_tps > 0
            assert "Thread: MainThread" in (info.jstack or "")

            async def directly(msg_id: str, client_id: str = cid, group: str = "GID_RUNINFO"):
                return await admin.invoke(broker, _ask(RequestCode.CONSUME_MESSAGE_DIRECTLY, consumerGroup=group,
                                                       clientId=client_id, msgId=msg_id), 15)

            r = await directly(sent[3].offset_msg_id)
            assert r.code == ResponseCode.SUCCESS, r.remark
            ok = ConsumeMessageDirectlyResult.from_json(r.body)
            assert (ok.consume_result, ok.order, ok.auto_commit) == (CMResult.CR_SUCCESS, False, True)
            assert got.count(b"m3") == 2          # the listener saw it once more...
            assert c.offset_store.table           # ...and nothing was committed or sent back for it
            boom = ConsumeMessageDirectlyResult.from_json((await directly(special[b"boom"].offset_msg_id)).body)
            assert (boom.consume_result, boom.remark) == (CMResult.CR_THROW_EXCEPTION, "ValueError: listener says no")
            odd = ConsumeMessageDirectlyResult.from_json((await directly(special[b"odd"].offset_msg_id)).body)
            assert odd.consume_result is None

            # what goes wrong is answered, and the broker serves on
            r = await admin.invoke(broker, _ask(RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup="GID_RUNINFO",
                                                clientId="10.0.0.9@nobody"), 15)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                          "The Consumer <GID_RUNINFO> <10.0.0.9@nobody> not online")
            r = await admin.invoke(broker, _ask(RequestCode.GET_CONSUMER_RUNNING_INFO, clientId=cid), 15)
            assert r.code == ResponseCode.SYSTEM_ERROR and "consumerGroup" in r.remark
            r = await directly("not-an-id")
            assert r.code == ResponseCode.SYSTEM_ERROR and "offset message id" in r.remark
            nowhere = sent[0].offset_msg_id[:-16] + f"{10**9:016X}"
            r = await directly(nowhere)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {10**9}")
            assert (await directly(sent[0].offset_msg_id)).code == ResponseCode.SUCCESS
        finally:
            await admin.close()
            await c.shutdown()


async def test_a_pull_consumer_reports_itself_but_consumes_nothing_directly(fastmq_cluster: EmbeddedCluster) -> None:
    ns, broker = fastmq_cluster.namesrv_addr, fastmq_cluster.broker_addr
    c = PullConsumer("GID_RUNINFO_PULL", namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe("RunInfoPull")
    admin = RemotingClient()
    async with Producer("PG_RUNINFO_PULL", namesrv_addr=ns) as p:
        sent = await p.send(Message("RunInfoPull", b"x"))
        await c.start()
        try:
            assert await _until(lambda: len(c.process_queues) == 5, 20)
            fields = {"consumerGroup": "GID_RUNINFO_PULL", "clientId": c.instance.client_id}
            r = await admin.invoke(broker, _ask(RequestCode.GET_CONSUMER_RUNNING_INFO, **fields), 15)
            assert r.code == ResponseCode.SUCCESS, r.remark
            info = ConsumerRunningInfo.from_json(r.body)
            assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY" and info.jstack is None
            r = await admin.invoke(broker, _ask(RequestCode.CONSUME_MESSAGE_DIRECTLY, msgId=sent.offset_msg_id,
                                                **fields), 15)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                          "The Consumer Group <GID_RUNINFO_PULL> not exist in this consumer")
        finally:
            await admin.close()
            await c.shutdown()


@pytest.mark.cpp_client
@pytest.mark.slow
async def test_the_broker_asks_the_cpp_consumer(fastmq_cluster: EmbeddedCluster, tmp_path: Path) -> None:
    """The official C++ consumer answers GET_CONSUMER_RUNNING_INFO through fastmq-broker, and its
    body reads; it never answers CONSUME_MESSAGE_DIRECTLY, which the broker turns into
    CONSUME_MSG_TIMEOUT after Broker2Client's 10 s, as 4.9 does."""
    pytest.importorskip("rocketmq.client")
    ns, broker, home = fastmq_cluster.namesrv_addr, fastmq_cluster.broker_addr, tmp_path
    # the topic first: a C++ client that finds no route waits 30 s before it asks again
    async with Producer("PG_RUNINFO_CPP", namesrv_addr=ns) as p:
        sent = await p.send(Message("RunInfoCpp", b"hello"))
    peer = subprocess.Popen([sys.executable, str(PEERS / "cpp_consumer_peer.py"), "--namesrv", ns, "--topic",
                             "RunInfoCpp", "--group", "GID_RUNINFO_CPP", "--expect", "1000", "--seconds", "40"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=home,
                            env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    admin = RemotingClient()
    try:
        ids: list[str] = []
        deadline = time.monotonic() + 30
        while not ids and time.monotonic() < deadline:
            r = await admin.invoke(broker, _ask(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                consumerGroup="GID_RUNINFO_CPP"), 5)
            ids = json.loads(r.body).get("consumerIdList", []) if r.code == 0 and r.body else []
            await asyncio.sleep(0.2)
        if not ids:
            peer.kill()
            pytest.fail(f"the C++ consumer never registered: {peer.communicate(timeout=10)[0][-3000:]}")
        fields = {"consumerGroup": "GID_RUNINFO_CPP", "clientId": ids[0]}
        info = None
        for _ in range(50):  # until its rebalance has given it the topic's queues
            r = await admin.invoke(broker, _ask(RequestCode.GET_CONSUMER_RUNNING_INFO, **fields), 15)
            assert r.code == ResponseCode.SUCCESS, r.remark
            info = ConsumerRunningInfo.from_json(r.body)
            if len([mq for mq in info.mq_table if mq.topic == "RunInfoCpp"]) == 4:
                break
            await asyncio.sleep(0.2)
        assert info is not None and info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert {s.topic for s in info.subscriptions} == {"RunInfoCpp", "%RETRY%GID_RUNINFO_CPP"}
        assert len([mq for mq in info.mq_table if mq.topic == "RunInfoCpp"]) == 4
        r = await admin.invoke(broker, _ask(RequestCode.CONSUME_MESSAGE_DIRECTLY, msgId=sent.offset_msg_id,
                                            **fields), 20)
        assert r.code == ResponseCode.CONSUME_MSG_TIMEOUT, r.remark
        assert r.remark.startswith(f"consumer <GID_RUNINFO_CPP> <{ids[0]}> Timeout: ")
    finally:
        await admin.close()
        peer.kill()
        peer.communicate(timeout=10)
