"""Issue 17: asynchronous and oneway sends over a dead broker, as RocketMQ documents them.

An asynchronous send whose try fails on a dead broker is retried on another broker, up to
``retry_times_when_send_async_failed`` times, and its callback reports the final outcome once;
with no retries allowed it reports the failure, once. A oneway send is one try and no answer, so
it is never retried; but once the dead broker is marked unreachable no oneway send goes there.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer, PullConsumer
from fastmq.errors import SendFailedError
from fastmq.remoting import RemotingClient
from fastmq.testing.failover import failover_broker as _broker
from fastmq.testing.failover import prepare_topic as _prepare
from fastmq.testing import namesrv_process

pytestmark = pytest.mark.slow

TOPIC = "FailoverTopic"


async def test_async_retries_elsewhere_and_oneway_avoids_the_dead_broker(tmp_path: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    a = _broker(tmp_path, "broker-a", ns.addr).start()
    b = _broker(tmp_path, "broker-b", ns.addr).start()
    producers = [Producer("PG_MODES_0", namesrv_addr=ns.addr, retry_times_when_send_async_failed=0),
                 Producer("PG_MODES_2", namesrv_addr=ns.addr)]  # the default: 2 retries
    try:
        admin = RemotingClient()
        try:
            await _prepare(admin, [a, b], [ns])
        finally:
            await admin.close()
        for p in producers:
            await p.start()
            for i in range(16):  # both brokers used and connected
                await p.send(Message(TOPIC, f"warm-{i}".encode()))
        a.kill()

        outcomes: dict[str, list] = {}
        for p in producers:
            calls: Counter[int] = Counter()
            results: list = []
            for i in range(16):  # round robin over 8 queues: some first tries land on broker a
                def cb(result, error, i=i):
                    calls[i] += 1
                    results.append((i, result, error))
                fut = await p.send_async(Message(TOPIC, f"{p.group}-{i}".encode()), cb)
                try:
                    await fut
                except SendFailedError:
                    pass
            assert set(calls.values()) == {1} and len(calls) == 16   # every callback once
            outcomes[p.group] = results
            # marked, or already gone from the route (a probe round then unmarks it)
            info = p._publish[TOPIC]
            assert p.unreachable_brokers() == ["broker-a"] or "broker-a" not in info.masters

        no_retry = outcomes["PG_MODES_0"]
        failed = [(i, e) for i, r, e in no_retry if e is not None]
        assert len(failed) == 1, failed                      # the one try on a, before it was marked
        assert isinstance(failed[0][1], SendFailedError) and "Send [1] times" in str(failed[0][1])
        assert all(r.message_queue.broker_name == "broker-b" for i, r, e in no_retry if e is None)
        with_retry = outcomes["PG_MODES_2"]
        assert [e for _, _, e in with_retry if e is not None] == []
        assert {r.message_queue.broker_name for _, r, _ in with_retry} == {"broker-b"}

        oneway = [f"oneway-{i}".encode() for i in range(20)]
        for body in oneway:
            await producers[0].send_oneway(Message(TOPIC, body))
        # all of them on broker b: read back from it alone
        c = PullConsumer("GID_MODES", namesrv_addr=ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        c.subscribe(TOPIC)
        await c.start()
        got: set[bytes] = set()
        try:
            deadline = time.monotonic() + 30
            while not set(oneway) <= got and time.monotonic() < deadline:
                got.update(bytes(m.body) for m in await c.poll(0.5))
        finally:
            await c.shutdown()
        assert set(oneway) <= got
    finally:
        for p in producers:
            await p.shutdown()
        b.stop()
        a.stop()
        ns.stop()
