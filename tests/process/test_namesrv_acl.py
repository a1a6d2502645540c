"""The NameServer's ACL (``aclEnable``, beyond 4.9.8) with real processes: route and KV reads stay
open; every state-changing code unsigned, with a wrong secret, an unknown account or a non-admin
account is refused with the broker's ACL answer (SYSTEM_ERROR and 4.9.8's AclException text); an
admin account's writes pass (the Admin API's too); a broker signing with
``innerClientAuthenticationCredentials`` registers, one without is refused, logs it and stays up;
the file is reloaded when it changes."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastmq.client.acl import AclClientRPCHook, SessionCredentials
from fastmq.client.admin import Admin
from fastmq.errors import FastMQError
from fastmq.namesrv.acl import ADMIN_CODES
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import RemotingCommand, create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster, broker_process

ADMIN = SessionCredentials("NsAdmin01", "12345678admin")
USER = SessionCredentials("NsUser001", "12345678user")
ROOT = Path(__file__).resolve().parents[2]
EXC = "org.apache.rocketmq.acl.common.AclException: "
RULES = """\
accounts:
  - accessKey: NsAdmin01
    secretKey: 12345678admin
    admin: true
  - accessKey: NsUser001
    secretKey: 12345678user
    admin: {user_admin}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("ns-acl")
    acl_file = work / "ns_acl.yml"
    acl_file.write_text(RULES.format(user_admin="false"))
    inner = f'{{"accessKey": "{ADMIN.access_key}", "secretKey": "{ADMIN.secret_key}"}}'
    with EmbeddedCluster(work, namesrv_conf={"aclEnable": "true", "aclFile": acl_file},
                         broker_conf={"innerClientAuthenticationCredentials": inner}) as c:
        c.acl_file = acl_file  # type: ignore[attr-defined]
        yield c


async def _invoke(addr: str, req: RemotingCommand, creds: SessionCredentials | None = None) -> RemotingCommand:
    client = RemotingClient(rpc_hook=AclClientRPCHook(creds) if creds else None)
    try:
        return await client.invoke(addr, req, 5)
    finally:
        await client.close()


def _put_kv(value: str) -> RemotingCommand:
    return create_request(RequestCode.PUT_KV_CONFIG, {"namespace": "NsAclTest", "key": "k", "value": value})


def _refused(r: RemotingCommand, text: str) -> None:
    assert r.code == ResponseCode.SYSTEM_ERROR, (r.code, r.remark)
    assert (r.remark or "").startswith(EXC + text), r.remark


