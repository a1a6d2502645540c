"""A raw-wire transactional producer for testing a broker's transactions: it sends halves, ends
them (COMMIT, ROLLBACK, UNKNOW; oneway or not; as the answer of a check), answers the broker's
CHECK_TRANSACTION_STATE pushes with a function of yours, and pulls what a consumer group would see.

Built from fastmq.protocol rather than the client's TransactionProducer, so a broker is tested
against requests exactly as a 4.9.8 Java client builds them, odd ones included. fastmq's tests and
its transaction benchmark use it.
"""
from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import RemotingCommand, create_request
from fastmq.protocol.headers import (CheckTransactionStateRequestHeader, EndTransactionRequestHeader,
                                     PULL_SYSFLAG_SUBSCRIPTION, PullMessageRequestHeader, SendMessageRequestHeader)
from fastmq.protocol.heartbeat import HeartbeatData, ProducerData
from fastmq.protocol.message import (MessageConst, MessageExt, MessageSysFlag, decode_offset_msg_id,
                                     decode_record, decode_records, encode_properties)
from fastmq.remoting import Connection, RemotingClient
from fastmq.remoting.processor import RequestProcessor

COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
UNKNOW = MessageSysFlag.TRANSACTION_NOT_TYPE
_seq = itertools.count()

__all__ = ["COMMIT", "ROLLBACK", "UNKNOW", "Check", "Half", "TxProbe"]


@dataclass
class Half:
    """A half (prepared) message the broker stored."""

    uniq: str
    msg_id: str            # offsetMsgId of the stored half
    queue_offset: int      # in the half queue
    queue_id: int          # the requested queue of the real topic
    body: bytes

    @property
    def commit_log_offset(self) -> int:
        """Where the half is in the commit log (from its offset message id)."""
        return decode_offset_msg_id(self.msg_id)[2]


@dataclass
class Check:
    """A CHECK_TRANSACTION_STATE the broker pushed: its header, the half, when it came."""

    header: CheckTransactionStateRequestHeader
    msg: MessageExt
    at: float = field(default_factory=time.monotonic)


class _CheckHandler(RequestProcessor):
    def __init__(self, probe: "TxProbe") -> None:
        self.probe = probe

    def process_request(self, conn: Connection, request: RemotingCommand) -> Any:
        if request.code != RequestCode.CHECK_TRANSACTION_STATE:
            return None
        h = CheckTransactionStateRequestHeader.decode(request)
        msg = decode_record(request.body or b"", verify_crc=False)
        self.probe.checks.append(Check(h, msg))
        state = self.probe.on_check(msg)
        if state is None:
            return None  # a producer that does not answer
        end = EndTransactionRequestHeader(
            producerGroup=msg.properties.get(MessageConst.PRODUCER_GROUP, ""), tranStateTableOffset=h.tranStateTableOffset,
            commitLogOffset=h.commitLogOffset, commitOrRollback=state, msgId=h.msgId or "",
            fromTransactionCheck=True, transactionId=h.transactionId)
        req = create_request(RequestCode.END_TRANSACTION, end.to_fields())
        conn.send_oneway(req)  # as the Java client: oneway, on the channel the check came by
        return None


