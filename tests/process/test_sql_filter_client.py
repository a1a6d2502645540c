"""fastmq's consumers with MessageSelector.by_sql / by_tag against a broker with
enablePropertyFilter=true: push and lite pull, asyncio and blocking, and the typed refusals at
start (a bad expression; the switch turned off)."""
from __future__ import annotations

import threading
import time

import pytest

import fastmq
from fastmq.aio import Message, MessageSelector, Producer
from fastmq.client.push_consumer import ConsumeStatus, PullConsumer, PushConsumer
from fastmq.errors import FilterRefusedError
from fastmq.testing import EmbeddedCluster
from tests.process.helpers import update_broker_config
from tests.support import wait_until

pytestmark = pytest.mark.fastmq_cluster(broker_conf={"enablePropertyFilter": "true",
                                                     "mappedFileSizeCommitLog": 16777216})

TOPIC = "SqlClientTopic"
WANTED = {f"m{i}".encode() for i in range(30) if i % 3 == 0 and 6 <= i < 24}  # region eu, 6 <= amount < 24


@pytest.fixture
async def produced(fastmq_cluster: EmbeddedCluster) -> str:
    """30 messages on the topic (once per module's cluster): amount = i, region eu for every third."""
    ns = fastmq_cluster.namesrv_addr
    if not getattr(fastmq_cluster, "_sql_produced", False):
        async with Producer("PG_SQL", namesrv_addr=ns) as p:
            for i in range(30):
                r = await p.send(Message(TOPIC, f"m{i}".encode(), properties={
                    "TAGS": "tagA" if i % 2 else "tagB", "region": "eu" if i % 3 == 0 else "us", "amount": str(i)}))
                assert r.status == "SEND_OK"
        fastmq_cluster._sql_produced = True  # type: ignore[attr-defined]
    return ns


SQL = "region = 'eu' AND amount >= 6 AND amount < 24"


async def test_push_consumer_by_sql(produced: str) -> None:
    got: list[bytes] = []

    def listener(msgs):
        got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("GID_SQL_PUSH", namesrv_addr=produced, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC, MessageSelector.by_sql(SQL))
    c.register_message_listener(listener)
    await c.start()
    try:
        assert await wait_until(lambda: set(got) >= WANTED, 20), got
        await wait_until(lambda: False, 0.5)  # (anything unwanted would have come by now)
    finally:
        await c.shutdown()
    assert set(got) == WANTED


async def test_lite_pull_consumer_by_sql_and_by_tag(produced: str) -> None:
    c = PullConsumer("GID_SQL_PULL", namesrv_addr=produced, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC, MessageSelector.by_sql(SQL))
    await c.start()
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while set(seen) < WANTED and time.monotonic() < deadline:
            seen += [m.body for m in await c.poll(0.5)]
    finally:
        await c.shutdown()
    assert set(seen) == WANTED
    t = PullConsumer("GID_TAG_PULL", namesrv_addr=produced, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    t.subscribe(TOPIC, MessageSelector.by_tag("tagA"))
    await t.start()
    tagged: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(set(tagged)) < 15 and time.monotonic() < deadline:
            tagged += [m.body for m in await t.poll(0.5)]
    finally:
        await t.shutdown()
    assert set(tagged) == {f"m{i}".encode() for i in range(30) if i % 2}


async def test_a_bad_expression_fails_the_start(produced: str) -> None:
    c = PushConsumer("GID_SQL_BAD", namesrv_addr=produced)
    c.subscribe(TOPIC, MessageSelector.by_sql("amount > 'x'"))
    c.register_message_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    with pytest.raises(FilterRefusedError) as info:
        await c.start()
    assert info.value.code == 23 and info.value.topic == TOPIC
    assert info.value.remark == "java.lang.RuntimeException: Value ''x'' cannot be compared."
    await c.shutdown()  # (releases what the failed start took)
    assert not c.instance.started
    with pytest.raises(fastmq.MessageValidationError):
        c.subscribe(TOPIC, MessageSelector(expression_type="SQL92", expression=""))
    with pytest.raises(ValueError):
        MessageSelector.by_sql(" ")


def test_blocking_consumers_by_sql_and_refused_when_the_switch_is_off(fastmq_cluster: EmbeddedCluster,
                                                                      produced: str) -> None:
    got: list[bytes] = []
    done = threading.Event()

    def listener(msgs):
        got.extend(m.body for m in msgs)
        if set(got) >= WANTED:
            done.set()
        return fastmq.ConsumeStatus.CONSUME_SUCCESS

    c = fastmq.PushConsumer("GID_SQL_BLOCK", namesrv_addr=produced, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC, fastmq.MessageSelector.by_sql(SQL))
    c.register_message_listener(listener)
    with c:
        assert done.wait(20), got
    assert set(got) == WANTED
    import asyncio

    from fastmq.remoting import RemotingClient

    async def switch(on: bool) -> None:
        rc = RemotingClient(connect_timeout=2)
        try:
            await update_broker_config(rc, fastmq_cluster.broker_addr, enablePropertyFilter=str(on).lower())
        finally:
            await rc.close()

    asyncio.run(switch(False))
    try:
        pc = fastmq.PullConsumer("GID_SQL_OFF", namesrv_addr=produced)
        pc.subscribe(TOPIC, fastmq.MessageSelector.by_sql(SQL))
        with pytest.raises(FilterRefusedError) as info:
            pc.start()
        assert info.value.code == 1
        assert info.value.remark == "The broker does not support consumer to filter message by SQL92"
        pc.shutdown()
    finally:
        asyncio.run(switch(True))
