"""Shared plumbing of the broker processors: dispatch by request code, with the broker at hand.

Every request passes the name gate first: a topic or group name in its header that RocketMQ's
rules refuse (characters outside ``^[%|a-zA-Z0-9_-]+$``, a topic over 127 or a group over 255
characters) is answered SYSTEM_ERROR with RocketMQ's text before any handler sees it. Names
become directory names under the store (``consumequeue/<topic>``, ``%RETRY%<group>``), so no
request may carry one that could leave it (``../``).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Protocol

from ...protocol import topic as tv
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand, response_for
from ...remoting import CodeDispatchProcessor as _CodeDispatch
from ...remoting import Connection

if TYPE_CHECKING:
    from ...protocol.bodies import DataVersion, TopicConfig
    from ...remoting import RemotingClient
    from ...store.config import MessageStoreConfig
    from ...store.message_store import MessageStore
    from ..config import BrokerConfig
    from ..consumer_filter import ConsumerFilterManager
    from ..consumer_manager import ConsumerManager, ProducerManager
    from ..long_polling import PullRequestHoldService
    from ..offsets import ConsumerOffsetManager
    from ..rebalance_lock import RebalanceLockManager
    from ..schedule import ScheduleMessageService
    from ..timer import TimerMessageService
    from ..stats import BrokerStatsManager, Tally
    from ..subscription_group import SubscriptionGroupManager
    from ..topic_config import TopicConfigManager
    from ..transaction import TransactionService

__all__ = ["BrokerCodeDispatchProcessor", "BrokerContext", "Handler", "check_names", "log_refusal", "refuse_bad_names"]

log = logging.getLogger("fastmq.broker")

Handler = Callable[[Connection, RemotingCommand], Any]

_TOPIC_KEYS = ("topic", "defaultTopic", "originTopic")
_GROUP_KEYS = ("consumerGroup", "group", "producerGroup", "groupName")
# SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE / SEND_REPLY_MESSAGE_V2 name their fields with one letter:
# a = producerGroup, b = topic, c = defaultTopic
_SHORT_CODES = frozenset((RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                          RequestCode.SEND_REPLY_MESSAGE_V2))
_SHORT_TOPIC_KEYS, _SHORT_GROUP_KEYS = ("b", "c") + _TOPIC_KEYS, ("a",) + _GROUP_KEYS


# Names already found legal: every pull and send names the same few, and a check costs more
# than a lookup. Bounded (emptied when full): a client inventing names must not grow them.
_LEGAL_TOPICS: set[str] = set()
_LEGAL_GROUPS: set[str] = set()
_LEGAL_MAX = 4096


def _legal(names: set[str], name: str) -> None:
    if len(names) >= _LEGAL_MAX:
        names.clear()
    names.add(name)


def legal_groups() -> set[str]:
    """The group names :func:`check_names` already found legal (one set for the broker's life,
    emptied when full): a fast path that reads only a group may take the request when its name
    is in it, and leave the rest to :func:`check_names`. Read it, never add to it."""
    return _LEGAL_GROUPS


def check_names(request: RemotingCommand) -> str | None:
    """The reason a request's header names are refused, or None.

    Blank values are left to the handlers: some fields are optional (an admin query's topic,
    UNREGISTER_CLIENT's other group) and those that are not say so in RocketMQ's words.
    """
    f = request.ext_fields
    if not f:
        return None
    short = request.code in _SHORT_CODES
    # (`key in f` first: most keys are absent, and that test is the cheapest way to skip them)
    for key in _SHORT_TOPIC_KEYS if short else _TOPIC_KEYS:
        if key not in f:
            continue
        v = f[key]
        if type(v) is str and v and v not in _LEGAL_TOPICS:
            remark = tv.validate_topic_ref(v)
            if remark is not None:
                return remark
            _legal(_LEGAL_TOPICS, v)
    for key in _SHORT_GROUP_KEYS if short else _GROUP_KEYS:
        if key not in f:
            continue
        v = f[key]
        if type(v) is str and v and v not in _LEGAL_GROUPS:
            remark = tv.validate_group(v)
            if remark is not None:
                return remark
            _legal(_LEGAL_GROUPS, v)
    return None


class BrokerContext(Protocol):
    """What processors (and the slave's sync) use of the broker; BrokerController provides it.

    Processors name this rather than the controller, which builds them: the controller imports
    its processors, never the other way round.
    """

    config: BrokerConfig
    store_config: MessageStoreConfig
    boot_timestamp: int
    store: MessageStore
    topic_config: TopicConfigManager
    subscription_groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumer_manager: ConsumerManager
    consumer_filters: ConsumerFilterManager
    producer_manager: ProducerManager
    rebalance_locks: RebalanceLockManager
    hold_service: PullRequestHoldService
    stats: BrokerStatsManager
    dlq_sends: Tally  # (group, original topic)
    tx_ends: Tally  # ("commit" | "rollback", topic)
    half_puts: Tally  # (real topic,)
    config_version: DataVersion
    schedule: ScheduleMessageService | None
    timer: TimerMessageService
    transactions: TransactionService
    client: RemotingClient

    def schedule_register(self, force: bool = False, topic: TopicConfig | None = None) -> None: ...

    async def registered(self) -> None: ...

    async def register_all(self, force: bool) -> None: ...

    def update_config(self, props: dict[str, str]) -> None: ...

    def config_text(self) -> str: ...

    def daily_totals(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]: ...


_LOG_EVERY = 10.0
_refusals = {"at": -_LOG_EVERY, "since": 0}


def refuse_bad_names(conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
    """SYSTEM_ERROR (logged) for a request naming an illegal topic or group, else None."""
    remark = check_names(request)
    if remark is None:
        return None
    log_refusal(request.code, conn.remote_addr, remark)
    return response_for(request, ResponseCode.SYSTEM_ERROR, remark)


def log_refusal(code: int, remote: str, remark: str) -> None:
    """One warning per 10 s at most (with how many were not logged): a client looping on a bad
    name, or a hostile one, must not fill the disk with log lines."""
    r = _refusals
    r["since"] += 1
    now = time.monotonic()
    if now - r["at"] >= _LOG_EVERY:
        log.warning("request %d from %s refused: %s (%d refusal(s) since the last report)",
                    code, remote, remark[:300], r["since"])
        r["at"], r["since"] = now, 0


class BrokerCodeDispatchProcessor(_CodeDispatch):
    """A broker processor: ``handlers`` maps request codes to methods that use ``self.broker``."""

    def __init__(self, broker: BrokerContext) -> None:
        super().__init__()
        self.broker = broker

    def process_request(self, conn: Connection, request: RemotingCommand) -> Any:
        refused = refuse_bad_names(conn, request)
        if refused is not None:
            extra = self.answer_fields(request)
            if extra:
                refused.ext_fields = {**(refused.ext_fields or {}), **extra}
            return refused
        return super().process_request(conn, request)

    def answer_fields(self, request: RemotingCommand) -> dict[str, str] | None:
        """Header fields every answer of this processor to ``request`` carries, refusals of a
        bad name included (4.9's send processor adds its region before it checks anything)."""
        return None
