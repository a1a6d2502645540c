"""HEART_BEAT bodies: who a client is, which groups it produces and consumes for, and its subscriptions.

Java clients write the enums by name (``"CONSUME_PASSIVELY"``, ``"CLUSTERING"``); the C++ client
writes their ordinals (1, 1) and a string ``subVersion``, and omits empty sets. Both are read; we
write names, as Java does. A subscription expression is parsed the way FilterAPI does: ``*`` (or
empty) subscribes everything, otherwise tags separated by ``||``, each reduced to its Java
``String.hashCode()`` in ``codeSet`` — the broker filters consume-queue entries on those codes.
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import RemotingCommandError
from .java_number import JavaNumberFormatError, json_int, json_long
from .message import java_string_hash

__all__ = ["SubscriptionData", "ConsumerData", "ProducerData", "HeartbeatData", "build_subscription",
           "build_typed_subscription",
           "java_string_hash", "SUB_ALL", "CONSUME_TYPES", "MESSAGE_MODELS", "CONSUME_FROM_WHERE",
           "MessageModel", "ConsumeFromWhere"]

SUB_ALL = "*"
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")


class MessageModel(enum.StrEnum):
    """RocketMQ's MessageModel, a consumer's ``message_model``. Members are in Java's order (the C++
    client writes the ordinal) and are the strings they name, so either may be passed."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.StrEnum):
    """RocketMQ's ConsumeFromWhere, where a consumer group new to a queue starts
    (``consume_from_where``; TIMESTAMP reads ``consume_timestamp_ms``). In Java's order, and the
    strings they name, as :class:`MessageModel`."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


# the names by ordinal, as plain strings (what a heartbeat body is read into)
MESSAGE_MODELS = tuple(m.value for m in MessageModel)
CONSUME_FROM_WHERE = tuple(c.value for c in ConsumeFromWhere)


def _enum(value: Any, names: tuple[str, ...], what: str) -> str:
    if isinstance(value, str) and value in names:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    raise RemotingCommandError(f"heartbeat: {what} {value!r} is not one of {', '.join(names)}")


def _int(value: Any, what: str, *, long: bool = False) -> int:
    """``value`` as fastjson binds it to a Java ``int`` (``long``) field."""
    if isinstance(value, bool):
        raise RemotingCommandError(f"heartbeat: {what} must be a number")
    try:
        return json_long(value) if long else json_int(value)
    except JavaNumberFormatError as exc:
        raise RemotingCommandError(f"heartbeat: {what} must be a Java {'long' if long else 'int'}, not {value!r} "
                                   f"({exc.java_text})") from None


def _str(obj: dict[str, Any], key: str, what: str) -> str:
    v = obj.get(key)
    if not isinstance(v, str):
        raise RemotingCommandError(f"heartbeat: {what}.{key} must be a string")
    return v


def _opt_str(obj: dict[str, Any], key: str, what: str) -> str | None:
    """Like ``_str``, but an absent (or null) field is None rather than an error."""
    if obj.get(key) is None:
        return None
    return _str(obj, key, what)


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    @property
    def subscribes_all(self) -> bool:
        return self.expression_type == "TAG" and (not self.tags_set or SUB_ALL in self.tags_set)

    def to_obj(self) -> dict[str, Any]:
        return {"classFilterMode": self.class_filter_mode, "codeSet": self.code_set,
                "expressionType": self.expression_type, "subString": self.sub_string,
                "subVersion": self.sub_version, "tagsSet": self.tags_set, "topic": self.topic}

    @classmethod
    def from_obj(cls, obj: Any) -> "SubscriptionData":
        if not isinstance(obj, dict):
            raise RemotingCommandError("heartbeat: a subscription must be an object")
        topic = _str(obj, "topic", "subscription")
        sub = _opt_str(obj, "subString", "subscription") or SUB_ALL
        tags = obj.get("tagsSet") or []
        codes = obj.get("codeSet") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise RemotingCommandError("heartbeat: subscription.tagsSet must be a list of strings")
        if not isinstance(codes, list):
            raise RemotingCommandError("heartbeat: subscription.codeSet must be a list of numbers")
        return cls(topic=topic, sub_string=sub, tags_set=list(tags), code_set=[_int(c, "codeSet") for c in codes],
                   sub_version=_int(obj.get("subVersion", 0), "subVersion", long=True),
                   expression_type=obj.get("expressionType") or "TAG",
                   class_filter_mode=bool(obj.get("classFilterMode", False)))


def build_subscription(topic: str, expression: str | None, sub_version: int = 0) -> SubscriptionData:
    """FilterAPI.buildSubscriptionData for TAG expressions: tags and their hash codes."""
    expr = (expression or "").strip()
    if not expr or expr == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, [SUB_ALL], [], sub_version)
    tags = [t.strip() for t in expr.split("||") if t.strip()]
    return SubscriptionData(topic, expr, tags, [java_string_hash(t) for t in tags], sub_version)


def build_typed_subscription(topic: str, expression: str | None, expression_type: str | None,
                             sub_version: int = 0) -> SubscriptionData:
    """FilterAPI.build: a TAG subscription (type None or empty too) as :func:`build_subscription`;
    any other type (SQL92) keeps its expression as it is, with no tags.

    Raises:
        ValueError: a non-TAG expression that is empty ("Expression can't be null! SQL92").
    """
    if not expression_type or expression_type == "TAG":
        return build_subscription(topic, expression, sub_version)
    if not expression:
        raise ValueError(f"Expression can't be null! {expression_type}")
    return SubscriptionData(topic, expression, [], [], sub_version, expression_type=expression_type)


@dataclass
class ConsumerData:
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_obj(self) -> dict[str, Any]:
        return {"consumeFromWhere": self.consume_from_where, "consumeType": self.consume_type,
                "groupName": self.group_name, "messageModel": self.message_model,
                "subscriptionDataSet": [s.to_obj() for s in self.subscriptions], "unitMode": self.unit_mode}

    @classmethod
    def from_obj(cls, obj: Any) -> "ConsumerData":
        if not isinstance(obj, dict):
            raise RemotingCommandError("heartbeat: consumer data must be an object")
        subs = obj.get("subscriptionDataSet") or []
        if not isinstance(subs, list):
            raise RemotingCommandError("heartbeat: subscriptionDataSet must be a list")
        return cls(group_name=_str(obj, "groupName", "consumer"),
                   consume_type=_enum(obj.get("consumeType", 1), CONSUME_TYPES, "consumeType"),
                   message_model=_enum(obj.get("messageModel", 1), MESSAGE_MODELS, "messageModel"),
                   consume_from_where=_enum(obj.get("consumeFromWhere", 0), CONSUME_FROM_WHERE, "consumeFromWhere"),
                   subscriptions=[SubscriptionData.from_obj(s) for s in subs],
                   unit_mode=bool(obj.get("unitMode", False)))


@dataclass
class ProducerData:
    group_name: str

    def to_obj(self) -> dict[str, Any]:
        return {"groupName": self.group_name}


@dataclass
class HeartbeatData:
    client_id: str
    producers: list[ProducerData] = field(default_factory=list)
    consumers: list[ConsumerData] = field(default_factory=list)

    def to_json(self) -> bytes:
        return json.dumps({"clientID": self.client_id,
                           "consumerDataSet": [c.to_obj() for c in self.consumers],
                           "producerDataSet": [p.to_obj() for p in self.producers]},
                          separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str | None) -> "HeartbeatData":
        """Parse a HEART_BEAT body; anything malformed is a RemotingCommandError naming the field."""
        if not data:
            raise RemotingCommandError("heartbeat body is empty")
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:  # both clients write standard JSON here
            raise RemotingCommandError(f"heartbeat body is not valid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise RemotingCommandError("heartbeat body must be a JSON object")
        producers = obj.get("producerDataSet") or []
        consumers = obj.get("consumerDataSet") or []
        if not isinstance(producers, list) or not isinstance(consumers, list):
            raise RemotingCommandError("heartbeat: producerDataSet and consumerDataSet must be lists")
        prods = []
        for p in producers:
            if not isinstance(p, dict):
                raise RemotingCommandError("heartbeat: producer data must be an object")
            prods.append(ProducerData(_str(p, "groupName", "producer")))
        return cls(client_id=_str(obj, "clientID", "heartbeat"),
                   producers=prods, consumers=[ConsumerData.from_obj(c) for c in consumers])
