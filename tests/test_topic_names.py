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
