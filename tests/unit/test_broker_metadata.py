"""Broker metadata managers: topics (auto-creation rules), subscription groups, consumer offsets."""
from __future__ import annotations

import json

import pytest

from fastmq.broker.config import BrokerConfig
from fastmq.broker.offsets import ConsumerOffsetManager
from fastmq.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from fastmq.broker.topic_config import TopicConfigManager
from fastmq.errors import RemotingCommandError
from fastmq.protocol import topic as tv
from fastmq.protocol.bodies import TopicConfig


def _cfg(**kw) -> BrokerConfig:
    return BrokerConfig(brokerName="broker-a", brokerIP1="127.0.0.1", **kw)


def test_reserved_topics_and_auto_create(tmp_path) -> None:
    created = []
    tcm = TopicConfigManager(_cfg(), tmp_path / "topics.json", on_new_topic=created.append)
    tbw = tcm.select("TBW102")
    assert tbw.perm == 7 and tbw.write_queue_nums == 8
    assert tcm.select("SCHEDULE_TOPIC_XXXX").read_queue_nums == 18 and tcm.select("broker-a") is not None
    v0 = tcm.data_version.counter
    tc = tcm.create_in_send("NewTopic", "TBW102", "1.2.3.4:5", 4)
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (4, 4, 6)   # inherit bit removed
    assert created == [tc] and tcm.data_version.counter == v0 + 1
    assert tcm.create_in_send("NewTopic", "TBW102", "x", 16) is tc            # exists: unchanged
    assert tcm.create_in_send("Other", "NoSuchDefault", "x", 4) is None
    tcm.file.flush()  # the change was handed to the background writer; take it now
    saved = json.loads((tmp_path / "topics.json").read_text())
    assert "NewTopic" in saved["topicConfigTable"]
    again = TopicConfigManager(_cfg(), tmp_path / "topics.json")
    again.load()
    assert again.select("NewTopic") == tc


def test_auto_create_off(tmp_path) -> None:
    tcm = TopicConfigManager(_cfg(autoCreateTopicEnable=False), tmp_path / "topics.json")
    assert tcm.select("TBW102") is None
    assert tcm.create_in_send("NewTopic", "TBW102", "x", 4) is None


def test_retry_topic_and_update_delete(tmp_path) -> None:
    tcm = TopicConfigManager(_cfg(), tmp_path / "topics.json")
    rt = tcm.create_in_send_back(tv.retry_topic("G"), 1, tv.PERM_READ | tv.PERM_WRITE)
    assert rt.write_queue_nums == 1 and tcm.create_in_send_back(tv.retry_topic("G"), 5, 6) is rt
    tcm.update(TopicConfig("Admin", 2, 2, 4))
    assert tcm.select("Admin").perm == 4
    assert tcm.delete("Admin") and not tcm.delete("Admin")


def test_subscription_groups(tmp_path) -> None:
    sgm = SubscriptionGroupManager(tmp_path / "subscriptionGroup.json")
    g = sgm.find("GID_X")
    assert g.retry_max_times == 16 and g.retry_queue_nums == 1
    sgm.update(SubscriptionGroupConfig("GID_Y", retry_max_times=3))
    sgm.file.flush()
    again = SubscriptionGroupManager(tmp_path / "subscriptionGroup.json")
    again.load()
    assert again.table["GID_Y"].retry_max_times == 3 and "GID_X" in again.table
    assert SubscriptionGroupManager(tmp_path / "x.json", auto_create=False).find("nope") is None
    with pytest.raises(RemotingCommandError, match="retryMaxTimes must be an integer"):
        SubscriptionGroupConfig.from_json(b'{"groupName":"G","retryMaxTimes":"many"}')


def test_consumer_offsets_persist_and_read_java_form(tmp_path) -> None:
    path = tmp_path / "consumerOffset.json"
    om = ConsumerOffsetManager(path)
    assert om.query("G", "T", 0) == -1
    om.commit("G", "T", 0, 42)
    om.commit("G", "T", 1, 7)
    om.persist()
    again = ConsumerOffsetManager(path)
    again.load()
    assert again.query("G", "T", 0) == 42 and again.query_all("G", "T") == {0: 42, 1: 7}
    # What a Java broker writes (fastjson, unquoted queue ids) loads too.
    path.write_text('{"offsetTable":{"T@G":{0:5,1:6}}}')
    java = ConsumerOffsetManager(path)
    java.load()
    assert java.query_all("G", "T") == {0: 5, 1: 6}
    java.remove_topic("T")
    assert java.query("G", "T", 0) == -1


def test_broker_stats_windows() -> None:
    from fastmq.broker.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS, BrokerStatsManager

    now = [100.0]
    stats = BrokerStatsManager(clock=lambda: now[0])
    assert stats.stats_data(TOPIC_PUT_NUMS, "T") is None
    stats.topic_put("T", 10)                  # the item starts its windows here (value 0)
    for _ in range(6):                        # a minute of 10 s samples, 30 messages in 3 calls each 10 s
        now[0] += 10.0
        for _ in range(3):
            stats.topic_put("T", 10)
        stats.sample("minute")
    data = stats.stats_data(TOPIC_PUT_NUMS, "T")
    assert data["statsMinute"] == {"avgpt": 10.0, "sum": 190, "tps": 190 / 60}
    assert data["statsHour"] == {"avgpt": 0.0, "sum": 0, "tps": 0.0}  # one snapshot: nothing to compare yet
    stats.group_get("G", "T", 5)
    assert stats.get(GROUP_GET_NUMS, "T@G").value == 5
