"""The ``fastmq-broker`` command as a real process, with a real ``fastmq-namesrv``, over loopback.

One NameServer + broker pair serves the module (autoCreateTopicEnable=false, small commit-log
files, a 64 KiB maxMessageSize, one-second delay levels); topics are made with
UPDATE_AND_CREATE_TOPIC as an operator would. Requests go through fastmq's RemotingClient.
"""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastmq._ext.codec import encode_frame
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import Message, decode_records, encode_batch_body
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster, ServerProcess, free_port
from tests.support import create_topic, pull_request, send_request

MAX_MESSAGE_SIZE = 64 * 1024
FAST_LEVELS = " ".join(["1s"] * 18)

pytestmark = pytest.mark.fastmq_cluster(broker_conf={
    "brokerClusterName": "FastCluster", "brokerName": "fast-broker-a", "mappedFileSizeCommitLog": 256 * 1024,
    "mappedFileSizeConsumeQueue": 6000, "autoCreateTopicEnable": "false", "maxMessageSize": MAX_MESSAGE_SIZE,
    "messageDelayLevel": FAST_LEVELS})


def write_broker_conf(path: Path, *, port: int, namesrv: str, store: Path, **extra: object) -> Path:
    lines = {"brokerClusterName": "FastCluster", "brokerName": "fast-broker-a", "brokerId": 0,
             "listenPort": port, "haListenPort": free_port(), "namesrvAddr": namesrv, "brokerIP1": "127.0.0.1",
             "storePathRootDir": store, "mappedFileSizeCommitLog": 256 * 1024,
             "mappedFileSizeConsumeQueue": 6000, "logPath": store.parent / f"broker-{port}.log", **extra}
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


async def write_while_stopped(broker: ServerProcess, conns: list, reqs: list) -> None:
    """Write each request on its connection while the broker is stopped (SIGSTOP), so that its
    next loop turn reads them all at once: the gathered send path."""
    broker.proc.send_signal(signal.SIGSTOP)
    try:
        for (_, w), req in zip(conns, reqs):
            w.write(encode_frame(req))
        await asyncio.sleep(0.05)  # every write reaches the stopped broker's sockets
    finally:
        broker.proc.send_signal(signal.SIGCONT)


