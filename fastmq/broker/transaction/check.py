"""The master's transaction check service: ask producers about halves nobody resolved.

RocketMQ 4.9.8's TransactionalMessageCheckService and TransactionalMessageServiceImpl.check, in
its order. Every ``transactionCheckInterval`` ms (the first round one interval after the start),
for each queue of ``RMQ_SYS_TRANS_HALF_TOPIC``:

1. the progress is ``CID_RMQ_SYS_TRANS``'s consumer offsets on the half queue and on the op queue
   of the same id (``consumerOffset.json``: a restart resumes where the last persist left it);
2. op messages from the op offset say which halves are resolved;
3. from the half offset on, each half is: skipped when resolved; given up when it was checked
   ``transactionCheckMax`` times already (or is older than the store keeps files), moved to
   ``TRANS_CHECK_MAX_TIME_TOPIC``; left for a later round when younger than ``transactionTimeOut``
   (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``); otherwise re-appended to the half queue with its
   check count raised, and CHECK_TRANSACTION_STATE about that copy is pushed (oneway) to one live
   channel of its producer group. The producer's answer (END_TRANSACTION) names the copy;
4. the half offset and the op offset (over the op messages now all accounted for) are committed.

A round stops after 60 s of work or at a half stored during the round. A slave never runs it.

One addition to 4.9: before a check is sent, a half whose real message was already committed (the
op message lost to a kill -9 between the two puts) is resolved by writing the op message only.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...protocol import topic as tv
from ...protocol.codes import RequestCode
from ...protocol.command import create_request
from ...protocol.headers import CheckTransactionStateRequestHeader
from ...protocol.message import MessageConst, MessageExt, encode_record
from ...store import StoreError
from .bridge import TransactionalMessageBridge, parse_op_body

if TYPE_CHECKING:
    from .bridge import TxBroker

__all__ = ["TransactionalMessageCheckService", "CheckStats"]

log = logging.getLogger("fastmq.broker.transaction")

#: MAX_PROCESS_TIME_LIMIT: one queue's share of a round.
MAX_PROCESS_TIME_S = 60.0
#: Op messages read per pull (4.9.8's fillOpRemoveMap pulls 32).
OP_PULL_NUMS = 32
#: Halves visited before yielding the loop to requests.
_YIELD_EVERY = 256


@dataclass
class CheckStats:
    """What the service did since the start (runtime info and tests)."""

    rounds: int = 0
    checks_sent: int = 0
    checks_dropped: int = 0  # no live channel of the producer group
    discarded: int = 0       # moved to TRANS_CHECK_MAX_TIME_TOPIC
    discarded_topics: dict[str, int] = field(default_factory=dict)  # the same, per real topic
    recovered: int = 0       # already committed, only the op message was missing
    last_round_ms: int = 0
    rr: dict[str, int] = field(default_factory=dict)  # round-robin position per producer group


class TransactionalMessageCheckService:
    """Owns the check loop of one broker (started on a master only)."""

    def __init__(self, broker: TxBroker, bridge: TransactionalMessageBridge) -> None:
        self.broker = broker
        self.bridge = bridge
        self.stats = CheckStats()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    # ------------------------------------------------------------------ lifetime
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        t, self._task = self._task, None
        if t is not None:
            t.cancel()
            await asyncio.gather(t, return_exceptions=True)

    def wakeup(self) -> None:
        """Run a round now instead of at the end of the interval."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            # read every round: UPDATE_BROKER_CONFIG may change the interval
            interval = max(0.05, self.broker.config.transactionCheckInterval / 1000)
            try:
                async with asyncio.timeout(interval):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            begin = time.monotonic()
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad round must not end the service
                log.exception("transaction check round failed")
            self.stats.last_round_ms = int((time.monotonic() - begin) * 1000)

    # ------------------------------------------------------------------ a round
    async def check(self) -> None:
        """One round over every queue of the half topic."""
        b = self.broker
        self.stats.rounds += 1
        tc = b.topic_config.select(tv.TRANS_HALF_TOPIC)
        if tc is None:
            # halves stored but the topic table lost its entry (a kill -9 before the table's
            # write): 4.9 creates the topic when the check asks for it, and so do we
            if b.store.max_offset_in_queue(tv.TRANS_HALF_TOPIC, 0) <= 0:
                return
            self.bridge.ensure_topic(tv.TRANS_HALF_TOPIC)
            tc = b.topic_config.select(tv.TRANS_HALF_TOPIC)
            if tc is None:
                return
        for qid in range(tc.read_queue_nums):
            await self._check_queue(qid)

    def _progress(self, topic: str, qid: int) -> int:
        off = self.broker.offsets.query(tv.TRANS_SYS_GROUP, topic, qid)
        if off < 0:
            off = self.broker.store.min_offset_in_queue(topic, qid)
        return off

    def _read(self, topic: str, qid: int, offset: int) -> MessageExt | None:
        """The record at queue ``offset`` (queue offset and commit-log offset filled), or None."""
        store = self.broker.store
        cq = store.queues.get(topic, qid)
        if cq is None:
            return None
        try:
            phy, size, _tag = cq.get_entry(offset)
            m = store.commit_log.get_message(phy, size)
        except (StoreError, ValueError, Exception):  # gone to retention, or past the end
            return None
        m.queue_offset = offset
        m.commit_log_offset = phy
        return m

    def _fill_op_remove_map(self, op_qid: int, from_off: int, half_off: int, remove: dict[int, int],
                            done: list[int]) -> tuple[list[MessageExt], int]:
        """fillOpRemoveMap: up to OP_PULL_NUMS op messages from ``from_off``; returns them and the
        next op offset. A resolved half before ``half_off`` makes its op message done at once."""
        store = self.broker.store
        max_off = store.max_offset_in_queue(tv.TRANS_OP_HALF_TOPIC, op_qid)
        off = max(from_off, store.min_offset_in_queue(tv.TRANS_OP_HALF_TOPIC, op_qid))
        ops: list[MessageExt] = []
        while off < max_off and len(ops) < OP_PULL_NUMS:
            m = self._read(tv.TRANS_OP_HALF_TOPIC, op_qid, off)
            if m is None:  # a gap (retention): nothing it could resolve any more
                done.append(off)
                off += 1
                continue
            ops.append(m)
            if m.properties.get(MessageConst.TAGS) == tv.TRANS_OP_REMOVE_TAG:
                halves = parse_op_body(m.body)
            else:
                halves = []
            if not halves:
                done.append(off)
            for h in halves:
                if h < half_off:
                    done.append(off)
                else:
                    remove[h] = off
            off += 1
        return ops, off

    async def _check_queue(self, qid: int) -> None:
        b = self.broker
        cfg = b.config
        half_off = self._progress(tv.TRANS_HALF_TOPIC, qid)
        op_off = self._progress(tv.TRANS_OP_HALF_TOPIC, qid)
        if half_off < 0 or op_off < 0:
            log.error("transaction check: half queue %d has illegal offsets half=%d op=%d", qid, half_off, op_off)
            return
        remove: dict[int, int] = {}
        done: list[int] = []
        ops, next_op = self._fill_op_remove_map(qid, op_off, half_off, remove, done)
        start_ms = int(time.time() * 1000)
        began = time.monotonic()
        timeout = cfg.transactionTimeOut
        max_checks = cfg.transactionCheckMax
        reserved_ms = b.store_config.fileReservedTime * 3_600_000
        i = half_off
        visited = 0
        max_half = b.store.max_offset_in_queue(tv.TRANS_HALF_TOPIC, qid)
        while i < max_half:
            if time.monotonic() - began > MAX_PROCESS_TIME_S:
                log.info("transaction check: queue %d spent %.0f s, the rest waits for the next round",
                         qid, MAX_PROCESS_TIME_S)
                break
            visited += 1
            if visited % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
            if i in remove:
                done.append(remove.pop(i))
                i += 1
                continue
            half = self._read(tv.TRANS_HALF_TOPIC, qid, i)
            if half is None:  # removed by retention: nothing left to check
                i += 1
                continue
            now = int(time.time() * 1000)
            if self._need_discard(half, max_checks) or now - half.born_timestamp > reserved_ms:
                await self._discard(half)
                i += 1
                continue
            if half.store_timestamp >= start_ms:
                break  # stored during this round: the next round sees it
            age = now - half.born_timestamp
            immunity = timeout
            imm_s = half.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
            if imm_s is not None:
                immunity = _immunity_ms(imm_s, timeout)
                if age < immunity:
                    if await self._check_prepare_queue_offset(half, remove, done):
                        i += 1
                        continue
                    break  # the immunity copy could not be stored: try again next round
            elif 0 <= age < immunity:
                break  # halves are in arrival order: the rest are younger still
            need = False
            while True:
                if not ops:
                    need = age > immunity or age <= -1
                    break
                if ops[-1].born_timestamp - start_ms > timeout or age <= -1:
                    need = True
                    break
                if i in remove:
                    break
                ops, next_op = self._fill_op_remove_map(qid, next_op, half_off, remove, done)
            if i in remove:
                continue  # resolved by an op message read just now: the top of the loop takes it
            if need:
                if not await self._put_back_and_check(half):
                    break  # the copy was not stored: keep the offset here and try next round
            i += 1
        b.offsets.commit(tv.TRANS_SYS_GROUP, tv.TRANS_HALF_TOPIC, qid, i)
        new_op = _advance_op_offset(op_off, done)
        if new_op != op_off:
            b.offsets.commit(tv.TRANS_SYS_GROUP, tv.TRANS_OP_HALF_TOPIC, qid, new_op)

    # ------------------------------------------------------------------ per half
    @staticmethod
    def _need_discard(half: MessageExt, max_checks: int) -> bool:
        """needDiscard: counts the check this visit would make on the half's properties."""
        raw = half.properties.get(MessageConst.TRANSACTION_CHECK_TIMES)
        times = 1
        if raw is not None:
            try:
                times = int(raw)
            except ValueError:
                times = max_checks  # unreadable: treat as used up rather than check forever
            if times >= max_checks:
                return True
            times += 1
        half.properties[MessageConst.TRANSACTION_CHECK_TIMES] = str(times)
        return False

    async def _discard(self, half: MessageExt) -> None:
        res = await self.bridge.put_check_max(half)
        # given up either way: no longer a half waiting (rocketmq_half_messages)
        real = half.properties.get(MessageConst.REAL_TOPIC) or half.topic
        self.stats.discarded_topics[real] = self.stats.discarded_topics.get(real, 0) + 1
        if res.ok:
            self.stats.discarded += 1
            log.info("half message %s (queue offset %d) checked %s times: moved to %s",
                     half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), half.queue_offset,
                     half.properties.get(MessageConst.TRANSACTION_CHECK_TIMES), tv.TRANS_CHECK_MAX_TIME_TOPIC)
        else:  # 4.9 logs and moves on too: the half is given up either way
            log.error("half message at queue offset %d given up but not kept in %s: %s",
                      half.queue_offset, tv.TRANS_CHECK_MAX_TIME_TOPIC, res.status.value)

    async def _check_prepare_queue_offset(self, half: MessageExt, remove: dict[int, int],
                                          done: list[int]) -> bool:
        """checkPrepareQueueOffset: a half still inside its own immunity time. The first visit
        re-appends it marked with its queue offset (so its op message, which names that offset,
        still resolves the copy); a copy already marked is done when that offset is resolved."""
        raw = half.properties.get(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET)
        if raw is None:
            res = await self.bridge.renew_half(
                half, {MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET: str(half.queue_offset)})
            return res.ok
        try:
            prepared = int(raw)
        except ValueError:
            return False
        if prepared in remove:
            done.append(remove.pop(prepared))
            return True
        res = await self.bridge.renew_half(half, {})
        return res.ok

    async def _put_back_and_check(self, half: MessageExt) -> bool:
        """putBackHalfMsgQueue then resolveHalfMsg: the copy carries the raised check count and is
        what the check names. False when the copy could not be stored."""
        committed = self.bridge.find_committed(half)
        if committed is not None:
            res = await self.bridge.put_op(half.queue_id, [half.queue_offset])
            if res.ok:
                self.stats.recovered += 1
                log.warning("half at queue offset %d was committed at %d before a restart; op message written",
                            half.queue_offset, committed.commit_log_offset)
            return res.ok
        res = await self.bridge.renew_half(half, {})
        if not res.ok:
            log.error("transaction check: re-appending half at queue offset %d failed: %s",
                      half.queue_offset, res.status.value)
            return False
        half.queue_offset = res.queue_offset
        half.commit_log_offset = res.wrote_offset
        half.store_timestamp = res.store_timestamp
        self.send_check(half)
        return True

    def _channel(self, group: str) -> Any | None:
        """ProducerManager.getAvailableChannel: round-robin over the group's open channels."""
        chans = self.broker.producer_manager.groups.get(group)
        if not chans:
            return None
        conns = [c for c in chans if not getattr(c, "closed", False)]
        if not conns:
            return None
        n = self.stats.rr.get(group, 0)
        self.stats.rr[group] = n + 1
        return conns[n % len(conns)]

    def send_check(self, half: MessageExt) -> bool:
        """sendCheckMessage: CHECK_TRANSACTION_STATE (oneway) about ``half`` (a stored copy) to a
        live channel of its producer group; dropped (logged) when the group has none."""
        group = half.properties.get(MessageConst.PRODUCER_GROUP, "")
        conn = self._channel(group)
        if conn is None:
            self.stats.checks_dropped += 1
            log.warning("check transaction failed, channel of producer group %r is empty, msgId=%s",
                        group, half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
            return False
        uniq = half.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            tranStateTableOffset=half.queue_offset, commitLogOffset=half.commit_log_offset, msgId=uniq,
            transactionId=uniq, offsetMsgId=half.msg_id, bname=self.broker.config.brokerName)
        try:
            qid = int(half.properties.get(MessageConst.REAL_QUEUE_ID, "0"))
        except ValueError:
            qid = 0
        # the body is the copy as a stored record, with its real topic and queue (as 4.9 encodes it)
        body = bytes(encode_record(
            topic=half.properties.get(MessageConst.REAL_TOPIC, half.topic), body=half.body,
            properties=half.properties, queue_id=qid, flag=half.flag, queue_offset=half.queue_offset,
            phys_offset=half.commit_log_offset, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp,
            born_host=half.born_host, store_timestamp=half.store_timestamp, store_host=half.store_host,
            reconsume_times=half.reconsume_times, prepared_transaction_offset=half.prepared_transaction_offset))
        req = create_request(RequestCode.CHECK_TRANSACTION_STATE, header.to_fields(), body)
        try:
            conn.send_oneway(req)
        except Exception:
            self.stats.checks_dropped += 1
            log.exception("CHECK_TRANSACTION_STATE to %s failed", getattr(conn, "remote_addr", conn))
            return False
        self.stats.checks_sent += 1
        return True


def _immunity_ms(raw: str, default_ms: int) -> int:
    """getImmunityTime: the property in seconds, or transactionTimeOut when it is unreadable."""
    try:
        v = int(raw) * 1000
    except ValueError:
        return default_ms
    return v if v >= 0 else default_ms


def _advance_op_offset(op_off: int, done: list[int]) -> int:
    """calculateOpOffset: the op offset moved over the run of done op messages that starts there."""
    for o in sorted(set(done)):
        if o == op_off:
            op_off += 1
        elif o > op_off:
            break
    return op_off
