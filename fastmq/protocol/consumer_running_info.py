"""What a consumer reports of itself, and of a message consumed on request.

GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``, the dashboard's consumer detail) answers
with a ConsumerRunningInfo: the consumer's settings as properties, its subscriptions, the state
of each queue it holds (ProcessQueueInfo) and each topic's pull and consume rates
(TopicConsumeStatus). CONSUME_MESSAGE_DIRECTLY (``mqadmin queryMsgById -g -d``, the dashboard's
"resend") answers with a ConsumeMessageDirectlyResult.

Field names and order are fastjson's (getter names, sorted), and ``mqTable`` is keyed by the
queue objects themselves, as Java's TreeMap<MessageQueue, ...> is written: standard JSON cannot
say that, so it is written and read with ``bodies.mq_map_json`` / ``bodies.loads_mq_keyed``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Self

from ..errors import RemotingCommandError
from .bodies import compact_json, loads_mq_keyed, mq_map_json
from .heartbeat import SubscriptionData
from .message_queue import MessageQueue

__all__ = ["ProcessQueueInfo", "TopicConsumeStatus", "ConsumerRunningInfo", "ConsumeMessageDirectlyResult", "CMResult",
           "PROP_NAMESERVER_ADDR", "PROP_THREADPOOL_CORE_SIZE", "PROP_CONSUME_ORDERLY", "PROP_CONSUME_TYPE",
           "PROP_CLIENT_VERSION", "PROP_CONSUMER_START_TIMESTAMP"]

PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"  # (sic: the constant's value in Java)
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


class _JavaNamed:
    """A flat body whose dataclass fields carry their Java names in ``metadata["java"]``."""

    def to_obj(self) -> dict[str, Any]:
        # (fields(self): every subclass is a dataclass, which mypy cannot see from the base)
        return dict(sorted((f.metadata["java"], getattr(self, f.name)) for f in fields(self)))  # type: ignore[arg-type]

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        """Read the fields that are there. Numbers may come as strings and booleans as
        ``"true"``/``"false"``, as fastjson takes them: the C++ client writes its 64-bit fields
        as strings."""
        if not isinstance(obj, dict):
            raise RemotingCommandError(f"{cls.__name__} must be an object")
        kwargs: dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]  # subclasses are dataclasses, the base not
            v = obj.get(f.metadata["java"])
            if v is None:
                continue
            kind = type(f.default)
            try:
                kwargs[f.name] = _coerce(kind, v)
            except (TypeError, ValueError):
                raise RemotingCommandError(
                    f"{cls.__name__}.{f.metadata['java']} must be a {kind.__name__}, not {v!r}") from None
        return cls(**kwargs)


def _coerce(kind: type, v: Any) -> Any:
    if kind is bool:
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        raise ValueError(v)
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise TypeError(v)
    if kind is int and isinstance(v, float):
        raise TypeError(v)
    return kind(v.strip() if isinstance(v, str) else v)


def _j(java: str, default: Any) -> Any:
    return field(default=default, metadata={"java": java})


@dataclass
class ProcessQueueInfo(_JavaNamed):
    """One held queue: its committed offset, what is cached, its lock (orderly) and last activity."""

    commit_offset: int = _j("commitOffset", 0)
    cached_msg_min_offset: int = _j("cachedMsgMinOffset", 0)
    cached_msg_max_offset: int = _j("cachedMsgMaxOffset", 0)
    cached_msg_count: int = _j("cachedMsgCount", 0)
    cached_msg_size_in_mib: int = _j("cachedMsgSizeInMiB", 0)
    transaction_msg_min_offset: int = _j("transactionMsgMinOffset", 0)
    transaction_msg_max_offset: int = _j("transactionMsgMaxOffset", 0)
    transaction_msg_count: int = _j("transactionMsgCount", 0)
    locked: bool = _j("locked", False)
    try_unlock_times: int = _j("tryUnlockTimes", 0)
    last_lock_timestamp: int = _j("lastLockTimestamp", 0)
    dropped: bool = _j("droped", False)  # (sic)
    last_pull_timestamp: int = _j("lastPullTimestamp", 0)
    last_consume_timestamp: int = _j("lastConsumeTimestamp", 0)


@dataclass
class TopicConsumeStatus(_JavaNamed):
    """A topic's rates: pull and consume response times (ms) and TPS over the last minute, and
    the messages whose consumption failed in the last hour. RocketMQ's body ConsumeStatus,
    renamed: ConsumeStatus is the listener's answer (fastmq.ConsumeStatus)."""

    pull_rt: float = _j("pullRT", 0.0)
    pull_tps: float = _j("pullTPS", 0.0)
    consume_rt: float = _j("consumeRT", 0.0)
    consume_ok_tps: float = _j("consumeOKTPS", 0.0)
    consume_failed_tps: float = _j("consumeFailedTPS", 0.0)
    consume_failed_msgs: int = _j("consumeFailedMsgs", 0)


