"""JSON bodies: round trips, fastjson's lenient forms, the compressed registration, bad input."""
from __future__ import annotations

import json
import re
import zlib
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fastmq.errors import RemotingCommandError
from fastmq.protocol.bodies import (BrokerData, ClusterInfo, DataVersion, KVTable, QueueData, RegisterBrokerBody,
                                    TopicConfig, TopicList, TopicRouteData, loads_lenient)
from tests.support import examples

names = st.text(st.sampled_from("abcXYZ019_-%|"), min_size=1, max_size=20)
# Free text for values that are only ever JSON strings: the lenient reader must not touch them.
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30) | st.sampled_from(
    ['{0:"x"}', ',1:', '\\', '"', '{0:', '\\"{7:'])
addrs = st.builds(lambda a, p: f"10.0.0.{a}:{p}", st.integers(0, 255), st.integers(1, 65535))
ints = st.integers(0, 2**31 - 1)

data_versions = st.builds(DataVersion, st.integers(0, 2**62), st.integers(0, 2**62))
topic_configs = st.builds(TopicConfig, names, ints, ints, st.integers(0, 7),
                          st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]), ints, st.booleans())
queue_datas = st.builds(QueueData, texts, ints, ints, st.integers(0, 7), ints)
broker_datas = st.builds(BrokerData, texts, texts, st.dictionaries(st.integers(-1, 2**40), addrs, max_size=3))
route_datas = st.builds(TopicRouteData, st.lists(queue_datas, max_size=4), st.lists(broker_datas, max_size=3),
                        st.dictionaries(addrs, st.lists(addrs, max_size=2), max_size=2), st.none() | texts)
cluster_infos = st.builds(ClusterInfo, st.dictionaries(texts, broker_datas, max_size=3),
                          st.dictionaries(texts, st.sets(texts, max_size=3), max_size=3))
kv_tables = st.builds(KVTable, st.dictionaries(texts, texts, max_size=5))
topic_lists = st.builds(TopicList, st.sets(texts, max_size=5), st.none() | addrs)


def fastjson_form(obj: Any) -> str:
    """Serialise as fastjson does for old clients: integer-looking map keys without quotes."""
    if isinstance(obj, dict):
        parts = [(k if re.fullmatch(r"-?[0-9]+", k) else json.dumps(k)) + ":" + fastjson_form(v)
                 for k, v in obj.items()]
        return "{" + ",".join(parts) + "}"
    if isinstance(obj, list):
        return "[" + ",".join(fastjson_form(v) for v in obj) + "]"
    return json.dumps(obj, ensure_ascii=False)


@pytest.mark.parametrize("strategy, cls", [
    (data_versions, DataVersion), (topic_configs, TopicConfig), (queue_datas, QueueData),
    (broker_datas, BrokerData), (route_datas, TopicRouteData), (cluster_infos, ClusterInfo),
    (kv_tables, KVTable), (topic_lists, TopicList)], ids=lambda x: getattr(x, "__name__", ""))
def test_every_body_round_trips(strategy, cls) -> None:
    @settings(max_examples=examples(60), deadline=None)
    @given(strategy)
    def check(value) -> None:
        data = value.to_json()
        assert cls.from_json(data) == value
        assert cls.from_json(data.decode("utf-8") + "\n") == value  # jsoncpp ends bodies in a newline
        assert cls.from_obj(value.to_obj()) == value
        # the same object in fastjson's form (bare integer keys) reads back the same
        assert cls.from_json(fastjson_form(json.loads(data))) == value
    check()


def test_fastjson_unquoted_integer_keys() -> None:
    text = ('{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b",'
            '"cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,'
            '"topicSynFlag":0,"writeQueueNums":4}]}\n')
    route = TopicRouteData.from_json(text)
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    assert route.broker_datas[0].select_broker_addr() == "127.0.0.1:10911"
    assert route.queue_datas[0] == QueueData("b", 4, 4, 6, 0)
    assert BrokerData.from_json('{"brokerAddrs":{ 2 :"a:1" , -1:"b:2"},"brokerName":"x"}').broker_addrs == {
        2: "a:1", -1: "b:2"}


def test_select_broker_addr_falls_back_to_a_slave() -> None:
    assert BrokerData("c", "b", {1: "s1:1", 2: "s2:2"}).select_broker_addr() in ("s1:1", "s2:2")
    assert BrokerData("c", "b", {}).select_broker_addr() is None


def test_lenient_reader_leaves_strings_alone() -> None:
    obj = loads_lenient('{"a":"{0:\\"x\\", 1:2}",5:{"k":", 7:"}}')
    assert obj == {"a": '{0:"x", 1:2}', "5": {"k": ", 7:"}}
    # a route whose broker name holds the fastjson pattern itself
    route = TopicRouteData.from_json('{"brokerDatas":[{"brokerAddrs":{0:"h:1"},"brokerName":"{0:\\"b\\",1:",'
                                     '"cluster":",2:"}],"queueDatas":[]}')
    assert route.broker_datas[0] == BrokerData(",2:", '{0:"b",1:', {0: "h:1"})


