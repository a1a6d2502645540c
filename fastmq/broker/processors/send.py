"""SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK.

The checks and remarks follow RocketMQ 4.9's AbstractSendMessageProcessor.msgCheck and
SendMessageProcessor: broker permission, topic name, topics no client may write, auto-creation
from the default topic, queue id range, topic permission, and the retry-topic-to-DLQ rule.
Every SUCCESS answer carries string ``extFields`` (the C++ client crashes without them).
"""
from __future__ import annotations

import logging
import random
import time
from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Awaitable, Iterable

import numpy as np

from ..._ext.send import answer_template, binary_answer_template, encode_answers, encode_sends
from ..._ext.send_batch import COLUMNS, SendBatch
from ...errors import FAQ_SUFFIX, RemotingCommandError
from ...protocol import topic as tv
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand, response_for
from ...protocol.headers import (SEND_FIELDS, ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader,
                                 SendMessageResponseHeader, declared, decode_send_header, in_int_range,
                                 in_long_range, java_number, send_wire_names)
from ...protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from ...protocol.message import (MessageConst, MessageExt, MessageFormatError, MessageSysFlag, decode_batch_body,
                                 decode_properties, pack_host)
from ...remoting import Connection
from ...remoting.processor import Gathered
# Sends run eagerly: on an ASYNC_FLUSH store a send never waits, so its response joins the
# other responses of the same socket read (one write) instead of costing a Task; a SYNC_FLUSH
# send waits for the group commit and is finished by the dispatcher's Task.
from ...remoting.loop import run_eagerly
from ...store.message_store import PUT_OK, PutResult, PutStatus
from ..stats import TOPIC_PUT_NUMS
from ..timer import check_timer_message
from .base import BrokerCodeDispatchProcessor, log_refusal

if TYPE_CHECKING:
    from .base import BrokerContext
    from ...protocol.bodies import TopicConfig

__all__ = ["SendMessageProcessor", "parse_addr", "PUT_STATUS_CODES"]

log = logging.getLogger("fastmq.broker")

_UNIT_SUB_FLAG = 0x2          # TopicSysFlag unit-subscription bit
_DLQ_NUMS_PER_GROUP = 1
_V3_4_9 = 109                 # MQVersion.Version.V3_4_9.ordinal(): clients from here send maxReconsumeTimes
_MULTI_TAG = "MULTI_TAG"
_TX_MASK = 0xC                # MessageSysFlag's transaction bits
_GOOD_GROUPS_MAX = 4096       # bound of the fast path's producer group cache

#: How a store outcome is answered (SendMessageProcessor.handlePutMessageResult).
PUT_STATUS_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
#: (CLUSTER property, msgId prefix, JSON answer template, binary answer template)
_Consts = tuple[bytes, bytes, tuple[bytes, bytes, bytes, bytes, bytes], tuple[bytes, bytes, bytes, bytes, bytes, bytes]]
#: (store host, size limit, CLUSTER property, msgId prefix, JSON and binary answer templates,
#: the half topic when halves take the fast path)
_FastState = tuple[bytes, int, bytes, bytes, tuple[bytes, bytes, bytes, bytes, bytes],
                   tuple[bytes, bytes, bytes, bytes, bytes, bytes], str | None]
_C_REQ, _C_QID, _C_QOFF, _C_PHYS, _C_KEY = (COLUMNS.index(c) for c in ("req", "queue_id", "queue_offset",
                                                                         "commit_log_offset", "key"))


def parse_addr(addr: str) -> tuple[str, int]:
    """``"ip:port"`` -> ``(ip, port)``; anything unparsable becomes port 0 (born host is informative)."""
    host, _, port = addr.rpartition(":")
    try:
        return (host or addr).strip("[]"), int(port)
    except ValueError:
        return addr, 0


# fast_send_header reads the fields by position, in the declaration's order: the first
# _FAST_FIELDS of them; a request carrying a field declared after those (RocketMQ appends new
# ones) takes the generic decoder, so declaring a field needs no edit here
_WIRE_V1, _WIRE_V2 = send_wire_names(SEND_FIELDS)
_FAST_FIELDS = 14
_LATER_V1, _LATER_V2 = _WIRE_V1[_FAST_FIELDS:], _WIRE_V2[_FAST_FIELDS:]
_I_GROUP, _I_TOPIC = SEND_FIELDS.index("producerGroup"), SEND_FIELDS.index("topic")
#: the object _fast_state hands the fast path, and so the one its batches' keys hold
_HALF_TOPIC = tv.TRANS_HALF_TOPIC
_MSG_ID, _QUEUE_ID, _QUEUE_OFFSET = declared(SendMessageResponseHeader, "msgId", "queueId", "queueOffset")


