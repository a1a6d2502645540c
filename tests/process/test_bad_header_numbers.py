"""Bad numbers in request headers against a real fastmq-broker and fastmq-namesrv (issue 15,
item 9): a value that is not a number, or outside its Java type (``Integer`` / ``Long``), gets
SYSTEM_ERROR naming the field, as 4.9 answers its NumberFormatException; the log gets one line,
never a traceback; the server keeps serving. Extreme values inside the range are answered too."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SEND_V2_NAMES
from fastmq.remoting import RemotingClient
from fastmq.testing import running_cluster

pytestmark = pytest.mark.slow

TOPIC = "NumTopic"

#: Values Integer.parseInt and Long.parseLong refuse (or Python's int() would wrongly take).
NOT_NUMBERS = ["abc", "", " ", "1_0", "1e3", "0x10", "12abc", " 1", "1 ", "+", "-"]
BEYOND_INT = ["2147483648", "-2147483649", "99999999999"]
BEYOND_LONG = ["9223372036854775808", "-9223372036854775809", "1" + "0" * 40]
#: Inside the range: answered (success or a typed refusal), never a crash.
EXTREMES_INT = ["-1", "2147483647", "-2147483648", "0"]
EXTREMES_LONG = ["-1", "9223372036854775807", "-9223372036854775808"]


def _send_fields(v2: bool) -> dict[str, str]:
    f = {"producerGroup": "PG_NUM", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
         "queueId": "0", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
         "properties": "", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "16", "batch": "false"}
    return {SEND_V2_NAMES[k]: v for k, v in f.items()} if v2 else f


# (name, code, fields, Java int fields, Java long fields, body)
CASES = [
    ("SEND_MESSAGE", RequestCode.SEND_MESSAGE, _send_fields(False),
     ["defaultTopicQueueNums", "queueId", "sysFlag", "flag", "reconsumeTimes", "maxReconsumeTimes"],
     ["bornTimestamp"], b"x"),
    ("SEND_MESSAGE_V2", RequestCode.SEND_MESSAGE_V2, _send_fields(True), ["d", "e", "f", "h", "j", "l"], ["g"], b"x"),
    ("PULL_MESSAGE", RequestCode.PULL_MESSAGE,
     {"consumerGroup": "GID_NUM", "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "4",
      "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0", "subscription": "*",
      "expressionType": "TAG"},
     ["queueId", "maxMsgNums", "sysFlag"], ["queueOffset", "commitOffset", "suspendTimeoutMillis", "subVersion"], None),
    ("QUERY_CONSUMER_OFFSET", RequestCode.QUERY_CONSUMER_OFFSET,
     {"consumerGroup": "GID_NUM", "topic": TOPIC, "queueId": "0"}, ["queueId"], [], None),
    ("UPDATE_CONSUMER_OFFSET", RequestCode.UPDATE_CONSUMER_OFFSET,
     {"consumerGroup": "GID_NUM", "topic": TOPIC, "queueId": "0", "commitOffset": "1"}, ["queueId"], ["commitOffset"],
     None),
    ("GET_MAX_OFFSET", RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}, ["queueId"], [], None),
    ("GET_MIN_OFFSET", RequestCode.GET_MIN_OFFSET, {"topic": TOPIC, "queueId": "0"}, ["queueId"], [], None),
    ("GET_EARLIEST_MSG_STORETIME", RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": TOPIC, "queueId": "0"},
     ["queueId"], [], None),
    ("SEARCH_OFFSET_BY_TIMESTAMP", RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
     {"topic": TOPIC, "queueId": "0", "timestamp": "0"}, ["queueId"], ["timestamp"], None),
    ("VIEW_MESSAGE_BY_ID", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}, [], ["offset"], None),
    ("CONSUMER_SEND_MSG_BACK", RequestCode.CONSUMER_SEND_MSG_BACK,
     {"offset": "0", "group": "GID_NUM", "delayLevel": "0", "originMsgId": "00", "originTopic": TOPIC,
      "maxReconsumeTimes": "16"}, ["delayLevel", "maxReconsumeTimes"], ["offset"], None),
    ("QUERY_MESSAGE", RequestCode.QUERY_MESSAGE,
     {"topic": TOPIC, "key": "k", "maxNum": "4", "beginTimestamp": "0", "endTimestamp": "9"},
     ["maxNum"], ["beginTimestamp", "endTimestamp"], None),
    ("UPDATE_AND_CREATE_TOPIC", RequestCode.UPDATE_AND_CREATE_TOPIC,
     {"topic": "NumTopic2", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
      "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0"},
     ["readQueueNums", "writeQueueNums", "perm", "topicSysFlag"], [], None),
    ("QUERY_CONSUME_QUEUE", RequestCode.QUERY_CONSUME_QUEUE,
     {"topic": TOPIC, "queueId": "0", "index": "0", "count": "4", "consumerGroup": "GID_NUM"},
     ["queueId", "count"], ["index"], None),
    ("INVOKE_BROKER_TO_RESET_OFFSET", RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
     {"topic": TOPIC, "group": "GID_NUM", "timestamp": "0", "isForce": "false"}, [], ["timestamp"], None),
]


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text, text[text.index("Traceback") - 2000:][:6000]


async def test_bad_numbers_in_broker_headers(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as (_ns, broker):
        client = RemotingClient()
        try:
            r = await client.invoke(broker.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                "topicFilterType": "SINGLE_TAG"}), 10)
            assert r.code == ResponseCode.SUCCESS, r.remark
            tried = 0
            for name, code, fields, ints, longs, body in CASES:
                for field, bad_values, extremes in [*((f, NOT_NUMBERS + BEYOND_INT, EXTREMES_INT) for f in ints),
                                                    *((f, NOT_NUMBERS + BEYOND_LONG, EXTREMES_LONG) for f in longs)]:
                    for value in bad_values:
                        req = create_request(code, {**fields, field: value}, body)
                        r = await client.invoke(broker.addr, req, 10)
                        tried += 1
                        assert r.code == ResponseCode.SYSTEM_ERROR, (name, field, value, r.code, r.remark)
                        assert f"<{field}>" in (r.remark or ""), (name, field, value, r.remark)
                    for value in extremes:
                        r = await client.invoke(broker.addr, create_request(code, {**fields, field: value}, body), 10)
                        tried += 1
                        assert r.code is not None, (name, field, value)
            # still serving, and the log has one line per refusal and no traceback
            r = await client.invoke(broker.addr, create_request(RequestCode.GET_MAX_OFFSET,
                                                                {"topic": TOPIC, "queueId": "0"}), 10)
            assert r.code == ResponseCode.SUCCESS
            assert tried > 300
        finally:
            await client.close()
        out = broker.output()
        _no_traceback(out)
        assert out.count("bad request") >= len(NOT_NUMBERS), out[-3000:]


async def test_bad_numbers_in_namesrv_headers(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as (ns, _broker):
        client = RemotingClient()
        try:
            for value in NOT_NUMBERS[:1] + BEYOND_LONG:
                r = await client.invoke(ns.addr, create_request(RequestCode.REGISTER_BROKER, {
                    "brokerName": "b-num", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "haServerAddr": "",
                    "brokerId": value, "compressed": "false"}, b"{}"), 10)
                assert r.code == ResponseCode.SYSTEM_ERROR and "brokerId" in r.remark, (value, r.code, r.remark)
            r = await client.invoke(ns.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO, {}), 10)
            assert r.code == ResponseCode.SUCCESS and b"b-num" not in (r.body or b"")
        finally:
            await client.close()
        _no_traceback(ns.output())


async def test_bad_numbers_in_properties(tmp_path: Path) -> None:
    """DELAY is read with Integer.parseInt, as 4.9.8's Message.getDelayTimeLevel(): what it
    refuses is answered SYSTEM_ERROR with the NumberFormatException's text and is not stored."""
    with running_cluster(tmp_path) as (_ns, broker):
        client = RemotingClient()
        try:
            r = await client.invoke(broker.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                "topicFilterType": "SINGLE_TAG"}), 10)
            assert r.code == ResponseCode.SUCCESS, r.remark
            for v2 in (False, True):
                for value in (" 1", "1_0", "2147483648", "1 "):
                    fields = {**_send_fields(v2), SEND_V2_NAMES["properties"] if v2 else "properties":
                              f"DELAY\x01{value}\x02"}
                    code = RequestCode.SEND_MESSAGE_V2 if v2 else RequestCode.SEND_MESSAGE
                    r = await client.invoke(broker.addr, create_request(code, fields, b"x"), 10)
                    assert r.code == ResponseCode.SYSTEM_ERROR, (value, r.code, r.remark)
                    assert r.remark == f'java.lang.NumberFormatException: For input string: "{value}"'
            r = await client.invoke(broker.addr, create_request(RequestCode.GET_MAX_OFFSET,
                                                                {"topic": TOPIC, "queueId": "0"}), 10)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"
        finally:
            await client.close()
        _no_traceback(broker.output())
