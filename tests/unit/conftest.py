"""Fixtures the unit tests share: ``cluster``, an in-process NameServer with two stub brokers."""
from __future__ import annotations

import pytest

from fastmq.namesrv.config import NamesrvConfig, NamesrvServerConfig
from fastmq.namesrv.controller import NamesrvController
from fastmq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from tests.stub_broker import start_stub_broker


@pytest.fixture
async def cluster(tmp_path):
    """A NameServer and two stub brokers registered with it (topic T on both, TBW102 on the
    first): ``(namesrv addr, [the two stubs' recorders], register(i, {topic: queues}))``."""
    ns = NamesrvController(NamesrvConfig(kvConfigPath=str(tmp_path / "kv.json")),
                           NamesrvServerConfig(listenPort=0, bindAddress="127.0.0.1"))
    await ns.start()
    brokers = [await start_stub_broker() for _ in range(2)]
    registrar = RemotingClient()
    addr = f"127.0.0.1:{ns.port}"

    async def register(i: int, topics: dict[str, int]) -> None:
        server, _ = brokers[i]
        body = RegisterBrokerBody({t: TopicConfig(t, n, n) for t, n in topics.items()}, DataVersion())
        await registrar.invoke(addr, create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": f"broker-{i}", "brokerAddr": f"127.0.0.1:{server.port}", "clusterName": "C",
            "brokerId": 0}, body.encode()), 5)

    await register(0, {"T": 2, "TBW102": 8})
    await register(1, {"T": 2})
    try:
        yield addr, [b[1] for b in brokers], register
    finally:
        await registrar.close()
        for server, _ in brokers:
            await server.close()
        await ns.shutdown()
