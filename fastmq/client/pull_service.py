"""The long-polling pull loop of each queue (RocketMQ's PullMessageService with the pulling half
of DefaultMQPushConsumerImpl and PullAPIWrapper).

One loop per process queue: 32 messages a pull, held by the broker up to 15 s; paused while the
queue holds more than ``pull_threshold_for_queue`` unconsumed messages; tags filtered again here
(the broker filters by hash code only); a retried message's topic restored. A compressed body is
inflated on its way to the listener (``inflated``), not here.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import time
import zlib
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .._ext.pull import usual_longs
from ..errors import FastMQError, RemotingConnectError
from ..protocol.bodies import MASTER_ID
from ..protocol.codes import ResponseCode
from ..protocol.command import RemotingCommand, ext_int
from ..protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader, declared
from ..protocol.heartbeat import SubscriptionData
from ..protocol.message import MAX_INFLATED_BODY, MessageConst, MessageExt, MessageSysFlag, inflate_body
from ..protocol.message_queue import MessageQueue
from ..protocol.topic import retry_topic
from .process_queue import ProcessQueue
from .pull_body import decode_pull_body

if TYPE_CHECKING:
    from .instance import ClientInstance
    from .offset_store import OffsetStore

__all__ = ["PullService", "MAX_INFLATED_BODY", "inflate_body", "inflated"]

log = logging.getLogger("fastmq.client")

PULL_SUSPEND_MS = 15_000          # brokerSuspendMaxTimeMillis
PULL_TIMEOUT_MS = 30_000          # consumerTimeoutMillisWhenSuspend
PULL_DELAY_ON_ERROR_S = 3.0       # pullTimeDelayMillsWhenException
PULL_DELAY_FLOW_CONTROL_S = 0.05
# While a queue reads a slave for want of its master: how often its route is asked for, and how
# long the slave may hold a pull, so the consumer is back on the master seconds after it returns
SLAVE_ROUTE_REFRESH_S = 2.0
SLAVE_SUSPEND_MS = 2_000
_SYSFLAG_COMMIT, _SYSFLAG_SUSPEND, _SYSFLAG_SUBSCRIPTION = 1, 2, 4
# the pull header's wire names, from its declaration (a rename there fails here, at import)
(_H_GROUP, _H_TOPIC, _H_QUEUE_ID, _H_QUEUE_OFFSET, _H_MAX_NUMS, _H_SYSFLAG, _H_COMMIT, _H_SUSPEND, _H_SUB,
 _H_SUB_VERSION, _H_EXPR_TYPE) = declared(
    PullMessageRequestHeader, "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
    "commitOffset", "suspendTimeoutMillis", "subscription", "subVersion", "expressionType")
_R_SUGGEST, _R_NEXT_BEGIN = declared(PullMessageResponseHeader, "suggestWhichBrokerId", "nextBeginOffset")
_SYSFLAG_WITH_COMMIT = str(_SYSFLAG_SUSPEND | _SYSFLAG_SUBSCRIPTION | _SYSFLAG_COMMIT)
_SYSFLAG_WITHOUT_COMMIT = str(_SYSFLAG_SUSPEND | _SYSFLAG_SUBSCRIPTION)
# the answer codes as plain ints: an IntEnum member's load and compare cost ~1,300 instructions
_SUCCESS, _OFFSET_MOVED, _NOT_FOUND, _RETRY_IMMEDIATELY = (int(c) for c in (
    ResponseCode.SUCCESS, ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY))


class _Pull:
    """A PULL_MESSAGE on its way: the future of its answer, where it went, and how to take it back."""

    __slots__ = ("answer", "addr", "suggested", "conn", "opaque", "started")

    def __init__(self, answer: "asyncio.Future[RemotingCommand]", addr: str, suggested: int,
                 conn: Any = None, opaque: int = 0) -> None:
        # (PullService._start_pull makes its pulls without this call: keep the two in step)
        self.answer, self.addr, self.suggested, self.conn, self.opaque = answer, addr, suggested, conn, opaque
        self.started = time.monotonic()  # for the pull's response time (consumer stats)

    def cancel(self) -> None:
        """Forget the answer (opaques are unique: the pending entry is ours)."""
        if self.conn is not None:
            # a suspended pull is answered later anyway (a message, or the suspend timeout)
            self.conn.abandon(self.opaque)
        self.answer.cancel()


_new_pull = object.__new__


def _unwrap(m: MessageExt, group: str) -> MessageExt:
    """What a listener sees: the original topic of a retried message, an inflated body."""
    if m.sys_flag & MessageSysFlag.COMPRESSED:
        try:
            m.body = inflate_body(m.body)
        except zlib.error:
            log.warning("message %s says compressed but does not inflate; delivered as is", m.msg_id)
        except ValueError as exc:
            log.warning("message %s %s; delivered as is (compressed)", m.msg_id, exc)
    real = m.properties.get(MessageConst.RETRY_TOPIC)
    if real and m.topic == retry_topic(group):
        m.topic = real
    return m


def _unwrap_all(msgs: list[MessageExt], group: str, retry: bool) -> bool:
    """A pull answer's messages as the process queue keeps them: a retried message's topic
    restored, in place (``retry``: they come from the group's retry topic, the only ones that
    carry RETRY_TOPIC to restore); True when one is compressed.

    Bodies stay compressed here: the queue's budget (``pull_threshold_size_for_queue``) counts
    the bytes it holds, and a compressed body is inflated only when it is handed to a listener or
    returned by ``poll`` (:func:`inflated`). Inflating a whole answer here took a consumer to
    gigabytes: the broker caps an answer by its wire bytes, and 32 bodies of a few KiB can
    inflate to 16 MiB each. A plain answer costs one flag test per message, as before."""
    if retry:
        for m in msgs:
            real = m.properties.get(MessageConst.RETRY_TOPIC)
            if real and m.topic == retry_topic(group):
                m.topic = real
    for m in msgs:
        if m.sys_flag & _COMPRESSED:
            return True
    return False


def inflated(batch: list[MessageExt]) -> list[MessageExt]:
    """``batch`` as a listener sees it: each compressed message replaced by a copy with its body
    inflated (``_unwrap``), the others as they are. The process queue keeps the messages as they
    came, so what it counts against its budget, and takes off at commit, does not change."""
    if not any(m.sys_flag & _COMPRESSED for m in batch):
        return batch
    return [_inflate_copy(m) if m.sys_flag & _COMPRESSED else m for m in batch]


def _inflate_copy(m: MessageExt) -> MessageExt:
    c = copy.copy(m)
    if c.sys_flag & MessageSysFlag.COMPRESSED:
        try:
            c.body = inflate_body(c.body)
        except zlib.error:
            log.warning("message %s says compressed but does not inflate; delivered as is", m.msg_id)
        except ValueError as exc:
            log.warning("message %s %s; delivered as is (compressed)", m.msg_id, exc)
    return c


_COMPRESSED = int(MessageSysFlag.COMPRESSED)


class PullService:
    """The pull loops of a consumer's process queues; a part of the consumer (a mixin), which
    provides the attributes declared here."""

    group: str
    instance: ClientInstance
    subscriptions: dict[str, SubscriptionData]
    offset_store: OffsetStore
    message_model: str
    pull_batch_size: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    pull_from_which: dict[MessageQueue, int]
    _running: bool
    _commit: Callable[[ProcessQueue, Sequence[MessageExt]], None]
    _deliver: Callable[[ProcessQueue, list[MessageExt]], Any]
    _delivers_inline: bool  # True when _deliver runs the listener itself, False when it hands off
    _hand_off: Callable[[ProcessQueue, list[MessageExt]], None]
    _hands_off: bool  # True when _hand_off takes the answers (a plain listener's consume threads), not _deliver

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        mq = pq.mq
        sub = self.subscriptions.get(mq.topic)
        # (the client's tag check, as PullAPIWrapper: only for tags; a SQL92 subscription has none)
        wanted = None if sub is None or sub.subscribes_all or not sub.tags_set else set(sub.tags_set)
        group = self.group
        from_retry = mq.topic == retry_topic(group)
        # the header fields no pull of this queue changes, stringified once (as create_request would)
        template = {_H_GROUP: group, _H_TOPIC: mq.topic, _H_QUEUE_ID: str(mq.queue_id), _H_QUEUE_OFFSET: "",
                    _H_MAX_NUMS: str(self.pull_batch_size), _H_SYSFLAG: "", _H_COMMIT: "",
                    _H_SUSPEND: str(PULL_SUSPEND_MS), _H_SUB: sub.sub_string if sub else "*",
                    _H_SUB_VERSION: str(sub.sub_version if sub else 0),
                    _H_EXPR_TYPE: sub.expression_type if sub and sub.expression_type else "TAG"}
        # the broker id the answers suggest: kept here and in pull_from_which (written when it
        # changes), read by _start_pull from the process queue
        pq.pull_from = suggested = self.pull_from_which.get(mq, MASTER_ID)
        pull: _Pull | float | None = None
        try:
            while not pq.dropped and self._running:
                if pull is None:
                    pull = self._start_pull(pq, template)
                if isinstance(pull, float):
                    await asyncio.sleep(pull)
                    pull = None
                    continue
                started, pull = pull, None
                try:
                    resp = await started.answer
                except asyncio.CancelledError:
                    started.cancel()
                    raise
                except RemotingConnectError as exc:
                    log.warning("pull %s from %s failed: %s", mq, started.addr, exc)
                    self.instance.mark_unreachable(started.addr)
                    self.instance.refresh_route_soon(mq.topic)  # a master back, a broker gone: learn it now
                    other, _ = self.instance.find_broker_addr_in_subscribe(mq.broker_name, started.suggested)
                    if other is None or other == started.addr:
                        await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                    continue  # another broker of the name (a slave) takes the next pull at once
                except FastMQError as exc:
                    log.warning("pull %s failed: %s", mq, exc)
                    await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                    continue
                # both numbers in one compiled call when in the usual form (ext_int was ~5,000
                # instructions each), else Long.parseLong's rules and errors through ext_int
                numbers = usual_longs(resp.ext_fields, _R_SUGGEST, _R_NEXT_BEGIN)
                if numbers is None:
                    suggest = ext_int(resp, _R_SUGGEST, MASTER_ID)
                    next_offset = ext_int(resp, _R_NEXT_BEGIN, pq.next_offset)
                    if suggest is None:
                        suggest = MASTER_ID
                else:
                    suggest, next_offset = numbers
                if suggest != suggested:
                    self.pull_from_which[mq] = pq.pull_from = suggested = suggest
                code = resp.code
                if code == _SUCCESS:
                    body = resp.body
                    msgs = decode_pull_body(body) if body else []
                    if _unwrap_all(msgs, group, from_retry):
                        pq.has_compressed = True  # its batches are inflated on their way to the listener
                    if wanted is not None:
                        msgs = [m for m in msgs if m.tags in wanted]
                    c = pq.counters
                    c.pulls += 1
                    c.pull_rt_ms += int((time.monotonic() - started.started) * 1000)
                    c.pulled += len(msgs)
                    if msgs:
                        pq.put(msgs)
                        if next_offset is not None:
                            pq.next_offset = next_offset
                        if self._hands_off:
                            # to the consume threads, synchronously (no coroutine per answer):
                            # made first, the listener's thread wakes while the next pull is written
                            self._hand_off(pq, msgs)
                            nxt = self._start_pull(pq, template)
                            pull = None if isinstance(nxt, float) else nxt  # flow control: checked again after
                        elif self._delivers_inline:
                            # RocketMQ's order: the batch is in the process queue, the next pull
                            # leaves now, then the batch goes to the listener; pulling only after
                            # the listener had run left the broker without this queue's pull meanwhile.
                            nxt = self._start_pull(pq, template)
                            pull = None if isinstance(nxt, float) else nxt
                            await self._deliver(pq, msgs)
                        else:
                            # a hand-off (a task, a queue) returns at once: made first, as above
                            await self._deliver(pq, msgs)
                            nxt = self._start_pull(pq, template)
                            pull = None if isinstance(nxt, float) else nxt
                        continue
                    if next_offset is not None and next_offset > pq.next_offset:
                        # the whole batch was filtered out here: move the committed offset past it
                        self._commit(pq, [])
                        if not pq.msgs:
                            pq.max_seen = max(pq.max_seen, next_offset - 1)
                            self.offset_store.update(mq, next_offset, increase_only=True)
                elif code == _OFFSET_MOVED:
                    log.warning("the pull request offset illegal, %s offset %d -> %s", mq, pq.next_offset, next_offset)
                    if next_offset is not None:
                        self.offset_store.update(mq, next_offset)
                elif code != _NOT_FOUND and code != _RETRY_IMMEDIATELY:
                    log.warning("pull %s answered %d %s", mq, code, resp.remark)
                    await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                    continue
                if next_offset is not None:
                    pq.next_offset = next_offset
        finally:
            if isinstance(pull, _Pull):  # a pull already written for a queue now dropped or stopped
                pull.cancel()

    def _start_pull(self, pq: ProcessQueue, template: dict[str, str]) -> _Pull | float:
        """The queue's next PULL_MESSAGE, written now; or how long to wait first (flow control, or
        no broker address for the queue)."""
        if len(pq.msgs) > self.pull_threshold_for_queue or pq.size_bytes > self.pull_threshold_size_for_queue:
            return PULL_DELAY_FLOW_CONTROL_S
        mq = pq.mq
        # the broker id the last answer suggested (RocketMQ's pullFromWhichNodeTable), else a
        # slave of the name when the master is gone from the route or unreachable
        suggested = pq.pull_from
        addr, is_slave = self.instance.find_broker_addr_in_subscribe(mq.broker_name, suggested)
        if addr is None:
            return PULL_DELAY_ON_ERROR_S
        slave_for_master = is_slave and suggested == MASTER_ID
        if slave_for_master:
            # reading a slave only because the master is gone: learn of its return within a few
            # seconds rather than at the 30 s route poll (one NameServer request per topic at most)
            self.instance.refresh_route_soon(mq.topic, SLAVE_ROUTE_REFRESH_S)
        pq.pulling_from = addr
        pq.last_pull_time = time.time()
        commit = self.offset_store.table.get(mq, -1) if self.message_model == "CLUSTERING" else -1
        fields = template.copy()
        fields[_H_QUEUE_OFFSET] = str(pq.next_offset)
        if slave_for_master:
            fields[_H_SUSPEND] = str(SLAVE_SUSPEND_MS)  # a held pull would pin us there
        if commit > 0:
            fields[_H_SYSFLAG] = _SYSFLAG_WITH_COMMIT
            fields[_H_COMMIT] = str(commit)
        else:
            fields[_H_SYSFLAG] = _SYSFLAG_WITHOUT_COMMIT
            fields[_H_COMMIT] = "0"
        # written and flushed at once, no timer of its own (see ClientAPI.pull_message)
        fut, conn, opaque = self.instance.api.pull_message(addr, fields, PULL_TIMEOUT_MS)
        # _Pull(...) as its __init__ would make it, without the call: in 3.11 a class call runs
        # __init__ through slot_tp_init and a frame of its own (~2,000 instructions a pull)
        p = _new_pull(_Pull)
        p.answer, p.addr, p.suggested, p.conn, p.opaque = fut, addr, suggested, conn, opaque
        p.started = time.monotonic()
        return p
