"""The official C++ client (``rocketmq==0.4.4``, ``set_session_credentials``) against a fastmq broker
with ACL on: the right keys send, a wrong secret and no credentials are refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from fastmq.client.acl import AclClientRPCHook, SessionCredentials
from fastmq.remoting import RemotingClient
from fastmq.remoting.loop import run
from fastmq.testing import EmbeddedCluster
from tests.support import create_topic
from tests.interop.cpp_runner import produce

pytestmark = [pytest.mark.cpp_client, pytest.mark.slow]

ACL = """\
accounts:
  - accessKey: CppUser01
    secretKey: CppSecret01
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [CppAcl=PUB|SUB]
  - accessKey: CppAdmin01
    secretKey: CppSecret01
    admin: true
"""


async def _create_topic(addr: str, namesrv: str) -> None:
    """The test's topic, created by the admin account (the broker refuses an unsigned creation)."""
    client = RemotingClient(rpc_hook=AclClientRPCHook(SessionCredentials("CppAdmin01", "CppSecret01")))
    try:
        await create_topic(client, addr, "CppAcl", routed_by=namesrv)
    finally:
        await client.close()


def test_cpp_producer_with_and_without_the_right_keys(tmp_path: Path) -> None:
    pytest.importorskip("rocketmq.client")
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    with EmbeddedCluster(tmp_path / "cluster", broker_conf={"aclEnable": "true", "aclFile": acl_file}) as cluster:
        run(_create_topic(cluster.broker_addr, cluster.namesrv_addr))
        ns = cluster.namesrv_addr
        ok = produce(ns, "CppAcl", tmp_path, body="signed", tags="A", count=3, oneway=False,
                     credentials=("CppUser01", "CppSecret01"))
        assert all(r["ok"] and r["status"] == 0 for r in ok), ok
        wrong = produce(ns, "CppAcl", tmp_path, body="wrong", tags="A", count=1, oneway=False,
                        credentials=("CppUser01", "not-the-secret"))
        unsigned = produce(ns, "CppAcl", tmp_path, body="none", tags="A", count=1, oneway=False)
        # the C++ client words a refused send its own way (even "No route info of this topic",
        # once the broker has refused its heartbeats too); the broker's log names the reason
        assert not wrong[0]["ok"] and not unsigned[0]["ok"], (wrong, unsigned)
        log = cluster.brokers[0].output()
        assert "Check signature failed for accessKey=CppUser01" in log
        assert "No acl config for \n" in log  # the C++ client without credentials sends an empty AccessKey
        assert cluster.brokers[0].proc.poll() is None  # the broker stayed up
