"""A broker with ``traceOn=false`` says ``TRACE_ON=false`` in every send's answer, and a producer
with ``enable_trace=True`` then writes no Pub record for that send (4.9.8's
SendMessageTraceHookImpl skips it); a consumer's traces are not the switch's business.
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Iterator

import pytest

from fastmq.aio import Message, Producer
from fastmq.testing import EmbeddedCluster
from tests.support import read_topic

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path_factory.mktemp("trace-off"),
                         broker_conf={"traceTopicEnable": "true", "traceOn": "false"}) as c:
        yield c


async def test_trace_on_false_in_the_answer_stops_the_pub_record(cluster: EmbeddedCluster) -> None:
    ns, topic = cluster.namesrv_addr, f"TraceOff_{uuid.uuid4().hex[:8]}"
    async with Producer(f"PG_TRACE_OFF_{uuid.uuid4().hex[:6]}", namesrv_addr=ns, enable_trace=True) as p:
        d = p.trace_dispatcher
        assert d is not None
        sent = await p.send(Message(topic, b"one"))
        assert sent.trace_on is False and sent.region_id == "DefaultRegion"
        done = asyncio.get_running_loop().create_future()
        await p.send_async(Message(topic, b"two"), lambda r, e: done.set_result((r, e)))
        r, e = await asyncio.wait_for(done, 10)
        assert e is None and r.trace_on is False
        await p.send_batch([Message(topic, b"three"), Message(topic, b"four")])
        assert len(d.pub_rows) == 0 and not d._queue
        await d.flush()
        # a marker message on the trace topic itself: once it is readable, anything the
        # producer had sent before it would be too
        marker = f"marker {uuid.uuid4().hex}".encode()
        await p.send(Message(TRACE_TOPIC, marker))
    stored = await read_topic(ns, TRACE_TOPIC, {marker}, 10, 1.0)
    assert {m.body for m in stored} == {marker}, [m.body[:80] for m in stored]
