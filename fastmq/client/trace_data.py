"""Message trace records: RocketMQ 4.9.8's TraceContext, TraceBean and TraceDataEncoder.

A trace message's body is records laid end to end; a record's fields are joined by ``\\x01``
(CONTENT_SPLITOR) and it ends with ``\\x02`` (FIELD_SPLITOR). The first field names the record:

- ``Pub``: timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost, bodyLength,
  costTime, msgType ordinal, offsetMsgId, success (4.9.8 writes 14 fields; a 15th, clientHost,
  is read when present);
- ``SubBefore`` (one per message): timeStamp, regionId, groupName, requestId, msgId, retryTimes, keys;
- ``SubAfter``: requestId, msgId, costTime, success, keys, contextCode, timeStamp, groupName;
- ``EndTransaction``: timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
  msgType ordinal, transactionId, transactionState, fromTransactionCheck.

Text is written as Java's ``StringBuilder.append`` writes it: ``null`` for a missing string,
``true``/``false`` for booleans. The trace message's keys are each record's msgId and the keys
of the traced message, so that QUERY_MESSAGE by a message id finds its records.
"""
from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._ext.produce import SendResult
from .._ext.trace_encode import PubRows
from ..protocol.message import Message
from ..protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst

__all__ = ["TraceType", "MessageType", "ConsumeReturnType", "TraceBean", "TraceContext", "encode_context",
           "trace_keys", "decode_trace", "CONTENT_SPLITOR", "FIELD_SPLITOR", "DEFAULT_TRACE_TOPIC",
           "DEFAULT_REGION", "pub_row", "SentMessage"]

log = logging.getLogger("fastmq.client")

# TraceConstants' (char) 1 and (char) 2: the same two characters as a message's property separators
CONTENT_SPLITOR = NAME_VALUE_SEPARATOR
FIELD_SPLITOR = PROPERTY_SEPARATOR
#: TopicValidator.RMQ_SYS_TRACE_TOPIC: where traces go unless the client names another topic.
DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: MixAll.DEFAULT_TRACE_REGION_ID
DEFAULT_REGION = "DefaultRegion"


class TraceType(str, enum.Enum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """org.apache.rocketmq.common.message.MessageType; the trace carries the ordinal."""
    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """The ``contextCode`` of a SubAfter record (ConsumeReturnType's ordinal)."""
    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass
class TraceBean:
    """One message as a trace record names it."""
    topic: str | None = None
    msg_id: str | None = None
    offset_msg_id: str | None = None
    tags: str | None = None
    keys: str | None = None
    store_host: str | None = None
    client_host: str | None = None
    store_time: int = 0
    retry_times: int = 0
    body_length: int = 0
    msg_type: MessageType | None = None
    transaction_id: str | None = None
    transaction_state: str | None = None
    from_transaction_check: bool = False


@dataclass
class TraceContext:
    """One trace event: what happened (``trace_type``), when, to which messages (``beans``)."""
    trace_type: TraceType
    time_stamp: int = 0
    region_id: str | None = None
    group_name: str | None = None
    cost_time: int = 0
    success: bool = True
    request_id: str | None = None
    context_code: int = 0
    beans: list[TraceBean] = field(default_factory=list)


def _j(v: object) -> str:
    """A value as Java's StringBuilder.append writes it."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


def _record(*fields: object) -> str:
    return CONTENT_SPLITOR.join(_j(f) for f in fields) + FIELD_SPLITOR


def encode_context(ctx: TraceContext) -> str:
    """The records of ``ctx`` in 4.9.8's text (TraceDataEncoder.encoderFromContextBean)."""
    t = ctx.trace_type
    if t is TraceType.Pub:
        b = ctx.beans[0]
        return _record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
                       b.store_host, b.body_length, ctx.cost_time, _ordinal(b.msg_type), b.offset_msg_id,
                       ctx.success)
    if t is TraceType.SubBefore:
        return "".join(_record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id,
                               b.retry_times, b.keys) for b in ctx.beans)
    if t is TraceType.SubAfter:
        return "".join(_record(t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys,
                               ctx.context_code, ctx.time_stamp, ctx.group_name) for b in ctx.beans)
    b = ctx.beans[0]
    return _record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
                   b.store_host, _ordinal(b.msg_type), b.transaction_id, b.transaction_state,
                   b.from_transaction_check)


_TAGS, _KEYS, _PREPARED, _DELAY = (MessageConst.TAGS, MessageConst.KEYS, MessageConst.TRANSACTION_PREPARED,
                                   MessageConst.DELAY_TIME_LEVEL)


class SentMessage(Protocol):
    """What a Pub record reads of a sent message: a Message, or the fast path's entry of its send."""

    @property
    def topic(self) -> Any: ...

    @property
    def body(self) -> Any: ...

    @property
    def properties(self) -> Any: ...