@settings(max_examples=examples(200), deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | texts,
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(texts | st.integers(-99, 10**12).map(str), kids, max_size=3), max_leaves=15))
@example({"0": '{0:"x",1:"y"}', "k": [{"12": ",3:"}]})
def test_lenient_reader_inverts_fastjson_form(obj) -> None:
    assert loads_lenient(fastjson_form(obj)) == obj
    assert loads_lenient(json.dumps(obj).encode()) == obj


def test_old_and_new_sysflag_spelling() -> None:
    assert QueueData.from_obj({"brokerName": "b", "topicSysFlag": 3}).topic_sys_flag == 3
    assert QueueData.from_obj({"brokerName": "b", "topicSynFlag": 2}).topic_sys_flag == 2
    assert QueueData.from_obj({"brokerName": "b", "topicSynFlag": 2, "topicSysFlag": 4}).topic_sys_flag == 4
    written = json.loads(QueueData("b", 1, 1, 6, 5).to_json())
    assert written["topicSysFlag"] == written["topicSynFlag"] == 5


def test_written_json_is_standard_with_rocketmq_names() -> None:
    assert json.loads(TopicConfig("T", 4, 4, 6).to_json()) == {
        "order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicName": "T",
        "topicSysFlag": 0, "writeQueueNums": 4}
    assert json.loads(BrokerData("c", "b", {0: "h:1"}).to_json()) == {
        "brokerAddrs": {"0": "h:1"}, "brokerName": "b", "cluster": "c"}
    assert json.loads(DataVersion(7, 3).to_json()) == {"counter": 3, "timestamp": 7}
    route = json.loads(TopicRouteData([], [], {}, "b:4").to_json())
    assert route == {"brokerDatas": [], "filterServerTable": {}, "orderTopicConf": "b:4", "queueDatas": []}
    assert set(json.loads(ClusterInfo().to_json())) == {"brokerAddrTable", "clusterAddrTable"}
    assert json.loads(TopicList({"b", "a"}).to_json()) == {"topicList": ["a", "b"]}
    assert json.loads(KVTable({"k": "v"}).to_json()) == {"table": {"k": "v"}}
    assert set(json.loads(RegisterBrokerBody().to_json())) == {"filterServerList", "topicConfigSerializeWrapper"}


@pytest.mark.parametrize("body, msg", [
    (b"\xff\xfe", "not valid UTF-8"), (b"{", "not valid JSON"), (b"", "not valid JSON"), (b"[]", "must be a JSON object"),
    (b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"x":"a"}}]}', "not a broker id"),
    (b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:7}}]}', "must be an address string"),
    (b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":[]}]}', "brokerAddrs must be a JSON object"),
    (b'{"queueDatas":[{"brokerName":7}]}', "brokerName must be a string"),
    (b'{"queueDatas":[{"brokerName":"b","perm":"rw"}]}', "perm must be a number"),
    (b'{"queueDatas":[{"brokerName":"b","perm":true}]}', "perm must be a number"),
    (b'{"queueDatas":[{"brokerName":"b","topicSynFlag":"x"}]}', "topicSynFlag must be a number"),
    (b'{"queueDatas":{}}', "must be lists"),
    (b'{"queueDatas":[],"filterServerTable":{"a":"b"}}', "list of strings"),
    (b'{"queueDatas":[],"orderTopicConf":5}', "orderTopicConf must be a string"),
    (b"[" * 100000 + b"]" * 100000, "nests too deeply"),
    (b'"' + b'\\"' * 200000, "not valid JSON"),  # unterminated: must fail in linear time
    (b"{" + b"0:1," * 50000, "not valid JSON"),
])
def test_bad_route_bodies(body: bytes, msg: str) -> None:
    with pytest.raises(RemotingCommandError, match=msg):
        TopicRouteData.from_json(body)


@pytest.mark.parametrize("cls, body, msg", [
    (DataVersion, '{"counter":"x"}', "counter must be a number"),
    (TopicConfig, '{"readQueueNums":4}', "topicName is missing"),
    (TopicConfig, '{"topicName":"t","order":"maybe"}', "order must be a boolean"),
    (ClusterInfo, '{"clusterAddrTable":{"c":"b"}}', "list of strings"),
    (ClusterInfo, '{"brokerAddrTable":[]}', "must be a JSON object"),
    (KVTable, '{"table":{"k":{}}}', "must be a string"),
    (KVTable, '{"table":[]}', "must be a JSON object"),
    (TopicList, '{"topicList":"abc"}', "list of strings"),
    (TopicList, '{"topicList":[],"brokerAddr":1}', "brokerAddr must be a string"),
    (RegisterBrokerBody, '{"filterServerList":[1]}', "list of strings"),
    (RegisterBrokerBody, '{"topicConfigSerializeWrapper":{"topicConfigTable":{"t":[]}}}', "JSON object"),
])
def test_bad_bodies(cls, body: str, msg: str) -> None:
    with pytest.raises(RemotingCommandError, match=msg):
        cls.from_json(body)


