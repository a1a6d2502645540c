"""Typed custom headers: the ``extFields`` of a request or response, as RocketMQ names them.

Each header is a slotted dataclass whose attribute names are the wire names (camelCase, as in
RocketMQ's ``*RequestHeader`` classes, so a reader of the Java source finds them). A field with no
default is required (``@CFNotNull`` in Java): when it is missing, :meth:`Header.decode` raises
:class:`RemotingCommandError` with RocketMQ's text "the custom field <name> is null". Values travel
as strings whatever their type; decoding accepts the JSON numbers the C++ client sends too, because
the codec has already turned them into their text.

SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE carry :class:`SendMessageRequestHeader` under the one-letter
names ``a``..``n`` to keep the header short; :func:`decode_send_header` reads either form.

These dataclasses are the one declaration of each header's wire names, order, Java types and
defaults. The hot paths (``fastmq/_ext`` send and produce twins, the broker's send processor, the
producer) do not spell a send or pull header's names themselves: they take them from the tables
derived here at import (:data:`SEND_FIELDS`, :data:`SEND_V2_NAMES`, :func:`send_wire_names`,
:func:`wire_names`), so adding a field to a dataclass is the one edit. This module imports only
the pure-data ``codes`` and ``errors`` at load time, so the compiled twins may read it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, TypeVar

from ..errors import RemotingCommandError
from .codes import RequestCode
from .java_number import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, JavaNumberFormatError, parse_int, parse_long

if TYPE_CHECKING:  # the command class lives above the codec; a header only reads its fields
    from .command import RemotingCommand

__all__ = [
    "Header", "SendMessageRequestHeader", "SendMessageResponseHeader", "decode_send_header", "SEND_V2_NAMES",
    "SEND_FIELDS", "send_wire_names", "wire_names", "declared", "ReplyMessageRequestHeader",
    "PullMessageRequestHeader", "PullMessageResponseHeader", "ConsumerSendMsgBackRequestHeader",
    "QueryConsumerOffsetRequestHeader", "QueryConsumerOffsetResponseHeader", "UpdateConsumerOffsetRequestHeader",
    "GetMaxOffsetRequestHeader", "GetMinOffsetRequestHeader", "OffsetResponseHeader", "SearchOffsetRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader", "GetEarliestMsgStoretimeResponseHeader",
    "UnregisterClientRequestHeader", "GetConsumerListByGroupRequestHeader", "NotifyConsumerIdsChangedRequestHeader",
    "QueryMessageRequestHeader", "QueryMessageResponseHeader", "ViewMessageRequestHeader",
    "CreateTopicRequestHeader", "DeleteTopicRequestHeader", "GetTopicStatsInfoRequestHeader",
    "GetConsumerRunningInfoRequestHeader", "ConsumeMessageDirectlyResultRequestHeader",
    "GetConsumeStatsInBrokerHeader", "QueryConsumeQueueRequestHeader",
    "GetConsumeStatsRequestHeader", "GetConsumerConnectionListRequestHeader", "GetRouteInfoRequestHeader",
    "EndTransactionRequestHeader", "CheckTransactionStateRequestHeader", "ResumeCheckHalfMessageRequestHeader",
    "Long", "java_number", "in_int_range", "in_long_range",
    "PULL_SYSFLAG_COMMIT_OFFSET", "PULL_SYSFLAG_SUSPEND", "PULL_SYSFLAG_SUBSCRIPTION", "PULL_SYSFLAG_CLASS_FILTER",
]

H = TypeVar("H", bound="Header")

#: PullMessageRequestHeader.sysFlag bits (PullSysFlag).
PULL_SYSFLAG_COMMIT_OFFSET = 0x1
PULL_SYSFLAG_SUSPEND = 0x2
PULL_SYSFLAG_SUBSCRIPTION = 0x4
PULL_SYSFLAG_CLASS_FILTER = 0x8


#: A header field that is a Java ``long`` (64 bits); a plain ``int`` field is a Java ``Integer``.
Long = int


def _parse_number(name: str, raw: str, parse: Callable[[str], int], java_type: str) -> int:
    """Java's ``Integer.parseInt`` / ``Long.parseLong`` of a header value, as 4.9's
    ``decodeCommandCustomHeader`` does it: no blanks, no underscores, the Java type's range.

    Raises:
        RemotingCommandError: not a number, or outside the Java type's range; 4.9 answers both
            with SYSTEM_ERROR and the NumberFormatException's text.
    """
    try:
        return parse(raw)
    except JavaNumberFormatError as exc:
        text = raw
        if text[1:].isdecimal() if text[:1] in ("+", "-") else text.isdecimal():
            raise RemotingCommandError(f"the custom field <{name}> is out of range for a Java {java_type}: {exc}") from None
        raise RemotingCommandError(f"the custom field <{name}> is not a number: {exc}") from None


def _parse_int(name: str, raw: str) -> int:
    return _parse_number(name, raw, parse_int, "int")


def _parse_long(name: str, raw: str) -> int:
    return _parse_number(name, raw, parse_long, "long")


def _parse_bool(name: str, raw: str) -> bool:
    # Java's Boolean.parseBoolean: anything but "true" (any case) is false.
    return raw.strip().lower() == "true"


_PARSERS = {"int": _parse_int, "Long": _parse_long, "bool": _parse_bool}


def java_number(raw: str) -> int:
    """``Long.parseLong(raw)``: the fast paths' parser (they check the narrower ranges after).

    Raises:
        ValueError: not a number Java takes.
    """
    return parse_long(raw)


def in_int_range(*values: int) -> bool:
    """True when every value fits a Java ``int`` (the fast paths' check before they trust ``int()``)."""
    return all(INT_MIN <= v <= INT_MAX for v in values)


def in_long_range(*values: int) -> bool:
    """True when every value fits a Java ``long``."""
    return all(LONG_MIN <= v <= LONG_MAX for v in values)


def _parser_for(annotation: str) -> Any:
    """The parser of a field annotated ``int``, ``bool | None``...; None keeps the text as is."""
    # Annotations are strings here (postponed evaluation); the first named type decides.
    return _PARSERS.get(annotation.split("|")[0].strip())


class Header:
    """Base of every custom header; subclasses are dataclasses whose fields are wire names."""

    _spec: ClassVar[tuple[tuple[str, Any, bool, Any], ...]]

    @classmethod
    def _fields_spec(cls) -> tuple[tuple[str, Any, bool, Any], ...]:
        spec = cls.__dict__.get("_spec")
        if spec is None:
            out = []
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # subclasses are dataclasses, the base not
                required = f.default is MISSING and f.default_factory is MISSING
                # Every header module postpones annotations, so the field's type is its source text.
                assert isinstance(f.type, str), f"{cls.__name__}.{f.name}: annotation is not a string"
                out.append((f.name, _parser_for(f.type), required, None if required else f.default))
            spec = tuple(out)
            cls._spec = spec
        return spec

    @classmethod
    def from_fields(cls: type[H], ext: dict[str, str] | None, names: dict[str, str] | None = None) -> H:
        """Build from an ext-fields map; ``names`` maps attribute -> wire name when they differ."""
        ext = ext or {}
        kw: dict[str, Any] = {}
        for name, parse, required, default in cls._fields_spec():
            wire = names.get(name, name) if names else name
            raw = ext.get(wire)
            if raw is None:
                if required:
                    raise RemotingCommandError(f"the custom field <{wire}> is null")
                kw[name] = default
            else:
                kw[name] = parse(wire, raw) if parse is not None else raw
        return cls(**kw)

    @classmethod
    def decode(cls: type[H], cmd: RemotingCommand) -> H:
        """The header carried by ``cmd``; raises RemotingCommandError naming the bad field."""
        return cls.from_fields(cmd.ext_fields)

    def to_fields(self, names: dict[str, str] | None = None) -> dict[str, str]:
        """The ext-fields map, every value a string (the C++ client reads only strings)."""
        out: dict[str, str] = {}
        for name, _parse, _req, _default in self._fields_spec():
            v = getattr(self, name)
            if v is None:
                continue
            wire = names.get(name, name) if names else name
            out[wire] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        return out


# ------------------------------------------------------------------- send

@dataclass(slots=True)
class SendMessageRequestHeader(Header):
    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: Long
    flag: int
    properties: str | None = None
    reconsumeTimes: int | None = None
    unitMode: bool = False
    maxReconsumeTimes: int | None = None
    batch: bool = False
    bname: str | None = None

    def to_v2_fields(self) -> dict[str, str]:
        """The one-letter form SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE use."""
        return self.to_fields(SEND_V2_NAMES)


def wire_names(header: type[Header]) -> tuple[str, ...]:
    """The wire names of ``header``'s fields, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(header))  # type: ignore[arg-type]  # a dataclass subclass


def declared(header: type[Header], *names: str) -> tuple[str, ...]:
    """``names``, each checked to be a wire name ``header`` declares: how a hot path that keys a
    dict by a long-name header's fields takes them from the declaration (a rename fails at import).

    Raises:
        KeyError: a name the header does not declare.
    """
    fields = wire_names(header)
    for name in names:
        if name not in fields:
            raise KeyError(f"{header.__name__} declares no field {name!r}")
    return names


#: SendMessageRequestHeader's wire names (SEND_MESSAGE), in declaration order.
SEND_FIELDS: tuple[str, ...] = wire_names(SendMessageRequestHeader)

#: SendMessageRequestHeaderV2's field letters: the declaration order, lettered from ``a`` (as
#: RocketMQ's createSendMessageRequestHeaderV2 maps them).
SEND_V2_NAMES: dict[str, str] = {name: chr(ord("a") + i) for i, name in enumerate(SEND_FIELDS)}


def send_wire_names(attrs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The SEND_MESSAGE names and the SEND_MESSAGE_V2 letters of the send header fields ``attrs``.

    Raises:
        KeyError: an attribute that SendMessageRequestHeader does not declare.
    """
    letters = tuple(SEND_V2_NAMES[a] for a in attrs)
    return tuple(attrs), letters


def decode_send_header(cmd: RemotingCommand) -> SendMessageRequestHeader:
    """The send header of SEND_MESSAGE (long names) or SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (letters)."""
    if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        return SendMessageRequestHeader.from_fields(cmd.ext_fields, SEND_V2_NAMES)
    return SendMessageRequestHeader.from_fields(cmd.ext_fields)


@dataclass(slots=True)
class SendMessageResponseHeader(Header):
    msgId: str
    queueId: int
    queueOffset: Long
    transactionId: str | None = None


# ------------------------------------------------------------------- pull

@dataclass(slots=True)
class PullMessageRequestHeader(Header):
    consumerGroup: str
    topic: str
    queueId: int
    queueOffset: Long
    maxMsgNums: int
    sysFlag: int
    commitOffset: Long
    suspendTimeoutMillis: Long
    subVersion: Long
    subscription: str | None = None
    expressionType: str | None = None

    @classmethod
    def decode(cls, cmd: RemotingCommand) -> "PullMessageRequestHeader":
        """The header of a pull; raises RemotingCommandError naming the bad field.

        Every pull reads one, so the usual header is read field by field here (~2 µs, against
        ~6 µs for the generic loop); a missing, null, malformed or out-of-range field goes to
        ``from_fields``, which decides and names it.
        """
        f = cmd.ext_fields
        if f:
            try:
                group, topic = f["consumerGroup"], f["topic"]
                if group is not None and topic is not None:
                    n = java_number
                    h = cls(group, topic, n(f["queueId"]), n(f["queueOffset"]), n(f["maxMsgNums"]),
                            n(f["sysFlag"]), n(f["commitOffset"]), n(f["suspendTimeoutMillis"]),
                            n(f["subVersion"]), f.get("subscription"), f.get("expressionType"))
                    if (in_int_range(h.queueId, h.maxMsgNums, h.sysFlag)
                            and in_long_range(h.queueOffset, h.commitOffset, h.suspendTimeoutMillis, h.subVersion)):
                        return h
            except (KeyError, ValueError, TypeError):
                pass
        return cls.from_fields(f)


@dataclass(slots=True)
class PullMessageResponseHeader(Header):
    suggestWhichBrokerId: Long
    nextBeginOffset: Long
    minOffset: Long
    maxOffset: Long


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader(Header):
    offset: Long
    group: str
    delayLevel: int
    originMsgId: str | None = None
    originTopic: str | None = None
    unitMode: bool = False
    maxReconsumeTimes: int | None = None


# ---------------------------------------------------------------- offsets

@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader(Header):
    consumerGroup: str
    topic: str
    queueId: int


@dataclass(slots=True)
class QueryConsumerOffsetResponseHeader(Header):
    offset: Long


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader(Header):
    consumerGroup: str
    topic: str
    queueId: int
    commitOffset: Long


@dataclass(slots=True)
class GetMaxOffsetRequestHeader(Header):
    topic: str
    queueId: int


@dataclass(slots=True)
class GetMinOffsetRequestHeader(Header):
    topic: str
    queueId: int


@dataclass(slots=True)
class OffsetResponseHeader(Header):
    """GET_MAX_OFFSET, GET_MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP answer with one ``offset``."""

    offset: Long


@dataclass(slots=True)
class SearchOffsetRequestHeader(Header):
    topic: str
    queueId: int
    timestamp: Long


@dataclass(slots=True)
class GetEarliestMsgStoretimeRequestHeader(Header):
    topic: str
    queueId: int


@dataclass(slots=True)
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: Long


# ----------------------------------------------------------------- client

@dataclass(slots=True)
class UnregisterClientRequestHeader(Header):
    clientID: str
    producerGroup: str | None = None
    consumerGroup: str | None = None


@dataclass(slots=True)
class GetConsumerListByGroupRequestHeader(Header):
    consumerGroup: str


@dataclass(slots=True)
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumerGroup: str


@dataclass(slots=True)
class GetConsumerConnectionListRequestHeader(Header):
    consumerGroup: str


# ------------------------------------------------------------------ admin

@dataclass(slots=True)
class QueryMessageRequestHeader(Header):
    topic: str
    key: str
    maxNum: int
    beginTimestamp: Long
    endTimestamp: Long


@dataclass(slots=True)
class QueryMessageResponseHeader(Header):
    indexLastUpdateTimestamp: Long
    indexLastUpdatePhyoffset: Long


@dataclass(slots=True)
class ViewMessageRequestHeader(Header):
    offset: Long


@dataclass(slots=True)
class CreateTopicRequestHeader(Header):
    topic: str
    defaultTopic: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicFilterType: str
    topicSysFlag: int | None = None
    order: bool = False


@dataclass(slots=True)
class DeleteTopicRequestHeader(Header):
    topic: str


@dataclass(slots=True)
class ViewBrokerStatsDataRequestHeader(Header):
    statsName: str
    statsKey: str


@dataclass(slots=True)
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET and RESET_CONSUMER_CLIENT_OFFSET."""
    topic: str
    group: str
    timestamp: Long
    isForce: bool = False


@dataclass(slots=True)
class GetProducerConnectionListRequestHeader(Header):
    producerGroup: str


@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader(Header):
    groupName: str
    removeOffset: bool = False


@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader(Header):
    """GET_CONSUMER_RUNNING_INFO, from an admin tool to the broker and from it to the client."""
    consumerGroup: str
    clientId: str
    jstackEnable: bool = False


@dataclass(slots=True)
class ConsumeMessageDirectlyResultRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY; the broker adds ``brokerName`` before passing it to the client."""
    consumerGroup: str
    clientId: str | None = None
    msgId: str | None = None
    brokerName: str | None = None


@dataclass(slots=True)
class GetTopicStatsInfoRequestHeader(Header):
    topic: str


@dataclass(slots=True)
class GetConsumeStatsRequestHeader(Header):
    consumerGroup: str
    topic: str | None = None


@dataclass(slots=True)
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS (``mqadmin brokerConsumeStats``)."""
    isOrder: bool


@dataclass(slots=True)
class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE (``mqadmin queryCq``)."""
    topic: str
    queueId: int
    index: Long
    count: int
    consumerGroup: str | None = None


@dataclass(slots=True)
class GetRouteInfoRequestHeader(Header):
    topic: str


# ------------------------------------------------------------------- request-reply

@dataclass(slots=True)
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker -> requester: a reply (SEND_REPLY_MESSAGE 324 /
    _V2 325) as its responder sent it, with the hosts "ip:port" and the time the broker took it;
    the body is the reply's body (compressed when ``sysFlag`` says so). ``queueId`` is the one the
    responder asked for, ``properties`` carry ``PUSH_REPLY_TIME``."""
    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: Long
    flag: int
    bornHost: str
    storeHost: str
    storeTimestamp: Long
    properties: str | None = None
    reconsumeTimes: int | None = None
    unitMode: bool = False


# ------------------------------------------------------------------- transactions

@dataclass(slots=True)
class EndTransactionRequestHeader(Header):
    """END_TRANSACTION (37), producer -> broker, oneway. ``commitOrRollback`` is a sysFlag
    transaction type: 0 (unknown, a no-op), 8 (commit) or 12 (rollback); any other value is
    refused as 4.9's ``checkFields`` does (:meth:`check_fields`)."""
    producerGroup: str
    tranStateTableOffset: Long
    commitLogOffset: Long
    commitOrRollback: int
    msgId: str  # declared after fromTransactionCheck in Java; a dataclass puts required fields first
    fromTransactionCheck: bool = False
    transactionId: str | None = None
    bname: str | None = None

    def check_fields(self) -> None:
        """4.9's EndTransactionRequestHeader.checkFields.

        Raises:
            RemotingCommandError: ``commitOrRollback`` not 0, 8 or 12.
        """
        if self.commitOrRollback not in (0, 0x8, 0xC):
            raise RemotingCommandError("commitOrRollback field wrong")


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(Header):
    """CHECK_TRANSACTION_STATE (39), broker -> producer, oneway; the body is the half message
    encoded as a stored record with its real topic and queue. ``msgId`` and ``transactionId`` are
    the half's UNIQ_KEY, ``offsetMsgId`` the id of the stored half (the copy being checked)."""
    tranStateTableOffset: Long
    commitLogOffset: Long
    msgId: str | None = None
    transactionId: str | None = None
    offsetMsgId: str | None = None
    bname: str | None = None


@dataclass(slots=True)
class ResumeCheckHalfMessageRequestHeader(Header):
    """RESUME_CHECK_HALF_MESSAGE (323), admin: put a given-up half (its offset message id in
    TRANS_CHECK_MAX_TIME_TOPIC) back in the half topic with its check count at 0."""
    msgId: str | None = None
