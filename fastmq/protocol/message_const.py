"""Message property names, their separators and the SYSFLAG bits, declared once.

RocketMQ's ``MessageConst`` (property names), ``MessageDecoder``'s two separators and
``MessageSysFlag``. A message's properties travel as ``name\\x01value\\x02`` repeated, in the send
header and in the stored record alike. This module imports nothing, so every floor reads it: the
compiled twins in ``fastmq/_ext`` take these names through the generated ``wire_facts.pxd`` and
their pure twins from here (docs/ARCHITECTURE.md, "Where each wire fact is declared").
"""
from __future__ import annotations

__all__ = ["MessageConst", "MessageSysFlag", "CompressedBody", "NAME_VALUE_SEPARATOR", "PROPERTY_SEPARATOR"]

#: Between a property's name and its value (MessageDecoder.NAME_VALUE_SEPARATOR).
NAME_VALUE_SEPARATOR = "\x01"
#: After each name/value pair (MessageDecoder.PROPERTY_SEPARATOR).
PROPERTY_SEPARATOR = "\x02"


class MessageConst:
    """Property names RocketMQ puts in ``properties`` (``MessageConst``)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    CLUSTER = "CLUSTER"
    # request-reply (DefaultMQProducer.request, MessageUtil.createReplyMessage)
    CORRELATION_ID = "CORRELATION_ID"
    REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"  # the request's timeout in ms (PROPERTY_MESSAGE_TTL)
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    MESSAGE_TYPE = "MSG_TYPE"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    KEY_SEPARATOR = " "
    #: MSG_TYPE of a reply (MixAll.REPLY_MESSAGE_FLAG)
    REPLY_MESSAGE_FLAG = "reply"
    # timer messages (RocketMQ 5's PROPERTY_TIMER_*): what a sender sets, one of three
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"  # epoch ms
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    # ... and what the broker adds while it holds and delivers the message
    TIMER_OUT_MS = "TIMER_OUT_MS"  # the rounded time slot
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    #: Every timer property name starts so: the send fast path hands such a message to the processor.
    TIMER_PREFIX = "TIMER_"


class CompressedBody(bytes):
    """A message body zlib-compressed already (as tryToCompressMessage would): sent as it is,
    with ``MessageSysFlag.COMPRESSED``, never compressed again, on the producer's compiled first
    try as on its general path (a trace dispatcher's thread compresses its trace messages so).
    Also exported by ``fastmq.protocol.message`` and ``fastmq.client.api``."""

    __slots__ = ()


class MessageSysFlag:
    """Bits of the stored ``SYSFLAG`` and of the send header's ``sysFlag`` (``MessageSysFlag``)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
