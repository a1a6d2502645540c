"""Admin requests against a real fastmq-broker, as 4.9.8's mqadmin sends them: the consumption
views GET_CONSUME_STATS (``consumerProgress``), GET_BROKER_CONSUME_STATS (``brokerConsumeStats``)
and QUERY_CONSUME_QUEUE (``queryCq``); GET_ALL_PRODUCER_INFO (``producer``); and the store's
clean-ups CLEAN_UNUSED_TOPIC, DELETE_EXPIRED_COMMITLOG and CLEAN_EXPIRED_CONSUMEQUEUE."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.push_consumer import ConsumeStatus, PushConsumer
from fastmq.protocol.bodies import loads_mq_keyed
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.message import decode_offset_msg_id
from fastmq.protocol.message_queue import MessageQueue
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster, broker_process, namesrv_process
from tests.support import wait_until

pytestmark = pytest.mark.fastmq_cluster(broker_conf={"brokerName": "stats-b", "mappedFileSizeCommitLog": 16777216})


async def test_consume_stats_views(fastmq_cluster: EmbeddedCluster) -> None:
    ns, broker = fastmq_cluster.namesrv_addr, fastmq_cluster.broker_addr
    got: list[bytes] = []
    c = PushConsumer("GID_STATS", namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe("StatsTopic")
    c.register_message_listener(lambda msgs: got.extend(m.body for m in msgs) or ConsumeStatus.CONSUME_SUCCESS)
    admin = RemotingClient()

    async def ask(code: int, **fields: object):
        return await admin.invoke(broker, create_request(code, fields), 5)
    async with Producer("PG_STATS", namesrv_addr=ns) as p:
        sent = [await p.send(Message("StatsTopic", f"s{i}".encode(), properties={"TAGS": "tA"})) for i in range(8)]
        await c.start()
        try:
            assert await wait_until(lambda: len(got) == 8, 20), got
            await c.offset_store.persist_all()

            # consumerProgress: every read queue, the group caught up, the time of its last message
            r = await ask(RequestCode.GET_CONSUME_STATS, consumerGroup="GID_STATS", topic="StatsTopic")
            assert r.code == ResponseCode.SUCCESS, r.remark
            stats = loads_mq_keyed(r.body)
            table = stats["offsetTable"]
            assert sorted(table) == [MessageQueue("StatsTopic", "stats-b", q) for q in range(4)]
            assert sum(w["brokerOffset"] for w in table.values()) == 8
            assert all(w["consumerOffset"] == w["brokerOffset"] for w in table.values())
            assert all(w["lastTimestamp"] > 0 for w in table.values() if w["consumerOffset"])
            assert isinstance(stats["consumeTps"], float)
            r = await ask(RequestCode.GET_CONSUME_STATS, consumerGroup="GID_NOBODY")
            assert r.code == ResponseCode.SUCCESS and loads_mq_keyed(r.body)["offsetTable"] == {}

            # brokerConsumeStats: per group, its topics' ConsumeStats, and the total lag
            extra = await p.send(Message("StatsTopic", b"one more", properties={"TAGS": "tA"}))
            r = await ask(RequestCode.GET_BROKER_CONSUME_STATS, isOrder="false")
            assert r.code == ResponseCode.SUCCESS, r.remark
            body = loads_mq_keyed(r.body)
            assert body["brokerAddr"] == broker
            mine = [g["GID_STATS"] for g in body["consumeStatsList"] if "GID_STATS" in g]
            assert mine and {mq.topic for s in mine[0] for mq in s["offsetTable"]} >= {"StatsTopic"}
            lag = sum(w["brokerOffset"] - w["consumerOffset"] for g in body["consumeStatsList"] for stats_list in
                      g.values() for s in stats_list for w in s["offsetTable"].values())
            assert body["totalDiff"] == lag  # (the message just sent may or may not be consumed yet)
            r = await ask(RequestCode.GET_BROKER_CONSUME_STATS, isOrder="true")  # no order topics here
            assert all(lists == [] for g in loads_mq_keyed(r.body)["consumeStatsList"] for lists in g.values())
            r = await ask(RequestCode.GET_BROKER_CONSUME_STATS)
            assert r.code == ResponseCode.SYSTEM_ERROR and "isOrder" in r.remark

            # queryCq: the entries as the store holds them, the group's subscription when online
            phys = {decode_offset_msg_id(s.offset_msg_id)[2]: s for s in sent}
            q0 = [s for s in sent if s.message_queue.queue_id == 0]
            r = await ask(RequestCode.QUERY_CONSUME_QUEUE, topic="StatsTopic", queueId=0, index=0, count=100,
                          consumerGroup="GID_STATS")
            assert r.code == ResponseCode.SUCCESS and r.remark is None
            cq = loads_mq_keyed(r.body)
            in_q0 = len(q0) + (extra.message_queue.queue_id == 0)
            assert (cq["minQueueIndex"], cq["maxQueueIndex"], len(cq["queueData"])) == (0, in_q0, in_q0)
            assert [phys[e["physicOffset"]].message_queue.queue_id for e in cq["queueData"]
                    if e["physicOffset"] in phys] == [0] * len(q0)
            assert all(e["physicSize"] > 0 and e["eval"] is False for e in cq["queueData"])
            assert cq["subscriptionData"]["topic"] == "StatsTopic" and cq["filterData"] == "null"
            r = await ask(RequestCode.QUERY_CONSUME_QUEUE, topic="StatsTopic", queueId=0, index=0, count=1,
                          consumerGroup="GID_GONE")
            cq = loads_mq_keyed(r.body)
            assert len(cq["queueData"]) == 1 and cq["filterData"] == "GID_GONE@StatsTopic is not online!"
            assert "subscriptionData" not in cq
            r = await ask(RequestCode.QUERY_CONSUME_QUEUE, topic="StatsTopic", queueId=0, index=999, count=5)
            assert (r.code, r.remark, r.body) == (ResponseCode.SUCCESS, "Index 999 of 0@StatsTopic is not exist!",
                                                  None)
            r = await ask(RequestCode.QUERY_CONSUME_QUEUE, topic="StatsTopic", queueId=7, index=0, count=5)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "7@StatsTopic is not exist!")
            r = await ask(RequestCode.QUERY_CONSUME_QUEUE, topic="StatsTopic", queueId=0, count=5)
            assert r.code == ResponseCode.SYSTEM_ERROR and "index" in r.remark
        finally:
            await admin.close()
            await c.shutdown()


async def test_producer_info_and_store_clean_ups(tmp_path: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    conf = {"brokerName": "clean-b", "mappedFileSizeCommitLog": 1 << 20, "fileReservedTime": 0}
    broker = broker_process(tmp_path, ns.addr, **conf).start()
    admin = RemotingClient()
    big = os.urandom(100 * 1024)  # ten to a commit-log file (incompressible: the producer zips bodies over 4 KiB)

    async def ask(code: int, **fields: object):
        return await admin.invoke(broker.addr, create_request(code, fields), 10)

    async def max_offset(topic: str) -> int:
        r = await ask(RequestCode.GET_MAX_OFFSET, topic=topic, queueId=0)
        return int(r.ext_fields["offset"])
    cq_dir = tmp_path / "store" / "consumequeue"
    try:
        async with Producer("PG_CLEAN", namesrv_addr=ns.addr) as p:
            for topic in ("Orphan", "Old"):
                for _ in range(3):
                    await p.send_to_queue(Message(topic, big), MessageQueue(topic, "clean-b", 0))
            await p.instance.send_heartbeat_to_all_brokers()  # (a producer knows its broker after a send)
            r = await ask(RequestCode.GET_ALL_PRODUCER_INFO)
            assert r.code == ResponseCode.SUCCESS, r.remark
            (info,) = json.loads(r.body)["data"]["PG_CLEAN"]
            assert info["clientId"] == p.instance.client_id and info["language"] == "PYTHON"
            assert info["remoteIP"].startswith("/127.0.0.1:") and info["lastUpdateTimestamp"] > 0
        assert broker.stop() == 0
        await admin.close()
        admin = RemotingClient()  # (its connection died with the broker)
        # an operator drops a topic from topics.json while the broker is down: its queue stays on disk
        topics = tmp_path / "store" / "config" / "topics.json"
        table = json.loads(topics.read_text())
        del table["topicConfigTable"]["Orphan"]
        topics.write_text(json.dumps(table))
        broker = broker_process(tmp_path, ns.addr, port=broker.port, **conf).start()
        assert await max_offset("Orphan") == 3 and (cq_dir / "Orphan").exists()
        r = await ask(RequestCode.CLEAN_UNUSED_TOPIC)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert not (cq_dir / "Orphan").exists() and await max_offset("Orphan") == 0
        assert await max_offset("Old") == 3                       # a topic the broker has stays

        async with Producer("PG_CLEAN", namesrv_addr=ns.addr) as p:  # later files, another topic
            for _ in range(25):
                await p.send_to_queue(Message("New", big), MessageQueue("New", "clean-b", 0))
        r = await ask(RequestCode.DELETE_EXPIRED_COMMITLOG)  # fileReservedTime 0: all files but the last
        assert r.code == ResponseCode.SUCCESS, r.remark
        r = await ask(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert not (cq_dir / "Old").exists() and await max_offset("Old") == 0  # its messages went with the files
        assert await max_offset("New") == 25 and (cq_dir / "New" / "0").exists()
    finally:
        await admin.close()
        broker.stop()
        ns.stop()