class TxProbe:
    """One producer client of group ``group`` talking to broker ``addr``; ``on_check`` answers the
    broker's checks (COMMIT, ROLLBACK, UNKNOW, or None for no answer), each kept in ``checks``."""

    def __init__(self, addr: str, group: str, on_check: Callable[[MessageExt], int | None] | None = None) -> None:
        self.addr = addr
        self.group = group
        self.client_id = f"127.0.0.1@probe-{uuid.uuid4().hex[:8]}"
        self.checks: list[Check] = []
        self.on_check: Callable[[MessageExt], int | None] = on_check or (lambda m: None)
        self.remoting = RemotingClient(processor=_CheckHandler(self))

    async def close(self) -> None:
        """Close the connection."""
        await self.remoting.close()

    async def heartbeat(self) -> None:
        """Register as a producer of the group (the broker checks through this connection)."""
        body = HeartbeatData(self.client_id, producers=[ProducerData(self.group)]).to_json()
        r = await self.remoting.invoke(self.addr, create_request(RequestCode.HEART_BEAT, {}, body), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark

    async def send(self, topic: str, body: bytes, *, half: bool = True, queue_id: int = 0,
                   extra: dict[str, str] | None = None, sys_flag: int | None = None) -> RemotingCommand:
        """SEND_MESSAGE of ``body`` (a half unless ``half`` is False); the answer, its ext fields
        with ``_uniq``, the message's unique id."""
        uniq = f"{uuid.uuid4().hex.upper()}{next(_seq):08d}"
        props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq, MessageConst.WAIT_STORE_MSG_OK: "true"}
        if half:
            props[MessageConst.TRANSACTION_PREPARED] = "true"
            props[MessageConst.PRODUCER_GROUP] = self.group
        props.update(extra or {})
        h = SendMessageRequestHeader(
            producerGroup=self.group, topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=queue_id,
            sysFlag=(MessageSysFlag.TRANSACTION_PREPARED_TYPE if half else 0) if sys_flag is None else sys_flag,
            bornTimestamp=int(time.time() * 1000), flag=0, properties=encode_properties(props).decode())
        r = await self.remoting.invoke(self.addr, create_request(RequestCode.SEND_MESSAGE, h.to_fields(), body), 5)
        r.ext_fields = r.ext_fields or {}
        r.ext_fields.setdefault("_uniq", uniq)
        return r

    async def send_half(self, topic: str, body: bytes, **kw: Any) -> Half:
        """Send a half (asserting the broker stored it)."""
        r = await self.send(topic, body, **kw)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        f = r.ext_fields or {}
        return Half(f["_uniq"], f["msgId"], int(f["queueOffset"]), int(f["queueId"]), body)

    async def end(self, half: Half, state: int, *, oneway: bool = False, group: str | None = None,
                  tran_state_table_offset: int | None = None, commit_log_offset: int | None = None,
                  from_check: bool = False) -> RemotingCommand | None:
        """END_TRANSACTION of ``half`` with ``state``; the answer (None when ``oneway``). The other
        keywords override the header's fields, to send what a broken client would."""
        h = EndTransactionRequestHeader(
            producerGroup=self.group if group is None else group,
            tranStateTableOffset=half.queue_offset if tran_state_table_offset is None else tran_state_table_offset,
            commitLogOffset=half.commit_log_offset if commit_log_offset is None else commit_log_offset,
            commitOrRollback=state, msgId=half.uniq, fromTransactionCheck=from_check)
        req = create_request(RequestCode.END_TRANSACTION, h.to_fields())
        if oneway:
            await self.remoting.invoke_oneway(self.addr, req, 5)
            return None
        return await self.remoting.invoke(self.addr, req, 5)

    async def pull_all(self, topic: str, group: str, queue_ids: range = range(4), offset: int = 0) -> list[MessageExt]:
        """Everything in ``topic``'s queues from ``offset`` (bounded: 50 pulls per queue)."""
        out: list[MessageExt] = []
        for qid in queue_ids:
            off = offset
            for _ in range(50):
                h = PullMessageRequestHeader(consumerGroup=group, topic=topic, queueId=qid, queueOffset=off,
                                             maxMsgNums=32, sysFlag=PULL_SYSFLAG_SUBSCRIPTION, commitOffset=0, suspendTimeoutMillis=0,
                                             subVersion=0, subscription="*")
                r = await self.remoting.invoke(self.addr, create_request(RequestCode.PULL_MESSAGE, h.to_fields()), 5)
                if r.code != ResponseCode.SUCCESS or not r.body:
                    break
                msgs = decode_records(r.body, verify_crc=False)
                out.extend(msgs)
                off = int((r.ext_fields or {})["nextBeginOffset"])
        return out

    async def wait_checks(self, n: int, timeout: float) -> None:
        """Wait (bounded by ``timeout``) until ``n`` checks came."""
        deadline = time.monotonic() + timeout
        while len(self.checks) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
