"""The Apache RocketMQ 4.9.8 Java client with ``AclClientRPCHook`` against a fastmq broker with ACL on
(opt-in: needs ``FASTMQ_JAVA_CLASSPATH`` with rocketmq-acl, see /work/java498/READY, and javac):
the right keys send; a wrong secret is refused with 4.9.8's AclException text."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fastmq.client.acl import AclClientRPCHook, SessionCredentials
from fastmq.remoting import RemotingClient
from fastmq.remoting.loop import run
from fastmq.testing import EmbeddedCluster
from tests.support import create_topic

CLASSPATH = os.environ.get("FASTMQ_JAVA_CLASSPATH", "")
PEER_SOURCE = Path(__file__).resolve().parent / "java" / "AclPeer.java"

pytestmark = [pytest.mark.java_rocketmq, pytest.mark.slow,
              pytest.mark.skipif(not CLASSPATH or shutil.which("javac") is None,
                                 reason="FASTMQ_JAVA_CLASSPATH (RocketMQ's Java client) and javac not both set")]

ACL = """\
accounts:
  - accessKey: JavaUser01
    secretKey: JavaSecret01
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [JavaAcl=PUB|SUB]
  - accessKey: JavaAdmin01
    secretKey: JavaSecret01
    admin: true
"""


async def _create_topic(addr: str, namesrv: str) -> None:
    """The test's topic, created by the admin account (the broker refuses an unsigned creation)."""
    client = RemotingClient(rpc_hook=AclClientRPCHook(SessionCredentials("JavaAdmin01", "JavaSecret01")))
    try:
        await create_topic(client, addr, "JavaAcl", routed_by=namesrv)
    finally:
        await client.close()


def _send(cp: str, ns: str, ak: str, sk: str, count: int) -> list[dict]:
    proc = subprocess.run(["java", "-Xmx256m", "-cp", cp, "AclPeer", ns, "JavaAcl", ak, sk, str(count)],
                          capture_output=True, text=True, timeout=120)
    sent = [json.loads(ln[5:]) for ln in proc.stdout.splitlines() if ln.startswith("SENT ")]
    assert len(sent) == count, proc.stdout[-2000:] + proc.stderr[-2000:]
    return sent


def test_java_producer_with_acl_client_rpc_hook(tmp_path: Path) -> None:
    out = tmp_path / "classes"
    out.mkdir()
    proc = subprocess.run(["javac", "-cp", CLASSPATH, "-d", str(out), str(PEER_SOURCE)], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cp = f"{CLASSPATH}{os.pathsep}{out}"
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    with EmbeddedCluster(tmp_path / "cluster", broker_conf={"aclEnable": "true", "aclFile": acl_file}) as cluster:
        run(_create_topic(cluster.broker_addr, cluster.namesrv_addr))
        ok = _send(cp, cluster.namesrv_addr, "JavaUser01", "JavaSecret01", 3)
        assert all(s["ok"] and s["status"] == "SEND_OK" for s in ok), ok
        wrong = _send(cp, cluster.namesrv_addr, "JavaUser01", "not-the-secret", 1)
        assert not wrong[0]["ok"], wrong
        assert "AclException: Check signature failed for accessKey=JavaUser01" in wrong[0]["error"], wrong
