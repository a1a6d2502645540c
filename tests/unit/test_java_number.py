"""Java's number rules (issue 32, item 6): ``fastmq.protocol.java_number`` against the answers of
``Integer.parseInt`` / ``Long.parseLong`` (JDK 8, radix 10), and every reader of a numeric header
or property going through it: a text Java refuses is refused with Java's words, never taken."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fastmq.errors import RemotingCommandError
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request, ext_int
from fastmq.protocol.headers import (PullMessageRequestHeader, SendMessageRequestHeader, decode_send_header,
                                     java_number)
from fastmq.protocol.java_number import JavaNumberFormatError, parse_int, parse_long
from fastmq.protocol.message import Message
from fastmq.store.put_result import PutStatus

#: (text, Integer.parseInt's answer or None for NumberFormatException), as Java 8 answers them.
INT_CASES = [
    ("0", 0), ("473", 473), ("+42", 42), ("-0", 0), ("-42", -42), ("007", 7),
    ("2147483647", 2147483647), ("-2147483648", -2147483648), ("+2147483647", 2147483647),
    ("\u0661\u0662\u0663", 123),  # Arabic-Indic digits: Character.digit takes them
    ("0" * 60 + "1", 1),  # leading zeros do not count towards the range
    ("2147483648", None), ("-2147483649", None), ("99999999999", None), ("1" + "0" * 5000, None),
    ("", None), (" ", None), (" 1", None), ("1 ", None), ("\t1", None), ("1\n", None), ("\u00a01", None),
    ("1_0", None), ("_1", None), ("1_", None), ("+", None), ("-", None), ("++1", None), ("+-1", None),
    ("--1", None), ("1-", None), ("-FF", None), ("0x10", None), ("1e3", None), ("1.0", None), ("Kona", None),
    ("\u00b2", None),  # superscript two: a digit to Python's isdigit(), not to Java
]
LONG_CASES = [
    ("9223372036854775807", 9223372036854775807), ("-9223372036854775808", -9223372036854775808),
    ("2147483648", 2147483648), ("+1", 1),
    ("9223372036854775808", None), ("-9223372036854775809", None), (" 5", None), ("5_0", None), ("", None),
]


@pytest.mark.parametrize(("text", "java"), INT_CASES)
def test_parse_int_follows_integer_parse_int(text: str, java: int | None) -> None:
    if java is None:
        with pytest.raises(JavaNumberFormatError) as info:
            parse_int(text)
        assert str(info.value) == f'For input string: "{text}"'
        assert info.value.java_text == f'java.lang.NumberFormatException: For input string: "{text}"'
    else:
        assert parse_int(text) == java


@pytest.mark.parametrize(("text", "java"), LONG_CASES + [(t, v) for t, v in INT_CASES if v is None and t != "2147483648"
                                                         and t != "-2147483649" and t != "99999999999"])
def test_parse_long_follows_long_parse_long(text: str, java: int | None) -> None:
    if java is None:
        with pytest.raises(JavaNumberFormatError):
            parse_long(text)
        with pytest.raises(ValueError):  # the fast paths' parser is the same one
            java_number(text)
    else:
        assert parse_long(text) == java == java_number(text)


def test_null_is_java_s_null() -> None:
    with pytest.raises(JavaNumberFormatError, match="^null$"):
        parse_int(None)


_PULL = {"consumerGroup": "G", "topic": "T", "queueId": "3", "queueOffset": "10", "maxMsgNums": "32",
         "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "0"}


@pytest.mark.parametrize("bad", [" 1", "1 ", "1_0", "2147483648", "", "+"])
def test_header_int_fields_refuse_what_java_refuses(bad: str) -> None:
    cmd = create_request(RequestCode.PULL_MESSAGE)
    cmd.ext_fields = {**_PULL, "queueId": bad}
    with pytest.raises(RemotingCommandError, match=r"the custom field <queueId> is (not a number|out of range)"):
        PullMessageRequestHeader.decode(cmd)
    cmd.ext_fields = {**_PULL, "queueId": "+3"}
    assert PullMessageRequestHeader.decode(cmd).queueId == 3


@pytest.mark.parametrize("bad", [" 1", "1_0", "9223372036854775808"])
def test_send_header_both_readers_refuse(bad: str) -> None:
    fields = {"producerGroup": "P", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
              "queueId": "0", "sysFlag": "0", "bornTimestamp": bad, "flag": "0"}
    cmd = create_request(RequestCode.SEND_MESSAGE, fields)
    with pytest.raises(RemotingCommandError, match="bornTimestamp"):
        SendMessageRequestHeader.decode(cmd)
    with pytest.raises(RemotingCommandError, match="bornTimestamp"):
        decode_send_header(cmd)


def test_ext_int_is_long_parse_long() -> None:
    cmd = create_request(RequestCode.PULL_MESSAGE, {"a": " 1", "b": "-7", "c": "1_0"})
    assert ext_int(cmd, "b") == -7
    for name in ("a", "c"):
        with pytest.raises(RemotingCommandError, match="not a Java long"):
            ext_int(cmd, name)


def test_message_delay_level_is_integer_parse_int() -> None:
    assert Message("T", b"x").delay_time_level == 0
    assert Message("T", b"x", properties={"DELAY": "+3"}).delay_time_level == 3
    for bad in (" 1", "1_0", "2147483648"):
        with pytest.raises(JavaNumberFormatError):
            _ = Message("T", b"x", properties={"DELAY": bad}).delay_time_level


def test_store_refuses_a_delay_java_refuses_with_java_s_error(tmp_path: Path) -> None:
    from tests.support import msg, open_store
    s = open_store(tmp_path)
    try:
        for bad in (" 1", "1_0", "2147483648"):
            r = asyncio.run(s.put_messages([msg(topic="Real", DELAY=bad)]))
            assert r.status is PutStatus.UNKNOWN_ERROR  # the broker answers SYSTEM_ERROR, as 4.9.8
            assert r.remark == f'java.lang.NumberFormatException: For input string: "{bad}"'
        assert s.max_offset_in_queue("Real", 0) == 0
        assert asyncio.run(s.put_messages([msg(topic="Real", DELAY="+1")])).ok
    finally:
        s.shutdown()


# ------------------------------------------------------------ numbers inside JSON bodies

@pytest.mark.parametrize(("value", "java"), [
    (0, 0), (-5, -5), (2147483647, 2147483647), (-2147483648, -2147483648), ("42", 42), ("+7", 7),
    (2147483648, None), (-2147483649, None), (10 ** 40, None), (" 1", None), ("1_0", None), ("", None),
    (1.5, None), (True, None), (None, None), ([1], None), ({}, None),
])
def test_json_int_binds_as_fastjson_binds_a_java_int(value: object, java: int | None) -> None:
    from fastmq.protocol.java_number import json_int, json_long
    if java is None:
        with pytest.raises(JavaNumberFormatError):
            json_int(value)
    else:
        assert json_int(value) == java == json_long(value)
    assert json_long(2147483648) == 2147483648 and json_long("-9223372036854775808") == -(1 << 63)
    with pytest.raises(JavaNumberFormatError):
        json_long(1 << 63)


@pytest.mark.parametrize("body", [
    b'{"topicName":"T","readQueueNums":2147483648}', b'{"topicName":"T","perm":" 6"}',
    b'{"topicName":"T","writeQueueNums":"1_6"}', b'{"topicName":"T","topicSysFlag":1.5}',
])
def test_json_bodies_refuse_numbers_java_refuses(body: bytes) -> None:
    from fastmq.protocol.bodies import DataVersion, TopicConfig
    with pytest.raises(RemotingCommandError, match="must be a number .a Java int.: java.lang.NumberFormatException"):
        TopicConfig.from_json(body)
    assert TopicConfig.from_json(b'{"topicName":"T","readQueueNums":"8"}').read_queue_nums == 8
    assert DataVersion.from_json(b'{"timestamp":4102444800000,"counter":"3000000000"}').counter == 3_000_000_000


def test_heartbeat_and_group_bodies_follow_java_number_rules() -> None:
    from fastmq.broker.subscription_group import SubscriptionGroupConfig
    from fastmq.protocol.heartbeat import SubscriptionData
    sub = {"topic": "T", "subString": "*", "tagsSet": [], "codeSet": [2147483648], "subVersion": 1}
    with pytest.raises(RemotingCommandError, match="codeSet must be a Java int"):
        SubscriptionData.from_obj(sub)
    assert SubscriptionData.from_obj({**sub, "codeSet": [-1], "subVersion": 1 << 40}).sub_version == 1 << 40
    with pytest.raises(RemotingCommandError, match="retryQueueNums must be an integer .a Java int."):
        SubscriptionGroupConfig.from_obj({"groupName": "G", "retryQueueNums": 1 << 31})
    g = SubscriptionGroupConfig.from_obj({"groupName": "G", "brokerId": 1 << 40, "retryMaxTimes": "3"})
    assert g.broker_id == 1 << 40 and g.retry_max_times == 3