def test_lenient_number_forms() -> None:
    # fastjson reads "4" into an int field; so do we. A Map<String,String> holds numbers as text.
    assert TopicConfig.from_json('{"topicName":"t","readQueueNums":"4","order":"true"}') == TopicConfig(
        "t", 4, 16, 6, order=True)
    assert KVTable.from_json('{"table":{"k":5}}') == KVTable({"k": "5"})
    with pytest.raises(RemotingCommandError, match="bytes or str"):
        loads_lenient(5)  # type: ignore[arg-type]


@settings(max_examples=examples(60), deadline=None)
@given(st.dictionaries(names, topic_configs, max_size=5), data_versions, st.lists(addrs, max_size=2))
def test_register_body_round_trips(table, dv, fsl) -> None:
    table = {k: TopicConfig(k, v.read_queue_nums, v.write_queue_nums, v.perm, v.topic_filter_type,
                            v.topic_sys_flag, v.order) for k, v in table.items()}
    body = RegisterBrokerBody(table, dv, fsl)
    assert RegisterBrokerBody.decode(body.encode(False), False) == body
    assert RegisterBrokerBody.from_json(body.to_json()) == body
    back = RegisterBrokerBody.decode(body.encode(True), True)
    # The compressed form carries name, queues, perm and filter type only (TopicConfig.encode()).
    assert back.data_version == dv and back.filter_server_list == fsl
    assert back.topic_config_table == {k: TopicConfig(k, tc.read_queue_nums, tc.write_queue_nums, tc.perm,
                                                      tc.topic_filter_type) for k, tc in table.items()}


def _hand_built(dv: bytes, topics: list[bytes], fsl: bytes) -> bytes:
    raw = len(dv).to_bytes(4, "big") + dv + len(topics).to_bytes(4, "big")
    for tc in topics:
        raw += len(tc).to_bytes(4, "big") + tc
    return raw + len(fsl).to_bytes(4, "big") + fsl


def test_compressed_register_body_layout() -> None:
    # Built by hand as RegisterBrokerBody.encode(true) lays it out: big-endian lengths, deflated.
    dv = b'{"counter":2,"timestamp":1700000000000}'
    raw = _hand_built(dv, [b"TopicA 4 4 6 SINGLE_TAG", b"TopicB 8 2 2 MULTI_TAG"], b'["10.0.0.1:4000"]')
    body = RegisterBrokerBody.decode(zlib.compress(raw), True)
    assert body.data_version == DataVersion(1700000000000, 2)
    assert body.topic_config_table == {"TopicA": TopicConfig("TopicA", 4, 4, 6, "SINGLE_TAG"),
                                       "TopicB": TopicConfig("TopicB", 8, 2, 2, "MULTI_TAG")}
    assert body.filter_server_list == ["10.0.0.1:4000"]
    # and the other direction: our encoder writes exactly those bytes, as one zlib stream
    assert zlib.decompress(body.encode(True)) == raw
    assert body.encode(True)[:2] == b"\x78\xda"  # zlib header of Deflater.BEST_COMPRESSION
    # Java ignores bytes after the filter list, and a filter list fastjson cannot parse stays empty
    assert RegisterBrokerBody.decode(zlib.compress(raw + b"junk"), True) == body
    odd = RegisterBrokerBody.decode(zlib.compress(_hand_built(dv, [], b"null")), True)
    assert odd.filter_server_list == [] and odd.topic_config_table == {}


@pytest.mark.parametrize("raw, msg", [
    (_hand_built(b'{"counter":1,"timestamp":1}', [b"T 1 1 6 SINGLE_TAG"], b"[]")[:-3], "truncated"),
    (b"\x00\x00\x00\x05{}", "truncated"),
    ((-1).to_bytes(4, "big", signed=True), "truncated"),
    (_hand_built(b"{}", [b"T 1 1 6"], b"[]"), "does not have 5 fields"),
    (_hand_built(b"{}", [b"T 1 x 6 SINGLE_TAG"], b"[]"), "non-numeric"),
    (_hand_built(b"{}", [b"T 1 1 6 NO_TAG"], b"[]"), "unknown filter type"),
    (_hand_built(b"[1]", [], b"[]"), "dataVersion must be a JSON object"),
    (_hand_built(b"{}", [], b"[3]"), "list of strings"),
])
def test_bad_compressed_register_bodies(raw: bytes, msg: str) -> None:
    with pytest.raises(RemotingCommandError, match=msg):
        RegisterBrokerBody.decode(zlib.compress(raw), True)


def test_compressed_register_body_is_bounded() -> None:
    with pytest.raises(RemotingCommandError, match="does not inflate"):
        RegisterBrokerBody.decode(b"not deflate", True)
    bomb = zlib.compress(b"\x00" * (4 << 20), 9)  # 4 MiB of zeros in a few KiB
    with pytest.raises(RemotingCommandError, match="inflates past 1048576 bytes"):
        RegisterBrokerBody.decode(bomb, True, max_inflated=1 << 20)


def test_data_version() -> None:
    dv = DataVersion(5, 1)
    dv.next_version()
    assert dv.counter == 2 and dv.timestamp > 5
    assert DataVersion(5, 1) == DataVersion(5, 1) != DataVersion(5, 2)
    assert DataVersion.from_json("{}") == DataVersion(0, 0)
