"""Issue 4's interop acceptance: the fastmq client and the official C++ client (rocketmq 0.4.4) on one
fastmq cluster, each side consuming what the other produced, intact (body, keys, tags, properties)."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.push_consumer import ConsumeStatus, PushConsumer
from tests.interop.cpp_runner import produce, run_peer

pytestmark = [pytest.mark.cpp_client, pytest.mark.slow]


async def test_fastmq_producer_to_cpp_push_consumer(cpp_cluster) -> None:
    namesrv, _, home = cpp_cluster
    topic = "FastmqToCpp"
    async with Producer("PG_FASTMQ_TO_CPP", namesrv_addr=namesrv.addr) as p:
        for i in range(5):
            r = await p.send(Message(topic, f"fastmq-{i}".encode(),
                                     properties={"TAGS": "TagX", "KEYS": f"key-{i}", "userProp": f"value-{i}"}))
            assert r.status == "SEND_OK"
        big = await p.send(Message(topic, b"B" * 6000, properties={"TAGS": "TagX", "KEYS": "big"}))  # compressed
        assert big.status == "SEND_OK"
    proc_out, proc = await asyncio.to_thread(run_peer, "cpp_consumer_peer.py", [
        "--namesrv", namesrv.addr, "--topic", topic, "--group", "GID_CPP_FROM_FASTMQ", "--expect", "6",
        "--seconds", "60"], home, 120)
    deliveries = [json.loads(ln[4:]) for ln in proc_out.splitlines() if ln.startswith("MSG ")]
    ok = {d["body"]: d for d in deliveries if d["status"] == "CONSUME_SUCCESS"}
    assert set(ok) == {f"fastmq-{i}" for i in range(5)} | {"B" * 6000}, (proc_out[-2000:], proc.stderr[-2000:])
    for i in range(5):
        d = ok[f"fastmq-{i}"]
        assert (d["topic"], d["tags"], d["keys"], d["user_prop"]) == (topic, "TagX", f"key-{i}", f"value-{i}")


async def test_cpp_producer_to_fastmq_push_consumer(cpp_cluster) -> None:
    namesrv, _, home = cpp_cluster
    topic = "CppToFastmq"
    sent = await asyncio.to_thread(produce, namesrv.addr, topic, home, body="cpp", tags="TagY", count=5,
                                   oneway=False)
    assert all(r["ok"] for r in sent), sent
    got: dict[bytes, tuple[str | None, str | None, str | None, str]] = {}

    def listener(msgs):
        for m in msgs:
            got[m.body] = (m.tags, m.properties.get("KEYS"), m.properties.get("userProp"),
                           m.properties.get("UNIQ_KEY", ""))
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("GID_FASTMQ_FROM_CPP", namesrv_addr=namesrv.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(topic, "TagY")
    c.register_message_listener(listener)
    await c.start()
    try:
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    finally:
        await c.shutdown()
    assert set(got) == {f"cpp-{i}".encode() for i in range(5)}
    for i in range(5):
        tags, keys, prop, uniq = got[f"cpp-{i}".encode()]
        assert (tags, keys, prop) == ("TagY", f"key-{i}", f"value-{i}") and len(uniq) == 32
    assert {u for *_, u in got.values()} == {r["msg_id"] for r in sent}   # the C++ client's ids, as it reported
