"""SQL92 subscriptions on a real broker with enablePropertyFilter=true: CHECK_CLIENT_CONFIG, pulls
carrying the expression, pulls using the heartbeat's, and the refusals (4.9.8's codes and texts).

(With the switch off, test_semantics.test_sql92_subscription_is_refused keeps today's refusal.)
"""
from __future__ import annotations

import asyncio
import json

import pytest

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from fastmq.protocol.message import decode_records
from fastmq.testing import EmbeddedCluster
from tests.process.helpers import create_topic, send_request

pytestmark = pytest.mark.fastmq_cluster(broker_conf={"enablePropertyFilter": "true"})

TOPIC = "SqlT"


def check_request(expr: str, etype: str = "SQL92"):
    return create_request(RequestCode.CHECK_CLIENT_CONFIG, {}, json.dumps({
        "clientId": "127.0.0.1@sql", "group": "CG_SQL", "subscriptionData": {
            "topic": TOPIC, "subString": expr, "expressionType": etype, "tagsSet": [], "codeSet": [],
            "subVersion": 1, "classFilterMode": False}}).encode())


def pull(group: str, expr: str | None, *, offset: int = 0, most: int = 32, etype: str = "SQL92", topic: str = TOPIC,
         suspend_ms: int = 0):
    f = {"consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": offset, "maxMsgNums": most,
         "sysFlag": (0x4 if expr is not None else 0) | (0x2 if suspend_ms else 0), "commitOffset": 0,
         "suspendTimeoutMillis": suspend_ms, "subVersion": 0}
    if expr is not None:
        f["subscription"] = expr
        f["expressionType"] = etype
    return create_request(RequestCode.PULL_MESSAGE, f)


def heartbeat(group: str, expr: str) -> bytes:
    sub = SubscriptionData(TOPIC, expr, [], [], 1, expression_type="SQL92")
    return HeartbeatData("127.0.0.1@sql", [], [ConsumerData(group, subscriptions=[sub])]).to_json()


_LOADED: set[str] = set()


@pytest.fixture
async def loaded(fastmq_cluster: EmbeddedCluster, client):
    """The broker's address, its topic holding (once per module's cluster) 40 messages on queue 0:
    property a = i, region eu for even i, then one without properties and one with a = 'x'."""
    c = client
    a = fastmq_cluster.broker_addr
    if a not in _LOADED:
        _LOADED.add(a)
        assert (await create_topic(c, a, TOPIC, queues=1)).code == ResponseCode.SUCCESS
        for i in range(40):
            props = {"a": str(i), "region": "eu" if i % 2 == 0 else "us", "TAGS": "TagA"}
            assert (await c.invoke(a, send_request(TOPIC, f"m{i}".encode(), props), 5)).code == ResponseCode.SUCCESS
        assert (await c.invoke(a, send_request(TOPIC, b"bare"), 5)).code == ResponseCode.SUCCESS
        assert (await c.invoke(a, send_request(TOPIC, b"ax", {"a": "x"}), 5)).code == ResponseCode.SUCCESS
    return a


def bodies(r) -> list[bytes]:
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return [m.body for m in decode_records(r.body)]


async def test_check_client_config(loaded, client) -> None:
    r = await client.invoke(loaded, check_request("region = 'eu' AND a > 10"), 5)
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    r = await client.invoke(loaded, check_request("a = NULL"), 5)
    assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                  "java.lang.RuntimeException: 'NULL' cannot be compared.")
    r = await client.invoke(loaded, check_request("a and between 2 and 10"), 5)
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert r.remark.startswith('org.apache.rocketmq.filter.parser.ParseException: Encountered " "BETWEEN" ')
    r = await client.invoke(loaded, check_request("a > 1 OR " * 1000 + "a > 1"), 5)
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "over the limit" in r.remark
    r = await client.invoke(loaded, check_request("TagA || TagB", etype="TAG"), 5)
    assert r.code == ResponseCode.SUCCESS


