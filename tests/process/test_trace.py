"""Message trace through a real ``fastmq-broker`` with ``traceTopicEnable=true``: fastmq's
producers and consumers with ``enable_trace=True`` write 4.9.8's records to
``RMQ_SYS_TRACE_TOPIC``, and ``query_trace`` (asyncio and blocking) reads a message's trace back
by QUERY_MESSAGE on its id: a send and its consumption, a retry and the DLQ, a transaction's
EndTransaction, a poll of the lite pull consumer; bad bodies on the trace topic; the broker's
side (the topic at start, TRACE_ON in send answers, a trace message's many keys all indexed).
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Iterator

import pytest

import fastmq
from fastmq.aio import (ConsumeStatus, LocalTransactionState, Message, MessageExt, Producer,
                        PushConsumer, TransactionProducer, query_trace)
from fastmq.client.trace_query import TraceRecord
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import encode_properties
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster
from tests.process.helpers import until

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
BROKER = {"traceTopicEnable": "true",
          # retries a second apart, so a message reaches the DLQ within seconds
          "messageDelayLevel": " ".join(["1s"] * 18),
          # a half left UNKNOW is checked within a couple of seconds
          "transactionCheckInterval": 1000, "transactionTimeOut": 1000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path_factory.mktemp("trace-cluster"), broker_conf=BROKER) as c:
        yield c


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def _trace_until(ns: str, msg_id: str, want: list[str], seconds: float = 15.0) -> list[TraceRecord]:
    """The message's trace once it holds every type in ``want`` (as many times as listed)."""
    got: list[TraceRecord] = []

    async def complete() -> bool:
        nonlocal got
        got = await query_trace(msg_id, namesrv_addr=ns)
        kinds = [r.trace_type for r in got]
        return all(kinds.count(k) >= want.count(k) for k in want)
    await until(complete, seconds)
    return got


async def test_trace_topic_exists_at_start_and_send_answers_say_trace_on(cluster: EmbeddedCluster) -> None:
    client = RemotingClient(namesrv_addrs=[cluster.namesrv_addr])
    try:
        resp = await client.invoke(cluster.namesrv_addr, create_request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TRACE_TOPIC}), 5)
        assert resp.code == ResponseCode.SUCCESS
        topic = _name("TraceOnTopic")
        header = SendMessageRequestHeader(producerGroup="pg", topic=topic, defaultTopic="TBW102",
                                          defaultTopicQueueNums=4, queueId=0, sysFlag=0, bornTimestamp=0, flag=0,
                                          properties=encode_properties({}).decode())
        resp = await client.invoke(cluster.broker_addr, create_request(RequestCode.SEND_MESSAGE, header.to_fields(),
                                                                      b"x"), 5)
        assert resp.code == ResponseCode.SUCCESS
        assert resp.ext_fields["TRACE_ON"] == "true" and resp.ext_fields["MSG_REGION"] == "DefaultRegion"
    finally:
        await client.close()


