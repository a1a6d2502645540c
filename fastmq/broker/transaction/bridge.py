"""The broker's half, op and commit records: how a transaction's messages are built and stored.

RocketMQ 4.9.8's ``TransactionalMessageBridge`` and the message building of its
``EndTransactionProcessor``, over fastmq's store:

- a half is the producer's message moved to ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, its real topic
  and queue kept in ``REAL_TOPIC`` / ``REAL_QID`` and its transaction bits reset to 0, so the
  half topic's consume queue indexes it and the real topic's consumers never see it;
- an op message (``RMQ_SYS_TRANS_OP_HALF_TOPIC``, same queue id as the half, tag ``d``, body the
  half's queue offset in decimal) says "this half is resolved";
- a commit stores the real message: the half's record with the real topic and queue back, sysFlag
  COMMIT and ``preparedTransactionOffset`` = the half's commit-log offset. Its properties are the
  half's stored ones, ``REAL_TOPIC``, ``REAL_QID`` and ``TRAN_MSG`` included: 4.9.8 clears those
  from the property map after it has serialized it, so what its commit log holds (and what
  consumers read) still carries them.

The store format is 4.9.8's; nothing here adds a field or a file.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

from ...protocol import topic as tv
from ...protocol.message import MessageConst, MessageExt, MessageSysFlag, decode_record
from ...store.message_store import PutResult

if TYPE_CHECKING:
    from ...store.config import MessageStoreConfig
    from ...store.message_store import MessageStore
    from ..config import BrokerConfig
    from ..consumer_manager import ProducerManager
    from ..offsets import ConsumerOffsetManager
    from ..topic_config import TopicConfigManager

__all__ = ["TxBroker", "TransactionalMessageBridge", "TX_MASK", "reset_transaction_value", "parse_op_body"]

log = logging.getLogger("fastmq.broker.transaction")

#: The transaction-type bits of a sysFlag (MessageSysFlag.TRANSACTION_ROLLBACK_TYPE covers both).
TX_MASK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_RW = tv.PERM_READ | tv.PERM_WRITE
#: How many records a committed-copy lookup reads from the index at most.
_DEDUP_LOOKUP_MAX = 64


class TxBroker(Protocol):
    """What the transaction parts use of the broker (BrokerContext has it all; naming the parts
    here keeps the processors' context and this package from importing each other)."""

    config: BrokerConfig
    store_config: MessageStoreConfig
    store: MessageStore
    topic_config: TopicConfigManager
    offsets: ConsumerOffsetManager
    producer_manager: ProducerManager


def reset_transaction_value(sys_flag: int, tx_type: int) -> int:
    """MessageSysFlag.resetTransactionValue: ``sys_flag`` with its transaction type replaced."""
    return (sys_flag & ~TX_MASK) | tx_type


def parse_op_body(body: bytes) -> list[int]:
    """The half queue offsets an op message resolves: one decimal (4.9.8), or several joined by
    ``,`` (5.x batches them); anything unreadable is skipped (logged), not fatal."""
    out: list[int] = []
    for part in body.decode("utf-8", "replace").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(int(part))
        except ValueError:
            log.warning("op message body %r: %r is not a queue offset, ignored", body[:64], part)
    return out


class TransactionalMessageBridge:
    """Puts and reads of the half, op and check-max topics for one broker."""

    def __init__(self, broker: TxBroker) -> None:
        self.broker = broker

    # ------------------------------------------------------------------ topics
    def ensure_topic(self, topic: str) -> None:
        """The half, op and check-max topics: 1 queue, RW, created when first needed (4.9's
        selectTopicConfig / createTopicOfTranCheckMaxTime), so routes and admin tools see them."""
        if self.broker.topic_config.select(topic) is None:
            self.broker.topic_config.create_in_send_back(topic, 1, _RW, 0)

    # ------------------------------------------------------------------ half
    @staticmethod
    def to_half(msg: MessageExt) -> MessageExt:
        """parseHalfMessageInner: ``msg`` moved to the half topic queue 0, real place kept.

        A DELAY property is dropped: a half stored with it would be parked on the delay level by
        the store (its transaction bits are 0) and later delivered uncommitted. The Java client
        clears it before sending a half anyway.
        """
        props = dict(msg.properties)
        props.pop(MessageConst.DELAY_TIME_LEVEL, None)
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        return MessageExt(topic=tv.TRANS_HALF_TOPIC, body=msg.body, flag=msg.flag, properties=props, queue_id=0,
                          sys_flag=reset_transaction_value(msg.sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE),
                          born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                          reconsume_times=msg.reconsume_times)

    async def put_half(self, msg: MessageExt) -> PutResult:
        """Store ``msg`` (already in the half topic, see :meth:`to_half`)."""
        self.ensure_topic(tv.TRANS_HALF_TOPIC)
        return await self.broker.store.put_messages([msg])

    def look_half(self, commit_log_offset: int) -> MessageExt | None:
        """The half stored at ``commit_log_offset``; None when no record starts there or the record
        there is not a half (4.9 would try to commit any record; a typed refusal is safer)."""
        if commit_log_offset < 0:
            return None
        m = self.broker.store.look_message_by_offset(commit_log_offset)
        if m is None or m.topic != tv.TRANS_HALF_TOPIC:
            return None
        return m

    # ------------------------------------------------------------------ commit / op
    @staticmethod
    def to_committed(half: MessageExt, commit_log_offset: int) -> MessageExt | None:
        """endMessageTransaction: the real message of ``half``; None when its REAL_* are unusable."""
        topic = half.properties.get(MessageConst.REAL_TOPIC)
        try:
            qid = int(half.properties.get(MessageConst.REAL_QUEUE_ID, ""))
        except ValueError:
            return None
        if not topic:
            return None
        return MessageExt(topic=topic, body=half.body, flag=half.flag, properties=dict(half.properties),
                          queue_id=qid,
                          sys_flag=reset_transaction_value(half.sys_flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE),
                          born_timestamp=half.born_timestamp, born_host=half.born_host,
                          reconsume_times=half.reconsume_times, prepared_transaction_offset=commit_log_offset)

    def find_committed(self, half: MessageExt) -> MessageExt | None:
        """A committed real message of the same transaction (same UNIQ_KEY, sysFlag COMMIT) if one
        is stored: a commit whose op message was lost (kill -9 between the two puts, or a
        rewound check progress) must not be stored twice. Found through the index; None when the
        index is off or holds none."""
        topic = half.properties.get(MessageConst.REAL_TOPIC)
        uniq = half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not topic or not uniq:
            return None
        now = int(time.time() * 1000)
        begin = half.born_timestamp - 60_000  # born before it was stored; clocks may differ a little
        for raw in self.broker.store.query_message(topic, uniq, _DEDUP_LOOKUP_MAX, max(0, begin), now + 60_000):
            try:
                m = decode_record(raw, verify_crc=False)
            except Exception:
                continue
            if m is None:
                continue
            if ((m.sys_flag & TX_MASK) == MessageSysFlag.TRANSACTION_COMMIT_TYPE
                    and m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == uniq):
                return m
        return None

    async def put_op(self, half_queue_id: int, half_queue_offsets: list[int]) -> PutResult:
        """addRemoveTagInTransactionOp: the op message resolving the half(s) at those offsets.

        4.9.8 writes one offset per op message; callers pass one."""
        self.ensure_topic(tv.TRANS_OP_HALF_TOPIC)
        body = ",".join(str(o) for o in half_queue_offsets).encode("utf-8")
        op = MessageExt(topic=tv.TRANS_OP_HALF_TOPIC, body=body, queue_id=half_queue_id,
                        properties={MessageConst.TAGS: tv.TRANS_OP_REMOVE_TAG},
                        born_timestamp=int(time.time() * 1000), born_host=self.broker.store.store_host)
        return await self.broker.store.put_messages([op])

    # ------------------------------------------------------------------ check service puts
    async def renew_half(self, half: MessageExt, extra: dict[str, str]) -> PutResult:
        """renewHalfMessageInner: a copy of ``half`` appended to the half queue with ``extra``
        properties (the check count, or the immunity marker)."""
        props = dict(half.properties)
        props.update(extra)
        copy = MessageExt(topic=tv.TRANS_HALF_TOPIC, body=half.body, flag=half.flag, properties=props,
                          queue_id=half.queue_id, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp,
                          born_host=half.born_host, reconsume_times=half.reconsume_times)
        return await self.broker.store.put_messages([copy])

    async def put_check_max(self, half: MessageExt) -> PutResult:
        """DefaultTransactionalMessageCheckListener.resolveDiscardMsg: the half given up after the
        last check, kept in TRANS_CHECK_MAX_TIME_TOPIC queue 0 (same body and properties)."""
        self.ensure_topic(tv.TRANS_CHECK_MAX_TIME_TOPIC)
        m = MessageExt(topic=tv.TRANS_CHECK_MAX_TIME_TOPIC, body=half.body, flag=half.flag,
                       properties=dict(half.properties), queue_id=0, sys_flag=half.sys_flag,
                       born_timestamp=half.born_timestamp, born_host=half.born_host,
                       reconsume_times=half.reconsume_times)
        return await self.broker.store.put_messages([m])