def _subscription_order(sd: SubscriptionData) -> str:
    return f"{sd.topic}@{sd.sub_string}"  # SubscriptionData.compareTo


@dataclass
class ConsumerRunningInfo:
    properties: dict[str, str] = field(default_factory=dict)
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, TopicConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    def to_json(self) -> bytes:
        """fastjson's text: fields sorted, ``jstack`` left out when None, mqTable and the set in
        their TreeMap / TreeSet order."""
        parts = [] if self.jstack is None else [f'"jstack":{compact_json(self.jstack)}']
        parts.append('"mqTable":' + mq_map_json((mq, self.mq_table[mq].to_obj()) for mq in sorted(self.mq_table)))
        parts.append(f'"properties":{compact_json(dict(sorted(self.properties.items())))}')
        parts.append(f'"statusTable":{compact_json({t: s.to_obj() for t, s in sorted(self.status_table.items())})}')
        subs = sorted(self.subscriptions, key=_subscription_order)
        parts.append(f'"subscriptionSet":{compact_json([s.to_obj() for s in subs])}')
        return ("{" + ",".join(parts) + "}").encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Read what a Java, C++ or fastmq consumer answered.

        Raises:
            RemotingCommandError: not such a body.
        """
        obj = loads_mq_keyed(data)
        if not isinstance(obj, dict):
            raise RemotingCommandError("ConsumerRunningInfo must be an object")
        def part(key: str, empty: Any) -> Any:
            v = obj.get(key)
            return empty if v is None else v

        props, table, status = part("properties", {}), part("mqTable", {}), part("statusTable", {})
        subs = part("subscriptionSet", [])
        if not (isinstance(props, dict) and isinstance(table, dict) and isinstance(status, dict)
                and isinstance(subs, list)):
            raise RemotingCommandError("ConsumerRunningInfo: properties, mqTable, statusTable or subscriptionSet "
                                       "has the wrong shape")
        if not all(isinstance(k, MessageQueue) for k in table):
            raise RemotingCommandError("ConsumerRunningInfo: mqTable keys must be message queues")
        jstack = obj.get("jstack")
        return cls({str(k): str(v) for k, v in props.items()}, [SubscriptionData.from_obj(s) for s in subs],
                   {mq: ProcessQueueInfo.from_obj(v) for mq, v in table.items()},
                   {str(t): TopicConsumeStatus.from_obj(v) for t, v in status.items()},
                   None if jstack is None else str(jstack))


class CMResult:
    """How a message consumed on request went (Java's CMResult enum, by name)."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass
class ConsumeMessageDirectlyResult:
    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None
    remark: str | None = None
    spent_time_mills: int = 0

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {"autoCommit": self.auto_commit}
        if self.consume_result is not None:
            obj["consumeResult"] = self.consume_result
        obj["order"] = self.order
        if self.remark is not None:
            obj["remark"] = self.remark
        obj["spentTimeMills"] = self.spent_time_mills
        return compact_json(obj).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        obj = loads_mq_keyed(data)
        if not isinstance(obj, dict):
            raise RemotingCommandError("ConsumeMessageDirectlyResult must be an object")
        spent = obj.get("spentTimeMills", 0)
        if not isinstance(spent, int) or isinstance(spent, bool):
            raise RemotingCommandError(f"ConsumeMessageDirectlyResult.spentTimeMills must be a number, not {spent!r}")
        result, remark = obj.get("consumeResult"), obj.get("remark")
        return cls(bool(obj.get("order", False)), bool(obj.get("autoCommit", True)),
                   None if result is None else str(result), None if remark is None else str(remark), spent)
