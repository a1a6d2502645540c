"""Timer messages on a real broker: held in rmq_sys_wheel_timer, delivered to their topic at their
time (never before), RocketMQ 5's precedence between the three properties, a delay level winning,
a time in the past delivered at once, and the refusals with 5.x's code and text.

Timers here are 1-3 s; every wait is bounded. A fresh topic per test keeps them apart on the
module's one cluster.
"""
from __future__ import annotations

import time

import pytest

from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.message import MessageConst, decode_records
from fastmq.testing import EmbeddedCluster
from tests.process.helpers import create_topic, send_request, until
from tests.support import pull_request

pytestmark = pytest.mark.fastmq_cluster(broker_conf={"messageDelayLevel": "1s 2s"})

MAX_TEXT = ("timer message illegal, the delay time should not be bigger than the max delay 259200000ms; or if set "
            "del msg, the delay time should be bigger than the current time")


def now_ms() -> int:
    return int(time.time() * 1000)


async def _topic(client, addr: str, name: str) -> str:
    assert (await create_topic(client, addr, name, queues=2)).code == ResponseCode.SUCCESS
    return name


async def _pull(client, addr: str, topic: str, queue_id: int = 0) -> list:
    r = await client.invoke(addr, pull_request(topic, queue_id, 0), 5)
    if r.code != ResponseCode.SUCCESS:
        return []
    return decode_records(r.body)


async def _send(client, addr: str, topic: str, body: bytes, props: dict[str, str], queue_id: int = 1):
    return await client.invoke(addr, send_request(topic, body, props, queue_id=queue_id), 5)


async def test_held_then_delivered_at_its_time(fastmq_cluster: EmbeddedCluster, client) -> None:
    a = fastmq_cluster.broker_addr
    topic = await _topic(client, a, "TimerHeld")
    t0 = now_ms()
    wanted = {b"ms": t0 + 1500, b"sec": t0 + 1000, b"at": t0 + 2300}
    for body, props in ((b"ms", {"TIMER_DELAY_MS": "1500"}), (b"sec", {"TIMER_DELAY_SEC": "1"}),
                        (b"at", {"TIMER_DELIVER_MS": str(wanted[b"at"]), "TAGS": "TagT", "KEYS": "k1"})):
        r = await _send(client, a, topic, body, props)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == "1"  # the requested queue, as 5.x answers
    t1 = now_ms()  # the broker's clock read a relative delay somewhere in [t0, t1]
    assert (await _send(client, a, topic, b"plain", {})).code == ResponseCode.SUCCESS
    first = await _pull(client, a, topic, 1)
    assert [m.body for m in first] == [b"plain"]  # the three are held

    seen: dict[bytes, tuple[int, object]] = {}

    async def all_there() -> bool:
        for m in await _pull(client, a, topic, 1):
            if m.body not in seen:
                seen[m.body] = (now_ms(), m)
        return len(seen) == 4

    assert await until(all_there, 8), sorted(seen)
    for body, due in wanted.items():
        arrived, m = seen[body]
        p = m.properties
        # never before the asked time: the slot is rounded down and delivered one precision later
        assert int(p[MessageConst.TIMER_DEQUEUE_MS]) >= due, (body, p)
        assert arrived >= due
        slot = int(p[MessageConst.TIMER_OUT_MS])
        # rounded down to the second of the broker's due time, which a relative delay took from
        # the broker's clock: up to t1 - t0 after the client's (a loaded machine may cross a second)
        late = 0 if body == b"at" else t1 - t0
        assert slot % 1000 == 0 and due - 1000 < slot <= due + late, (body, slot, due, late)
        assert MessageConst.TIMER_ENQUEUE_MS in p
        assert MessageConst.REAL_TOPIC not in p and MessageConst.REAL_QUEUE_ID not in p
        assert p[MessageConst.WAIT_STORE_MSG_OK] == "false"
        assert m.topic == topic and m.queue_id == 1
    assert seen[b"at"][1].properties["TAGS"] == "TagT"


