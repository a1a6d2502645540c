"""JSON bodies: round trips, fastjson's lenient forms, the compressed registration, bad input."""
from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.errors import RemotingCommandError
from fastmq.protocol.bodies import (BrokerData, ClusterInfo, DataVersion, KVTable, QueueData, RegisterBrokerBody,
                                    TopicConfig, TopicList, TopicRouteData, loads_lenient)

names = st.text(st.sampled_from("abcXYZ019_-%|"), min_size=1, max_size=20)
addrs = st.builds(lambda a, p: f"10.0.0.{a}:{p}", st.integers(0, 255), st.integers(1, 65535))


def test_fastjson_unquoted_integer_keys() -> None:
    text = ('{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b",'
            '"cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,'
            '"topicSynFlag":0,"writeQueueNums":4}]}\n')
    route = TopicRouteData.from_json(text)
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    assert route.broker_datas[0].select_broker_addr() == "127.0.0.1:10911"
    assert route.queue_datas[0] == QueueData("b", 4, 4, 6, 0)


def test_lenient_reader_leaves_strings_alone() -> None:
    obj = loads_lenient('{"a":"{0:\\"x\\", 1:2}",5:{"k":", 7:"}}')
    assert obj == {"a": '{0:"x", 1:2}', "5": {"k": ", 7:"}}


def test_old_and_new_sysflag_spelling() -> None:
    assert QueueData.from_obj({"brokerName": "b", "topicSysFlag": 3}).topic_sys_flag == 3
    assert QueueData.from_obj({"brokerName": "b", "topicSynFlag": 2}).topic_sys_flag == 2
    written = json.loads(QueueData("b", 1, 1, 6, 5).to_json())
    assert written["topicSysFlag"] == written["topicSynFlag"] == 5


@pytest.mark.parametrize("body, msg", [
    (b"\xff\xfe", "not valid UTF-8"), (b"{", "not valid JSON"), (b"[]", "must be a JSON object"),
    (b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"x":"a"}}]}', "not a broker id"),
    (b'{"queueDatas":[{"brokerName":7}]}', "brokerName must be a string"),
    (b'{"queueDatas":[{"brokerName":"b","perm":"rw"}]}', "perm must be a number"),
    (b'{"queueDatas":{}}', "must be lists"),
])
def test_bad_route_bodies(body: bytes, msg: str) -> None:
    with pytest.raises(RemotingCommandError, match=msg):
        TopicRouteData.from_json(body)


topic_configs = st.builds(TopicConfig, names, st.integers(0, 64), st.integers(0, 64), st.integers(0, 7),
                          st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]), st.integers(0, 3), st.booleans())


@settings(max_examples=50, deadline=None)
@given(st.lists(st.builds(QueueData, names, st.integers(0, 64), st.integers(0, 64), st.integers(0, 7),
                          st.integers(0, 3)), max_size=4),
       st.lists(st.builds(BrokerData, names, names, st.dictionaries(st.integers(0, 3), addrs, max_size=3)),
                max_size=3),
       st.one_of(st.none(), names))
def test_route_round_trip(qds, bds, conf) -> None:
    r = TopicRouteData(qds, bds, {}, conf)
    assert TopicRouteData.from_json(r.to_json()) == r


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(names, topic_configs, max_size=5), st.integers(0, 2**45), st.integers(0, 2**31),
       st.lists(addrs, max_size=2))
def test_register_body_round_trips(table, ts, counter, fsl) -> None:
    table = {k: TopicConfig(k, *[getattr(v, f) for f in ("read_queue_nums", "write_queue_nums", "perm",
                                                          "topic_filter_type", "topic_sys_flag", "order")])
             for k, v in table.items()}
    body = RegisterBrokerBody(table, DataVersion(ts, counter), fsl)
    assert RegisterBrokerBody.decode(body.encode(False), False) == body
    back = RegisterBrokerBody.decode(body.encode(True), True)
    # The compressed form carries name, queues, perm and filter type only (TopicConfig.encode()).
    assert back.data_version == body.data_version and back.filter_server_list == fsl
    for k, tc in table.items():
        b = back.topic_config_table[k]
        assert (b.read_queue_nums, b.write_queue_nums, b.perm, b.topic_filter_type) == (
            tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_filter_type)


def test_compressed_register_body_layout() -> None:
    # Built by hand as RegisterBrokerBody.encode(true) lays it out: big-endian lengths, deflated.
    dv = b'{"counter":2,"timestamp":1700000000000}'
    tc = b"TopicA 4 4 6 SINGLE_TAG"
    raw = (len(dv).to_bytes(4, "big") + dv + (1).to_bytes(4, "big") + len(tc).to_bytes(4, "big") + tc
           + (2).to_bytes(4, "big") + b"[]")
    body = RegisterBrokerBody.decode(zlib.compress(raw), True)
    assert body.data_version == DataVersion(1700000000000, 2)
    assert body.topic_config_table == {"TopicA": TopicConfig("TopicA", 4, 4, 6, "SINGLE_TAG")}
    with pytest.raises(RemotingCommandError, match="truncated"):
        RegisterBrokerBody.decode(zlib.compress(raw[:-3]), True)
    with pytest.raises(RemotingCommandError, match="does not inflate"):
        RegisterBrokerBody.decode(b"not deflate", True)


def test_other_bodies_round_trip() -> None:
    ci = ClusterInfo({"b": BrokerData("c", "b", {0: "1.2.3.4:10911"})}, {"c": {"b"}})
    assert ClusterInfo.from_json(ci.to_json()) == ci
    kv = KVTable({"a": "1"})
    assert KVTable.from_json(kv.to_json()) == kv
    tl = TopicList({"x", "y"}, "1.2.3.4:10911")
    assert TopicList.from_json(tl.to_json()) == tl
    dv = DataVersion(5, 1)
    dv.next_version()
    assert dv.counter == 2 and dv.timestamp > 5
