"""``fastmq-admin``'s ACL commands (updateAclConfig, deleteAclConfig, clusterAclConfigVersion,
updateGlobalWhiteAddr) against a broker with aclEnable=true, run as a user runs them: signed with
``--access-key/--secret-key`` or ROCKETMQ_HOME/conf/tools.yml as mqadmin is, refused unsigned or
signed by a non-admin, and the broker's plain_acl.yml changed on disk."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from fastmq.testing import EmbeddedCluster

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "AclAdminCluster"
RULES = """\
accounts:
  - accessKey: RocketMQUser
    secretKey: 12345678user
    admin: false
  - accessKey: RocketMQAdmin
    secretKey: 12345678admin
    admin: true
"""
AS_ADMIN = ("--access-key", "RocketMQAdmin", "--secret-key", "12345678admin")


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedCluster, Path]]:
    work = tmp_path_factory.mktemp("acladmin")
    acl_file = work / "plain_acl.yml"
    acl_file.write_text(RULES)
    with EmbeddedCluster(work, broker_conf={"aclEnable": "true", "aclFile": acl_file,
                                            "brokerClusterName": CLUSTER}) as cluster:
        yield cluster, acl_file


def admin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"}
    return subprocess.run([sys.executable, "-m", "fastmq.admin_cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**base, "PYTHONPATH": str(ROOT), **(env or {})})


def ok_json(*args: str, env: dict[str, str] | None = None) -> Any:
    r = admin(*args, "--json", env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_update_delete_and_versions(acl_cluster: tuple[EmbeddedCluster, Path]) -> None:
    cluster, acl_file = acl_cluster
    ns, b = cluster.namesrv_addr, cluster.broker_addr
    before = ok_json("clusterAclConfigVersion", "-n", ns, "-c", CLUSTER, *AS_ADMIN)
    assert [i["brokerAddr"] for i in before] == [b]
    counter = next(iter(before[0]["versions"].values()))["counter"]
    r = admin("updateAclConfig", "-n", ns, "-b", b, "-a", "NewUser", "-s", "12345678new", "-i", "DENY",
              "-u", "SUB", "-t", "TopicA=PUB|SUB,TopicB=DENY", "-g", "GroupA=SUB", "-w", "192.168.0.*",
              *AS_ADMIN)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"create or update plain access config to {b} success.")
    text = acl_file.read_text()
    assert "NewUser" in text and "TopicB=DENY" in text and "192.168.0.*" in text
    # -c reaches every broker of the cluster; the version counter moved
    assert ok_json("updateAclConfig", "-n", ns, "-c", CLUSTER, "-a", "NewUser", "-s", "12345678new", "-m", "true",
                   *AS_ADMIN)["brokers"] == [b]
    after = ok_json("clusterAclConfigVersion", "-n", ns, "-b", b, *AS_ADMIN)
    assert next(iter(after[0]["versions"].values()))["counter"] > counter
    table = admin("clusterAclConfigVersion", "-n", ns, "-c", CLUSTER, *AS_ADMIN)
    assert table.returncode == 0 and table.stdout.splitlines()[0].split()[:2] == ["#Cluster", "Name"]
    assert CLUSTER in table.stdout.splitlines()[1]
    r = admin("deleteAclConfig", "-n", ns, "-b", b, "-a", "NewUser", *AS_ADMIN)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("account's accesskey is:NewUser") and "NewUser" not in acl_file.read_text()


def test_global_white_addr_and_tools_yml(acl_cluster: tuple[EmbeddedCluster, Path], tmp_path: Path) -> None:
    cluster, acl_file = acl_cluster
    ns, b = cluster.namesrv_addr, cluster.broker_addr
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: RocketMQAdmin\nsecretKey: 12345678admin\n")
    r = admin("updateGlobalWhiteAddr", "-n", ns, "-c", CLUSTER, "-g", "10.10.103.*,192.168.9.*",
              env={"ROCKETMQ_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"update global white remote addresses to {b} success."
    assert "10.10.103.*" in acl_file.read_text()


def test_refusals(acl_cluster: tuple[EmbeddedCluster, Path]) -> None:
    cluster, acl_file = acl_cluster
    ns, b = cluster.namesrv_addr, cluster.broker_addr
    before = acl_file.read_text()
    unsigned = admin("updateAclConfig", "-n", ns, "-b", b, "-a", "X1", "-s", "12345678x1")
    user = admin("deleteAclConfig", "-n", ns, "-b", b, "-a", "RocketMQAdmin",
                 "--access-key", "RocketMQUser", "--secret-key", "12345678user")
    for r in (unsigned, user):
        assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, (r.returncode, r.stderr)
    assert "Need admin permission" in user.stderr
    assert acl_file.read_text() == before
    assert admin("updateAclConfig", "-n", ns, "-a", "X1", "-s", "12345678x1", *AS_ADMIN).returncode == 2
    assert admin("deleteAclConfig", "-n", ns, "-b", b, *AS_ADMIN).returncode == 2
    assert admin("clusterAclConfigVersion", "-n", ns, "--access-key", "RocketMQAdmin").returncode == 2
    assert admin("clusterAclConfigVersion", "-n", ns, "-c", "NoSuchCluster", *AS_ADMIN).returncode == 1