async def test_precedence_and_delay_level(fastmq_cluster: EmbeddedCluster, client) -> None:
    a = fastmq_cluster.broker_addr
    topic = await _topic(client, a, "TimerPrec")
    t0 = now_ms()
    # TIMER_DELAY_SEC wins over TIMER_DELAY_MS and TIMER_DELIVER_MS (5.x's order)
    r = await _send(client, a, topic, b"sec-wins", {"TIMER_DELAY_SEC": "1", "TIMER_DELAY_MS": "3600000",
                                                    "TIMER_DELIVER_MS": str(t0 + 7_200_000)})
    assert r.code == ResponseCode.SUCCESS, r.remark
    # TIMER_DELAY_MS over TIMER_DELIVER_MS
    r = await _send(client, a, topic, b"ms-wins", {"TIMER_DELAY_MS": "1200", "TIMER_DELIVER_MS": str(t0 + 7_200_000)})
    assert r.code == ResponseCode.SUCCESS, r.remark
    # a delay level wins and strips the timer properties, even one that would be refused
    r = await _send(client, a, topic, b"level", {"DELAY": "1", "TIMER_DELIVER_MS": str(t0 + 10 * 86_400_000)})
    assert r.code == ResponseCode.SUCCESS, r.remark

    got: dict[bytes, object] = {}

    async def all_there() -> bool:
        for m in await _pull(client, a, topic, 1):
            got.setdefault(m.body, m)
        return len(got) == 3

    assert await until(all_there, 8), sorted(got)
    assert now_ms() - t0 < 6000
    level = got[b"level"].properties
    assert not any(k.startswith("TIMER_") for k in level), level
    assert MessageConst.TIMER_OUT_MS in got[b"sec-wins"].properties


async def test_past_time_is_delivered_at_once(fastmq_cluster: EmbeddedCluster, client) -> None:
    a = fastmq_cluster.broker_addr
    topic = await _topic(client, a, "TimerPast")
    r = await _send(client, a, topic, b"past", {"TIMER_DELIVER_MS": str(now_ms() - 5000)})
    assert r.code == ResponseCode.SUCCESS, r.remark
    msgs = await _pull(client, a, topic, 1)
    assert [m.body for m in msgs] == [b"past"]
    assert MessageConst.TIMER_OUT_MS not in msgs[0].properties


@pytest.mark.parametrize("props", [
    {"TIMER_DELAY_SEC": str(3 * 86_400 + 10)},
    {"TIMER_DELAY_MS": str(3 * 86_400_000 + 5000)},
    {"TIMER_DELIVER_MS": "10000000000000000"},
    {"TIMER_DELIVER_MS": "tomorrow"},
    {"TIMER_DELAY_SEC": "1.5"},
    {"TIMER_DELIVER_MS": "1000", "TIMER_DEL_UNIQKEY": "x"},
])
async def test_refused_with_5x_code_and_text(fastmq_cluster: EmbeddedCluster, client, props) -> None:
    a = fastmq_cluster.broker_addr
    topic = await _topic(client, a, "TimerBad")
    r = await _send(client, a, topic, b"bad", props)
    assert (r.code, r.remark) == (ResponseCode.MESSAGE_ILLEGAL, MAX_TEXT)
    assert not [m for m in await _pull(client, a, topic, 1) if m.body == b"bad"]


async def test_timer_topic_takes_no_sends(fastmq_cluster: EmbeddedCluster, client) -> None:
    r = await client.invoke(fastmq_cluster.broker_addr, send_request("rmq_sys_wheel_timer", b"x", {}), 5)
    assert r.code != ResponseCode.SUCCESS


async def test_client_keywords_both_apis(fastmq_cluster: EmbeddedCluster, client) -> None:
    import asyncio

    import fastmq
    import fastmq.aio

    a = fastmq_cluster.broker_addr
    topic = await _topic(client, a, "TimerClient")
    t0 = now_ms()
    due_blocking = t0 + 1500

    def blocking_send() -> None:
        with fastmq.Producer("PG_TIMER_B", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
            p.send(fastmq.Message(topic, b"blocking", deliver_time_ms=due_blocking))

    await asyncio.get_running_loop().run_in_executor(None, blocking_send)
    async with fastmq.aio.Producer("PG_TIMER_A", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        sent = now_ms()
        await p.send(fastmq.Message(topic, b"aio", delay_time_ms=1200))
    got: dict[bytes, int] = {}

    async def both() -> bool:
        for q in (0, 1):
            for m in await _pull(client, a, topic, q):
                got.setdefault(m.body, int(m.properties[MessageConst.TIMER_DEQUEUE_MS]))
        return len(got) == 2

    assert await until(both, 8), got
    assert got[b"blocking"] >= due_blocking and got[b"aio"] >= sent + 1200
