"""END_TRANSACTION (37): a producer commits or rolls back a half message; and the admin's
RESUME_CHECK_HALF_MESSAGE (323), which gives a half given up after its last check another round.

RocketMQ 4.9.8's EndTransactionProcessor: a slave answers SLAVE_NOT_AVAILABLE; state 0 (unknown)
leaves the half to the check service; commit and rollback find the half by its commit-log offset
and check that the request names it (producer group, half queue offset, commit-log offset, each
refusal with 4.9's remark); a commit stores the real message and then the op message (in one
append, see ``TransactionalMessageBridge.put_commit``), a rollback writes only the op message.
Java clients send it oneway, so answers are read only by clients that ask for one (and by
tests); they are built all the same.

A commit or rollback a producer sends after its local transaction (not one answering a check)
takes a batch path when the half is plain (:mod:`fastmq._ext.end_transaction` decides, and builds
the records from the stored half's bytes; the store places them as it places a run of sends);
the rest, refusals included, takes the bridge's long way. Both store the same bytes. The
requests of one read come in one call (:meth:`EndTransactionProcessor.process_batch`): a header
the compiled stage reads as it is (``end_fields``) goes straight to its records, without the
header object, the name check (its group already passed it) or a coroutine per request.

One addition to 4.9: a commit that comes from a check (``fromTransactionCheck``) first looks for
a real message this transaction already committed, and if there is one writes only the missing
op message. That is the state a torn append of the two records leaves (or a check progress
rewound by a kill -9, which checks a half again), and 4.9 would store the real message twice.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from ..._ext.end_transaction import end_fields, end_records
from ...errors import RemotingCommandError
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand, response_for
from ...protocol import topic as tv
from ...protocol.headers import EndTransactionRequestHeader, ResumeCheckHalfMessageRequestHeader
from ...protocol.message import MessageConst, MessageExt, MessageSysFlag, decode_offset_msg_id, pack_host
from ...remoting import Connection
from ...remoting.loop import run_eagerly
from ...store.message_store import PutResult, PutStatus
from .base import BrokerCodeDispatchProcessor, legal_groups

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from ..._ext.send_batch import SendBatch
    from .base import BrokerContext

__all__ = ["EndTransactionProcessor"]

log = logging.getLogger("fastmq.broker.transaction")

_END = RequestCode.END_TRANSACTION
_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_HALF_TOPIC, _OP_TOPIC, _OP_TAG = (t.encode() for t in (tv.TRANS_HALF_TOPIC, tv.TRANS_OP_HALF_TOPIC,
                                                         tv.TRANS_OP_REMOVE_TAG))


class EndTransactionProcessor(BrokerCodeDispatchProcessor):
    batches = True

    def __init__(self, broker: "BrokerContext") -> None:
        super().__init__(broker)
        # run at once, without a task, when the store answers without waiting (ASYNC_FLUSH): a
        # task per request would cost the commit about as much again as its lookup
        self.handlers = {RequestCode.END_TRANSACTION: lambda conn, req: run_eagerly(self.end_transaction(conn, req)),
                         RequestCode.RESUME_CHECK_HALF_MESSAGE: self.resume_check_half_message}
        self._store_host: bytes | None = None  # the store's packed host, for the op message

    async def end_transaction(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        try:
            h = EndTransactionRequestHeader.decode(request)
            h.check_fields()
        except RemotingCommandError as exc:
            return response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        b = self.broker
        if b.store_config.is_slave:
            return response_for(request, ResponseCode.SLAVE_NOT_AVAILABLE)
        if h.commitOrRollback not in (_COMMIT, _ROLLBACK):
            # UNKNOW: nothing to do now; the half stays and the check service asks again. (4.9
            # returns no answer at all; a client that asked for one gets this instead of a timeout.)
            log.info("END_TRANSACTION from %s: state unknown for %s, left to the check (remark %s)",
                     conn.remote_addr, h.msgId, request.remark)
            return response_for(request, ResponseCode.SUCCESS,
                                "the transaction state is unknown: the half message stays and will be checked")
        if h.fromTransactionCheck:
            log.info("END_TRANSACTION from %s after a check: %s %s", conn.remote_addr,
                     "commit" if h.commitOrRollback == _COMMIT else "rollback", h.msgId)
        if not h.fromTransactionCheck:
            try:
                group = h.producerGroup.encode("utf-8")
            except UnicodeEncodeError:  # (the long way refuses it)
                group = None
            commit = h.commitOrRollback == _COMMIT
            batch = None if group is None else self._end_batch(h.commitLogOffset, group, h.tranStateTableOffset,
                                                               commit)
            if batch is not None:
                res = b.store.put_batch_now(batch)
                if not isinstance(res, PutResult):  # a flush or slave wait
                    res = await res
                if res.ok:
                    self._count_end(commit, batch, h.commitLogOffset)
                return self._end_answer(request, res, commit, batch, h.tranStateTableOffset)
        tx = b.transactions.bridge
        half = tx.look_half(h.commitLogOffset)
        refusal = _check_prepare_message(half, h)
        if refusal is not None:
            return response_for(request, ResponseCode.SYSTEM_ERROR, refusal)
        assert half is not None
        if h.commitOrRollback == _COMMIT:
            done = tx.find_committed(half) if h.fromTransactionCheck else None
            if done is None:
                real = tx.to_committed(half, h.commitLogOffset)
                if real is None:
                    return response_for(request, ResponseCode.SYSTEM_ERROR,
                                        f"the prepared message has no usable {MessageConst.REAL_TOPIC}/"
                                        f"{MessageConst.REAL_QUEUE_ID}")
                res = await tx.put_commit(real, half)
                if not res.ok:  # neither record stored: the half stays and is checked again
                    code, remark = self._final_refusal(res)
                    return response_for(request, code, remark)
                self.broker.tx_ends.count("commit", real.topic)
                return response_for(request, ResponseCode.SUCCESS)
            else:
                log.warning("END_TRANSACTION: %s was already committed at %d; writing its op message only",
                            h.msgId, done.commit_log_offset)
            return await self._delete_prepare(request, half)
        resp = await self._delete_prepare(request, half)
        if resp.code == ResponseCode.SUCCESS:
            self.broker.tx_ends.count("rollback", half.properties.get(MessageConst.REAL_TOPIC) or half.topic)
        return resp

    def process_batch(self, conn: Connection, requests: list[RemotingCommand]) -> list[Any]:
        """The END_TRANSACTION requests of one socket read (see ``Dispatcher.dispatch``): each
        whose header ``end_fields`` takes and whose half :meth:`_end_batch` builds is stored at
        once, and answered only when it asked for an answer (a Java client's is oneway); the
        rest (refusals, answers to a check, RESUME_CHECK_HALF_MESSAGE) go through
        :meth:`process_request`."""
        out: list[Any] = []
        fast = not self.broker.store_config.is_slave
        groups = legal_groups()
        store = self.broker.store
        for req in requests:
            e = end_fields(req.ext_fields, groups) if fast and req.code == _END else None
            batch = None if e is None else self._end_batch(e[2], e[0], e[1], e[3])
            if e is None or batch is None:
                out.append((req, self.process_request(conn, req)))
                continue
            res = store.put_batch_now(batch)
            if not isinstance(res, PutResult):  # a flush or slave wait: answered when it ends
                out.append((req, self._end_later(req, res, e[3], batch, e[1], e[2])))
                continue
            if res.ok:
                self._count_end(e[3], batch, e[2])
            if not (res.ok and req.flag & 2):  # (a oneway success has nothing to say)
                out.append((req, self._end_answer(req, res, e[3], batch, e[1])))
        return out

    async def _end_later(self, request: RemotingCommand, pending: Coroutine[Any, Any, PutResult], commit: bool,
                         batch: SendBatch, queue_offset: int, half_offset: int) -> RemotingCommand:
        res = await pending
        if res.ok:
            self._count_end(commit, batch, half_offset)
        return self._end_answer(request, res, commit, batch, queue_offset)

    def _count_end(self, commit: bool, batch: SendBatch, half_offset: int) -> None:
        """The transaction counters (``rocketmq_commit_messages_total`` and the rollback one) of an
        end the batch path stored. A commit's real topic is its first record's; a rollback stores
        only the op message, so its topic is read from the half (the rarer end pays the read)."""
        if commit:
            self.broker.tx_ends.count("commit", batch.keys[0][0])
            return
        half = self.broker.transactions.bridge.look_half(half_offset)
        topic = "" if half is None else half.properties.get(MessageConst.REAL_TOPIC) or half.topic
        self.broker.tx_ends.count("rollback", topic)

    def _end_answer(self, request: RemotingCommand, res: PutResult, commit: bool, batch: SendBatch,
                    queue_offset: int) -> RemotingCommand:
        """The answer to a commit or rollback the batch path stored (or failed to)."""
        if res.ok:
            return response_for(request, ResponseCode.SUCCESS)
        if commit:  # neither record stored: the half stays and is checked again
            code, remark = self._final_refusal(res)
            return response_for(request, code, remark)
        return self._op_refused(request, res, batch.keys[0][1], queue_offset)

    def _end_batch(self, commit_log_offset: int, group: bytes, queue_offset: int, commit: bool) -> SendBatch | None:
        """The records of this commit or rollback built straight from the stored half
        (:mod:`fastmq._ext.end_transaction`), for one append through the store's batch path;
        None when the half needs the long way (whose checks then answer with 4.9's remarks).
        ``group``: the request's producerGroup as UTF-8. A half is the op topic's only source
        of records: the op topic is created here once."""
        b = self.broker
        view = b.store.record_view(commit_log_offset) if commit_log_offset >= 0 else None
        if view is None:
            return None
        store_host = self._store_host
        if store_host is None:
            store_host = self._store_host = pack_host(*b.store.store_host)
        b.transactions.bridge.ensure_topic(tv.TRANS_OP_HALF_TOPIC)
        cfg = b.store.config
        try:
            return end_records(view, commit_log_offset, _HALF_TOPIC, group, queue_offset, commit, _OP_TOPIC, _OP_TAG,
                               int(time.time() * 1000), store_host,
                               min(cfg.maxMessageSize, cfg.mappedFileSizeCommitLog - 8))
        except (OverflowError, ValueError):  # (an offset the long way refuses)
            return None
        finally:
            view.release()

    async def _delete_prepare(self, request: RemotingCommand, half: MessageExt) -> RemotingCommand:
        """deletePrepareMessage: the op message; its failure is a failure of the request (4.9 logs
        it and answers success; the half would then be checked again, which the client cannot
        know from a success)."""
        res = await self.broker.transactions.bridge.put_op(half.queue_id, [half.queue_offset])
        if not res.ok:
            return self._op_refused(request, res, half.queue_id, half.queue_offset)
        return response_for(request, ResponseCode.SUCCESS)

    @staticmethod
    def _op_refused(request: RemotingCommand, res: PutResult, queue_id: int, queue_offset: int) -> RemotingCommand:
        log.error("op message for half %d of queue %d not stored: %s", queue_offset, queue_id, res.status.value)
        return response_for(request, ResponseCode.SYSTEM_ERROR,
                            f"the transaction op message was not stored ({res.status.value}); "
                            "the half message will be checked again")

    async def resume_check_half_message(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """RESUME_CHECK_HALF_MESSAGE (323): the message at ``msgId`` (a half given up after its last
        check, kept in TRANS_CHECK_MAX_TIME_TOPIC) appended to the half queue again with
        TRANSACTION_CHECK_TIMES=0, so the check service asks its producer group again."""
        failed = "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."
        try:
            h = ResumeCheckHalfMessageRequestHeader.decode(request)
            m = None if h.msgId is None else self.broker.store.look_message_by_offset(decode_offset_msg_id(h.msgId)[2])
        except (RemotingCommandError, ValueError) as exc:
            log.warning("RESUME_CHECK_HALF_MESSAGE from %s: %s", conn.remote_addr, exc)
            return response_for(request, ResponseCode.SYSTEM_ERROR, failed)
        if m is None or m.topic != tv.TRANS_CHECK_MAX_TIME_TOPIC:
            # (4.9 throws on a message it cannot read, and would turn any other message into a
            # half, to be committed, i.e. delivered, a second time: refused alike)
            return response_for(request, ResponseCode.SYSTEM_ERROR, failed)
        props = dict(m.properties)
        props[MessageConst.TRANSACTION_CHECK_TIMES] = "0"
        half = MessageExt(topic=tv.TRANS_HALF_TOPIC, body=m.body, flag=m.flag, properties=props, queue_id=0,
                          sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
                          reconsume_times=m.reconsume_times)
        res = await self.broker.transactions.bridge.put_half(half)
        if res.status is not PutStatus.PUT_OK:  # 4.9 takes PUT_OK only here
            return response_for(request, ResponseCode.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
        log.info("Put message back to RMQ_SYS_TRANS_HALF_TOPIC. real topic=%s", props.get(MessageConst.REAL_TOPIC))
        return response_for(request, ResponseCode.SUCCESS)

    def _final_refusal(self, res: PutResult) -> tuple[int, str]:
        """sendFinalMessage's codes and remarks for a put that did not store."""
        s = res.status
        if s in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
            return ResponseCode.MESSAGE_ILLEGAL, (
                "The message is illegal, maybe msg body or properties length not matched. msg body length limit "
                f"{self.broker.store_config.maxMessageSize}B, msg properties length limit 32KB.")
        if s is PutStatus.SERVICE_NOT_AVAILABLE:
            return ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."
        if s is PutStatus.UNKNOWN_ERROR:
            return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"


def _check_prepare_message(half: MessageExt | None, h: EndTransactionRequestHeader) -> str | None:
    """checkPrepareMessage: 4.9.8's remark when the request does not name this half, else None."""
    if half is None:
        return "Find prepared transaction message failed"
    if half.properties.get(MessageConst.PRODUCER_GROUP) != h.producerGroup:
        return "The producer group wrong"
    if half.queue_offset != h.tranStateTableOffset:
        return "The transaction state table offset wrong"
    if half.commit_log_offset != h.commitLogOffset:
        return "The commit log offset wrong"
    return None
