"""A put of message objects made into commit-log appends: RocketMQ's checks, delay levels, records.

:meth:`MessageStore.put_messages` (the schedule service's re-puts, send-backs, transactions, the
broker's general send path) hands its :class:`~fastmq.protocol.message.MessageExt` batch to
:class:`MessageEncoder`, which does what 4.9 spreads over ``DefaultMessageStore.checkMessage``,
``CommitLog.putMessage`` and ``DefaultAppendMessageCallback``: refuse a topic, properties or record
that cannot be stored, move a delayed message to ``SCHEDULE_TOPIC_XXXX`` (its queue ``level - 1``,
its real topic and queue in REAL_TOPIC / REAL_QID, its tag code the time it is due), and encode the
record with this store's host. The broker's send fast path does not come here: its records are
built by the compiled ``_ext/send`` stage.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..protocol.message import (
    MessageConst, MessageExt, MessageFormatError, MessageSysFlag,
    encode_properties, encode_record, pack_host, record_length, tags_code,
)
from ..protocol.java_number import JavaNumberFormatError, parse_int
from ..protocol.topic import SCHEDULE_TOPIC, TIMER_TOPIC
from .commit_log import AppendRequest, timer_slot
from .config import MessageStoreConfig
from .put_result import PutStatus

__all__ = ["DEFAULT_DELAY_LEVELS", "parse_delay_levels", "Refused", "MessageEncoder"]

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_TX_MASK = 0xC
_MAX_PROPERTIES = 0x7FFF
_MAX_TOPIC = 127
# Topic names become directories under consumequeue/: nothing else may reach the disk.
_TOPIC_CHARS = frozenset("%|_-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_RECORD_FIXED = record_length(0, 0, 0, 0)  # a record's size without body, topic, properties
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL_RE = re.compile(r"^(\d+)(ms|s|m|h|d)$")


def parse_delay_levels(spec: str) -> dict[int, int]:
    """``messageDelayLevel`` -> {level (1-based): delay in ms}.

    RocketMQ's units s/m/h/d, plus ``ms`` (fastmq's, so tests can run levels in milliseconds).

    Raises:
        ValueError: an item that is not ``<digits><unit>``.
    """
    table: dict[int, int] = {}
    for i, item in enumerate(spec.split(), start=1):
        m = _LEVEL_RE.match(item.strip().lower())
        if m is None:
            raise ValueError(f"bad messageDelayLevel item {item!r} (want e.g. 10s, 1m, 2h, 1d)")
        table[i] = int(m.group(1)) * _UNIT_MS[m.group(2)]
    if not table:
        raise ValueError("messageDelayLevel is empty")
    return table


@dataclass(frozen=True)
class Refused:
    """Why a put's batch cannot be stored, as the store answers it (nothing of it is stored)."""

    status: PutStatus
    remark: str