async def test_send_v2_then_pull_back(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcTopicA")
    props = {"TAGS": "tagA", "KEYS": "k1 k2", "WAIT": "true", "userProp": "v1"}
    r = await client.invoke(broker.addr, send_request("ProcTopicA", b"hello fastmq", props, queue_id=1), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    f = r.ext_fields
    assert all(isinstance(v, str) for v in f.values())
    assert f["queueId"] == "1" and f["queueOffset"] == "0"
    assert len(f["msgId"]) == 32 and f["msgId"].startswith("7F000001")  # 127.0.0.1 + port + offset
    assert f["MSG_REGION"] == "DefaultRegion" and f["TRACE_ON"] == "true"

    p = await client.invoke(broker.addr, pull_request("ProcTopicA", 1, 0), 5)
    assert p.code == ResponseCode.SUCCESS, p.remark
    assert p.ext_fields["nextBeginOffset"] == "1" and p.ext_fields["maxOffset"] == "1"
    assert p.ext_fields["minOffset"] == "0" and p.ext_fields["suggestWhichBrokerId"] == "0"
    [m] = decode_records(p.body)
    assert m.body == b"hello fastmq" and m.topic == "ProcTopicA" and m.queue_id == 1
    assert {k: m.properties[k] for k in props} == props
    assert m.store_host == ("127.0.0.1", broker.port)
    assert m.born_host[0] == "127.0.0.1"

    # tag filter: nothing matches -> PULL_RETRY_IMMEDIATELY with the scan's next offset
    p = await client.invoke(broker.addr, pull_request("ProcTopicA", 1, 0, expr="other"), 5)
    assert p.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    # caught up -> PULL_NOT_FOUND; far past the end -> PULL_OFFSET_MOVED
    p = await client.invoke(broker.addr, pull_request("ProcTopicA", 1, 1), 5)
    assert p.code == ResponseCode.PULL_NOT_FOUND and p.ext_fields["nextBeginOffset"] == "1"
    p = await client.invoke(broker.addr, pull_request("ProcTopicA", 1, 50), 5)
    # 4.9.8 (and a Java broker, tests/interop/test_java_rocketmq.py): an overflow moves the consumer to the max
    assert p.code == ResponseCode.PULL_OFFSET_MOVED and p.ext_fields["nextBeginOffset"] == "1"
    # an empty queue pulled from past 0: back to 0
    p = await client.invoke(broker.addr, pull_request("ProcTopicA", 3, 5), 5)
    assert p.code == ResponseCode.PULL_OFFSET_MOVED and p.ext_fields["nextBeginOffset"] == "0"


async def test_many_producers_each_one_send_in_flight(fastmq_cluster: EmbeddedCluster, client):
    """Guards the gathered send path (RocketMQ's benchmark Producer: many connections, each one
    sync send in flight). The broker is stopped while 12 connections each write a send, so its
    next loop turn reads them all at once; one of them goes to a topic that does not exist. Each
    acknowledged message is stored once, with its own connection's born host, in its queue's
    order, and found by its key; the bad one gets its own error and the broker goes on."""
    from fastmq._ext.codec import FrameDecoder

    broker = fastmq_cluster.brokers[0]
    topic = "ProcGathered"
    await create_topic(client, broker.addr, topic, queues=8)
    r = await client.invoke(broker.addr, send_request(topic, b"first"), 5)  # the fast path learns the topic
    assert r.code == ResponseCode.SUCCESS
    conns = [await asyncio.open_connection("127.0.0.1", broker.port) for _ in range(12)]
    ports = [w.get_extra_info("sockname")[1] for _, w in conns]
    decoders = [FrameDecoder() for _ in conns]
    sent: dict[bytes, tuple[int, int]] = {}  # body -> (connection, queue)
    acked: dict[bytes, tuple[int, int]] = {}  # body -> (queue, queue offset)
    try:
        for rnd in range(6):
            reqs = []
            for i in range(len(conns)):
                body = f"c{i}-r{rnd}".encode()
                bad = i == 5 and rnd % 2 == 0
                reqs.append(send_request("NoSuchTopicHere" if bad else topic, body,
                                         {"KEYS": body.decode(), "UNIQ_KEY": f"{rnd:08X}{i:024X}"}, queue_id=i % 8))
                if not bad:
                    sent[body] = (i, i % 8)
            await write_while_stopped(broker, conns, reqs)
            for i, ((reader, _), req) in enumerate(zip(conns, reqs)):
                got: list = []
                deadline = time.monotonic() + 15
                while not got and time.monotonic() < deadline:
                    chunk = await asyncio.wait_for(reader.read(1 << 16), 15)
                    assert chunk, "the broker closed the connection"
                    got += decoders[i].feed(chunk)
                (resp,) = got
                assert resp.opaque == req.opaque
                if req.ext_fields["b"] != topic:
                    assert resp.code == ResponseCode.TOPIC_NOT_EXIST, resp.remark
                    continue
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                acked[req.body] = (int(resp.ext_fields["queueId"]), int(resp.ext_fields["queueOffset"]))
    finally:
        for _, w in conns:
            w.close()
    assert set(acked) == set(sent)
    assert all(acked[b][0] == q for b, (_, q) in sent.items())
    for qid in range(8):
        p = await client.invoke(broker.addr, pull_request(topic, qid, 0, max_nums=200), 5)
        msgs = [m for m in decode_records(p.body) if m.body != b"first"]
        assert sorted(m.body for m in msgs) == sorted(b for b, (_, q) in sent.items() if q == qid)
        for m in msgs:  # stored once each, where its answer said, with its own connection's address
            assert (m.queue_id, m.queue_offset) == acked[m.body]
            assert m.born_host == ("127.0.0.1", ports[sent[m.body][0]])
        offsets = [m.queue_offset for m in decode_records(p.body)]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    q = await client.invoke(broker.addr, create_request(RequestCode.QUERY_MESSAGE, {
        "topic": topic, "key": "c7-r3", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62}), 5)
    assert q.code == ResponseCode.SUCCESS and [m.body for m in decode_records(q.body)] == [b"c7-r3"]


@pytest.mark.parametrize("serialize_type", [0, 1], ids=["json", "binary"])
async def test_a_lone_send_and_gathered_sends_are_stored_and_answered_alike(fastmq_cluster, client, serialize_type):
    """Guards the two ways a send takes on the fast path: a read alone in its loop turn (one send
    in flight on a quiet broker) and reads gathered from several connections in one turn. Both
    must leave the same record (but for where it went and who sent it) and the same answer:
    code, remark, serialize type, the msgId of the stored record, queueId, queueOffset and the
    region and trace fields."""
    from fastmq._ext.codec import FrameDecoder
    from fastmq.protocol.message import decode_offset_msg_id

    broker = fastmq_cluster.brokers[0]
    topic = f"ProcLoneVsGathered{serialize_type}"
    await create_topic(client, broker.addr, topic, queues=4)
    assert (await client.invoke(broker.addr, send_request(topic, b"learn"), 5)).code == ResponseCode.SUCCESS
    props = {"TAGS": "tagL", "KEYS": "lk1 lk2", "WAIT": "true", "userProp": "v"}

    def request(body: bytes, qid: int):
        req = send_request(topic, body, dict(props, UNIQ_KEY=body.hex().upper().ljust(32, "0")), queue_id=qid)
        req.serialize_type = serialize_type
        return req

    async def answer(reader, dec, opaque):
        got: list = []
        while not got:
            chunk = await asyncio.wait_for(reader.read(1 << 16), 15)
            assert chunk, "the broker closed the connection"
            got += dec.feed(chunk)
        (resp,) = got
        assert resp.opaque == opaque and resp.flag & 1
        return resp

    conns = [await asyncio.open_connection("127.0.0.1", broker.port) for _ in range(4)]
    try:
        answers = {}
        # alone: one connection, one send, nothing else on the broker's loop
        reader, writer = conns[0]
        lone = request(b"lone", 2)
        writer.write(encode_frame(lone))
        answers[b"lone"] = await answer(reader, FrameDecoder(), lone.opaque)
        # gathered: four connections whose sends the stopped broker reads in one turn
        reqs = [request(b"gathered%d" % i, 2 if i == 1 else i) for i in range(4)]
        await write_while_stopped(broker, conns, reqs)
        for (r, _), req in zip(conns, reqs):
            answers[req.body] = await answer(r, FrameDecoder(), req.opaque)
    finally:
        for _, w in conns:
            w.close()
    records = {}
    for qid in range(4):
        p = await client.invoke(broker.addr, pull_request(topic, qid, 0), 5)
        records.update((m.body, m) for m in decode_records(p.body or b"") if m.body != b"learn")
    assert set(records) == set(answers)
    for body, resp in answers.items():
        m = records[body]
        assert (resp.code, resp.remark, resp.serialize_type) == (ResponseCode.SUCCESS, None, serialize_type)
        f = resp.ext_fields
        assert set(f) == {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
        assert (f["MSG_REGION"], f["TRACE_ON"]) == ("DefaultRegion", "true")
        assert (int(f["queueId"]), int(f["queueOffset"])) == (m.queue_id, m.queue_offset)
        assert decode_offset_msg_id(f["msgId"])[2] == m.commit_log_offset
        assert m.topic == topic and m.store_host == ("127.0.0.1", broker.port) and m.born_host[0] == "127.0.0.1"
        assert {k: m.properties[k] for k in props} == props
        assert (m.flag, m.sys_flag, m.reconsume_times) == (0, 0, 0)
    assert len({m.properties["CLUSTER"] for m in records.values()}) == 1
    lone, same_queue = records[b"lone"], records[b"gathered1"]
    assert same_queue.queue_offset == lone.queue_offset + 1  # one queue's order holds across both ways
    assert set(lone.properties) == set(same_queue.properties)
    q = await client.invoke(broker.addr, create_request(RequestCode.QUERY_MESSAGE, {
        "topic": topic, "key": "lk2", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62}), 5)
    assert q.code == ResponseCode.SUCCESS
    assert sorted(m.body for m in decode_records(q.body)) == sorted(answers)  # both ways indexed the keys


async def test_lone_sends_over_file_rolls_are_stored_and_answered_in_order(fastmq_cluster: EmbeddedCluster, client):
    """One send in flight at a time, 360 of them (2 KiB each) to one queue: the commit log's
    256 KiB files and the queue's 300-entry files roll over under them (the one-record path gives
    way to the general one there). Every answer is SUCCESS with the next queue offset and the
    msgId of its record; every message comes back, in order, with its key indexed."""
    from fastmq.protocol.message import decode_offset_msg_id

    broker = fastmq_cluster.brokers[0]
    topic = "ProcLoneRolls"
    await create_topic(client, broker.addr, topic, queues=2)
    offsets = {}
    for i in range(360):
        body = b"%04d" % i + b"r" * 2044
        r = await client.invoke(broker.addr, send_request(topic, body, {"KEYS": f"roll{i}"}, queue_id=1), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("1", str(i))
        offsets[i] = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    got = []
    for _ in range(40):  # 32 a pull, bounded
        p = await client.invoke(broker.addr, pull_request(topic, 1, len(got)), 5)
        if p.code != ResponseCode.SUCCESS:
            break
        got += decode_records(p.body)
    assert [m.queue_offset for m in got] == list(range(360))
    assert [int(m.body[:4]) for m in got] == list(range(360))
    assert [m.commit_log_offset for m in got] == [offsets[i] for i in range(360)]
    assert len({o // (256 * 1024) for o in offsets.values()}) >= 3  # it did roll over files
    q = await client.invoke(broker.addr, create_request(RequestCode.QUERY_MESSAGE, {
        "topic": topic, "key": "roll359", "maxNum": 4, "beginTimestamp": 0, "endTimestamp": 2**62}), 5)
    assert q.code == ResponseCode.SUCCESS and [m.body[:4] for m in decode_records(q.body)] == [b"0359"]


async def test_many_producers_each_one_send_in_flight_under_sync_flush(tmp_path, client):
    """The gathered sends of a SYNC_FLUSH broker wait for one group commit together and each
    connection is answered once the flush covers its message (the dispatcher's one task for all)."""
    from fastmq._ext.codec import FrameDecoder
    from fastmq.testing import running_cluster

    with running_cluster(tmp_path, flushDiskType="SYNC_FLUSH") as (_, broker):
        topic = "SyncGathered"
        await create_topic(client, broker.addr, topic, queues=4)
        assert (await client.invoke(broker.addr, send_request(topic, b"first"), 5)).code == ResponseCode.SUCCESS
        conns = [await asyncio.open_connection("127.0.0.1", broker.port) for _ in range(8)]
        try:
            for rnd in range(3):
                reqs = [send_request(topic, f"s{i}-{rnd}".encode(), queue_id=i % 4) for i in range(len(conns))]
                await write_while_stopped(broker, conns, reqs)
                for (reader, _), req in zip(conns, reqs):
                    dec, got = FrameDecoder(), []
                    deadline = time.monotonic() + 15
                    while not got and time.monotonic() < deadline:
                        chunk = await asyncio.wait_for(reader.read(1 << 16), 15)
                        assert chunk, "the broker closed the connection"
                        got += dec.feed(chunk)
                    (resp,) = got
                    assert (resp.opaque, resp.code) == (req.opaque, ResponseCode.SUCCESS), resp.remark
        finally:
            for _, w in conns:
                w.close()
        bodies = []
        for qid in range(4):
            p = await client.invoke(broker.addr, pull_request(topic, qid, 0, max_nums=64), 5)
            bodies += [m.body for m in decode_records(p.body)]
        assert sorted(bodies) == sorted([b"first"] + [f"s{i}-{r}".encode() for i in range(8) for r in range(3)])


async def test_view_message_by_id(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcTopicView")
    r = await client.invoke(broker.addr, send_request("ProcTopicView", b"look at me", {"TAGS": "v"}), 5)
    offset = int(r.ext_fields["msgId"][-16:], 16)                  # the offset id ends with the commit-log offset
    v = await client.invoke(broker.addr, create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}), 5)
    assert v.code == ResponseCode.SUCCESS
    [m] = decode_records(v.body)
    assert (m.body, m.topic, m.commit_log_offset) == (b"look at me", "ProcTopicView", offset)
    bad = await client.invoke(broker.addr, create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset + 3}), 5)
    assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset + 3}")


async def test_query_message_by_key(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcTopicQuery")
    for i in range(3):
        r = await client.invoke(broker.addr, send_request("ProcTopicQuery", f"order {i}".encode(),
                                                          {"KEYS": f"order-{i} shared", "UNIQ_KEY": f"{i:032X}"}), 5)
        assert r.code == ResponseCode.SUCCESS

    def query(key: str, topic: str = "ProcTopicQuery"):
        return client.invoke(broker.addr, create_request(RequestCode.QUERY_MESSAGE, {
            "topic": topic, "key": key, "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62}), 5)
    q = await query("order-1")
    assert q.code == ResponseCode.SUCCESS and [m.body for m in decode_records(q.body)] == [b"order 1"]
    assert int(q.ext_fields["indexLastUpdatePhyoffset"]) > 0
    q = await query("shared")
    assert sorted(m.body for m in decode_records(q.body)) == [b"order 0", b"order 1", b"order 2"]
    q = await query(f"{2:032X}")                                    # by the client's message id
    assert [m.body for m in decode_records(q.body)] == [b"order 2"]
    q = await query("order-1", topic="OtherTopic")
    assert (q.code, q.remark) == (ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct")


async def test_send_message_v1_and_batch(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcTopicBatch", queues=2)
    r = await client.invoke(broker.addr, send_request("ProcTopicBatch", b"v1", {"TAGS": "t"},
                                                      code=RequestCode.SEND_MESSAGE), 5)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "0"
    msgs = [Message("ProcTopicBatch", f"b{i}".encode(), properties={"TAGS": "tb", "KEYS": f"bk{i}"}) for i in range(3)]
    r = await client.invoke(broker.addr, send_request("ProcTopicBatch", encode_batch_body(msgs), {},
                                                      code=RequestCode.SEND_BATCH_MESSAGE, batch=True), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert len(r.ext_fields["msgId"].split(",")) == 3 and r.ext_fields["queueOffset"] == "1"
    p = await client.invoke(broker.addr, pull_request("ProcTopicBatch", 0, 0), 5)
    got = decode_records(p.body)
    assert [m.body for m in got] == [b"v1", b"b0", b"b1", b"b2"]
    assert [m.keys for m in got[1:]] == [["bk0"], ["bk1"], ["bk2"]]


@pytest.mark.parametrize("topic, body, extra, code, remark", [
    ("bad topic!", b"x", {}, ResponseCode.SYSTEM_ERROR, "illegal characters"),
    ("NoSuchTopic", b"x", {}, ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist, apply first please!"),
    ("SCHEDULE_TOPIC_XXXX", b"x", {}, ResponseCode.NO_PERMISSION, "is forbidden"),
    ("ProcTopicA", b"x" * (MAX_MESSAGE_SIZE + 10), {}, ResponseCode.MESSAGE_ILLEGAL, "maxMessageSize"),
    ("ProcTopicA", b"x", {"queue_id": 99}, ResponseCode.SYSTEM_ERROR, "request queueId[99] is illegal"),
])
async def test_send_bad_input(fastmq_cluster: EmbeddedCluster, client, topic, body, extra, code, remark):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcTopicA")
    r = await client.invoke(broker.addr, send_request(topic, body, {"TAGS": "t"}, **extra), 5)
    assert r.code == code, r.remark
    assert remark in (r.remark or "")
    # 4.9.8's send processor puts its region and trace switch on every answer, refusals too
    assert {k: (r.ext_fields or {}).get(k) for k in ("MSG_REGION", "TRACE_ON")} == {
        "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
    # the broker keeps serving on the same connection
    ok = await client.invoke(broker.addr, send_request("ProcTopicA", b"after", {}), 5)
    assert ok.code == ResponseCode.SUCCESS


async def test_read_only_topic_and_malformed_header(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcReadOnly", perm=4)
    r = await client.invoke(broker.addr, send_request("ProcReadOnly", b"x"), 5)
    # stored: a 4.9.8 broker does not check a topic's own permission on a send (routes keep
    # producers off read-only queues); tests/interop/test_java_rocketmq.py checks the same on a Java broker
    assert r.code == ResponseCode.SUCCESS, r.remark
    r = await client.invoke(broker.addr, create_request(RequestCode.SEND_MESSAGE_V2, {"b": "ProcReadOnly"}, b"x"), 5)
    assert r.code == ResponseCode.SYSTEM_ERROR and "is null" in r.remark
    r = await client.invoke(broker.addr, create_request(RequestCode.PULL_MESSAGE, {"topic": "x"}), 5)
    assert r.code == ResponseCode.SYSTEM_ERROR
    r = await client.invoke(broker.addr, create_request(RequestCode.SEND_MESSAGE_V2, {
        **send_request("ProcTopicA", b"").ext_fields, "e": "zero"}, b"x"), 5)
    assert r.code == ResponseCode.SYSTEM_ERROR
    r = await client.invoke(broker.addr, send_request("ProcTopicA", b"junk", {}, code=RequestCode.SEND_BATCH_MESSAGE,
                                                      batch=True), 5)
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    p = await client.invoke(broker.addr, pull_request("NoSuchTopic", 0, 0), 5)
    assert p.code == ResponseCode.TOPIC_NOT_EXIST


async def test_long_polling_answers_when_a_message_arrives(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcLongPoll", queues=1)
    held = asyncio.ensure_future(client.invoke(broker.addr, pull_request("ProcLongPoll", 0, 0, suspend_ms=15000), 20))
    await asyncio.sleep(0.3)
    assert not held.done()
    t0 = time.monotonic()
    r = await client.invoke(broker.addr, send_request("ProcLongPoll", b"wake up", {}), 5)
    assert r.code == ResponseCode.SUCCESS
    p = await asyncio.wait_for(held, 10)
    assert time.monotonic() - t0 < 5  # well before the 15 s suspend timeout
    assert p.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(p.body)] == [b"wake up"]
    # a held pull that sees nothing is answered PULL_NOT_FOUND at its timeout
    p = await client.invoke(broker.addr, pull_request("ProcLongPoll", 0, 1, suspend_ms=300), 10)
    assert p.code == ResponseCode.PULL_NOT_FOUND


async def test_send_back_goes_to_retry_then_dlq(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcRetry", queues=1)
    r = await client.invoke(broker.addr, send_request("ProcRetry", b"retry me", {"TAGS": "t", "KEYS": "rk"}), 5)
    assert r.code == ResponseCode.SUCCESS
    p = await client.invoke(broker.addr, pull_request("ProcRetry", 0, 0), 5)
    [m] = decode_records(p.body)
    back = create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "CG_RETRY", "delayLevel": 0,
                                                               "offset": m.commit_log_offset})
    r = await client.invoke(broker.addr, back, 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    # delay level 3 (one second in this broker), then %RETRY%CG_RETRY
    deadline = time.monotonic() + 20
    got = []
    while not got and time.monotonic() < deadline:
        p = await client.invoke(broker.addr, pull_request("%RETRY%CG_RETRY", 0, 0, group="CG_RETRY",
                                                          suspend_ms=2000), 10)
        if p.code == ResponseCode.SUCCESS:
            got = decode_records(p.body)
        elif p.code == ResponseCode.TOPIC_NOT_EXIST:
            await asyncio.sleep(0.2)
    assert got, "the sent-back message never reached the retry topic"
    rm = got[0]
    assert rm.body == b"retry me" and rm.reconsume_times == 1
    assert rm.properties["RETRY_TOPIC"] == "ProcRetry" and rm.properties["KEYS"] == "rk"
    assert rm.properties["ORIGIN_MESSAGE_ID"] == m.msg_id
    # past maxReconsumeTimes: straight to %DLQ%group (1 queue, readable and writable as 4.9.8 makes it)
    dead = create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "CG_RETRY", "delayLevel": 0,
                                                               "offset": rm.commit_log_offset, "maxReconsumeTimes": 1})
    r = await client.invoke(broker.addr, dead, 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    mx = await client.invoke(broker.addr, create_request(RequestCode.GET_MAX_OFFSET,
                                                         {"topic": "%DLQ%CG_RETRY", "queueId": 0}), 5)
    assert mx.ext_fields["offset"] == "1"
    p = await client.invoke(broker.addr, pull_request("%DLQ%CG_RETRY", 0, 0, group="CG_RETRY"), 5)
    assert p.code == ResponseCode.SUCCESS, p.remark
    assert [d.body for d in decode_records(p.body)] == [b"retry me"]
    # a commit-log offset with no message
    r = await client.invoke(broker.addr, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "group": "CG_RETRY", "delayLevel": 0, "offset": 10**12}), 5)
    assert r.code == ResponseCode.SYSTEM_ERROR and "look message by offset failed" in r.remark


async def test_pull_commits_offset(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcCommit", queues=1)
    req = pull_request("ProcCommit", 0, 0, group="CG_COMMIT")
    req.ext_fields["sysFlag"] = str(0x4 | 0x1)
    req.ext_fields["commitOffset"] = "7"
    await client.invoke(broker.addr, req, 5)
    q = await client.invoke(broker.addr, create_request(RequestCode.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": "CG_COMMIT", "topic": "ProcCommit", "queueId": 0}), 5)
    assert q.code == ResponseCode.SUCCESS and q.ext_fields["offset"] == "7"


def _broker_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "fastmq.broker", *args]


def test_print_config_and_bad_config(tmp_path):
    conf = write_broker_conf(tmp_path / "b.conf", port=10999, namesrv="127.0.0.1:1", store=tmp_path / "s",
                             flushDiskType="SYNC_FLUSH")
    out = subprocess.run(_broker_cmd("-c", str(conf), "-p"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "brokerName=fast-broker-a" in out.stdout and "flushDiskType=SYNC_FLUSH" in out.stdout
    assert "listenPort=10999" in out.stdout and "mappedFileSizeCommitLog=262144" in out.stdout
    (tmp_path / "bad.conf").write_text("listenPort=abc\n")
    out = subprocess.run(_broker_cmd("-c", str(tmp_path / "bad.conf")), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "listenPort" in out.stderr
    # a master's replication port on its client port: refused, not shared
    (tmp_path / "same.conf").write_text("listenPort=10999\nhaListenPort=10999\n")
    out = subprocess.run(_broker_cmd("-c", str(tmp_path / "same.conf")), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "haListenPort=10999: the same port as listenPort" in out.stderr


async def test_sigterm_exits_zero_and_store_checks_clean(tmp_path):
    port = free_port()
    conf = write_broker_conf(tmp_path / "b.conf", port=port, namesrv="", store=tmp_path / "store",
                             flushDiskType="SYNC_FLUSH")
    broker = ServerProcess(["fastmq-broker", "-c", str(conf)], port, tmp_path, env={"HOME": str(tmp_path)})
    broker.start()
    try:
        c = RemotingClient()
        try:
            for i in range(20):
                r = await c.invoke(broker.addr, send_request("AutoCreated", f"m{i}".encode(), {}), 5)
                assert r.code == ResponseCode.SUCCESS, r.remark
        finally:
            await c.close()
    finally:
        rc = broker.stop(signal.SIGTERM)
    out = broker.output()
    assert rc == 0, out[-3000:]
    assert f"The broker[fast-broker-a, 127.0.0.1:{port}] boot success." in out
    check = subprocess.run(_broker_cmd("-c", str(conf), "--check-store", str(tmp_path / "store")),
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "0 problem(s)" in check.stdout


# ---------------------------------------------------------------- in-process pieces of the send path

@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
def test_fast_send_header_matches_the_generic_decoder(code):
    from fastmq.errors import RemotingCommandError
    from fastmq.protocol.headers import decode_send_header
    from fastmq.broker.processors.send import fast_send_header

    req = send_request("T", b"x", {"TAGS": "a"}, queue_id=3, code=code)
    assert fast_send_header(req) == decode_send_header(req)
    h = SendMessageRequestHeader("g", "T", "TBW102", 4, 1, 0, 5, 0, None, 2, True, 16, False, "b")
    fields = h.to_fields() if code == RequestCode.SEND_MESSAGE else h.to_v2_fields()
    req = create_request(code, fields, b"")
    assert fast_send_header(req) == decode_send_header(req) == h
    bad = create_request(code, {k: v for k, v in fields.items() if k not in ("queueId", "e")}, b"")
    with pytest.raises(RemotingCommandError, match="is null"):
        fast_send_header(bad)
    bad = create_request(code, {**fields, ("queueId" if code == RequestCode.SEND_MESSAGE else "e"): "x"}, b"")
    with pytest.raises(RemotingCommandError, match="not a number"):
        fast_send_header(bad)


def test_cpp_batch_flag_one_is_a_batch():
    from fastmq.broker.processors.send import fast_send_header

    req = send_request("T", b"x", {}, code=RequestCode.SEND_MESSAGE)
    req.ext_fields["batch"] = "1"
    assert fast_send_header(req).batch
    req.ext_fields["batch"] = "0"
    assert not fast_send_header(req).batch


async def test_run_eagerly_finishes_now_or_in_the_task():
    from fastmq.remoting.loop import run_eagerly

    async def quick():
        return 1

    async def slow():
        await asyncio.sleep(0.01)
        return 2

    async def failing():
        await asyncio.sleep(0)
        raise ValueError("boom")

    assert run_eagerly(quick()) == 1
    assert await run_eagerly(slow()) == 2
    with pytest.raises(ValueError, match="boom"):
        await run_eagerly(failing())


async def test_one_socket_write_of_good_and_bad_sends(fastmq_cluster: EmbeddedCluster):
    """Everything a read delivers goes through the batch path at once: the good sends are stored
    and acknowledged in order, each bad one gets its own error, a oneway gets nothing, and the
    broker keeps serving the connection."""
    from fastmq._ext.codec import FrameDecoder, encode_frames

    broker = fastmq_cluster.brokers[0]
    c = RemotingClient()
    try:
        await create_topic(c, broker.addr, "ProcMixed", queues=2)
        await create_topic(c, broker.addr, "ProcMixedRO", queues=1, perm=4)
    finally:
        await c.close()
    batch_body = encode_batch_body([Message("ProcMixed", f"b{i}".encode(), properties={"KEYS": f"bk{i}"})
                                    for i in range(3)])
    oneway = send_request("ProcMixed", b"oneway", {"TAGS": "ow"}, queue_id=0)
    oneway.flag = 2
    reqs = [
        (send_request("ProcMixed", b"m0", {"TAGS": "标签", "KEYS": "k0"}, queue_id=0), ResponseCode.SUCCESS, None),
        (send_request("NoSuchTopic", b"x"), ResponseCode.TOPIC_NOT_EXIST, "not exist"),
        (send_request("ProcMixed", b"m1", {"DELAY": "1"}, queue_id=0), ResponseCode.SUCCESS, None),
        (send_request("ProcMixed", b"x" * (MAX_MESSAGE_SIZE + 10), queue_id=0), ResponseCode.MESSAGE_ILLEGAL,
         "maxMessageSize"),
        (send_request("ProcMixed", batch_body, queue_id=1, code=RequestCode.SEND_BATCH_MESSAGE),
         ResponseCode.SUCCESS, None),
        (send_request("ProcMixed", b"x", queue_id=7), ResponseCode.SYSTEM_ERROR, "queueId[7] is illegal"),
        (send_request("ProcMixedRO", b"x"), ResponseCode.SUCCESS, None),  # a read-only topic: as 4.9.8, stored
        (send_request("SCHEDULE_TOPIC_XXXX", b"x"), ResponseCode.NO_PERMISSION, "forbidden"),
        (create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "ProcMixed"}, b"x"), ResponseCode.SYSTEM_ERROR,
         None),
        (oneway, None, None),
        (send_request("ProcMixed", b"m2", {"TAGS": "t"}, queue_id=0, code=RequestCode.SEND_MESSAGE),
         ResponseCode.SUCCESS, None),
    ]
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    try:
        writer.write(encode_frames([r for r, _, _ in reqs]))
        want = {r.opaque: (code, remark) for r, code, remark in reqs if code is not None}
        got: dict[int, object] = {}
        dec = FrameDecoder()
        deadline = time.monotonic() + 15
        while len(got) < len(want) and time.monotonic() < deadline:
            chunk = await asyncio.wait_for(reader.read(1 << 20), 15)
            assert chunk, "the broker closed the connection"
            for resp in dec.feed(chunk):
                got[resp.opaque] = resp
        assert set(got) == set(want)
        for opaque, (code, remark) in want.items():
            resp = got[opaque]
            assert resp.code == code, (resp.code, resp.remark)
            if remark:
                assert remark in (resp.remark or "")
        offsets = [int(got[r.opaque].ext_fields["queueOffset"]) for r, code, _ in reqs
                   if code == ResponseCode.SUCCESS and r.ext_fields.get("e", r.ext_fields.get("queueId")) == "0"
                   and r.ext_fields.get("b", r.ext_fields.get("topic")) == "ProcMixed"
                   and "DELAY" not in (r.ext_fields.get("i") or "")]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    finally:
        writer.close()
    c = RemotingClient()
    try:
        p = await c.invoke(broker.addr, pull_request("ProcMixed", 0, 0), 5)
        bodies = [m.body for m in decode_records(p.body)]
        assert bodies[0] == b"m0" and b"oneway" in bodies and bodies[-1] == b"m2" and b"m1" not in bodies
        assert decode_records(p.body)[0].properties["TAGS"] == "标签"
        p = await c.invoke(broker.addr, pull_request("ProcMixed", 1, 0), 5)
        assert [m.body for m in decode_records(p.body)] == [b"b0", b"b1", b"b2"]
        r = await c.invoke(broker.addr, create_request(RequestCode.QUERY_MESSAGE, {
            "topic": "ProcMixed", "key": "bk1", "maxNum": 32, "beginTimestamp": 0,
            "endTimestamp": int(time.time() * 1000) + 60000}), 5)
        assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_records(r.body)] == [b"b1"]
    finally:
        await c.close()


async def test_delete_subscription_group_with_and_without_its_offsets(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcDeleteGroup")

    async def committed(group: str) -> int:
        r = await client.invoke(broker.addr, create_request(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": "ProcDeleteGroup", "queueId": 0}), 5)
        return int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -r.code

    for group in ("GID_KEEP", "GID_DROP"):
        r = await client.invoke(broker.addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": "ProcDeleteGroup", "queueId": 0, "commitOffset": 7}), 5)
        assert r.code == ResponseCode.SUCCESS
        r = await client.invoke(broker.addr, create_request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {
            "groupName": group, "removeOffset": str(group == "GID_DROP").lower()}), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
    assert await committed("GID_KEEP") == 7
    assert await committed("GID_DROP") == 0  # no offset: an empty queue that starts at 0 answers 0
    r = await client.invoke(broker.addr, create_request(RequestCode.DELETE_SUBSCRIPTIONGROUP,
                                                        {"groupName": "NoSuch"}), 5)
    assert r.code == ResponseCode.SUCCESS  # an unknown group too, as 4.9.8 answers
    r = await client.invoke(broker.addr, create_request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {}), 5)
    assert r.code == ResponseCode.SYSTEM_ERROR  # no groupName: a header error, the broker stays up


async def test_runtime_info_and_connection_lists_as_mqadmin_reads_them(fastmq_cluster: EmbeddedCluster, client):
    """clusterList and brokerStatus read these keys (a missing one was a NullPointerException in
    mqadmin); producerConnection and consumerConnection these bodies."""
    from fastmq.protocol.heartbeat import ConsumerData, HeartbeatData, ProducerData, build_subscription

    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcAdmin")
    for i in range(3):
        assert (await client.invoke(broker.addr, send_request("ProcAdmin", b"%d" % i), 5)).code == ResponseCode.SUCCESS
    r = await client.invoke(broker.addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5)
    table = json.loads(r.body)["table"]
    for key in ("putTps", "getTransferedTps", "getFoundTps", "getMissTps", "getTotalTps", "brokerVersionDesc",
                "sendThreadPoolQueueSize", "pullThreadPoolQueueSize", "sendThreadPoolQueueHeadWaitTimeMills",
                "pullThreadPoolQueueHeadWaitTimeMills", "pageCacheLockTimeMills", "earliestMessageTimeStamp",
                "commitLogDiskRatio", "msgPutTotalTodayNow", "msgGetTotalTodayNow", "msgPutTotalTodayMorning"):
        assert isinstance(table.get(key), str), key
    assert len(table["putTps"].split(" ")) == 3  # the 10 s, 1 min and 10 min windows
    assert int(table["msgPutTotalTodayNow"]) >= 3 and 0 < int(table["earliestMessageTimeStamp"]) <= time.time() * 1000

    hb = HeartbeatData("10.0.0.9@admin", [ProducerData("PG_ADMIN")],
                       [ConsumerData("GID_ADMIN", subscriptions=[build_subscription("ProcAdmin", "*")])])
    assert (await client.invoke(broker.addr, create_request(RequestCode.HEART_BEAT, body=hb.to_json()), 5)).code == 0
    r = await client.invoke(broker.addr, create_request(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                                        {"producerGroup": "PG_ADMIN"}), 5)
    assert r.code == ResponseCode.SUCCESS
    [c] = json.loads(r.body)["connectionSet"]
    assert c["clientId"] == "10.0.0.9@admin" and c["language"] == "PYTHON"
    r = await client.invoke(broker.addr, create_request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                        {"consumerGroup": "GID_ADMIN"}), 5)
    assert r.code == ResponseCode.SUCCESS and json.loads(r.body)["connectionSet"][0]["clientId"] == "10.0.0.9@admin"
    r = await client.invoke(broker.addr, create_request(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                                        {"producerGroup": "PG_NONE"}), 5)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[PG_NONE] not exist")


async def test_get_broker_config(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    r = await client.invoke(broker.addr, create_request(RequestCode.GET_BROKER_CONFIG, {}), 5)
    assert r.code == ResponseCode.SUCCESS
    conf = dict(line.split("=", 1) for line in r.body.decode().splitlines())
    assert conf["listenPort"] == str(broker.port) and conf["flushDiskType"] == "ASYNC_FLUSH"
    assert conf["autoCreateTopicEnable"] == "false" and "mappedFileSizeCommitLog" in conf  # broker and store keys
    assert set(json.loads(r.ext_fields["version"])) == {"counter", "timestamp"}


async def test_unknown_groups_without_auto_creation(fastmq_cluster: EmbeddedCluster, client, tmp_path):
    """autoCreateSubscriptionGroup=false: a pull and a send-back for a group nobody made are
    refused with 4.9.8's code and remark, and the broker keeps serving."""
    from fastmq.testing import broker_process

    namesrv = fastmq_cluster.namesrv
    strict = broker_process(tmp_path, namesrv.addr, brokerName="broker-strict",
                            autoCreateSubscriptionGroup="false").start()
    try:
        await create_topic(client, strict.addr, "ProcStrict")
        assert (await client.invoke(strict.addr, send_request("ProcStrict", b"x"), 5)).code == ResponseCode.SUCCESS
        p = await client.invoke(strict.addr, pull_request("ProcStrict", 0, 0, group="GID_NOBODY"), 5)
        assert p.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert p.remark.startswith("subscription group [GID_NOBODY] does not exist, \nSee http://rocketmq.apache.org")
        r = await client.invoke(strict.addr, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "group": "GID_NOBODY", "offset": 0, "delayLevel": 0, "originMsgId": "X", "originTopic": "ProcStrict",
            "unitMode": "false", "maxReconsumeTimes": 16}), 5)
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert r.remark.startswith("subscription group not exist, GID_NOBODY \nSee http://rocketmq.apache.org")
        assert (await client.invoke(strict.addr, send_request("ProcStrict", b"y"), 5)).code == ResponseCode.SUCCESS
    finally:
        assert strict.stop() == 0, strict.output()[-3000:]


async def test_update_broker_config(fastmq_cluster: EmbeddedCluster, client, tmp_path):
    """UPDATE_BROKER_CONFIG: a live key applies at once, a start-only one waits for the next
    start, both land in the -c file (as 4.9's BrokerStartup has it); a bad value changes nothing."""
    from fastmq.testing import broker_process

    namesrv = fastmq_cluster.namesrv
    b = broker_process(tmp_path, namesrv.addr, brokerName="broker-conf", maxMessageSize=65536).start()
    try:
        await create_topic(client, b.addr, "ProcConf")

        async def update(**kv: object):
            body = "".join(f"{k}={v}\n" for k, v in kv.items()).encode()
            return await client.invoke(b.addr, create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, body), 5)

        assert (await client.invoke(b.addr, send_request("ProcConf", b"x" * 2000), 5)).code == ResponseCode.SUCCESS
        r = await update(maxMessageSize=1024, listenPort=1, noSuchKey="x")
        assert r.code == ResponseCode.SUCCESS, r.remark
        r = await client.invoke(b.addr, send_request("ProcConf", b"x" * 2000), 5)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL  # applied now
        conf = (tmp_path / "broker.conf").read_text()
        assert "maxMessageSize=1024" in conf and "listenPort=1\n" in conf and "noSuchKey" not in conf
        r = await update(maxMessageSize="lots", flushIntervalCommitLog=100)
        assert r.code == ResponseCode.SYSTEM_ERROR and "maxMessageSize" in r.remark
        r = await client.invoke(b.addr, create_request(RequestCode.GET_BROKER_CONFIG, {}), 5)
        got = dict(line.split("=", 1) for line in r.body.decode().splitlines())
        assert (got["maxMessageSize"], got["flushIntervalCommitLog"]) == ("1024", "500")  # all or nothing
        r = await client.invoke(b.addr, create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, b"\xff=1\n"), 5)
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith("string2Properties error: not UTF-8")
        assert (await client.invoke(b.addr, send_request("ProcConf", b"ok"), 5)).code == ResponseCode.SUCCESS
    finally:
        assert b.stop() == 0, b.output()[-3000:]


async def test_reset_offset_pushes_the_offsets_to_online_members(fastmq_cluster: EmbeddedCluster, client):
    """INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime) as 4.9.8's Broker2Client does it:
    each queue's offset at the time, pushed oneway to the group's members, and answered; and
    its refusals (no topic, no offsets, nobody online)."""
    from fastmq.protocol.heartbeat import ConsumerData, HeartbeatData, build_subscription
    from fastmq.remoting import RemotingClient
    from fastmq.remoting.processor import RequestProcessor

    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcReset", queues=2)
    for i in range(4):
        assert (await client.invoke(broker.addr, send_request("ProcReset", b"%d" % i, queue_id=i % 2), 5)).code == 0

    def reset(group: str, timestamp: int, force: bool = True, topic: str = "ProcReset"):
        return client.invoke(broker.addr, create_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
            "topic": topic, "group": group, "timestamp": timestamp, "isForce": str(force).lower()}), 5)

    r = await reset("GID_RESET", 0, topic="NoSuchTopic")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "[reset-offset] reset offset failed, no topic in this broker. topic=NoSuchTopic")
    r = await reset("GID_RESET", 0)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <GID_RESET> not exist")
    for q in (0, 1):
        await client.invoke(broker.addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": "GID_RESET", "topic": "ProcReset", "queueId": q, "commitOffset": 2}), 5)
    r = await reset("GID_RESET", 0)
    assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert r.remark == "Consumer not online, so can not reset offset, Group: GID_RESET Topic: ProcReset Timestamp: 0"

    pushed: list = []

    class Member(RequestProcessor):
        def process_request(self, conn, request):
            if request.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:  # (not NOTIFY_CONSUMER_IDS_CHANGED)
                pushed.append(request)
            return None

    member = RemotingClient(processor=Member())
    try:
        hb = HeartbeatData("10.0.0.7@member", [], [ConsumerData("GID_RESET",
                                                                subscriptions=[build_subscription("ProcReset", "*")])])
        assert (await member.invoke(broker.addr, create_request(RequestCode.HEART_BEAT, body=hb.to_json()), 5)).code == 0
        r = await reset("GID_RESET", 0)  # the time of the first message: back to 0 on both queues
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.body.count(b'"topic":"ProcReset"}:0') == 2  # fastjson's Map<MessageQueue, Long>
        r = await reset("GID_RESET", -1, force=False)  # the end is later than where the group is: kept
        assert r.code == ResponseCode.SUCCESS and r.body.count(b'"topic":"ProcReset"}:2') == 2
        deadline = time.monotonic() + 10
        while len(pushed) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert [p.code for p in pushed] == [RequestCode.RESET_CONSUMER_CLIENT_OFFSET] * 2
        assert (pushed[0].ext_fields["group"], pushed[0].ext_fields["topic"], pushed[0].ext_fields["timestamp"]) == \
            ("GID_RESET", "ProcReset", "0")
        assert pushed[0].flag & 2 and b'"queueId":1' in pushed[0].body  # oneway, with the offset table
    finally:
        await member.close()


async def test_stats_data_and_consumers_of_a_topic_for_stats_all(fastmq_cluster: EmbeddedCluster, client):
    broker = fastmq_cluster.brokers[0]
    await create_topic(client, broker.addr, "ProcStats", queues=1)
    for i in range(3):
        assert (await client.invoke(broker.addr, send_request("ProcStats", b"%d" % i), 5)).code == 0
    p = await client.invoke(broker.addr, pull_request("ProcStats", 0, 0, group="GID_STATS"), 5)
    assert p.code == ResponseCode.SUCCESS
    await client.invoke(broker.addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "GID_STATS", "topic": "ProcStats", "queueId": 0, "commitOffset": 3}), 5)

    async def stats(name: str, key: str):
        return await client.invoke(broker.addr, create_request(RequestCode.VIEW_BROKER_STATS_DATA,
                                                               {"statsName": name, "statsKey": key}), 5)
    for name, key in (("TOPIC_PUT_NUMS", "ProcStats"), ("GROUP_GET_NUMS", "ProcStats@GID_STATS")):
        r = await stats(name, key)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert set(json.loads(r.body)) == {"statsMinute", "statsHour", "statsDay"}
        assert set(json.loads(r.body)["statsMinute"]) == {"sum", "tps", "avgpt"}
    r = await stats("TOPIC_PUT_NUMS", "NoSuchTopic")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist")
    r = await client.invoke(broker.addr, create_request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                                        {"topic": "ProcStats"}), 5)
    assert r.code == ResponseCode.SUCCESS and "GID_STATS" in json.loads(r.body)["groupList"]