def pub_row(rows: PubRows, msg: SentMessage, r: SendResult, begin_ms: int) -> int:
    """SendMessageTraceHookImpl.sendMessageAfter, as little as a send can do: the answered
    send's Pub record written into ``rows`` (its text only, so neither the message nor the
    result outlives its send, and no object is made for the cycle collector to scan); the
    dispatcher's thread makes trace messages of them later, a batch at a time. Nothing for an
    answer without ``MSG_REGION`` (a broker that does not know traces) or with
    ``TRACE_ON=false``. Returns what :meth:`PubRows.add` returns (0 for nothing written)."""
    if r.region_id is None or not r.trace_on:
        return 0
    p = msg.properties
    mtype = 1 if p.get(_PREPARED) == "true" else 3 if p.get(_DELAY) else 0
    return rows.add(begin_ms, int(time.time() * 1000), msg.topic, r.msg_id, p.get(_TAGS), p.get(_KEYS),
                    r.message_queue.broker_name, len(msg.body), mtype, r.offset_msg_id, r.status == "SEND_OK",
                    r.region_id)


def _ordinal(t: MessageType | None) -> int:
    return int(t) if t is not None else 0


def trace_keys(ctx: TraceContext) -> list[str]:
    """What the trace message is indexed by: each bean's msgId and its message's keys."""
    out: list[str] = []
    for b in ctx.beans:
        out.append(_j(b.msg_id))
        if b.keys:
            out.extend(k for k in b.keys.split(MessageConst.KEY_SEPARATOR) if k)
    return out


def _bool(s: str) -> bool:
    return s.lower() == "true"  # Boolean.parseBoolean


def _none(s: str) -> str | None:
    return None if s == "null" else s


def decode_trace(data: str | bytes) -> list[TraceContext]:
    """The records of a trace body (TraceDataEncoder.decoderFromTraceDataString).

    A record that cannot be read (too few fields, a bad number, an unknown type) is skipped and
    logged; the others are returned, so one bad writer does not hide the rest of a trace.
    """
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    out: list[TraceContext] = []
    for rec in data.split(FIELD_SPLITOR):
        if not rec:
            continue
        f = rec.split(CONTENT_SPLITOR)
        try:
            ctx = _decode_record(f)
        except (IndexError, ValueError) as exc:
            log.debug("unreadable trace record %r: %s", rec[:200], exc)
            continue
        if ctx is not None:
            out.append(ctx)
    return out


def _decode_record(f: list[str]) -> TraceContext | None:
    kind = f[0]
    if kind == "Pub":
        ctx = TraceContext(TraceType.Pub, int(f[1]), _none(f[2]), _none(f[3]), cost_time=int(f[10]))
        b = TraceBean(topic=_none(f[4]), msg_id=_none(f[5]), tags=_none(f[6]), keys=_none(f[7]),
                      store_host=_none(f[8]), body_length=int(f[9]), msg_type=MessageType(int(f[11])))
        if len(f) == 13:
            ctx.success = _bool(f[12])
        elif len(f) >= 14:
            b.offset_msg_id, ctx.success = _none(f[12]), _bool(f[13])
            if len(f) >= 15:
                b.client_host = _none(f[14])
        else:
            raise ValueError(f"a Pub record of {len(f)} fields")
        ctx.beans.append(b)
        return ctx
    if kind == "SubBefore":
        ctx = TraceContext(TraceType.SubBefore, int(f[1]), _none(f[2]), _none(f[3]), request_id=_none(f[4]))
        ctx.beans.append(TraceBean(msg_id=_none(f[5]), retry_times=int(f[6]), keys=_none(f[7])))
        return ctx
    if kind == "SubAfter":
        ctx = TraceContext(TraceType.SubAfter, request_id=_none(f[1]), cost_time=int(f[3]), success=_bool(f[4]))
        ctx.beans.append(TraceBean(msg_id=_none(f[2]), keys=_none(f[5])))
        if len(f) >= 7:
            ctx.context_code = int(f[6])
        if len(f) >= 9:
            ctx.time_stamp, ctx.group_name = int(f[7]), _none(f[8])
        return ctx
    if kind == "EndTransaction":
        ctx = TraceContext(TraceType.EndTransaction, int(f[1]), _none(f[2]), _none(f[3]))
        ctx.beans.append(TraceBean(topic=_none(f[4]), msg_id=_none(f[5]), tags=_none(f[6]), keys=_none(f[7]),
                                   store_host=_none(f[8]), msg_type=MessageType(int(f[9])),
                                   transaction_id=_none(f[10]), transaction_state=f[11],
                                   from_transaction_check=_bool(f[12])))
        return ctx
    raise ValueError(f"unknown trace record type {kind!r}")