async def test_a_sent_and_consumed_message_shows_pub_and_sub(cluster: EmbeddedCluster) -> None:
    ns, topic = cluster.namesrv_addr, _name("TraceTopic")
    consumed = asyncio.Event()

    async def listener(msgs: list[MessageExt]) -> str:
        consumed.set()
        return ConsumeStatus.CONSUME_SUCCESS

    async with Producer(_name("PG_TRACE"), namesrv_addr=ns, enable_trace=True) as producer:
        consumer = PushConsumer(_name("CG_TRACE"), namesrv_addr=ns, enable_trace=True,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        sent = await producer.send(Message(topic, b"traced", properties={"TAGS": "tagA", "KEYS": "order-1"}))
        await consumer.start()
        try:
            await asyncio.wait_for(consumed.wait(), 20)
            trace = await _trace_until(ns, sent.msg_id, ["Pub", "SubBefore", "SubAfter"])
        finally:
            await consumer.shutdown()
    kinds = [r.trace_type for r in trace]
    assert sorted(kinds) == ["Pub", "SubAfter", "SubBefore"], kinds
    pub = next(r.context for r in trace if r.trace_type == "Pub")
    bean = pub.beans[0]
    assert (pub.group_name, pub.region_id, pub.success) == (producer.group, "DefaultRegion", True)
    assert (bean.topic, bean.tags, bean.keys, bean.body_length) == (topic, "tagA", "order-1", 6)
    assert bean.offset_msg_id == sent.offset_msg_id and bean.store_host == cluster.broker_addr
    before = next(r.context for r in trace if r.trace_type == "SubBefore")
    after = next(r.context for r in trace if r.trace_type == "SubAfter")
    assert before.group_name == consumer.group and before.request_id == after.request_id
    assert after.success and after.context_code == 0 and after.beans[0].keys == "order-1"


async def test_a_retried_message_shows_each_try_until_the_dlq(cluster: EmbeddedCluster) -> None:
    ns, topic = cluster.namesrv_addr, _name("TraceRetry")
    tries: list[int] = []

    def listener(msgs: list[MessageExt]) -> str:
        tries.append(msgs[0].reconsume_times)
        return ConsumeStatus.RECONSUME_LATER

    async with Producer(_name("PG_TRACE"), namesrv_addr=ns, enable_trace=True) as producer:
        consumer = PushConsumer(_name("CG_RETRY"), namesrv_addr=ns, enable_trace=True, max_reconsume_times=2,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        sent = await producer.send(Message(topic, b"fails"))
        await consumer.start()
        try:
            async def three() -> bool:
                return len(tries) >= 3
            assert await until(three, 30), tries
            trace = await _trace_until(ns, sent.msg_id, ["Pub"] + ["SubBefore", "SubAfter"] * 3, 20)
        finally:
            await consumer.shutdown()
    befores = [r.context for r in trace if r.trace_type == "SubBefore"]
    afters = [r.context for r in trace if r.trace_type == "SubAfter"]
    assert sorted(b.beans[0].retry_times for b in befores) == [0, 1, 2]
    assert all(not a.success and a.context_code == 4 for a in afters)
    # the third failure sent it to %DLQ%<group>: nothing more is delivered
    await asyncio.sleep(2.5)
    assert len(tries) == 3


class _Commit:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def test_a_transaction_shows_its_half_and_end_transaction(cluster: EmbeddedCluster) -> None:
    ns, topic = cluster.namesrv_addr, _name("TraceTx")
    async with TransactionProducer(_name("PG_TX"), namesrv_addr=ns, listener=_Commit(), enable_trace=True) as p:
        r = await p.send_message_in_transaction(Message(topic, b"tx", properties={"KEYS": "tx-1"}))
    trace = await _trace_until(ns, r.msg_id, ["Pub", "EndTransaction"])
    pub = next(x.context for x in trace if x.trace_type == "Pub")
    end = next(x.context for x in trace if x.trace_type == "EndTransaction")
    assert pub.beans[0].msg_type == 1  # Trans_Msg_Half
    assert end.beans[0].transaction_state == "COMMIT_MESSAGE" and not end.beans[0].from_transaction_check
    assert end.beans[0].msg_type == 2 and end.beans[0].keys == "tx-1" and end.group_name == p.group


class _UnknownThenCommit:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def test_a_checked_transaction_shows_both_end_transactions(cluster: EmbeddedCluster) -> None:
    ns, topic = cluster.namesrv_addr, _name("TraceTxCheck")
    async with TransactionProducer(_name("PG_TXC"), namesrv_addr=ns, listener=_UnknownThenCommit(),
                                   enable_trace=True) as p:
        r = await p.send_message_in_transaction(Message(topic, b"tx"))
        trace = await _trace_until(ns, r.msg_id, ["Pub", "EndTransaction", "EndTransaction"], 25)
    ends = sorted((x.context.beans[0].from_transaction_check, x.context.beans[0].transaction_state)
                  for x in trace if x.trace_type == "EndTransaction")
    assert ends[:1] == [(False, "UNKNOW")] and (True, "COMMIT_MESSAGE") in ends, ends


async def test_bad_bodies_on_the_trace_topic_do_not_break_the_reader(cluster: EmbeddedCluster) -> None:
    ns, topic = cluster.namesrv_addr, _name("TraceBad")
    async with Producer(_name("PG_TRACE"), namesrv_addr=ns, enable_trace=True) as producer:
        sent = await producer.send(Message(topic, b"x"))
        async with Producer(_name("PG_VANDAL"), namesrv_addr=ns) as vandal:
            for body in (b"\xff\xfe\xfd", b"Pub\x01not-a-number\x02", b"Nonsense\x01a\x02", b"",
                         b"SubBefore\x011\x02"):
                await vandal.send(Message(TRACE_TOPIC, body or b"\x02", properties={"KEYS": sent.msg_id}))
    trace = await _trace_until(ns, sent.msg_id, ["Pub"])
    assert [r.trace_type for r in trace] == ["Pub"]


def test_blocking_producer_and_lite_pull_consumer(cluster: EmbeddedCluster) -> None:
    ns, topic = cluster.namesrv_addr, _name("TraceBlocking")
    producer = fastmq.Producer(_name("PG_BLOCK"), namesrv_addr=ns, enable_trace=True)
    producer.start()
    try:
        sent = producer.send(Message(topic, b"blocking"))
        done: list[Any] = []
        producer.send_async(Message(topic, b"async"), lambda r, e: done.append(r or e))
        for _ in range(100):
            if done:
                break
            time.sleep(0.05)
    finally:
        producer.shutdown()  # sends what its dispatcher holds
    consumer = fastmq.PullConsumer(_name("CG_POLL"), namesrv_addr=ns, enable_trace=True,
                                   consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.start()
    try:
        got: list[MessageExt] = []
        for _ in range(20):
            got += consumer.poll(1.0)
            if len(got) >= 2:
                break
        assert len(got) == 2
    finally:
        consumer.shutdown()
    kinds: list[str] = []
    for _ in range(50):
        kinds = sorted(r.trace_type for r in fastmq.query_trace(sent.msg_id, namesrv_addr=ns))
        if kinds == ["Pub", "SubAfter", "SubBefore"]:
            break
    assert kinds == ["Pub", "SubAfter", "SubBefore"]
    assert len(done) == 1 and not isinstance(done[0], BaseException)
    assert "Pub" in [r.trace_type for r in fastmq.query_trace(done[0].msg_id, namesrv_addr=ns)]


async def test_a_send_that_waits_for_a_permit_is_traced_once(cluster: EmbeddedCluster) -> None:
    """The blocking facade's awaited send (``start_send``) finding every in-flight permit taken
    waits for one on a task: its callback is traced, so the send it waits on must not be too."""
    ns, topic = cluster.namesrv_addr, _name("TraceWait")
    async with Producer(_name("PG_WAIT"), namesrv_addr=ns, enable_trace=True, max_in_flight=1) as producer:
        await producer.send(Message(topic, b"route"))  # (the route, out of the way)
        permits = producer._in_flight
        assert permits is not None and permits.try_acquire()  # every permit is out
        got: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        producer.start_send(Message(topic, b"waited"), lambda r, e: got.set_result(r or e), None, True)
        await asyncio.sleep(0.05)
        assert not got.done()  # it waits for the permit
        permits.release()
        sent = await asyncio.wait_for(got, 10)
        assert not isinstance(sent, BaseException)
        assert producer.trace_dispatcher is not None
        await producer.trace_dispatcher.flush()
    trace = await _trace_until(ns, sent.msg_id, ["Pub"])
    await asyncio.sleep(0.5)  # (a second record, were there one, would be sent with the first)
    trace = await query_trace(sent.msg_id, namesrv_addr=ns)
    assert [r.trace_type for r in trace] == ["Pub"]


async def test_every_key_of_a_trace_message_is_indexed(cluster: EmbeddedCluster) -> None:
    """A trace message carries a key per traced message: all of them are indexed, not the first 63."""
    ns = cluster.namesrv_addr
    keys = [f"K{i:04d}-{uuid.uuid4().hex[:6]}" for i in range(300)]
    async with Producer(_name("PG_KEYS"), namesrv_addr=ns) as producer:
        await producer.send(Message(TRACE_TOPIC, b"Nonsense\x02", properties={"KEYS": " ".join(keys)}))
        for key in (keys[0], keys[62], keys[63], keys[-1]):
            found = await producer.instance.api.query_message(cluster.broker_addr, TRACE_TOPIC, key, 32, 0, 2**62)
            assert len(found) == 1, key


async def test_messages_with_long_keys_are_all_traced(cluster: EmbeddedCluster) -> None:
    """Sends whose KEYS are long: their trace messages are cut by the keys' length too, so none
    passes the broker's 32,767-byte properties limit and is refused; every send is traced."""
    ns, topic = cluster.namesrv_addr, _name("TraceLongKeys")
    async with Producer(_name("PG_LONG_KEYS"), namesrv_addr=ns, enable_trace=True) as producer:
        sent = [await producer.send(Message(topic, b"x", properties={"KEYS": f"key{i}-" + "k" * 500}))
                for i in range(150)]
        assert producer.trace_dispatcher is not None
        await producer.trace_dispatcher.flush()
    for r in (sent[0], sent[75], sent[-1]):
        trace = await _trace_until(ns, r.msg_id, ["Pub"])
        assert [t.trace_type for t in trace] == ["Pub"]