def _true(raw: str | None) -> bool:
    return raw is not None and raw.strip().lower() == "true"


def fast_send_header(request: RemotingCommand) -> SendMessageRequestHeader:
    """decode_send_header without its per-field generic machinery (the send hot path).

    Any field it cannot take as is sends the request through decode_send_header, whose error
    names the field. One liberty: SEND_MESSAGE's ``batch`` also accepts ``"1"``, which is how
    the C++ client marks a batch (Java's parseBoolean would read it as false and store the
    batch encoding as one message body).
    """
    f = request.ext_fields
    v1 = request.code == RequestCode.SEND_MESSAGE
    w = _WIRE_V1 if v1 else _WIRE_V2
    try:
        if f is None:
            raise ValueError  # no fields at all: the generic decoder says which one is missing
        later = _LATER_V1 if v1 else _LATER_V2
        if later and not f.keys().isdisjoint(later):
            raise ValueError  # a field this reader does not know by position
        j, l, b = f.get(w[9]), f.get(w[11]), f.get(w[12])
        n = java_number
        h = SendMessageRequestHeader(f[w[0]], f[w[1]], f[w[2]], n(f[w[3]]), n(f[w[4]]), n(f[w[5]]),
                                     n(f[w[6]]), n(f[w[7]]), f.get(w[8]), None if j is None else n(j),
                                     _true(f.get(w[10])), None if l is None else n(l), _true(b), f.get(w[13]))
        if not (in_int_range(h.defaultTopicQueueNums, h.queueId, h.sysFlag, h.flag, h.reconsumeTimes or 0,
                             h.maxReconsumeTimes or 0) and in_long_range(h.bornTimestamp)):
            raise ValueError  # the generic decoder names the field
    except (KeyError, ValueError, TypeError, AttributeError):
        h = decode_send_header(request)
        b = (request.ext_fields or {}).get(w[12])
    if b is not None and b.strip() == "1" and request.code == RequestCode.SEND_MESSAGE:
        h.batch = True
    return h