async def test_reads_stay_open_and_the_signed_broker_registered(cluster) -> None:
    ns = cluster.namesrv_addr
    # the broker signed its registration with an admin account: its route is there
    r = await _invoke(ns, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert b"broker-a" in r.body
    for code in (RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
                 RequestCode.GET_NAMESRV_CONFIG):
        r = await _invoke(ns, create_request(code))
        assert r.code == ResponseCode.SUCCESS, (code, r.remark)
    r = await _invoke(ns, create_request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NsAclTest"}))
    assert r.code in (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND), r.remark


async def test_writes_need_a_signed_admin_account(cluster) -> None:
    ns = cluster.namesrv_addr
    for code in sorted(ADMIN_CODES):  # every state-changing code, unsigned
        _refused(await _invoke(ns, create_request(code, {"brokerName": "broker-a"})), "No accessKey is configured")
    _refused(await _invoke(ns, _put_kv("x"), SessionCredentials(ADMIN.access_key, "wrongsecret1")),
             f"Check signature failed for accessKey={ADMIN.access_key}")
    _refused(await _invoke(ns, _put_kv("x"), SessionCredentials("NsNobody1", "12345678none")),
             "No acl config for NsNobody1")
    _refused(await _invoke(ns, _put_kv("x"), USER),
             f"Need admin permission for request code={RequestCode.PUT_KV_CONFIG}, but accessKey={USER.access_key} is not")
    # a oneway write that fails is dropped, the connection stays usable
    client = RemotingClient()
    try:
        await client.invoke_oneway(ns, _put_kv("oneway"), 5)
        r = await client.invoke(ns, create_request(RequestCode.GET_KV_CONFIG, {"namespace": "NsAclTest", "key": "k"}), 5)
        assert r.code == ResponseCode.QUERY_NOT_FOUND, r.remark
    finally:
        await client.close()
    # the admin account writes; the read needs nothing
    assert (await _invoke(ns, _put_kv("v1"), ADMIN)).code == ResponseCode.SUCCESS
    r = await _invoke(ns, create_request(RequestCode.GET_KV_CONFIG, {"namespace": "NsAclTest", "key": "k"}))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["value"] == "v1"
    del_kv = create_request(RequestCode.DELETE_KV_CONFIG, {"namespace": "NsAclTest", "key": "k"})
    _refused(await _invoke(ns, del_kv), "No accessKey is configured")
    assert (await _invoke(ns, del_kv, ADMIN)).code == ResponseCode.SUCCESS
    # the Admin API (fastmq-admin --access-key/--secret-key) signs its NameServer writes
    async with Admin(ns) as anonymous:
        with pytest.raises(FastMQError, match="No accessKey is configured"):
            await anonymous.wipe_write_perm("broker-a")
    async with Admin(ns, credentials=ADMIN) as admin:
        assert (await admin.wipe_write_perm("broker-a"))[ns] >= 1
        assert (await admin.add_write_perm("broker-a"))[ns] >= 1
    # fastmq-admin signs with --access-key/--secret-key (an empty ROCKETMQ_HOME: no tools.yml keys)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ROCKETMQ_HOME": ""}
    for keys, ok in (((), False), (("--access-key", ADMIN.access_key, "--secret-key", ADMIN.secret_key), True)):
        r = subprocess.run([sys.executable, "-m", "fastmq.admin_cli", "addWritePerm", "-n", ns, "-b", "broker-a",
                            *keys], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
        assert (r.returncode == 0) is ok, (r.stdout, r.stderr)
        assert ok or "No accessKey is configured" in r.stderr, r.stderr
    r = await _invoke(ns, create_request(RequestCode.UPDATE_NAMESRV_CONFIG), ADMIN)  # no body: nothing to change
    assert r.code == ResponseCode.SUCCESS, r.remark


async def test_a_broker_without_credentials_is_refused_and_stays_up(cluster, tmp_path) -> None:
    b = broker_process(tmp_path, cluster.namesrv_addr, brokerName="broker-unsigned").start(30)
    try:
        log = tmp_path / "broker.log"
        deadline = time.monotonic() + 10
        while "refused by its ACL" not in log.read_text(errors="replace") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        text = log.read_text(errors="replace")
        assert "refused by its ACL" in text and "innerClientAuthenticationCredentials" in text, text[-2000:]
        assert EXC + "No accessKey is configured" in text
        assert b.alive()
        r = await _invoke(cluster.namesrv_addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert b"broker-unsigned" not in r.body and b"broker-a" in r.body
    finally:
        b.stop()


async def test_the_file_is_reloaded(cluster) -> None:
    ns = cluster.namesrv_addr
    _refused(await _invoke(ns, _put_kv("user"), USER), "Need admin permission")
    cluster.acl_file.write_text(RULES.format(user_admin="true"))
    try:
        deadline = time.monotonic() + 15
        while True:
            r = await _invoke(ns, _put_kv("user"), USER)
            if r.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.3)
        assert r.code == ResponseCode.SUCCESS, r.remark
    finally:
        cluster.acl_file.write_text(RULES.format(user_admin="false"))
        assert (await _invoke(ns, create_request(RequestCode.DELETE_KV_CONFIG, {"namespace": "NsAclTest", "key": "k"}),
                              ADMIN)).code == ResponseCode.SUCCESS
