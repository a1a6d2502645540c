"""PULL_MESSAGE, with RocketMQ 4.9's PullMessageProcessor semantics and long polling.

A pull that finds nothing and carries the suspend flag is parked in the broker's
:class:`~fastmq.broker.long_polling.PullRequestHoldService` and answered later, through
``conn.send``, when a message arrives (the store's arrival callback) or its suspend timeout ends.
Every answer carries string ``extFields`` (the C++ client ignores numbers and fails a pull
without them).
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..._ext.pull import decode_pull_header
from ..._ext.sql_filter import SqlProgram
from ...errors import FAQ_SUFFIX, FilterExpressionError, RemotingCommandError
from ...protocol import topic as tv
from ...protocol.codes import LanguageCode, RequestCode, ResponseCode
from ...protocol.command import VERSION, RemotingCommand, response_for
from ...protocol.headers import (PULL_SYSFLAG_COMMIT_OFFSET, PULL_SYSFLAG_SUBSCRIPTION, PULL_SYSFLAG_SUSPEND,
                                 PullMessageRequestHeader, PullMessageResponseHeader, declared)
from ...protocol.heartbeat import SubscriptionData, build_subscription
from ...remoting import Connection
from ...remoting.processor import failure_response
from ...store.message_store import GetResult, GetStatus
from ..config import MASTER_ID
from ..long_polling import HeldPull
from .base import BrokerCodeDispatchProcessor, refuse_bad_names

if TYPE_CHECKING:
    from .base import BrokerContext

__all__ = ["PullMessageProcessor"]

log = logging.getLogger("fastmq.broker")
# the answer's fields, checked against the PullMessageResponseHeader declaration
_SUGGEST, _NEXT, _MIN, _MAX = declared(PullMessageResponseHeader, "suggestWhichBrokerId", "nextBeginOffset", "minOffset",
                                       "maxOffset")


_JAVA = int(LanguageCode.JAVA)
_SUCCESS, _PULL_NOT_FOUND = int(ResponseCode.SUCCESS), int(ResponseCode.PULL_NOT_FOUND)
_PULL_MESSAGE = int(RequestCode.PULL_MESSAGE)
_RETRY_IMMEDIATELY = int(ResponseCode.PULL_RETRY_IMMEDIATELY)
_PERM_READ = tv.PERM_READ
# members as plain names: reading one off its Enum class costs a metaclass __getattr__ call
_FOUND, _OVERFLOW_ONE, _FOUND_NULL = GetStatus.FOUND, GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.OFFSET_FOUND_NULL
_FOUND_TEXT = _FOUND.value
_NO_MATCHED_TEXT = GetStatus.NO_MATCHED_MESSAGE.value
_RETRY_NOW = (GetStatus.MESSAGE_WAS_REMOVING, GetStatus.NO_MATCHED_MESSAGE)
_NO_QUEUE = (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE)
_MOVED = (GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.OFFSET_TOO_SMALL)


def _reply(request: RemotingCommand, code: int, remark: str, fields: dict[str, str],
           body: bytes | None = None) -> RemotingCommand:
    """``response_for`` for the answers every pull gets, whose header values are strings already."""
    return RemotingCommand(code, language=_JAVA, version=VERSION, opaque=request.opaque, flag=1, remark=remark,
                           ext_fields=fields, serialize_type=request.serialize_type, body=body)


class PullMessageProcessor(BrokerCodeDispatchProcessor):
    batches = True

    def __init__(self, broker: "BrokerContext") -> None:
        super().__init__(broker)
        self.handlers = {RequestCode.PULL_MESSAGE: self.pull_message}
        # answers of woken pulls not yet written, by connection (see flush_answers)
        self._answers: dict[Connection, list[RemotingCommand]] = {}

    def pull_message(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        return self.process(conn, request, True)

    def process_batch(self, conn: Connection, requests: list[RemotingCommand]) -> list[Any]:
        """The pulls of one socket read (a push consumer sends one per queue over one connection):
        each as :meth:`process_request` would, without the dispatcher's per-request steps; a pull
        held for long polling has no item. A failure is its own request's (logged, SYSTEM_ERROR),
        as when requests are dispatched one by one."""
        out: list[Any] = []
        for req in requests:
            try:
                if req.code != _PULL_MESSAGE:  # (no other code comes here; the general way if one did)
                    out.append((req, self.process_request(conn, req)))
                    continue
                resp = refuse_bad_names(conn, req)
                if resp is None:
                    resp = self.process(conn, req, True)
                if resp is not None:
                    out.append((req, resp))
            except Exception as exc:
                out.append((req, failure_response(conn, req, exc)))
        return out

    # ------------------------------------------------------------------ the pull
    def process(self, conn: Connection, request: RemotingCommand, allow_suspend: bool,
                h: PullMessageRequestHeader | None = None) -> RemotingCommand | None:
        """One pull (``h``: its header, when already decoded); None when it was parked for long
        polling."""
        if h is None:
            # the usual header in one compiled call; anything else the general decoder decides and names
            f = request.ext_fields
            h = decode_pull_header(f, PullMessageRequestHeader) if f else None
            if h is None:
                try:
                    h = PullMessageRequestHeader.decode(request)
                except RemotingCommandError as exc:
                    return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        b = self.broker
        cfg = b.config
        if not cfg.brokerPermission & _PERM_READ:
            return response_for(request, ResponseCode.NO_PERMISSION,
                                f"the broker[{cfg.brokerIP1}] pulling message is forbidden")
        group, topic = h.consumerGroup, h.topic
        sgc = b.subscription_groups.table.get(group)
        if sgc is None:
            sgc = b.subscription_groups.find(group)  # (made with defaults, when auto-creation is on)
        if sgc is None:
            return response_for(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group [{group}] does not exist, {FAQ_SUFFIX}")
        if not sgc.consume_enable:
            return response_for(request, ResponseCode.NO_PERMISSION,
                                f"subscription group no permission, {group}")
        sys_flag = h.sysFlag
        tc = b.topic_config.table.get(topic)
        if tc is None:
            return response_for(request, ResponseCode.TOPIC_NOT_EXIST,
                                f"topic[{topic}] not exist, apply first please! {FAQ_SUFFIX}")
        if not tc.perm & _PERM_READ:
            return response_for(request, ResponseCode.NO_PERMISSION,
                                f"the topic[{topic}] pulling message is forbidden")
        queue_id = h.queueId
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                                f"[{tc.read_queue_nums}] consumer:[/{conn.remote_addr}]")  # (Java's SocketAddress form)
        sub: SubscriptionData | None
        if sys_flag & PULL_SYSFLAG_SUBSCRIPTION:
            etype = h.expressionType or "TAG"
            if etype != "TAG":
                return self._carried_sql(conn, request, h, allow_suspend, etype)
            try:
                sub = build_subscription(topic, h.subscription, h.subVersion)
            except Exception as exc:  # noqa: BLE001 - any parse failure is the client's
                log.warning("parse the consumer's subscription[%s] failed, group: %s: %s",
                            h.subscription, group, exc)
                return response_for(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                    "parse the consumer's subscription failed")
        else:
            g = b.consumer_manager.groups.get(group)
            if g is None:
                return response_for(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                    "the consumer's group info not exist")
            if not sgc.consume_broadcast_enable and g.message_model == "BROADCASTING":
                return response_for(request, ResponseCode.NO_PERMISSION,
                                    f"the consumer group[{group}] can not consume by broadcast way")
            sub = g.subscriptions.get(topic)
            if sub is None:
                return response_for(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                    "the consumer's subscription not exist")
            if sub.sub_version < h.subVersion:
                return response_for(request, ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                    "the consumer's subscription not latest")
            if sub.expression_type and sub.expression_type != "TAG":
                return self._registered_sql(conn, request, h, allow_suspend, sub)
        codes = None if sub.subscribes_all else set(sub.code_set)
        # (the reader's, which MessageStore.get_message passes on: one call less, twice a message)
        reader = b.store.reader
        suspend = allow_suspend and sys_flag & PULL_SYSFLAG_SUSPEND
        if suspend and reader.caught_up(topic, queue_id, h.queueOffset):
            # a caught-up consumer's pull (half of all pulls of a push consumer): OFFSET_OVERFLOW_ONE,
            # which is held; the full read would build a result only to drop it
            response = None
        else:
            res = reader.get_message(group, topic, queue_id, h.queueOffset, h.maxMsgNums, codes)
            response = self._answer(request, h, res)
            if response is None and not suspend:
                response = self._not_found(request, res, h)
        if response is None:
            timeout_ms = h.suspendTimeoutMillis if cfg.longPollingEnable else cfg.shortPollingTimeMills
            request.body = None  # a pull has no use for one: not to be held for the whole wait
            wait = (timeout_ms if timeout_ms > 0 else 0) / 1000
            b.hold_service.hold(HeldPull(topic, queue_id, h.queueOffset, asyncio.get_running_loop().time() + wait,
                                         (conn, request, h), frozenset(codes) if codes else None, conn))
        if allow_suspend and sys_flag & PULL_SYSFLAG_COMMIT_OFFSET and cfg.brokerId == MASTER_ID:  # (is_master)
            b.offsets.commit(group, topic, queue_id, h.commitOffset)
        return response

    # ------------------------------------------------------------------ SQL92 subscriptions
    # Kept apart from process(), which returns into them, so that TAG subscriptions pay nothing.
    def _carried_sql(self, conn: Connection, request: RemotingCommand, h: PullMessageRequestHeader,
                     allow_suspend: bool, etype: str) -> RemotingCommand | None:
        """A pull carrying a SQL92 subscription (the Java client's postSubscriptionWhenPull)."""
        if not self.broker.config.enablePropertyFilter:
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"The broker does not support consumer to filter message by {etype}")
        try:
            program = self.broker.consumer_filters.compile(etype, h.subscription)
        except FilterExpressionError as exc:
            # (4.9.8 answers the same code when the subscription itself does not parse; a bad
            # expression it would let through unfiltered, which would be success for work not done)
            log.warning("parse the consumer's subscription[%s] failed, group: %s: %s", h.subscription,
                        h.consumerGroup, exc)
            return response_for(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                "parse the consumer's subscription failed")
        return self._read_sql(conn, request, h, allow_suspend, program)

    def _registered_sql(self, conn: Connection, request: RemotingCommand, h: PullMessageRequestHeader,
                        allow_suspend: bool, sub: SubscriptionData) -> RemotingCommand | None:
        """A pull of a consumer whose heartbeat registered a SQL92 subscription (what the Java
        client does by default): its compiled filter, or 4.9.8's FILTER_DATA_NOT_EXIST."""
        try:
            program = self.broker.consumer_filters.compile(sub.expression_type, sub.sub_string)
        except FilterExpressionError:
            return response_for(request, ResponseCode.FILTER_DATA_NOT_EXIST,
                                "The broker's consumer filter data is not exist!Your expression may be wrong!")
        if not self.broker.config.enablePropertyFilter:
            return response_for(request, ResponseCode.SYSTEM_ERROR,
                                f"The broker does not support consumer to filter message by {sub.expression_type}")
        return self._read_sql(conn, request, h, allow_suspend, program)

    def _read_sql(self, conn: Connection, request: RemotingCommand, h: PullMessageRequestHeader,
                  allow_suspend: bool, program: SqlProgram) -> RemotingCommand | None:
        """The rest of :meth:`process` for a SQL92 filter: the store evaluates ``program`` against
        each record's properties. A held pull wakes at any arrival (the filter needs the record)."""
        b = self.broker
        cfg = b.config
        topic, queue_id, sys_flag = h.topic, h.queueId, h.sysFlag
        reader = b.store.reader
        suspend = allow_suspend and sys_flag & PULL_SYSFLAG_SUSPEND
        if suspend and reader.caught_up(topic, queue_id, h.queueOffset):
            response = None
        else:
            res = reader.get_message(h.consumerGroup, topic, queue_id, h.queueOffset, h.maxMsgNums, program)
            response = self._answer(request, h, res)
            if response is None and not suspend:
                response = self._not_found(request, res, h)
        if response is None:
            timeout_ms = h.suspendTimeoutMillis if cfg.longPollingEnable else cfg.shortPollingTimeMills
            request.body = None
            wait = (timeout_ms if timeout_ms > 0 else 0) / 1000
            b.hold_service.hold(HeldPull(topic, queue_id, h.queueOffset, asyncio.get_running_loop().time() + wait,
                                         (conn, request, h), None, conn))
        if allow_suspend and sys_flag & PULL_SYSFLAG_COMMIT_OFFSET and cfg.brokerId == MASTER_ID:
            b.offsets.commit(h.consumerGroup, topic, queue_id, h.commitOffset)
        return response

    @staticmethod
    def _fields(res: GetResult) -> dict[str, str]:
        return {_SUGGEST: "0", _NEXT: str(res.next_begin_offset), _MIN: str(res.min_offset),
                _MAX: str(res.max_offset)}

    def _suggest(self, h: PullMessageRequestHeader, res: GetResult) -> int:
        """With slaveReadEnable: the group's whichBrokerWhenConsumeSlowly when what is left to
        read past this pull exceeds accessMessageInMemoryMaxRatio % of the memory (it would come
        from disk), else its brokerId (RocketMQ's isSuggestPullingFromSlave)."""
        sgc = self.broker.subscription_groups.find(h.consumerGroup)
        if sgc is None or not res.buffers:
            return MASTER_ID
        # the store judged it while reading (MessageStore.get_message, as RocketMQ's getMessage)
        return sgc.which_broker_when_consume_slowly if res.suggest_pulling_from_slave else sgc.broker_id

    def _not_found(self, request: RemotingCommand, res: GetResult, h: PullMessageRequestHeader) -> RemotingCommand:
        return _reply(request, _PULL_NOT_FOUND, res.status.value, self._fields(res))

    def _answer(self, request: RemotingCommand, h: PullMessageRequestHeader, res: GetResult) -> RemotingCommand | None:
        """The response for a store result; None for PULL_NOT_FOUND (the caller may hold it)."""
        st = res.status
        if st is _OVERFLOW_ONE or st is _FOUND_NULL:  # nothing yet: the usual pull of a caught-up consumer
            return None
        # the group's pull offset, once per answer (5.x's commitPullOffset): the in-flight and
        # ready gauges read it at scrape time
        self.broker.offsets.pulled[(h.consumerGroup, h.topic, h.queueId)] = res.next_begin_offset
        fields = self._fields(res)
        if st is _FOUND:
            self.broker.stats.group_get(h.consumerGroup, h.topic, res.msg_count, res.buffer_total_size)
            if self.broker.config.slaveReadEnable:
                fields[_SUGGEST] = str(self._suggest(h, res))
            body = b"".join(res.buffers) if len(res.buffers) != 1 else bytes(res.buffers[0])
            return _reply(request, _SUCCESS, _FOUND_TEXT, fields, body)
        if st in _RETRY_NOW:
            return response_for(request, ResponseCode.PULL_RETRY_IMMEDIATELY, st.value, fields)
        if st in _NO_QUEUE:
            if h.queueOffset != 0:
                # the store has nothing for this queue: tell the client to fix its offset
                log.info("the broker store no queue data, fix the request offset %d to %d, Topic: %s QueueId: %d "
                         "Consumer Group: %s", h.queueOffset, res.next_begin_offset, h.topic, h.queueId,
                         h.consumerGroup)
                return self._offset_moved(request, h, st, fields)
            return None
        if st in _MOVED:
            log.info("the request offset %d moved (%s), topic %s queue %d group %s, next %d", h.queueOffset,
                     st.value, h.topic, h.queueId, h.consumerGroup, res.next_begin_offset)
            return self._offset_moved(request, h, st, fields)
        return response_for(request, ResponseCode.SYSTEM_ERROR, f"store error {st.value}")

    def _offset_moved(self, request: RemotingCommand, h: PullMessageRequestHeader, st: GetStatus,
                      fields: dict[str, str]) -> RemotingCommand:
        """PULL_OFFSET_MOVED; but a slave that may not judge offsets (offsetCheckInSlave off)
        sends the consumer back to the group's broker to retry at once, as 4.9.8 does."""
        if not self.broker.store.config.corrects_offsets:
            sgc = self.broker.subscription_groups.find(h.consumerGroup)
            fields[_SUGGEST] = str(sgc.broker_id if sgc is not None else 0)
            return response_for(request, ResponseCode.PULL_RETRY_IMMEDIATELY, st.value, fields)
        return response_for(request, ResponseCode.PULL_OFFSET_MOVED, st.value, fields)

    # ------------------------------------------------------------------ long polling
    def wake(self, held: HeldPull, timed_out: bool) -> bool:
        """Re-run a held pull; True when it was answered (the hold service's callback). The answer
        waits for :meth:`flush_answers`, which the hold service calls after each round of wakes."""
        ctx: tuple[Connection, RemotingCommand, PullMessageRequestHeader] | None = held.context
        if ctx is None:
            return True
        conn, request, h = ctx
        if conn.closed:
            return True
        resp = self.process(conn, request, False, h)
        if resp is None:  # cannot happen with allow_suspend=False; be safe
            return False
        code = resp.code
        if code != _SUCCESS and not timed_out:
            if code == _PULL_NOT_FOUND:
                return False
            if code == _RETRY_IMMEDIATELY and resp.remark == _NO_MATCHED_TEXT and resp.ext_fields:
                # A filter (SQL92 above all: every arrival wakes it) took none of what arrived: the
                # pull stays held from past it, and answers when a message it takes arrives or its
                # time is up, as 4.9.8's hold service, which wakes such a pull only for a match.
                h.queueOffset = held.offset = int(resp.ext_fields[_NEXT])
                return False
        waiting = self._answers.get(conn)
        if waiting is None:
            self._answers[conn] = [resp]
        else:
            waiting.append(resp)
        return True

    def flush_answers(self) -> None:
        """Write the answers of the pulls woken since the last call: one write per connection."""
        answers, self._answers = self._answers, {}
        for conn, responses in answers.items():
            conn.send_many(responses)
