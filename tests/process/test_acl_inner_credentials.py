"""The broker's own requests signed (``innerClientAuthenticationCredentials``): a slave of a master
with ACL on takes over a topic the master made after the slave started, through the master's ACL;
GET_BROKER_CONFIG never shows the credentials. (4.9.8's broker never signs its own requests: its
slaves must be white-listed; the key is RocketMQ 5's.)"""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from fastmq.client.acl import AclClientRPCHook, SessionCredentials
from fastmq.errors import ConfigError
from fastmq.broker.config import inner_credentials
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster

ADMIN = SessionCredentials("RocketMQAdmin", "12345678admin")
INNER = '{"accessKey": "BrokerInner", "secretKey": "12345678inner"}'
RULES = """\
accounts:
  - accessKey: RocketMQAdmin
    secretKey: 12345678admin
    admin: true
  - accessKey: BrokerInner
    secretKey: 12345678inner
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("acl-inner")
    acl_file = work / "plain_acl.yml"
    acl_file.write_text(RULES)
    with EmbeddedCluster(work, slave=True, broker_conf={"aclEnable": "true", "aclFile": acl_file,
                                                        "innerClientAuthenticationCredentials": INNER}) as c:
        yield c


async def _invoke(addr: str, req, creds: SessionCredentials | None = ADMIN):
    client = RemotingClient(rpc_hook=AclClientRPCHook(creds) if creds else None)
    try:
        return await client.invoke(addr, req, 5)
    finally:
        await client.close()


async def test_a_slave_syncs_from_a_master_with_acl_on(cluster) -> None:
    master, slave = cluster.broker_addr, cluster.slaves[0].addr
    r = await _invoke(master, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "InnerSynced", "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
        "topicFilterType": "SINGLE_TAG"}))
    assert r.code == ResponseCode.SUCCESS, r.remark
    # the master refuses an unsigned sync request, as it would a slave without the key
    r = await _invoke(master, create_request(RequestCode.GET_ALL_TOPIC_CONFIG), None)
    assert r.code == ResponseCode.SYSTEM_ERROR and "No accessKey is configured" in r.remark
    # a message for the new topic reaches the slave over HA, which then syncs the topic configs
    send = create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_INNER", "b": "InnerSynced", "c": "TBW102", "d": 1, "e": 0, "f": 0, "g": int(time.time() * 1000),
        "h": 0, "i": "", "j": 0, "k": "false", "m": "false"}, b"hello")
    r = await _invoke(master, send)
    assert r.code == ResponseCode.SUCCESS, r.remark
    deadline = time.monotonic() + 20
    topics: dict = {}
    while time.monotonic() < deadline:
        r = await _invoke(slave, create_request(RequestCode.GET_ALL_TOPIC_CONFIG))
        assert r.code == ResponseCode.SUCCESS, r.remark
        topics = json.loads(r.body)["topicConfigTable"]
        if "InnerSynced" in topics:
            break
        await asyncio.sleep(0.2)
    assert "InnerSynced" in topics
    log = (cluster.slaves[0].workdir / "broker.log").read_text(errors="replace")
    assert "slave sync" not in log, log[-2000:]


async def test_get_broker_config_hides_the_credentials(cluster) -> None:
    r = await _invoke(cluster.broker_addr, create_request(RequestCode.GET_BROKER_CONFIG))
    assert r.code == ResponseCode.SUCCESS
    text = r.body.decode()
    assert "aclEnable=true" in text and "innerClientAuthentication" not in text and "12345678inner" not in text


def test_the_key_must_be_a_json_pair() -> None:
    assert inner_credentials("") is None
    assert inner_credentials(INNER) == ("BrokerInner", "12345678inner")
    for bad in ("BrokerInner:secret", '{"accessKey": "x"}', '["a", "b"]', '{"accessKey": "", "secretKey": "s"}'):
        with pytest.raises(ConfigError, match="innerClientAuthenticationCredentials"):
            inner_credentials(bad)
