"""Topic validation and permission helpers, with RocketMQ's remarks."""
from __future__ import annotations

import pytest

from fastmq.protocol import topic as tv


@pytest.mark.parametrize("name", ["TopicA", "%RETRY%G", "a|b", "x_y-z", "9" * 127])
def test_legal_topics(name: str) -> None:
    assert tv.validate_topic(name) is None


@pytest.mark.parametrize("name, remark", [
    ("", "The specified topic is blank."),
    ("   ", "The specified topic is blank."),
    ("a b", "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("tópico", "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("x" * 128, "The specified topic is longer than topic max length."),
])
def test_illegal_topics(name: str, remark: str) -> None:
    assert tv.validate_topic(name) == remark


def test_reserved_topics() -> None:
    assert tv.is_system_topic("TBW102") and tv.is_system_topic("rmq_sys_x")
    assert tv.is_not_allowed_send_topic("SCHEDULE_TOPIC_XXXX") and not tv.is_not_allowed_send_topic("TBW102")
    assert tv.retry_topic("G") == "%RETRY%G" and tv.is_retry_topic("%RETRY%G")
    assert tv.dlq_topic("G") == "%DLQ%G" and tv.is_dlq_topic("%DLQ%G")


def test_perm_strings() -> None:
    assert tv.perm_to_string(7) == "RWX" and tv.perm_to_string(4) == "R--" and tv.perm_to_string(2) == "-W-"
    assert tv.is_readable(6) and tv.is_writeable(6) and not tv.is_inherited(6)


@pytest.mark.parametrize("name, remark", [
    ("CG_1", None), ("%|_-", None), ("g" * 255, None),
    ("", "the specified group is blank"), (" ", "the specified group is blank"),
    ("g" * 256, "the specified group is longer than group max length 255."),
    ("../x", "the specified group[../x] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("a\\b", "the specified group[a\\b] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
])
def test_group_names(name: str, remark: str | None) -> None:
    assert tv.validate_group(name) == remark


def test_topic_references_allow_long_legal_groups_retry_topics() -> None:
    # a legal 200-character group: its retry topic is refused as a topic, yet may be named
    assert tv.validate_topic("%RETRY%" + "g" * 200) == "The specified topic is longer than topic max length."
    assert tv.validate_topic_ref("%RETRY%" + "g" * 200) is None
    assert tv.validate_topic_ref("%DLQ%" + "g" * 255) is None
    assert tv.validate_topic_ref("%RETRY%" + "g" * 256) == "The specified topic is longer than topic max length."
    assert tv.validate_topic_ref("%RETRY%../" + "g" * 200) is not None
    assert tv.validate_topic_ref("x" * 128) == "The specified topic is longer than topic max length."
