"""Acceptance 2: the official RocketMQ C++ client gets its routes from ``fastmq-namesrv``.

The client (PyPI ``rocketmq==0.4.4``, librocketmq.so inside) runs in its own process via
tests/cpp_peer.py; the broker it is routed to is a recording stub until fastmq-broker exists.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from fastmq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from tests.stub_broker import start_stub_broker
from tests.support import ServerProcess, free_port

pytestmark = pytest.mark.cpp_client

PEER = Path(__file__).with_name("cpp_peer.py")


async def _run_peer(tmp: Path, *args: str, timeout: float = 60) -> dict:
    env = {**os.environ, "HOME": str(tmp), "PYTHONPATH": str(PEER.parent.parent)}
    proc = await asyncio.create_subprocess_exec(sys.executable, str(PEER), *args, env=env, cwd=tmp,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    text = out.decode("utf-8", "replace")
    for line in text.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise AssertionError(f"C++ peer exited {proc.returncode} without a result:\n{text}")


@pytest.fixture
def namesrv(tmp_path):
    port = free_port()
    props = tmp_path / "namesrv.properties"
    props.write_text(f"listenPort={port}\nkvConfigPath={tmp_path / 'kv.json'}\nlogPath={tmp_path / 'ns.log'}\n")
    proc = ServerProcess(["fastmq-namesrv", "-c", str(props)], port, tmp_path, env={"HOME": str(tmp_path)})
    proc.start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0


async def test_cpp_producer_is_routed_to_the_registered_broker(namesrv, tmp_path) -> None:
    server, stub = await start_stub_broker()
    registrar = RemotingClient()  # kept open: closing it would unregister the broker at once
    try:
        body = RegisterBrokerBody({"TopicCpp": TopicConfig("TopicCpp", 4, 4, 6)}, DataVersion())
        resp = await registrar.invoke(namesrv.addr, create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": "stub-broker", "brokerAddr": f"127.0.0.1:{server.port}", "clusterName": "DefaultCluster",
            "haServerAddr": "", "brokerId": 0}, body.encode()), 3)
        assert resp.code == 0
        result = await _run_peer(tmp_path, "produce", "--namesrv", namesrv.addr, "--topic", "TopicCpp",
                                 "--tags", "TagCpp", "--body", "payload", "--count", "3")
        assert all(r["ok"] for r in result["results"]), result
        assert all(r["status"] == 0 for r in result["results"])
        sends = stub.sends()
        assert len(sends) == 3
        for i, s in enumerate(sends):
            assert s.ext_fields["topic"] == "TopicCpp" and s.body == f"payload-{i}".encode()
            props = s.ext_fields["properties"]
            assert "TAGS\x01TagCpp\x02" in props and f"KEYS\x01key-{i}\x02" in props
            assert f"userProp\x01value-{i}\x02" in props
        assert {int(s.ext_fields["queueId"]) for s in sends} <= {0, 1, 2, 3}
    finally:
        await registrar.close()
        await server.close()


async def test_cpp_producer_reports_unknown_topic(namesrv, tmp_path) -> None:
    result = await _run_peer(tmp_path, "produce", "--namesrv", namesrv.addr, "--topic", "NoSuchTopicCpp",
                             "--timeout-ms", "2000")
    (r,) = result["results"]
    assert not r["ok"] and "No route info of this topic" in r["error"], r
