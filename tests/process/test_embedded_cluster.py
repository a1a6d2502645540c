"""fastmq.testing: the embedded cluster and its pytest fixture, as a user's suite would use them."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer
from fastmq.protocol.bodies import ClusterInfo
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster, ServerProcess, wait_port
from tests.support import consume_positions

pytestmark = [pytest.mark.slow, pytest.mark.fastmq_cluster(broker_conf={"brokerClusterName": "EmbeddedC"})]


async def test_fixture_cluster_round_trip(fastmq_cluster: EmbeddedCluster) -> None:
    assert len(fastmq_cluster.brokers) == 1 and fastmq_cluster.slaves == []
    assert "brokerClusterName=EmbeddedC" in (fastmq_cluster.brokers[0].workdir / "broker.conf").read_text()
    async with Producer("PG_EMBEDDED", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        r = await p.send(Message("EmbeddedTopic", b"hello"))
    assert r.status == "SEND_OK"
    got = await consume_positions(fastmq_cluster.namesrv_addr, "CG_EMBEDDED", "EmbeddedTopic", [b"hello"], 20)
    assert b"hello" in got


def test_fixture_is_shared_by_the_module(fastmq_cluster: EmbeddedCluster) -> None:
    # the previous test's messages are still there: one cluster per module
    assert (fastmq_cluster.brokers[0].workdir / "store" / "commitlog").is_dir()


async def test_two_masters_with_slaves_stop_cleanly(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path, brokers=2, slave=True)
    with cluster:
        assert [b.workdir.name for b in cluster.brokers] == ["broker-a", "broker-b"]
        assert [s.workdir.name for s in cluster.slaves] == ["broker-a-slave", "broker-b-slave"]
        for server in [*cluster.brokers, *cluster.slaves]:
            wait_port(server.port, 5)
        async with Producer("PG_EMBEDDED2", namesrv_addr=cluster.namesrv_addr) as p:
            r = await p.send(Message("EmbeddedTopic2", b"x"))
        assert r.status in ("SEND_OK", "SLAVE_NOT_AVAILABLE")
        # each slave registers under its master's name as broker id 1
        want = {"broker-a": {0, 1}, "broker-b": {0, 1}}
        got: dict[str, set[int]] = {}
        client = RemotingClient()
        try:
            deadline = time.monotonic() + 30
            while got != want and time.monotonic() < deadline:
                a = await client.invoke(cluster.namesrv_addr, create_request(
                    RequestCode.GET_BROKER_CLUSTER_INFO, {}), 5)
                if a.code == 0 and a.body:
                    info = ClusterInfo.from_json(a.body)
                    got = {name: set(b.broker_addrs) for name, b in info.broker_addr_table.items()}
                await asyncio.sleep(0.2)
        finally:
            await client.close()
        assert got == want
    procs: list[ServerProcess] = [*cluster.brokers, *cluster.slaves]
    assert all(s.proc is not None and s.proc.returncode == 0 for s in procs)
    with pytest.raises(RuntimeError):
        EmbeddedCluster(tmp_path / "other").namesrv_addr


def test_a_stopped_cluster_starts_again_over_its_store(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path)
    with cluster:
        assert (tmp_path / "broker-a" / "store" / "commitlog").is_dir()
    with cluster:
        assert len(cluster.brokers) == 1 and cluster.brokers[0].alive()
    assert not cluster.brokers[0].alive()
