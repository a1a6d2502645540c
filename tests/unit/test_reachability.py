"""Issue 17: what marks a broker unreachable (a connection failure, not a slow answer), and the
probe that marks it reachable again once it answers (bounded, about once a second)."""
from __future__ import annotations

import asyncio
import time

from fastmq.aio import Message, Producer
from fastmq.client.publish_info import TopicPublishInfo
from fastmq.client.reachability import PROBE_INTERVAL_S
from fastmq.errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError
from fastmq.protocol.bodies import BrokerData, QueueData, TopicRouteData
from fastmq.protocol.codes import RequestCode
from fastmq.remoting import RemotingServer
from tests.stub_broker import RecordingBroker
from fastmq.testing import free_port
from tests.support import wait_until


def _route(addrs: dict[str, str]) -> TopicRouteData:
    return TopicRouteData(queue_datas=[QueueData(n, 2, 2, 6) for n in addrs],
                          broker_datas=[BrokerData("c", n, {0: a}) for n, a in addrs.items()])


async def test_connection_failures_mark_unreachable_and_a_probe_brings_it_back() -> None:
    port = free_port()
    addr = f"127.0.0.1:{port}"
    # the NameServer list points nowhere: route refreshes fail (logged), selection still works
    p = Producer("PG_PROBE", namesrv_addr=f"127.0.0.1:{free_port()}")
    server: RemotingServer | None = None
    try:
        await p.start()
        p._publish["T"] = TopicPublishInfo.from_route("T", _route({"broker-x": addr}), p._numbers)
        loop = asyncio.get_running_loop()
        p._reach.try_failed("broker-x", "T", loop.time(), RemotingTimeoutError(addr, 3000))
        assert p.unreachable_brokers() == []                      # slow is not dead
        p._reach.try_failed("broker-x", "T", loop.time(), RemotingConnectError(addr, "Connection refused"))
        assert p.unreachable_brokers() == ["broker-x"]
        assert p._fast.avoid_unreachable                          # the compiled first try defers to _select
        p._reach.try_failed("broker-x", "T", loop.time() - 10, RemotingSendRequestError(addr, "reset"))
        assert p._reach.tries_on_unreachable == 0                 # that try began before it was marked
        await asyncio.sleep(2.2 * PROBE_INTERVAL_S)               # probes fail: nothing listens yet
        assert p.unreachable_brokers() == ["broker-x"]

        rec = RecordingBroker()
        server = RemotingServer("127.0.0.1", port)
        server.register_default_processor(rec)
        await server.start()
        t0 = time.monotonic()
        assert await wait_until(lambda: not p.unreachable_brokers(), 5 * PROBE_INTERVAL_S)
        assert time.monotonic() - t0 <= 3 * PROBE_INTERVAL_S
        assert not p._fast.avoid_unreachable
        probes = [r for r in rec.requests if r.code == RequestCode.HEART_BEAT]
        assert len(probes) == 1, probes                           # one answered probe is enough
        r = await p.send(Message("T", b"back"))
        assert r.message_queue.broker_name == "broker-x" and len(rec.sends()) == 1
    finally:
        await p.shutdown()
        if server is not None:
            await server.close()


async def test_a_probe_stops_for_a_broker_no_route_lists() -> None:
    p = Producer("PG_PROBE_GONE", namesrv_addr=f"127.0.0.1:{free_port()}")
    try:
        await p.start()
        dead = f"127.0.0.1:{free_port()}"
        p._publish["T"] = TopicPublishInfo.from_route("T", _route({"broker-x": dead}), p._numbers)
        p._reach.try_failed("broker-x", "T", asyncio.get_running_loop().time(), RemotingConnectError(dead, "refused"))
        assert p.unreachable_brokers() == ["broker-x"]
        del p._publish["T"]                                        # the route no longer names it
        assert await wait_until(lambda: not p.unreachable_brokers(), 4 * PROBE_INTERVAL_S)
        assert p._reach._probe_task is None or p._reach._probe_task.done()
    finally:
        await p.shutdown()
