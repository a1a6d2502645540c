"""Issue 4 acceptance: two brokers, one killed mid-stream; the sync producer with latency fault
tolerance keeps succeeding, keeps away from the dead broker for its bucketed duration, and
nothing it was told was stored is lost."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.push_consumer import PullConsumer
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, broker_process, namesrv_process

pytestmark = pytest.mark.slow


def _broker(tmp: Path, name: str, ns: str, port: int | None = None) -> ServerProcess:
    d = tmp / name
    d.mkdir(exist_ok=True)
    return broker_process(d, ns, port=port, brokerName=name)


async def test_failover_keeps_sending_and_loses_nothing(tmp_path: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    a = _broker(tmp_path, "broker-a", ns.addr).start()
    b = _broker(tmp_path, "broker-b", ns.addr).start()
    pa, pb = a.port, b.port
    acked: dict[bytes, str] = {}
    try:
        admin = RemotingClient()
        try:
            for port in (pa, pb):  # the topic on both brokers, 4 queues each
                resp = await admin.invoke(f"127.0.0.1:{port}", create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                    "topic": "FailoverTopic", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
                    "perm": 6, "topicFilterType": "SINGLE_TAG"}), 5)
                assert resp.code == 0, resp.remark
            deadline = time.monotonic() + 40  # until the NameServer routes the topic to both brokers
            while time.monotonic() < deadline:
                r = await admin.invoke(ns.addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                               {"topic": "FailoverTopic"}), 5)
                if r.code == 0 and b"broker-a" in r.body and b"broker-b" in r.body:
                    break
                await asyncio.sleep(0.2)
        finally:
            await admin.close()
        p = Producer("PG_FAILOVER", namesrv_addr=ns.addr, send_latency_fault_enable=True, send_msg_timeout=3000)
        await p.start()
        try:
            deadline = time.monotonic() + 20
            while {"broker-a", "broker-b"} - set(acked.values()) and time.monotonic() < deadline:
                body = f"before-{len(acked)}".encode()
                acked[body] = (await p.send(Message("FailoverTopic", body))).message_queue.broker_name
            assert {"broker-a", "broker-b"} <= set(acked.values())  # the route names both brokers
            for i in range(20):
                body = f"before-more-{i}".encode()
                acked[body] = (await p.send(Message("FailoverTopic", body))).message_queue.broker_name

            b.kill()                                                  # mid-stream
            after = []
            for i in range(60):
                body = f"after-{i}".encode()
                r = await p.send(Message("FailoverTopic", body))      # never raises: retries go to broker-a
                acked[body] = r.message_queue.broker_name
                after.append(r.message_queue.broker_name)
            assert set(after) == {"broker-a"}
            # broker-b sits in its penalty box: a failed send counts as 30 s of latency -> 600 s away
            nb = p._numbers.number("broker-b")
            now = int(time.time() * 1000)
            assert not p._faults.is_available(nb, now)
            assert 590_000 <= int(p._faults.available_from[nb]) - now <= 600_000
        finally:
            await p.shutdown()

        b = _broker(tmp_path, "broker-b", ns.addr, pb).start()       # back, to read what it acknowledged
        c = PullConsumer("GID_FAILOVER", namesrv_addr=ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        c.subscribe("FailoverTopic")
        await c.start()
        got: set[bytes] = set()
        try:
            deadline = time.monotonic() + 60
            while not set(acked) <= got and time.monotonic() < deadline:
                got.update(m.body for m in await c.poll(1.0))
        finally:
            await c.shutdown()
        assert set(acked) <= got, f"lost: {sorted(set(acked) - got)[:5]}"
    finally:
        b.stop()
        a.stop()
        ns.stop()
