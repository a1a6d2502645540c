"""Issue 17, NameServer loss: a client whose NameServer list starts with a dead one starts, sends,
consumes and refreshes its routes, and keeps to the working NameServer afterwards instead of
trying the dead one first on every request."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fastmq.aio import ConsumeStatus, Message, Producer, PushConsumer
from fastmq.client.instance import ClientConfig
from fastmq.testing import broker_process, free_port, namesrv_process

pytestmark = pytest.mark.slow


class _DeadNameServer:
    """A port that accepts connections and drops them at once (a NameServer that cannot answer),
    counting how often clients come back to it."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.base_events.Server | None = None
        self.port = free_port()

    async def start(self) -> "_DeadNameServer":
        async def drop(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self.connections += 1
            w.transport.abort()
        self.server = await asyncio.start_server(drop, "127.0.0.1", self.port)
        return self

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@pytest.mark.parametrize("first", ["refused", "dropping"])
async def test_client_works_while_the_first_namesrv_is_dead(tmp_path: Path, first: str) -> None:
    dead = await _DeadNameServer().start() if first == "dropping" else None
    dead_addr = f"127.0.0.1:{dead.port if dead else free_port()}"  # "refused": nothing listens there
    ns = namesrv_process(tmp_path).start()
    d = tmp_path / "broker"
    d.mkdir()
    broker = broker_process(d, ns.addr, autoCreateTopicEnable="true").start()
    ns_list = f"{dead_addr};{ns.addr}"
    # refresh routes every 300 ms, so the test sees many refreshes go through the list
    config = ClientConfig(namesrv_addr=ns_list, poll_name_server_interval=300, instance_name="ns-loss-p")
    p = Producer("PG_NS_LOSS", client_config=config)
    c = PushConsumer("GID_NS_LOSS", consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     client_config=ClientConfig(namesrv_addr=ns_list, poll_name_server_interval=300,
                                                instance_name="ns-loss-c"))
    got: set[bytes] = set()

    def listener(msgs: list) -> str:
        got.update(bytes(m.body) for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS
    try:
        await p.start()
        sent = set()
        deadline = time.monotonic() + 30
        while len(sent) < 20 and time.monotonic() < deadline:
            body = f"ns-loss-{len(sent)}".encode()
            await p.send(Message("NsLossTopic", body))
            sent.add(body)
        c.subscribe("NsLossTopic")
        c.register_message_listener(listener)
        await c.start()
        deadline = time.monotonic() + 30
        while not sent <= got and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert sent <= got
        before = dead.connections if dead else 0
        await asyncio.sleep(1.5)                 # several route refreshes of both clients
        for inst in (p.instance, c.instance):
            assert await inst.update_route("NsLossTopic") is not None
        if dead is not None:
            # each client tried the dead one once, then kept to the working one
            assert before <= 2 and dead.connections == before, (before, dead.connections)
    finally:
        await c.shutdown()
        await p.shutdown()
        broker.stop()
        ns.stop()
        if dead is not None:
            await dead.close()