class MessageEncoder:
    """A store's message objects → append requests, with every check a put owes.

    Args:
        config: the store keys (``maxMessageSize`` read at each put; ``messageDelayLevel`` here).
        store_host: this store's packed STOREHOST, stamped into every record.
    """

    def __init__(self, config: MessageStoreConfig, store_host: bytes) -> None:
        self.config = config
        self.store_host = store_host
        self._born_hosts: dict[tuple[str, int], bytes] = {}  # packing parses the IP: ~2 us
        self.delay_level_table = parse_delay_levels(
            getattr(config, "messageDelayLevel", DEFAULT_DELAY_LEVELS) or DEFAULT_DELAY_LEVELS)
        self.max_delay_level = max(self.delay_level_table)

    def deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        """When a message stored at ``store_timestamp`` with delay ``level`` is due."""
        return store_timestamp + self.delay_level_table.get(level, 1000)

    def encode(self, msgs: Sequence[MessageExt], now: int) -> tuple[list[AppendRequest], bool] | Refused:
        """The batch's records and whether any asks the put to wait for the disk (WAIT is not
        "false"), or why the whole batch is refused. ``now``: the batch's store timestamp."""
        max_size = self.config.maxMessageSize
        requests: list[AppendRequest] = []
        wait = False
        sh = self.store_host
        born_hosts = self._born_hosts
        for m in msgs:
            topic, queue_id, props = m.topic, m.queue_id, m.properties
            # Checked before a delay moves the message to the schedule topic, as 4.9's
            # checkMessage does: a real topic that cannot be stored would otherwise be found
            # only when its delay level comes due, and block that level.
            if len(topic) > _MAX_TOPIC or not _TOPIC_CHARS.issuperset(topic):
                return Refused(PutStatus.MESSAGE_ILLEGAL, f"the topic {topic[:200]!r} cannot be stored: "
                               f"at most {_MAX_TOPIC} characters of ^[%|a-zA-Z0-9_-]+$")
            tran = m.sys_flag & _TX_MASK
            tag_code = 0
            delayed = False
            level_s = props.get(MessageConst.DELAY_TIME_LEVEL)
            if level_s and tran in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
                try:
                    level = parse_int(level_s)
                except JavaNumberFormatError as exc:
                    # 4.9's getDelayTimeLevel() throws here, answered SYSTEM_ERROR with its text.
                    return Refused(PutStatus.UNKNOWN_ERROR, exc.java_text)
                if level > 0:
                    level = min(level, self.max_delay_level)
                    props = dict(props)
                    props[MessageConst.DELAY_TIME_LEVEL] = str(level)
                    props[MessageConst.REAL_TOPIC] = topic
                    props[MessageConst.REAL_QUEUE_ID] = str(queue_id)
                    topic, queue_id = SCHEDULE_TOPIC, level - 1
                    tag_code = self.deliver_timestamp(level, now)
                    delayed = True
            if topic == TIMER_TOPIC:  # put there by the broker's timer check (fastmq.broker.timer)
                tag_code = timer_slot(props)
            elif not delayed:
                tags = props.get(MessageConst.TAGS)
                tag_code = tags_code(tags) if tags else 0
            if props.get(MessageConst.WAIT_STORE_MSG_OK, "true") != "false":
                wait = True
            tb = topic.encode("utf-8")
            if len(tb) > _MAX_TOPIC:
                return Refused(PutStatus.MESSAGE_ILLEGAL, f"topic is {len(tb)} bytes, the limit is {_MAX_TOPIC}")
            try:
                pb = encode_properties(props)
            except MessageFormatError as exc:
                return Refused(PutStatus.MESSAGE_ILLEGAL, str(exc))
            if len(pb) > _MAX_PROPERTIES:
                return Refused(PutStatus.PROPERTIES_SIZE_EXCEEDED,
                               f"message properties are {len(pb)} bytes, the limit is {_MAX_PROPERTIES}")
            size = _RECORD_FIXED + len(m.body) + len(tb) + len(pb)  # IPv4 hosts; before any copy
            if size > max_size:
                return Refused(PutStatus.MESSAGE_ILLEGAL, f"message of {size} bytes is over maxMessageSize {max_size}")
            try:
                bh = born_hosts.get(m.born_host)
                if bh is None:
                    bh = pack_host(*m.born_host)
                    if len(born_hosts) > 4096:
                        born_hosts.clear()
                    born_hosts[m.born_host] = bh
                rec = encode_record(topic=tb, body=m.body, properties=pb, queue_id=queue_id,
                                    flag=m.flag, sys_flag=m.sys_flag, born_timestamp=m.born_timestamp,
                                    born_host=bh, store_host=sh,
                                    reconsume_times=m.reconsume_times,
                                    prepared_transaction_offset=m.prepared_transaction_offset)
            except (MessageFormatError, ValueError, TypeError, OverflowError) as exc:
                return Refused(PutStatus.MESSAGE_ILLEGAL, f"cannot encode the message: {exc}")
            requests.append(AppendRequest(rec, topic, queue_id, tag_code))
        return requests, wait