async def test_pull_carrying_the_expression_is_filtered(loaded, client) -> None:
    r = await client.invoke(loaded, pull("CG_SQL_P", "region = 'eu' AND a BETWEEN 10 AND 19"), 5)
    assert bodies(r) == [b"m10", b"m12", b"m14", b"m16", b"m18"]
    # a = 'x' cannot be read as an Integer: no match, and nothing else is disturbed
    r = await client.invoke(loaded, pull("CG_SQL_P", "a >= 38 OR a IS NULL"), 5)
    assert bodies(r) == [b"m38", b"m39", b"bare"]
    r = await client.invoke(loaded, pull("CG_SQL_P", "a = 'x'"), 5)
    assert bodies(r) == [b"ax"]


async def test_max_messages_and_next_offset_follow_the_matches(loaded, client) -> None:
    r = await client.invoke(loaded, pull("CG_SQL_P", "region = 'us'", most=3), 5)
    assert bodies(r) == [b"m1", b"m3", b"m5"]
    assert r.ext_fields["nextBeginOffset"] == "6"
    r = await client.invoke(loaded, pull("CG_SQL_P", "region = 'us'", offset=6, most=3), 5)
    assert bodies(r) == [b"m7", b"m9", b"m11"]


async def test_nothing_matching_moves_the_offset_on(loaded, client) -> None:
    r = await client.invoke(loaded, pull("CG_SQL_P", "region = 'asia'"), 5)
    assert (r.code, r.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert r.ext_fields["nextBeginOffset"] == "42"


async def test_bad_carried_expression_is_refused(loaded, client) -> None:
    r = await client.invoke(loaded, pull("CG_SQL_P", "a > 'x'"), 5)
    assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")


async def test_heartbeat_subscription_filters_pulls(loaded, client) -> None:
    hb = create_request(RequestCode.HEART_BEAT, {}, heartbeat("CG_SQL_H", "a < 3 AND TAGS IN ('TagA')"))
    assert (await client.invoke(loaded, hb, 5)).code == ResponseCode.SUCCESS
    r = await client.invoke(loaded, pull("CG_SQL_H", None), 5)
    assert bodies(r) == [b"m0", b"m1", b"m2"]
    # a TAG pull of the same broker is untouched
    r = await client.invoke(loaded, pull("CG_SQL_T", "*", etype="TAG"), 5)
    assert len(bodies(r)) == 32


async def test_heartbeat_with_a_bad_expression_gets_filter_data_not_exist(loaded, client) -> None:
    hb = create_request(RequestCode.HEART_BEAT, {}, heartbeat("CG_SQL_BAD", "a ="))
    assert (await client.invoke(loaded, hb, 5)).code == ResponseCode.SUCCESS
    r = await client.invoke(loaded, pull("CG_SQL_BAD", None), 5)
    assert (r.code, r.remark) == (ResponseCode.FILTER_DATA_NOT_EXIST,
                                  "The broker's consumer filter data is not exist!Your expression may be wrong!")


async def test_a_held_pull_waits_for_a_message_its_filter_takes(loaded, client) -> None:
    """A long-polling SQL92 pull at the queue's end is not answered for arrivals it does not take
    (it moves on past them), only for one it takes, as 4.9.8 wakes it only for a match."""
    topic = "SqlHeld"
    assert (await create_topic(client, loaded, topic, queues=1)).code == ResponseCode.SUCCESS
    assert (await client.invoke(loaded, send_request(topic, b"first", {"k": "0"}), 5)).code == ResponseCode.SUCCESS
    held = asyncio.ensure_future(client.invoke(loaded, pull("CG_SQL_HELD", "k = 2", offset=1, topic=topic,
                                                           suspend_ms=8000), 15))
    await asyncio.sleep(0.3)
    for k in (1, 1, 3):
        r = await client.invoke(loaded, send_request(topic, f"k{k}".encode(), {"k": str(k)}), 5)
        assert r.code == ResponseCode.SUCCESS
    await asyncio.sleep(0.5)
    assert not held.done()  # three arrivals, none taken
    assert (await client.invoke(loaded, send_request(topic, b"k2", {"k": "2"}), 5)).code == ResponseCode.SUCCESS
    r = await asyncio.wait_for(held, 5)
    assert bodies(r) == [b"k2"]
    assert r.ext_fields["nextBeginOffset"] == "5"
