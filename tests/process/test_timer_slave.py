"""Timer messages with a slave: the slave replicates the held records (its timer consume queue
has them) and then the deliveries, but never delivers one itself -- each arrives on the slave
once, written by the master."""
from __future__ import annotations

import asyncio
import time

import pytest

from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.message import MessageConst, decode_records
from fastmq.testing import EmbeddedCluster
from tests.process.helpers import create_topic, send_request, until
from tests.support import pull_request

pytestmark = pytest.mark.fastmq_cluster(slave=True)


async def _bodies(client, addr: str, topic: str, queue_id: int = 0) -> list:
    r = await client.invoke(addr, pull_request(topic, queue_id, 0), 5)
    return decode_records(r.body) if r.code == ResponseCode.SUCCESS else []


async def test_slave_replicates_held_and_delivered(fastmq_cluster: EmbeddedCluster, client) -> None:
    master, slave = fastmq_cluster.broker_addr, fastmq_cluster.slaves[0].addr
    topic = "TimerSlave"
    assert (await create_topic(client, master, topic, queues=1)).code == ResponseCode.SUCCESS
    due = int(time.time() * 1000) + 2500
    for i in range(5):
        r = await client.invoke(master, send_request(topic, b"s%d" % i, {"TIMER_DELIVER_MS": str(due)}), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark

    async def held_on_slave() -> bool:
        return len(await _bodies(client, slave, "rmq_sys_wheel_timer")) >= 5

    assert await until(held_on_slave, 10)
    assert not await _bodies(client, slave, topic)

    async def delivered_on_slave() -> bool:
        return len(await _bodies(client, slave, topic)) >= 5

    assert await until(delivered_on_slave, 12)
    await asyncio.sleep(1.5)  # a slave delivering too would add copies by now
    got = await _bodies(client, slave, topic)
    assert sorted(m.body for m in got) == [b"s%d" % i for i in range(5)]
    assert all(int(m.properties[MessageConst.TIMER_DEQUEUE_MS]) >= due for m in got)
    assert all(m.store_host == msg.store_host for m in got for msg in got[:1])
