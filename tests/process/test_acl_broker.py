"""The broker's plain ACL (aclEnable=true) with real processes: fastmq's client with the right keys
works; a wrong secret, an unknown account, no signature and a signature replayed under another
account are refused with 4.9.8's answer; a topic the account may not write, admin-only codes,
the ACL admin codes, a reload within 5 s, a file that stops parsing (the old rules stay), and the
broker staying up through all of it."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.acl import AclClientRPCHook, SessionCredentials
from fastmq.client.instance import ClientConfig
from fastmq.errors import SendFailedError
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster
from tests.support import send_request

USER = SessionCredentials("RocketMQUser", "12345678user")
ADMIN = SessionCredentials("RocketMQAdmin", "12345678admin")
EXC = "org.apache.rocketmq.acl.common.AclException: "

RULES = """\
accounts:
  - accessKey: RocketMQUser
    secretKey: 12345678user
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [AclOk=PUB|SUB, AclNo={no_perm}]
  - accessKey: RocketMQAdmin
    secretKey: 12345678admin
    admin: true
"""


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("acl")
    acl_file = work / "plain_acl.yml"
    acl_file.write_text(RULES.format(no_perm="SUB"))
    with EmbeddedCluster(work, broker_conf={"aclEnable": "true", "aclFile": acl_file,
                                            "autoCreateTopicEnable": "false"}) as cluster:
        yield cluster, acl_file


def _client(creds: SessionCredentials | None) -> RemotingClient:
    return RemotingClient(rpc_hook=AclClientRPCHook(creds) if creds else None)


async def _invoke(creds: SessionCredentials | None, addr: str, req, timeout: float = 5):
    c = _client(creds)
    try:
        return await c.invoke(addr, req, timeout)
    finally:
        await c.close()


def _create_topic(topic: str):
    return create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
        "topicFilterType": "SINGLE_TAG"})


async def _topics(addr: str) -> None:
    for t in ("AclOk", "AclNo"):
        r = await _invoke(ADMIN, addr, _create_topic(t))
        assert r.code == ResponseCode.SUCCESS, r.remark


async def test_right_keys_send_and_wrong_ones_are_refused(acl_cluster) -> None:
    cluster, _ = acl_cluster
    addr = cluster.broker_addr
    await _topics(addr)
    async with Producer("PG_ACL", client_config=ClientConfig(namesrv_addr=cluster.namesrv_addr,
                                                             credentials=USER)) as p:
        for _ in range(30):  # the route appears with the broker's registration of the new topic
            try:
                res = await p.send(Message("AclOk", b"allowed"))
                break
            except Exception:
                await asyncio.sleep(0.3)
        assert res.status == "SEND_OK"

    r = await _invoke(SessionCredentials("RocketMQUser", "wrong-secret"), addr, send_request("AclOk", b"x"))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark == (EXC + "Check signature failed for accessKey=RocketMQUser, org.apache.rocketmq.acl.plain."
                        "PlainPermissionManager.validate(PlainPermissionManager.java:684)")
    r = await _invoke(SessionCredentials("Nobody1234", "12345678"), addr, send_request("AclOk", b"x"))
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith(EXC + "No acl config for Nobody1234, ")
    r = await _invoke(None, addr, send_request("AclOk", b"x"))
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith(EXC + "No accessKey is configured, ")

    # a request the user signed, replayed under the admin's access key: the key is signed too
    req = send_request("AclOk", b"x")
    AclClientRPCHook(USER)(req)
    req.ext_fields["AccessKey"] = ADMIN.access_key
    r = await _invoke(None, addr, req)
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark.startswith(EXC + "Check signature failed for accessKey=RocketMQAdmin, ")
    # the same request, body changed after signing
    req = send_request("AclOk", b"x")
    AclClientRPCHook(USER)(req)
    req.body = b"y"
    assert (await _invoke(None, addr, req)).code == ResponseCode.SYSTEM_ERROR


async def test_first_try_frames_are_signed(acl_cluster) -> None:
    """The producer's compiled first try signs the frames it writes: with the right keys the
    broker stores them (none took the general path), with a wrong secret it refuses them."""
    cluster, _ = acl_cluster
    await _topics(cluster.broker_addr)
    async with Producer("PG_ACL_FAST", client_config=ClientConfig(namesrv_addr=cluster.namesrv_addr,
                                                                  credentials=USER)) as p:
        for _ in range(30):  # the route appears with the broker's registration of the new topic
            try:
                await p.send(Message("AclOk", b"warm"))
                break
            except Exception:
                await asyncio.sleep(0.3)
        general = p.instance.api.send_message
        calls = []
        p.instance.api.send_message = lambda *a, **k: calls.append(a) or general(*a, **k)  # type: ignore[method-assign]
        futs = [await p.send_async(Message("AclOk", b"fast %d" % i, properties={"KEYS": "k é"})) for i in range(20)]
        results = await asyncio.gather(*futs, p.send(Message("AclOk", b"sync")))
        assert [r.status for r in results] == ["SEND_OK"] * 21 and calls == []
    wrong = SessionCredentials(USER.access_key, "wrong-secret")
    async with Producer("PG_ACL_WRONG", client_config=ClientConfig(namesrv_addr=cluster.namesrv_addr,
                                                                   credentials=wrong),
                        retry_times_when_send_failed=0) as p:
        assert p._fast.running
        calls.clear()
        for i in range(2):  # the first connects through the general path, the second is a first try's frame
            if i == 1:
                general = p.instance.api.send_message
                p.instance.api.send_message = (  # type: ignore[method-assign]
                    lambda *a, **k: calls.append(a) or general(*a, **k))
            with pytest.raises(SendFailedError) as err:
                await p.send(Message("AclOk", b"refused"))
            assert "Check signature failed for accessKey=RocketMQUser" in str(err.value.__cause__)
        assert calls == []


async def test_permissions_admin_codes_and_oneway(acl_cluster) -> None:
    cluster, _ = acl_cluster
    addr = cluster.broker_addr
    await _topics(addr)
    r = await _invoke(USER, addr, send_request("AclNo", b"x"))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark == (EXC + "No default permission for topic:AclNo, org.apache.rocketmq.acl.plain."
                        "PlainPermissionManager.checkPerm(PlainPermissionManager.java:611)")
    r = await _invoke(USER, addr, send_request("AclOther", b"x"))  # the default: DENY
    assert r.remark.startswith(EXC + "No default permission for topic:AclOther, ")
    r = await _invoke(USER, addr, _create_topic("AclUserMade"))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark.startswith(EXC + "Need admin permission for request code=17, but accessKey=RocketMQUser is not, ")
    # a refused oneway request gets no answer and stores nothing; the connection stays usable
    c = _client(None)
    try:
        before = await _invoke(ADMIN, addr, create_request(RequestCode.GET_MAX_OFFSET, {"topic": "AclOk", "queueId": 0}))
        await c.invoke_oneway(addr, send_request("AclOk", b"oneway"), 5)
        r = await c.invoke(addr, send_request("AclOk", b"x"), 5)
        assert r.remark.startswith(EXC + "No accessKey is configured")
        after = await _invoke(ADMIN, addr, create_request(RequestCode.GET_MAX_OFFSET, {"topic": "AclOk", "queueId": 0}))
        assert before.ext_fields["offset"] == after.ext_fields["offset"]
    finally:
        await c.close()


async def _wait_for(addr: str, creds: SessionCredentials, topic: str, code: int, seconds: float = 8) -> int:
    deadline = time.monotonic() + seconds
    got = -1
    while time.monotonic() < deadline:
        got = (await _invoke(creds, addr, send_request(topic, b"x"))).code
        if got == code:
            return got
        await asyncio.sleep(0.25)
    return got


async def test_reload_and_a_file_that_stops_parsing(acl_cluster) -> None:
    cluster, acl_file = acl_cluster
    addr = cluster.broker_addr
    await _topics(addr)
    assert (await _invoke(USER, addr, send_request("AclNo", b"x"))).code == ResponseCode.SYSTEM_ERROR
    t0 = time.monotonic()
    acl_file.write_text(RULES.format(no_perm="PUB"))
    assert await _wait_for(addr, USER, "AclNo", ResponseCode.SUCCESS) == ResponseCode.SUCCESS
    assert time.monotonic() - t0 < 5 + 1  # the watch polls well inside 5 s
    # a typo: the last good rules stay (neither open to all nor closed to all)
    acl_file.write_text("accounts: [ {accessKey: RocketMQUser\n  - broken: [\n")
    await asyncio.sleep(4)
    assert (await _invoke(USER, addr, send_request("AclNo", b"x"))).code == ResponseCode.SUCCESS
    assert (await _invoke(None, addr, send_request("AclNo", b"x"))).code == ResponseCode.SYSTEM_ERROR
    assert "does not parse" in cluster.brokers[0].output()
    acl_file.write_text(RULES.format(no_perm="SUB"))
    assert await _wait_for(addr, USER, "AclNo", ResponseCode.SYSTEM_ERROR) == ResponseCode.SYSTEM_ERROR


async def test_acl_admin_codes(acl_cluster) -> None:
    """Codes 50-53 as mqadmin sends them: written to the file, in force at once; the writes are
    an admin's only."""
    cluster, acl_file = acl_cluster
    addr = cluster.broker_addr
    await _topics(addr)
    new = SessionCredentials("RocketMQNew1", "12345678new")
    update = create_request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
        "accessKey": new.access_key, "secretKey": new.secret_key, "admin": "false",
        "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB", "topicPerms": "AclOk=PUB,AclNo=DENY"})
    r = await _invoke(USER, addr, update)
    assert r.code == ResponseCode.SYSTEM_ERROR and "Need admin permission for request code=50" in r.remark
    assert (await _invoke(new, addr, send_request("AclOk", b"x"))).remark.startswith(EXC + "No acl config for")
    r = await _invoke(ADMIN, addr, update)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert "RocketMQNew1" in acl_file.read_text() and "dataVersion" in acl_file.read_text()
    assert (await _invoke(new, addr, send_request("AclOk", b"x"))).code == ResponseCode.SUCCESS
    assert (await _invoke(new, addr, send_request("AclNo", b"x"))).code == ResponseCode.SYSTEM_ERROR
    bad = create_request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "short", "secretKey": "x"})
    r = await _invoke(ADMIN, addr, bad)
    assert r.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED and "length should longer than 6" in r.remark

    r = await _invoke(USER, addr, create_request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["brokerName"] == "broker-a"
    versions = json.loads(r.ext_fields["allAclFileVersion"])
    assert versions[str(acl_file)]["counter"] >= 1

    white = create_request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                           {"globalWhiteAddrs": "127.0.0.1", "aclFileFullPath": str(acl_file)})
    assert (await _invoke(USER, addr, white)).code == ResponseCode.SYSTEM_ERROR
    assert (await _invoke(ADMIN, addr, white)).code == ResponseCode.SUCCESS
    assert (await _invoke(None, addr, send_request("AclOk", b"x"))).code == ResponseCode.SUCCESS  # white: open
    white.ext_fields["globalWhiteAddrs"] = ""
    white.opaque += 1000
    assert (await _invoke(ADMIN, addr, white)).code == ResponseCode.SUCCESS
    assert (await _invoke(None, addr, send_request("AclOk", b"x"))).code == ResponseCode.SYSTEM_ERROR

    r = await _invoke(ADMIN, addr, create_request(RequestCode.DELETE_ACL_CONFIG, {"accessKey": new.access_key}))
    assert r.code == ResponseCode.SUCCESS
    assert (await _invoke(new, addr, send_request("AclOk", b"x"))).remark.startswith(EXC + "No acl config for")
    r = await _invoke(ADMIN, addr, create_request(RequestCode.DELETE_ACL_CONFIG, {"accessKey": new.access_key}))
    assert r.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