class _Reject(Exception):
    """A check failed: carries the response code and remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


_FAST_CODES = frozenset((RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE))


async def _waited(pending: Awaitable[PutResult]) -> PutResult:
    """The outcome of a put's flush or slave wait; a wait that raised (a bug: the store answers
    its own failures as statuses) becomes UNKNOWN_ERROR, so each of its requests is still
    answered, SYSTEM_ERROR with the error's text, as RocketMQ's remoting server answers a
    processor that threw. The records were stored: a client that sends again may store a copy."""
    try:
        return await pending
    except Exception as exc:
        log.exception("waiting for a stored batch's flush or slave failed")
        return PutResult(PutStatus.UNKNOWN_ERROR, remark=f"{type(exc).__name__}: {exc}" if str(exc)
                         else type(exc).__name__)


class SendMessageProcessor(BrokerCodeDispatchProcessor):
    batches = True

    def __init__(self, broker: "BrokerContext") -> None:
        super().__init__(broker)
        eager_send = lambda conn, req: run_eagerly(self.send_message(conn, req))  # noqa: E731
        eager_back = lambda conn, req: run_eagerly(self.consumer_send_msg_back(conn, req))  # noqa: E731
        self.handlers = {RequestCode.SEND_MESSAGE: eager_send,
                         RequestCode.SEND_MESSAGE_V2: eager_send,
                         RequestCode.SEND_BATCH_MESSAGE: eager_send,
                         RequestCode.CONSUMER_SEND_MSG_BACK: eager_back}
        # The fast path's view of the topic table: topic -> (queue id bound, write queue nums,
        # sys flag bits), for topics that passed _msg_check; rebuilt when the table or the
        # broker permission changes.
        self._fast_topics: dict[str, tuple[int, int, int]] = {}
        self._fast_version: tuple[int, int, int] | None = None
        self._rr = random.randrange(1 << 16)
        # (CLUSTER property, msgId prefix, JSON and binary answer templates): fixed for the
        # broker's life, made once
        self._consts: _Consts | None = None
        self._store_host: bytes | None = None
        # producer groups that passed the name gate: the fast path takes no other (encode_sends)
        self._good_groups: set[str] = set()
        # _fast_state's tuple, and the topic-table version and permission it was made under
        # (_fast_dv None: never made, or dropped by config_changed). _fast None under a current
        # version means refused (a read-only broker, an IPv6 store host): not worth asking again
        # until one of them changes
        self._fast: _FastState | None = None
        self._fast_dv: Any = None
        self._fast_counter = -1
        self._fast_perm = -1

    # ------------------------------------------------------------------ the batch fast path
    def process_batch(self, conn: Connection, requests: list[RemotingCommand]) -> list[Any]:
        """Answer a run of requests from one socket read (see ``Dispatcher.dispatch``).

        SEND requests the compiled encoder takes as they are (:mod:`fastmq._ext.send`) are
        stored with one :meth:`MessageStore.put_batch` and answered with one buffer of frames;
        the rest (and CONSUMER_SEND_MSG_BACK) go through :meth:`process_request` one by one.
        """
        born = conn.attrs.get("born_packed", b"")
        if born == b"":
            born = self._born_host(conn)
        b = self.broker
        fast = self._fast_state()
        if born is None or fast is None:
            return [(req, self.process_request(conn, req)) for req in requests]
        store_host, max_size, cluster_prop, prefix, template, binary, half_topic = fast
        batch = encode_sends(requests, self._fast_topics, born, store_host, cluster_prop, max_size, self._rr,
                             groups=self._good_groups, binary=True, half_topic=half_topic)
        self._rr = batch.rr & 0x3FFFFFFF
        out: list[Any] = []
        if batch.n:
            res = b.store.put_batch_now(batch)
            if not isinstance(res, PutResult):  # a flush or slave wait: begun now, to join this turn's group commit
                res = run_eagerly(res)
            if type(res) is PutResult and res.status is PUT_OK:
                # (the common answer, without _batch_answers's other cases)
                self._count_puts(batch, requests)
                out.append(encode_answers(batch, requests, prefix, template, binary_template=binary))
            elif isinstance(res, PutResult):
                answers = self._batch_answers(batch, requests, res)
                if type(answers) is list:  # one (request, response) pair per request, not frames
                    out.extend(answers)
                else:
                    out.append(answers)
            else:
                out.append(self._finish_batch(batch, requests, res))
        if not batch.slow:
            return out
        for i in batch.slow:
            req = requests[i]
            out.append((req, self.process_request(conn, req)))
            if req.code in _FAST_CODES:
                self._learn_topic(req)
        return out

    async def _finish_batch(self, batch: SendBatch, requests: list[RemotingCommand], pending: Any) -> Any:
        return self._batch_answers(batch, requests, await _waited(pending))

    # ------------------------------------------------------------------ gathered from several connections
    gathers = True

    def process_gathered(self, parts: list[tuple[Connection, list[RemotingCommand]]]) -> Gathered:
        """The sends several connections made in one loop turn: one :meth:`MessageStore.put_batch`
        for all that the fast path takes, then each connection's answers in one buffer.

        Many producers with one send in flight each (RocketMQ's benchmark Producer) otherwise
        pay the store's and this processor's fixed cost once per message.
        """
        if len(parts) == 1:  # one connection read this turn (one send in flight, say)
            conn, reqs = parts[0]
            return [(conn, self.process_batch(conn, reqs))], None
        fast = self._fast_state()
        if fast is None:
            return [(conn, self.process_batch(conn, reqs)) for conn, reqs in parts], None
        ready: list[tuple[Connection, list[Any]]] = []
        requests: list[RemotingCommand] = []
        borns: list[bytes] = []
        owners: list[tuple[Connection, int, int]] = []  # each connection's slice of ``requests``
        for conn, reqs in parts:
            born = self._born_host(conn)
            if born is None:  # (an IPv6 peer: the long way, see _born_host)
                ready.append((conn, self.process_batch(conn, reqs)))
                continue
            owners.append((conn, len(requests), len(requests) + len(reqs)))
            requests += reqs
            borns += [born] * len(reqs)
        if len(owners) <= 1:
            ready += [(conn, self.process_batch(conn, requests)) for conn, _, _ in owners]
            return ready, None
        store_host, max_size, cluster_prop = fast[:3]
        store = self.broker.store
        batch = encode_sends(requests, self._fast_topics, borns[0], store_host, cluster_prop, max_size, self._rr,
                             groups=self._good_groups, born_hosts=borns, binary=True, half_topic=fast[6])
        self._rr = batch.rr & 0x3FFFFFFF
        per: list[list[Any]] = [[] for _ in owners]
        later: Awaitable[list[tuple[Connection, list[Any]]]] | None = None
        if batch.n:
            res = store.put_batch_now(batch)
            if not isinstance(res, PutResult):  # a flush or slave wait: begun now, to join this turn's group commit
                res = run_eagerly(res)
            if isinstance(res, PutResult):
                for k, answers in enumerate(self._split_answers(batch, requests, owners, res)):
                    per[k] += answers
            else:
                later = self._finish_gathered(batch, requests, owners, res)
        if batch.slow:
            starts = [lo for _, lo, _ in owners]
            for i in batch.slow:
                k = bisect_right(starts, i) - 1
                req = requests[i]
                per[k].append((req, self.process_request(owners[k][0], req)))
                if req.code in _FAST_CODES:
                    self._learn_topic(req)
        ready += [(owners[k][0], items) for k, items in enumerate(per)]
        return ready, later

    async def _finish_gathered(self, batch: SendBatch, requests: list[RemotingCommand],
                               owners: list[tuple[Connection, int, int]],
                               pending: Any) -> list[tuple[Connection, list[Any]]]:
        per = self._split_answers(batch, requests, owners, await _waited(pending))
        return [(owners[k][0], answers) for k, answers in enumerate(per)]

    def _split_answers(self, batch: SendBatch, requests: list[RemotingCommand],
                       owners: list[tuple[Connection, int, int]], res: PutResult) -> list[list[Any]]:
        """:meth:`_batch_answers` of a gathered batch, one list per connection in ``owners``."""
        per: list[list[Any]] = [[] for _ in owners]
        if res.status is PUT_OK:
            self._count_puts(batch, requests)
            _, prefix, template, binary = self._fast_consts()
            for k, (_, lo, hi) in enumerate(owners):
                frames = encode_answers(batch, requests, prefix, template, lo=lo, hi=hi, binary_template=binary)
                if frames:
                    per[k].append(frames)
            return per
        owner_of = {id(req): k for k, (_, lo, hi) in enumerate(owners) for req in requests[lo:hi]}
        for pair in self._batch_answers(batch, requests, res):  # (request, response) pairs here
            per[owner_of[id(pair[0])]].append(pair)
        return per

    def _batch_answers(self, batch: SendBatch, requests: list[RemotingCommand], res: PutResult) -> Any:
        """One buffer of SUCCESS frames, or a response per request when the store said no."""
        if not res.ok:
            return [(requests[i], self._respond(requests[i], res, 0)) for i in batch.fast]
        self._count_puts(batch, requests)
        if res.status is not PUT_OK:
            return self._stored_answers(batch, requests, res)
        _, prefix, template, binary = self._fast_consts()
        return encode_answers(batch, requests, prefix, template, binary_template=binary)

    def _count_puts(self, batch: SendBatch, requests: list[RemotingCommand]) -> None:
        """TOPIC_PUT_NUMS: each topic's messages and requests in this batch (statsAll's InTPS);
        and the halves among them per real topic (the half topic's key holds the very object
        the fast path was given: one identity test a batch for plain sends)."""
        stats = self.broker.stats
        topic = batch.keys[0][0]
        if len(batch.keys) == 1 or all(t == topic for t, _ in batch.keys):
            # one topic (one queue, or sends to its queues gathered from many connections)
            stats.add(TOPIC_PUT_NUMS, topic, batch.n, len(batch.fast))
            if topic is _HALF_TOPIC:
                self._count_halves(requests, batch.fast)
            return
        cols = batch.cols  # (a view made per call: only when several topics need the columns)
        keys = cols[:, _C_KEY]
        msgs = np.bincount(keys, minlength=len(batch.keys))
        _, first = np.unique(cols[:, _C_REQ], return_index=True)  # a request's records share one queue
        calls = np.bincount(keys[first], minlength=len(batch.keys))
        for k, (topic, _qid) in enumerate(batch.keys):  # (a topic's queues add up in its item)
            stats.add(TOPIC_PUT_NUMS, topic, int(msgs[k]), int(calls[k]))
            if topic is _HALF_TOPIC:
                self._count_halves(requests, [int(i) for i in np.unique(cols[keys == k, _C_REQ])])

    def _count_halves(self, requests: list[RemotingCommand], which: Iterable[int]) -> None:
        """rocketmq_half_messages' part: a half stored, per real topic (its request's topic)."""
        tally = self.broker.half_puts
        for i in which:
            req = requests[i]
            topic = (req.ext_fields or {}).get((_WIRE_V1 if req.code == RequestCode.SEND_MESSAGE else _WIRE_V2)[_I_TOPIC])
            if type(topic) is str:
                tally.count(topic)

    def _stored_answers(self, batch: SendBatch, requests: list[RemotingCommand], res: PutResult) -> Any:
        """Stored but not SUCCESS (a flush or SYNC_MASTER wait that failed): RocketMQ still gives
        each request its msgId, queueId and queueOffset, under the status's code."""
        prefix = self.broker.store.msg_id_prefix
        cols = batch.cols
        out: list[Any] = []
        for i in batch.fast:
            rows = cols[cols[:, _C_REQ] == i]
            if not len(rows):
                continue
            one = PutResult(res.status, ",".join(f"{prefix}{int(p):016X}" for p in rows[:, _C_PHYS]),
                            int(rows[0, _C_QOFF]), remark=res.remark)
            out.append((requests[i], self._respond(requests[i], one, int(rows[0, _C_QID]))))
        return out

    def _born_host(self, conn: Connection) -> bytes | None:
        packed: bytes | None = conn.attrs.get("born_packed", b"")
        if packed == b"":
            born = conn.attrs.get("born_host")
            if born is None:
                born = conn.attrs["born_host"] = parse_addr(conn.remote_addr)
            try:
                packed = pack_host(*born)
            except MessageFormatError:
                packed = None
            if packed is not None and len(packed) != 8:
                packed = None  # IPv6 peers take the long way (the fast encoder writes IPv4 hosts)
            conn.attrs["born_packed"] = packed
        return packed

    def _fast_store_host(self) -> bytes | None:
        if self._store_host is None:
            packed = pack_host(*self.broker.store.store_host)
            self._store_host = packed if len(packed) == 8 else b""
        return self._store_host or None

    def config_changed(self) -> None:
        """The broker's configuration changed (UPDATE_BROKER_CONFIG): drop what was derived from it."""
        self._consts = None
        self._fast_version = None
        self._fast = None
        self._fast_dv = None

    def _fast_state(self) -> _FastState | None:
        """What the fast path needs on every call, made once: the store host, the size limit,
        the CLUSTER property, the answer templates and the half topic; None when the fast path cannot run (an
        IPv6 store host, or a broker without write permission, whose sends the per-request path
        refuses with 4.9's remark). The topic cache is cleared here when the topic table or the
        broker permission changed."""
        dv = self.broker.topic_config.data_version
        perm = self.broker.config.brokerPermission
        if dv is not self._fast_dv or dv.counter != self._fast_counter or perm != self._fast_perm:
            self._refresh_fast_topics()
            self._fast_dv, self._fast_counter, self._fast_perm = dv, dv.counter, perm
            store_host = self._fast_store_host()
            if store_host is None or not perm & tv.PERM_WRITE:
                self._fast = None
                return None
            cfg = self.broker.store.config
            cluster_prop, prefix, template, binary = self._fast_consts()
            # halves take the fast path once the half topic exists (the first one, taking the
            # long way, creates it, as 4.9 does on first use) and while the broker takes them
            half_topic = None if self.broker.config.rejectTransactionMessage or self.broker.topic_config.select(
                tv.TRANS_HALF_TOPIC) is None else tv.TRANS_HALF_TOPIC
            self._fast = (store_host, min(cfg.maxMessageSize, cfg.mappedFileSizeCommitLog - 8), cluster_prop,
                          prefix, template, binary, half_topic)
        return self._fast

    def _fast_consts(self) -> _Consts:
        """The CLUSTER property every record gets, the msgId prefix and the answer templates
        (JSON, and RocketMQ's binary header, which its own benchmark tools send)."""
        if self._consts is None:
            cfg = self.broker.config
            cluster = f"{MessageConst.CLUSTER}{NAME_VALUE_SEPARATOR}{cfg.brokerClusterName}{PROPERTY_SEPARATOR}"
            self._consts = (cluster.encode("utf-8"),
                            self.broker.store.msg_id_prefix.encode("ascii"),
                            answer_template(cfg.regionId, bool(cfg.traceOn)),
                            binary_answer_template(cfg.regionId, bool(cfg.traceOn)))
        return self._consts

    def _refresh_fast_topics(self) -> None:
        dv = self.broker.topic_config.data_version
        version = (dv.timestamp, dv.counter, self.broker.config.brokerPermission)
        if version != self._fast_version:
            self._fast_topics.clear()
            self._fast_version = version

    def _learn_topic(self, request: RemotingCommand) -> None:
        """After the long way, let the next sends to this topic, and from this producer group,
        take the fast path if they may (the group cache keeps the name gate's rule there)."""
        f = request.ext_fields or {}
        w = _WIRE_V1 if request.code == RequestCode.SEND_MESSAGE else _WIRE_V2
        g = f.get(w[_I_GROUP])
        if type(g) is str and g not in self._good_groups and tv.validate_group(g) is None:
            if len(self._good_groups) >= _GOOD_GROUPS_MAX:
                self._good_groups.clear()
            self._good_groups.add(g)
        topic = f.get(w[_I_TOPIC])
        if type(topic) is not str or topic in self._fast_topics or tv.is_retry_topic(topic):
            return
        if tv.validate_topic(topic) is not None or tv.is_not_allowed_send_topic(topic):
            return
        self._refresh_fast_topics()
        tc = self.broker.topic_config.select(topic)
        if tc is None or not tv.is_writeable(tc.perm):
            return
        sys_or = MessageSysFlag.MULTI_TAGS if tc.topic_filter_type == _MULTI_TAG else 0
        self._fast_topics[topic] = (max(tc.write_queue_nums, tc.read_queue_nums), tc.write_queue_nums, sys_or)

    # ------------------------------------------------------------------ checks
    def _broker_forbidden(self) -> str:
        return f"the broker[{self.broker.config.brokerIP1}] sending message is forbidden"

    def _transaction_forbidden(self) -> str:
        # 4.9's refusal of a half when rejectTransactionMessage=true
        return f"the broker[{self.broker.config.brokerIP1}] sending transaction message is forbidden"

    async def _send_half(self, request: RemotingCommand, msg: MessageExt, qid: int) -> RemotingCommand:
        """A half message (TRAN_MSG=true): stored in RMQ_SYS_TRANS_HALF_TOPIC queue 0 through the
        transaction bridge (prepareMessage); the plain send path never sees it."""
        tx = self.broker.transactions.bridge
        half = tx.to_half(msg)
        res = await tx.put_half(half)
        if res.ok:  # counted under the half topic, as 4.9 counts the rewritten message
            self.broker.stats.topic_put(half.topic, 1)
            self.broker.half_puts.count(msg.topic)
        return self._respond(request, res, qid)

    def _msg_check(self, conn: Connection, h: SendMessageRequestHeader) -> TopicConfig:
        b = self.broker
        # A broker without write permission refuses order topics only, as 4.9's msgCheck does:
        # the routes (which carry the broker's permission) keep producers away, and a send that
        # still arrives (a stale route, an operator's wipeWritePerm while sends are in flight) is
        # stored and answered truthfully. An order topic must not take it: its queue order would
        # break once producers move to the other brokers. The topic's own permission is not
        # checked either: a 4.9.8 broker stores a send to a read-only topic.
        if not tv.is_writeable(b.config.brokerPermission) and b.topic_config.is_order_topic(h.topic):
            raise _Reject(ResponseCode.NO_PERMISSION, self._broker_forbidden())
        remark = tv.validate_topic(h.topic)
        if remark is not None:
            raise _Reject(ResponseCode.SYSTEM_ERROR, remark)
        if tv.is_not_allowed_send_topic(h.topic):
            raise _Reject(ResponseCode.NO_PERMISSION, f"Sending message to topic[{h.topic}] is forbidden.")
        tc = b.topic_config.select(h.topic)
        if tc is None:
            sys_flag = _UNIT_SUB_FLAG if h.unitMode and tv.is_retry_topic(h.topic) else 0
            if tv.is_retry_topic(h.topic):
                tc = b.topic_config.create_in_send_back(h.topic, 1, tv.PERM_WRITE | tv.PERM_READ, sys_flag)
            else:
                if h.defaultTopicQueueNums < 1:  # 4.9 would make a topic of 0 queues that takes no send
                    raise _Reject(ResponseCode.SYSTEM_ERROR,
                                  f"the topic[{h.topic}] cannot be created with defaultTopicQueueNums "
                                  f"{h.defaultTopicQueueNums}, allowing only 1..{b.config.maxTopicQueueNums}")
                tc = b.topic_config.create_in_send(h.topic, h.defaultTopic or tv.AUTO_CREATE_TOPIC_KEY_TOPIC,
                                                   conn.remote_addr, h.defaultTopicQueueNums, sys_flag)
            if tc is None:
                raise _Reject(ResponseCode.TOPIC_NOT_EXIST,
                              f"topic[{h.topic}] not exist, apply first please!{FAQ_SUFFIX}")
        if h.queueId >= max(tc.write_queue_nums, tc.read_queue_nums):
            raise _Reject(ResponseCode.SYSTEM_ERROR,
                          f"request queueId[{h.queueId}] is illegal, {tc} Producer: {conn.remote_addr}")
        return tc

    def _retry_or_dlq(self, h: SendMessageRequestHeader, msg: MessageExt, request: RemotingCommand) -> None:
        """A consumer re-sending to %RETRY%group: past its max reconsume times it goes to %DLQ%group."""
        if not tv.is_retry_topic(msg.topic):
            return
        group = msg.topic[len(tv.RETRY_GROUP_TOPIC_PREFIX):]
        sgc = self.broker.subscription_groups.find(group)
        if sgc is None:
            raise _Reject(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                          f"subscription group not exist, {group} {FAQ_SUFFIX}")
        max_times = sgc.retry_max_times
        if request.version >= _V3_4_9 and h.maxReconsumeTimes is not None:
            max_times = h.maxReconsumeTimes
        if msg.reconsume_times >= max_times:
            dlq = tv.dlq_topic(group)
            # readable, as 4.9.8 creates it: the dead letters can be pulled and looked at
            tc = self.broker.topic_config.create_in_send_back(dlq, _DLQ_NUMS_PER_GROUP, tv.PERM_WRITE | tv.PERM_READ,
                                                              0)
            if tc is None:
                raise _Reject(ResponseCode.SYSTEM_ERROR, f"topic[{dlq}] not exist")
            self.broker.dlq_sends.count(group, msg.properties.get(MessageConst.RETRY_TOPIC) or msg.topic)
            msg.topic = dlq
            msg.queue_id = random.randrange(_DLQ_NUMS_PER_GROUP)
            msg.properties.pop(MessageConst.DELAY_TIME_LEVEL, None)

    def answer_fields(self, request: RemotingCommand) -> dict[str, str] | None:
        return self._region_fields() if request.code in _FAST_CODES else None

    def _region_fields(self) -> dict[str, str]:
        cfg = self.broker.config
        return {MessageConst.MSG_REGION: cfg.regionId, MessageConst.TRACE_SWITCH: "true" if cfg.traceOn else "false"}

    def _respond(self, request: RemotingCommand, res: PutResult, queue_id: int) -> RemotingCommand:
        code = PUT_STATUS_CODES.get(res.status, ResponseCode.SYSTEM_ERROR)
        if not res.ok:
            return response_for(request, code, res.remark or f"store refused the message: {res.status.value}",
                                self._region_fields())
        return response_for(request, code, res.remark, ext_fields={
            _MSG_ID: res.msg_id, _QUEUE_ID: str(queue_id), _QUEUE_OFFSET: str(res.queue_offset),
            **self._region_fields()})

    # ------------------------------------------------------------------ SEND
    async def send_message(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        try:
            h = fast_send_header(request)
        except RemotingCommandError as exc:
            return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        try:
            tc = self._msg_check(conn, h)
            qid = h.queueId
            if qid < 0:
                qid = random.randrange(max(1, tc.write_queue_nums))
            born = conn.attrs.get("born_host")
            if born is None:
                born = conn.attrs["born_host"] = parse_addr(conn.remote_addr)
            sys_flag = h.sysFlag
            if tc.topic_filter_type == _MULTI_TAG:
                sys_flag |= MessageSysFlag.MULTI_TAGS
            cluster = self.broker.config.brokerClusterName
            batch = h.batch or request.code == RequestCode.SEND_BATCH_MESSAGE
            if batch:
                if (h.sysFlag & _TX_MASK) == MessageSysFlag.TRANSACTION_PREPARED_TYPE:
                    raise _Reject(ResponseCode.NO_PERMISSION, self._transaction_forbidden())
                if tv.is_retry_topic(h.topic):
                    raise _Reject(ResponseCode.MESSAGE_ILLEGAL, "Retry Group is not supported for batching")
                try:
                    entries = decode_batch_body(request.body or b"", h.topic)
                    decode_properties(h.properties or "")
                except MessageFormatError as exc:
                    raise _Reject(ResponseCode.MESSAGE_ILLEGAL, f"the batch body is malformed: {exc}") from None
                if not entries:
                    raise _Reject(ResponseCode.MESSAGE_ILLEGAL, "the batch has no message")
                msgs = []
                for e in entries:
                    e.properties[MessageConst.CLUSTER] = cluster
                    msgs.append(MessageExt(topic=h.topic, body=e.body, flag=e.flag, properties=e.properties,
                                           queue_id=qid, sys_flag=sys_flag, born_timestamp=h.bornTimestamp,
                                           born_host=born, reconsume_times=h.reconsumeTimes or 0))
            else:
                try:
                    props = decode_properties(h.properties or "")
                except MessageFormatError as exc:
                    raise _Reject(ResponseCode.MESSAGE_ILLEGAL, f"the message properties are malformed: {exc}") \
                        from None
                tran = props.get(MessageConst.TRANSACTION_PREPARED, "")
                half = tran.lower() == "true"  # Boolean.parseBoolean, as 4.9 reads it
                if half and self.broker.config.rejectTransactionMessage or not half and (
                        (h.sysFlag & _TX_MASK) == MessageSysFlag.TRANSACTION_PREPARED_TYPE
                        or tran.strip().lower() == "true"):
                    # (a prepared sysFlag without TRAN_MSG would be stored but never indexed nor
                    # checked: refused rather than answered with a success that delivers nothing)
                    raise _Reject(ResponseCode.NO_PERMISSION, self._transaction_forbidden())
                props[MessageConst.CLUSTER] = cluster
                msg = MessageExt(topic=h.topic, body=request.body or b"", flag=h.flag, properties=props,
                                 queue_id=qid, sys_flag=sys_flag, born_timestamp=h.bornTimestamp, born_host=born,
                                 reconsume_times=h.reconsumeTimes or 0)
                self._retry_or_dlq(h, msg, request)
                qid = msg.queue_id
                if not half:
                    timer = check_timer_message(msg, self.broker.store_config, int(time.time() * 1000))
                    if timer is not None:
                        raise _Reject(*timer)
                if half:  # stored in the half topic; the answer names the requested queue (4.9)
                    return await self._send_half(request, msg, qid)
                msgs = [msg]
        except _Reject as rej:  # 4.9 puts the region and trace switch on every send answer, refusals too
            return response_for(request, rej.code, rej.remark, self._region_fields())
        res = await self.broker.store.put_messages(msgs)
        if res.ok:
            self.broker.stats.topic_put(msgs[0].topic, len(msgs))
        return self._respond(request, res, qid)

    # ------------------------------------------------------------------ SEND BACK
    @staticmethod
    def _no_retry_topic(request: RemotingCommand, group: str, topic: str) -> RemotingCommand:
        # 4.9's store refuses the over-long topic (MESSAGE_ILLEGAL) before the message is parked
        # on a delay level; refusing here also keeps the topic out of the table and the routes.
        # The consumer keeps the message and consumes it again later.
        remark = (f"the topic[{topic}] of group[{group}] is longer than topic max length {tv.TOPIC_MAX_LENGTH}: "
                  f"messages of a group name longer than {tv.TOPIC_MAX_LENGTH - len(tv.RETRY_GROUP_TOPIC_PREFIX)} "
                  "characters cannot be sent back for retry")
        log_refusal(request.code, "a consumer", remark)
        return response_for(request, ResponseCode.MESSAGE_ILLEGAL, remark)

    async def consumer_send_msg_back(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        try:
            h = ConsumerSendMsgBackRequestHeader.decode(request)
        except RemotingCommandError as exc:
            return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        b = self.broker
        sgc = b.subscription_groups.find(h.group)
        if sgc is None:
            return response_for(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group not exist, {h.group} {FAQ_SUFFIX}")
        if not tv.is_writeable(b.config.brokerPermission):
            return response_for(request, ResponseCode.NO_PERMISSION, self._broker_forbidden())
        if sgc.retry_queue_nums <= 0:
            return response_for(request, ResponseCode.SUCCESS)
        new_topic = tv.retry_topic(h.group)
        if tv.validate_topic(new_topic) is not None:
            return self._no_retry_topic(request, h.group, new_topic)
        qid = random.randrange(sgc.retry_queue_nums)
        tc = b.topic_config.create_in_send_back(new_topic, sgc.retry_queue_nums, tv.PERM_WRITE | tv.PERM_READ,
                                                _UNIT_SUB_FLAG if h.unitMode else 0)
        if tc is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
        if not tv.is_writeable(tc.perm):
            return response_for(request, ResponseCode.NO_PERMISSION,
                                f"the topic[{new_topic}] sending message is forbidden")
        ext = b.store.look_message_by_offset(h.offset)
        if ext is None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        props = dict(ext.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, ext.topic)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        delay = h.delayLevel
        max_times = sgc.retry_max_times
        if request.version >= _V3_4_9 and h.maxReconsumeTimes is not None:
            max_times = h.maxReconsumeTimes
        to_dlq = ext.reconsume_times >= max_times or delay < 0
        if to_dlq:
            new_topic = tv.dlq_topic(h.group)
            if tv.validate_topic(new_topic) is not None:
                return self._no_retry_topic(request, h.group, new_topic)
            qid = random.randrange(_DLQ_NUMS_PER_GROUP)
            tc = b.topic_config.create_in_send_back(new_topic, _DLQ_NUMS_PER_GROUP, tv.PERM_WRITE | tv.PERM_READ, 0)
            if tc is None:
                return response_for(request, ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
            props.pop(MessageConst.DELAY_TIME_LEVEL, None)
        else:
            if delay == 0:
                delay = 3 + ext.reconsume_times
            props[MessageConst.DELAY_TIME_LEVEL] = str(delay)
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = ext.msg_id
        msg = MessageExt(topic=new_topic, body=ext.body, flag=ext.flag, properties=props, queue_id=qid,
                         sys_flag=ext.sys_flag, born_timestamp=ext.born_timestamp, born_host=ext.born_host,
                         reconsume_times=ext.reconsume_times + 1)
        res = await b.store.put_messages([msg])
        if res.ok:
            original = props[MessageConst.RETRY_TOPIC]  # 4.9's backTopic: the message's first topic
            b.stats.send_back(h.group, original)
            if to_dlq:
                b.dlq_sends.count(h.group, original)
            return response_for(request, ResponseCode.SUCCESS)
        return response_for(request, PUT_STATUS_CODES.get(res.status, ResponseCode.SYSTEM_ERROR),
                            res.remark or res.status.value)
