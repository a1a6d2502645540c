"""Issue 4 acceptance: three consumers of one group over 8 queues, then one leaves."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.instance import ClientConfig
from fastmq.client.push_consumer import ConsumeStatus, PushConsumer
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import broker_process, namesrv_process
from tests.support import wait_until

pytestmark = pytest.mark.slow


def _until(pred, seconds: float):
    return wait_until(pred, seconds, every=0.1)


async def test_three_consumers_split_eight_queues_and_hand_over(tmp_path: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    broker = broker_process(tmp_path, ns.addr, brokerName="broker-g").start()
    consumers: list[PushConsumer] = []
    try:
        admin = RemotingClient()
        try:
            resp = await admin.invoke(broker.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "GroupTopic", "defaultTopic": "TBW102", "readQueueNums": 8, "writeQueueNums": 8,
                "perm": 6, "topicFilterType": "SINGLE_TAG"}), 5)
            assert resp.code == 0
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                r = await admin.invoke(ns.addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                               {"topic": "GroupTopic"}), 5)
                if r.code == 0:
                    break
                await asyncio.sleep(0.2)
        finally:
            await admin.close()

        seen: dict[bytes, int] = {}

        def listener(msgs):
            for m in msgs:
                seen[m.body] = seen.get(m.body, 0) + 1
            return ConsumeStatus.CONSUME_SUCCESS

        for i in range(3):
            c = PushConsumer("GID_GROUP", consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                             client_config=ClientConfig(namesrv_addr=ns.addr, instance_name=f"member{i}",
                                                        persist_consumer_offset_interval=500))
            c.subscribe("GroupTopic")
            c.register_message_listener(listener)
            await c.start()
            consumers.append(c)

        def owned(cs: list[PushConsumer]) -> list[set[int]]:
            return [{mq.queue_id for mq in c.process_queues if mq.topic == "GroupTopic"} for c in cs]

        def exact_split(cs: list[PushConsumer]) -> bool:
            sets = owned(cs)
            return sum(len(s) for s in sets) == 8 and set().union(*sets) == set(range(8)) and all(sets)

        assert await _until(lambda: exact_split(consumers), 30), owned(consumers)
        async with Producer("PG_GROUP", namesrv_addr=ns.addr) as p:
            for i in range(160):
                await p.send(Message("GroupTopic", f"first-{i}".encode()))
            assert await _until(lambda: all(f"first-{i}".encode() in seen for i in range(160)), 30)
            await asyncio.sleep(1.5)                                  # let the commits reach the broker

            leaving = consumers.pop()
            await leaving.shutdown()                                  # persists its offsets, unregisters
            assert await _until(lambda: exact_split(consumers), 30), owned(consumers)
            for i in range(160):
                await p.send(Message("GroupTopic", f"second-{i}".encode()))
            assert await _until(lambda: all(f"second-{i}".encode() in seen for i in range(160)), 30)
        # Nothing lost; what was committed before the hand-over was not delivered again.
        assert all(seen.get(f"first-{i}".encode(), 0) == 1 for i in range(160)), \
            sorted(b for b, n in seen.items() if n > 1)[:5]
    finally:
        for c in consumers:
            await c.shutdown()
        broker.stop()
        ns.stop()
