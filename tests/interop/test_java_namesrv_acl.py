"""A fastmq NameServer with its ACL on (``aclEnable``, beyond 4.9) against Apache RocketMQ 4.9.8's
Java tools and client (opt-in: ``source /work/java498/READY`` and javac).

``mqadmin updateKvConfig`` / ``deleteKvConfig`` sign with the keys of ``conf/tools.yml`` under
ROCKETMQ_HOME, as 4.9.8's MQAdminStartup reads them: with the NameServer's admin account they
change the KV table; with a wrong secret they are refused with the AclException text and the
table is unchanged. A Java producer and lite pull consumer with no credentials still find their
routes (route reads stay open) and send and read through the fastmq broker.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.remoting.loop import run
from fastmq.testing import EmbeddedCluster
from tests.support import create_topic

CLASSPATH = os.environ.get("FASTMQ_ROCKETMQ_CLASSPATH", "")
HOME = os.environ.get("FASTMQ_ROCKETMQ_HOME", "")
OPENS = os.environ.get("FASTMQ_ROCKETMQ_JAVA_OPENS", "").split()
PEER_SOURCE = Path(__file__).resolve().parent / "java" / "RoutePeer.java"

pytestmark = [pytest.mark.java_rocketmq, pytest.mark.slow,
              pytest.mark.skipif(not CLASSPATH or not HOME or shutil.which("javac") is None,
                                 reason="FASTMQ_ROCKETMQ_CLASSPATH / FASTMQ_ROCKETMQ_HOME (Java RocketMQ 4.9.8, "
                                        "source /work/java498/READY) and javac not all set")]

RULES = """\
accounts:
  - accessKey: NsAdmin01
    secretKey: 12345678admin
    admin: true
"""
INNER = '{"accessKey": "NsAdmin01", "secretKey": "12345678admin"}'
NAMESPACE = "JavaNsAcl"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    work = tmp_path_factory.mktemp("java-ns-acl")
    acl_file = work / "ns_acl.yml"
    acl_file.write_text(RULES)
    with EmbeddedCluster(work, namesrv_conf={"aclEnable": "true", "aclFile": acl_file},
                         broker_conf={"innerClientAuthenticationCredentials": INNER}) as c:
        yield c


def _tools_home(base: Path, access_key: str, secret_key: str) -> Path:
    """A ROCKETMQ_HOME for mqadmin: 4.9.8's logback_tools.xml and a tools.yml with these keys."""
    home = base / f"home-{access_key}-{secret_key}"
    (home / "conf").mkdir(parents=True)
    shutil.copy(Path(HOME) / "conf" / "logback_tools.xml", home / "conf")
    (home / "conf" / "tools.yml").write_text(f"accessKey: {access_key}\nsecretKey: {secret_key}\n")
    return home


def _mqadmin(home: Path, *args: str) -> str:
    # (mqadmin prints a failed command's exception and still exits 0: the text is the answer)
    r = subprocess.run(["java", *OPENS, f"-Duser.home={home}", "-cp", CLASSPATH,
                        "org.apache.rocketmq.tools.command.MQAdminStartup", *args],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "ROCKETMQ_HOME": str(home)})
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def _kv(ns: str, key: str) -> tuple[int, str | None]:
    async def go() -> tuple[int, str | None]:
        client = RemotingClient()
        try:
            r = await client.invoke(ns, create_request(RequestCode.GET_KV_CONFIG,
                                                       {"namespace": NAMESPACE, "key": key}), 5)
            return r.code, (r.ext_fields or {}).get("value")
        finally:
            await client.close()
    return run(go())


def test_mqadmin_kv_writes_need_the_admin_account(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    admin, wrong = _tools_home(tmp_path, "NsAdmin01", "12345678admin"), _tools_home(tmp_path, "NsAdmin01", "wrong")
    out = _mqadmin(admin, "updateKvConfig", "-n", ns, "-s", NAMESPACE, "-k", "k1", "-v", "v1")
    assert "create or update kv config to namespace success." in out, out[-3000:]
    assert _kv(ns, "k1") == (ResponseCode.SUCCESS, "v1")
    out = _mqadmin(wrong, "updateKvConfig", "-n", ns, "-s", NAMESPACE, "-k", "k1", "-v", "v2")
    assert "success" not in out and "Check signature failed for accessKey=NsAdmin01" in out, out[-3000:]
    out = _mqadmin(wrong, "deleteKvConfig", "-n", ns, "-s", NAMESPACE, "-k", "k1")
    assert "success" not in out and "Check signature failed for accessKey=NsAdmin01" in out, out[-3000:]
    assert _kv(ns, "k1") == (ResponseCode.SUCCESS, "v1")
    out = _mqadmin(admin, "deleteKvConfig", "-n", ns, "-s", NAMESPACE, "-k", "k1")
    assert "delete kv config from namespace success." in out, out[-3000:]
    assert _kv(ns, "k1")[0] == ResponseCode.QUERY_NOT_FOUND


def test_java_clients_without_credentials_read_routes(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    async def topic() -> None:
        client = RemotingClient()
        try:
            await create_topic(client, cluster.broker_addr, "JavaNsAclTopic", routed_by=cluster.namesrv_addr)
        finally:
            await client.close()
    run(topic())
    classes = tmp_path / "classes"
    classes.mkdir()
    built = subprocess.run(["javac", "-cp", CLASSPATH, "-d", str(classes), str(PEER_SOURCE)], capture_output=True,
                           text=True, timeout=180)
    assert built.returncode == 0, built.stderr[-3000:]
    r = subprocess.run(["java", *OPENS, "-Xmx256m", f"-Duser.home={tmp_path}", "-cp", f"{CLASSPATH}{os.pathsep}{classes}",
                        "RoutePeer", cluster.namesrv_addr, "JavaNsAclTopic", "3"],
                       capture_output=True, text=True, timeout=120)
    lines = r.stdout.splitlines()
    assert lines.count("SENT SEND_OK") == 3 and "GOT 3" in lines, r.stdout[-2000:] + r.stderr[-2000:]
