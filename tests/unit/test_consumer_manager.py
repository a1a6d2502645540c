"""Heartbeat bodies (Java and C++ forms) and the broker's consumer/producer membership tables."""
from __future__ import annotations

import json

import pytest

from fastmq.broker.consumer_manager import ClientChannelInfo, ConsumerManager, ProducerManager
from fastmq.broker.rebalance_lock import RebalanceLockManager
from fastmq.errors import RemotingCommandError
from fastmq.protocol.heartbeat import HeartbeatData, build_subscription, java_string_hash
from tests.support import WIRE_VECTORS


def _cpp_heartbeat() -> bytes:
    for line in (WIRE_VECTORS / "push-consumer.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("code") == 34 and r["direction"] == "client->server":
            frame = bytes.fromhex(r["frame_hex"])
            hlen = int.from_bytes(frame[4:8], "big") & 0xFFFFFF
            return frame[8 + hlen:]
    raise AssertionError("no heartbeat in the vectors")


def test_cpp_heartbeat_ordinals_and_string_subversion() -> None:
    hb = HeartbeatData.from_json(_cpp_heartbeat())
    c = hb.consumers[0]
    assert (c.group_name, c.consume_type, c.message_model, c.consume_from_where) == (
        "GID_CPP_PUSH", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    subs = {s.topic: s for s in c.subscriptions}
    assert subs["%RETRY%GID_CPP_PUSH"].sub_string == "*" and subs["%RETRY%GID_CPP_PUSH"].tags_set == []
    assert subs["TopicCppPush"].sub_version == 1795345682250
    assert subs["TopicCppPush"].tags_set == ["tagA", "tagBatch", "tagBig", "tagDelay"]


def test_java_heartbeat_round_trip() -> None:
    hb = HeartbeatData.from_json(b'{"clientID":"10.0.0.1@123","producerDataSet":[{"groupName":"PG"}],'
                                 b'"consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_ACTIVELY",'
                                 b'"messageModel":"BROADCASTING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",'
                                 b'"subscriptionDataSet":[],"unitMode":false}]}')
    again = HeartbeatData.from_json(hb.to_json())
    assert again == hb and again.consumers[0].message_model == "BROADCASTING"


@pytest.mark.parametrize("body, msg", [(b"", "empty"), (b"[1]", "object"), (b"{", "not valid JSON"),
                                       (b'{"clientID":5}', "clientID must be a string"),
                                       (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","messageModel":9}]}',
                                        "messageModel 9")])
def test_bad_heartbeats(body: bytes, msg: str) -> None:
    with pytest.raises(RemotingCommandError, match=msg):
        HeartbeatData.from_json(body)


# "polygenelubricants".hashCode() is Integer.MIN_VALUE, a known Java value; the CJK tag is the
# formula over its two UTF-16 units (U+6807, U+7B7E).
@pytest.mark.parametrize("tag, code", [("TagA", 2598919), ("", 0), ("a", 97), ("tagA", 3552231),
                                       ("标签", 0x6807 * 31 + 0x7B7E), ("polygenelubricants", -2147483648)])
def test_java_string_hash(tag: str, code: int) -> None:
    assert java_string_hash(tag) == code


def test_astral_tag_hash_uses_surrogates() -> None:
    # U+1F600 is the UTF-16 pair D83D DE00: 0xD83D * 31 + 0xDE00
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00


def test_build_subscription() -> None:
    s = build_subscription("T", "tagA || tagB ||  ")
    assert s.tags_set == ["tagA", "tagB"] and s.code_set == [java_string_hash("tagA"), java_string_hash("tagB")]
    assert build_subscription("T", "*").subscribes_all and build_subscription("T", None).subscribes_all


def test_consumer_membership_and_notifications() -> None:
    notified: list[tuple[str, int]] = []
    cm = ConsumerManager(lambda g, conns: notified.append((g, len(conns))), expire_ms=1000)
    c1, c2 = object(), object()
    from fastmq.protocol.heartbeat import ConsumerData
    data = ConsumerData("G", subscriptions=[build_subscription("T", "*")])
    assert cm.register(ClientChannelInfo(c1, "c1", last_update_ms=0), data)
    assert cm.register(ClientChannelInfo(c2, "c2", last_update_ms=500), data)
    assert not cm.register(ClientChannelInfo(c2, "c2", last_update_ms=900), data)  # renewal only
    assert notified == [("G", 1), ("G", 2)]
    assert sorted(cm.find("G").client_ids()) == ["c1", "c2"]
    assert cm.scan_not_active(now_ms=1500) == [c1]        # c1 silent for 1500 ms > 1000
    cm.on_connection_closed(c2)
    assert cm.find("G") is None


def test_producer_membership() -> None:
    pm = ProducerManager(expire_ms=10)
    conn = object()
    pm.register("PG", ClientChannelInfo(conn, "p1", last_update_ms=0))
    assert pm.scan_not_active(now_ms=100) == [conn] and pm.groups == {}


def test_rebalance_locks() -> None:
    lm = RebalanceLockManager(max_live_ms=60_000)
    mq = ("T", "b", 0)
    assert lm.try_lock_batch("G", [mq], "c1") == {mq}
    assert lm.try_lock_batch("G", [mq], "c2") == set()
    assert lm.is_locked("G", mq, "c1")
    lm.unlock_batch("G", [mq], "c2")                     # not the holder: no effect
    assert lm.is_locked("G", mq, "c1")
    lm.unlock_batch("G", [mq], "c1")
    assert lm.try_lock_batch("G", [mq], "c2") == {mq}
