"""Topic names, permissions and the reserved topics, as RocketMQ 4.9 defines them.

Shared by the broker (which validates what it is sent) and the client (which validates before
sending): the texts are RocketMQ's, because users grep logs for them.
"""
from __future__ import annotations

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC", "SCHEDULE_TOPIC", "BENCHMARK_TOPIC", "TRANS_HALF_TOPIC", "TRACE_TOPIC", "TIMER_TOPIC",
    "TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
    "TRANS_SYS_GROUP", "TRANS_OP_REMOVE_TAG", "SYSTEM_TOPIC_PREFIX", "RETRY_GROUP_TOPIC_PREFIX", "DLQ_GROUP_TOPIC_PREFIX", "TOPIC_MAX_LENGTH",
    "GROUP_MAX_LENGTH", "PERM_PRIORITY", "PERM_READ", "PERM_WRITE", "PERM_INHERIT", "is_topic_or_group_illegal",
    "validate_topic", "validate_group", "validate_topic_ref", "is_system_topic", "is_not_allowed_send_topic", "retry_topic", "dlq_topic",
    "reply_topic", "REPLY_TOPIC_POSTFIX",
    "is_retry_topic", "is_dlq_topic", "is_readable", "is_writeable", "is_inherited", "perm_to_string", "SYSTEM_TOPICS",
]

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
#: Where timer messages wait, queue 0 (RocketMQ 5's TimerMessageStore.TIMER_TOPIC).
TIMER_TOPIC = "rmq_sys_wheel_timer"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
#: The broker's internal group whose consumer offsets on the half and op queues are the check
#: service's progress (MixAll.CID_RMQ_SYS_PREFIX + "TRANS").
TRANS_SYS_GROUP = "CID_RMQ_SYS_TRANS"
#: The tag of an op message: "this half is resolved" (TransactionalMessageUtil.REMOVETAG).
TRANS_OP_REMOVE_TAG = "d"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
#: A cluster's reply topic is ``<cluster>`` + this (MixAll.getReplyTopic).
REPLY_TOPIC_POSTFIX = "_REPLY_TOPIC"
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255

PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1

#: Reserved names. A broker adds its cluster and broker names at start (TopicConfigManager).
SYSTEM_TOPICS: set[str] = {AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC,
                           TRACE_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC,
                           OFFSET_MOVED_EVENT, TIMER_TOPIC}
_NOT_ALLOWED_SEND = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
                               SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
_VALID = frozenset("%|_-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def is_topic_or_group_illegal(name: str) -> bool:
    """True when ``name`` has a character outside ``^[%|a-zA-Z0-9_-]+$``."""
    return not _VALID.issuperset(name)


def validate_topic(topic: str | None) -> str | None:
    """None when ``topic`` is a legal name, else RocketMQ's remark saying why not."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def validate_group(group: str | None) -> str | None:
    """None when ``group`` is a legal group name, else the reason (4.9's client Validators texts).

    4.9's broker checks no group name; fastmq does, because a group name becomes part of a
    topic (``%RETRY%group``) and so of a consume-queue directory under the store.
    """
    if group is None or not group.strip():
        return "the specified group is blank"
    if len(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if is_topic_or_group_illegal(group):
        return f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


def validate_topic_ref(topic: str | None) -> str | None:
    """Like :func:`validate_topic` for a name a request only refers to (a pull, a subscription).

    A group's retry and DLQ topics are checked by the group rules instead: a legal group of more
    than 120 characters has a retry topic no broker stores, and a client that names it (a Java
    consumer subscribes to its group's retry topic) is answered as for any missing topic.
    """
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if topic and topic.startswith(prefix) and len(topic) > TOPIC_MAX_LENGTH:
            return None if validate_group(topic[len(prefix):]) is None else validate_topic(topic)
    return validate_topic(topic)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    """Topics no client may send to (the broker writes them itself)."""
    return topic in _NOT_ALLOWED_SEND


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def reply_topic(cluster: str) -> str:
    """``<cluster>_REPLY_TOPIC``: where a cluster's responders send their replies."""
    return cluster + REPLY_TOPIC_POSTFIX


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def perm_to_string(perm: int) -> str:
    """PermName.perm2String: "RWX" with "-" for missing bits (X = inherit)."""
    return "".join(c if perm & bit else "-" for c, bit in (("R", PERM_READ), ("W", PERM_WRITE), ("X", PERM_INHERIT)))
