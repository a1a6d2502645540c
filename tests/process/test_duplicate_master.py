"""Two live brokers claiming one brokerName with brokerId=0 (issue 32, item 1): a copied config
file. The NameServer refuses the second (NO_PERMISSION), with an ERROR naming both addresses on
the NameServer and on the refused broker, which stays up and unrouted and retries at each
registration. The route never flips, so no acknowledged message is lost to a consumer group;
once the first broker stops cleanly the second is taken, and the first, restarted on another
address, is taken as soon as its old connection is gone."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fastmq.aio import ConsumeStatus, Message, Producer, PushConsumer
from fastmq.errors import FastMQError
from fastmq.protocol.bodies import TopicRouteData
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import broker_process, namesrv_process
from tests.support import create_topic

pytestmark = pytest.mark.slow

TOPIC = "DupMasterTopic"
N = 300
PERIOD_MS = 500  # registerNameServerPeriod: many re-registrations within the test's seconds


async def _master_addr(client: RemotingClient, ns: str) -> str | None:
    r = await client.invoke(ns, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5)
    if r.code != 0 or not r.body:
        return None
    route = TopicRouteData.from_json(r.body)
    return route.broker_datas[0].broker_addrs.get(0) if route.broker_datas else None


async def _until_master(client: RemotingClient, ns: str, want: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (got := await _master_addr(client, ns)) != want:
        assert time.monotonic() < deadline, f"the route's master is {got}, not {want}"
        await asyncio.sleep(0.1)


def _error_lines(text: str, *addrs: str) -> list[str]:
    return [ln for ln in text.splitlines() if "ERROR" in ln and all(a in ln for a in addrs)]


async def test_a_second_master_of_a_name_is_refused_and_nothing_is_lost(tmp_path: Path,
                                                                         client: RemotingClient) -> None:
    for d in ("ns", "a", "b", "a2"):
        (tmp_path / d).mkdir()
    ns = namesrv_process(tmp_path / "ns").start()
    first = broker_process(tmp_path / "a", ns.addr, brokerName="dup", registerNameServerPeriod=PERIOD_MS).start()
    second = None
    consumer: PushConsumer | None = None
    producer = Producer("PG_DUP_MASTER", namesrv_addr=ns.addr, send_msg_timeout=5000)
    try:
        await create_topic(client, first.addr, TOPIC, queues=4)
        await _until_master(client, ns.addr, first.addr, 20)
        second = broker_process(tmp_path / "b", ns.addr, brokerName="dup",
                                registerNameServerPeriod=PERIOD_MS).start()
        await create_topic(client, second.addr, TOPIC, queues=4)  # both serve the topic
        deadline = time.monotonic() + 20
        while not (_error_lines(ns.output(), first.addr, second.addr)
                   and _error_lines(second.output(), first.addr, second.addr)):
            assert time.monotonic() < deadline, (ns.output()[-2000:], second.output()[-2000:])
            await asyncio.sleep(0.1)

        got: set[bytes] = set()

        def listener(msgs: list) -> str:
            got.update(bytes(m.body) for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("GID_DUP_MASTER", namesrv_addr=ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(TOPIC)
        consumer.register_message_listener(listener)
        await consumer.start()
        await producer.start()
        acked = []
        t_end = time.monotonic() + 60
        for i in range(N):  # over several of the second broker's refused re-registrations
            body = f"m-{i}".encode()
            r = await producer.send(Message(TOPIC, body))
            assert r.status == "SEND_OK", r
            acked.append(body)
            assert await _master_addr(client, ns.addr) == first.addr  # it never flips
            await asyncio.sleep(0.01)
        while not got >= set(acked) and time.monotonic() < t_end:
            await asyncio.sleep(0.1)
        assert [b for b in acked if b not in got] == [], "acknowledged messages never delivered"
        assert second.alive()
        refusals = len(_error_lines(ns.output(), first.addr, second.addr))
        assert refusals >= 2, ns.output()[-2000:]  # it kept trying, and kept being refused

        # A clean stop of the first frees the name: the second is taken at its next registration.
        assert first.stop() == 0
        await _until_master(client, ns.addr, second.addr, 20)
        deadline = time.monotonic() + 20
        while True:  # until the producer's cached route has the new address (refreshed on failure)
            try:
                r = await producer.send(Message(TOPIC, b"after the first stopped"))
                break
            except FastMQError:
                assert time.monotonic() < deadline, "no send reached the second broker"
                await asyncio.sleep(0.2)
        assert r.status == "SEND_OK" and r.offset_msg_id, r
        # The first, restarted elsewhere (a new store, a new port), is now the refused one.
        first = broker_process(tmp_path / "a2", ns.addr, brokerName="dup", registerNameServerPeriod=PERIOD_MS).start()
        await create_topic(client, first.addr, TOPIC, queues=4)
        deadline = time.monotonic() + 20
        while not _error_lines(first.output(), first.addr, second.addr):
            assert time.monotonic() < deadline, first.output()[-2000:]
            await asyncio.sleep(0.1)
        assert await _master_addr(client, ns.addr) == second.addr
        # The second killed: its connection closes, and the first is taken without waiting for expiry.
        second.kill()
        await _until_master(client, ns.addr, first.addr, 20)
        assert "Traceback" not in ns.output()
    finally:
        if consumer is not None:
            await consumer.shutdown()
        await producer.shutdown()
        for b in (first, second):
            if b is not None and b.alive():
                b.stop()
        ns.stop()
