"""Issue 26, the broker side: half messages, END_TRANSACTION and the check service, on a real
``fastmq-broker`` process (pure or compiled, as the run's FASTMQ_NO_EXTENSIONS says).

Checks run every second here (``transactionCheckInterval=1000``) with ``transactionTimeOut=1000``:
the defaults (60 s, 6 s) are 4.9.8's and covered by the config tests.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from fastmq.protocol import topic as tv
from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.message import MessageConst, MessageSysFlag
from fastmq.testing import ServerProcess, broker_process, namesrv_process
from tests.process.txprobe import COMMIT, ROLLBACK, UNKNOW, TxProbe

pytestmark = pytest.mark.slow

TOPIC = "TxTopic"
GROUP = "PG_TX"
FAST = {"transactionCheckInterval": 1000, "transactionTimeOut": 1000, "flushConsumerOffsetInterval": 500}


class Cluster:
    def __init__(self, tmp: Path, **conf: Any) -> None:
        self.tmp = tmp
        self.conf = {**FAST, **conf}
        self.ns: ServerProcess | None = None
        self.broker: ServerProcess | None = None

    def start(self, port: int | None = None) -> ServerProcess:
        if self.ns is None:
            self.ns = namesrv_process(self.tmp).start()
        self.broker = broker_process(self.tmp, self.ns.addr, port=port, **self.conf).start()
        return self.broker

    @property
    def addr(self) -> str:
        assert self.broker is not None
        return f"127.0.0.1:{self.broker.port}"

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
        if self.ns is not None:
            self.ns.stop()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    c = Cluster(tmp_path)
    c.start()
    try:
        yield c
    finally:
        c.stop()


async def _probe(c: Cluster, group: str = GROUP, on_check: Any = None) -> TxProbe:
    p = TxProbe(c.addr, group, on_check)
    await p.heartbeat()
    return p


def _bodies(msgs: list[Any]) -> list[bytes]:
    return sorted(m.body for m in msgs)


async def test_commit_and_rollback_show_only_the_committed(cluster: Cluster) -> None:
    p = await _probe(cluster)
    try:
        # a plain send creates the topic with 4 queues
        r = await p.send(TOPIC, b"plain", half=False)
        assert r.code == ResponseCode.SUCCESS
        h1 = await p.send_half(TOPIC, b"commit-me", queue_id=2)
        h2 = await p.send_half(TOPIC, b"roll-me-back", queue_id=1)
        assert h1.queue_id == 2 and h2.queue_offset == h1.queue_offset + 1
        # invisible before the end
        assert _bodies(await p.pull_all(TOPIC, "CG_A")) == [b"plain"]
        r1 = await p.end(h1, COMMIT)
        r2 = await p.end(h2, ROLLBACK)
        assert r1 is not None and r1.code == ResponseCode.SUCCESS, r1.remark
        assert r2 is not None and r2.code == ResponseCode.SUCCESS, r2.remark
        got = await p.pull_all(TOPIC, "CG_A")
        assert _bodies(got) == [b"commit-me", b"plain"]
        committed = next(m for m in got if m.body == b"commit-me")
        assert committed.queue_id == 2
        assert committed.sys_flag & 0xC == MessageSysFlag.TRANSACTION_COMMIT_TYPE
        assert committed.prepared_transaction_offset == h1.commit_log_offset
        assert committed.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == h1.uniq
        # the half stays in the half topic, and two op messages name the two halves' offsets
        halves = await p.pull_all(tv.TRANS_HALF_TOPIC, "CG_SYS", range(1))
        assert [m.properties[MessageConst.REAL_TOPIC] for m in halves] == [TOPIC, TOPIC]
        assert [m.properties[MessageConst.REAL_QUEUE_ID] for m in halves] == ["2", "1"]
        assert all(m.sys_flag & 0xC == 0 for m in halves)
        ops = await p.pull_all(tv.TRANS_OP_HALF_TOPIC, "CG_SYS", range(1))
        assert [(m.tags, m.body) for m in ops] == [("d", str(h1.queue_offset).encode()),
                                                    ("d", str(h2.queue_offset).encode())]
    finally:
        await p.close()


async def test_end_transaction_refusals(cluster: Cluster) -> None:
    p = await _probe(cluster)
    try:
        h = await p.send_half(TOPIC, b"x")
        cases = [
            ({"group": "PG_OTHER"}, "The producer group wrong"),
            ({"tran_state_table_offset": h.queue_offset + 7}, "The transaction state table offset wrong"),
            ({"commit_log_offset": h.commit_log_offset + 3}, "Find prepared transaction message failed"),
            ({"commit_log_offset": 10 ** 12}, "Find prepared transaction message failed"),
        ]
        for kw, remark in cases:
            for state in (COMMIT, ROLLBACK):
                r = await p.end(h, state, **kw)
                assert r is not None and (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), (kw, r.remark)
        r = await p.end(h, 5)
        assert r is not None and (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "commitOrRollback field wrong")
        # a plain message's offsets are not a half's
        plain = await p.send(TOPIC, b"plain", half=False)
        from fastmq.protocol.message import decode_offset_msg_id
        r = await p.end(h, COMMIT, commit_log_offset=decode_offset_msg_id(plain.ext_fields["msgId"])[2])
        assert r is not None and r.remark == "Find prepared transaction message failed"
        # unknown: nothing done, the half stays
        r = await p.end(h, UNKNOW)
        assert r is not None and r.code == ResponseCode.SUCCESS
        assert await p.pull_all(TOPIC, "CG_R") == [] or _bodies(await p.pull_all(TOPIC, "CG_R")) == [b"plain"]
        # the server is still up and the right request still works
        r = await p.end(h, COMMIT)
        assert r is not None and r.code == ResponseCode.SUCCESS, r.remark
        assert _bodies(await p.pull_all(TOPIC, "CG_R")) == [b"plain", b"x"]
    finally:
        await p.close()


async def test_reject_transaction_message_keeps_the_refusal(tmp_path: Path) -> None:
    c = Cluster(tmp_path, rejectTransactionMessage="true")
    c.start()
    p = await _probe(c)
    try:
        r = await p.send(TOPIC, b"half")
        assert r.code == ResponseCode.NO_PERMISSION
        assert r.remark == "the broker[127.0.0.1] sending transaction message is forbidden"
        assert (await p.send(TOPIC, b"plain", half=False)).code == ResponseCode.SUCCESS
    finally:
        await p.close()
        c.stop()


async def test_unknown_then_check_back_commits_or_rolls_back(cluster: Cluster) -> None:
    answers = {b"c": COMMIT, b"r": ROLLBACK}
    p = await _probe(cluster, on_check=lambda m: answers.get(m.body[:1]))
    try:
        hs = [await p.send_half(TOPIC, b"c-1"), await p.send_half(TOPIC, b"r-1"), await p.send_half(TOPIC, b"c-2")]
        for h in hs:
            await p.end(h, UNKNOW, oneway=True)
        await p.wait_checks(3, 15)
        assert len(p.checks) >= 3
        first = p.checks[0]
        # the check names the re-appended copy, with the real topic and the check count 1
        assert first.msg.topic == TOPIC
        assert first.msg.properties[MessageConst.TRANSACTION_CHECK_TIMES] == "1"
        assert first.header.msgId == first.header.transactionId == hs[0].uniq
        assert first.header.commitLogOffset > hs[-1].commit_log_offset
        await _eventually(lambda: p.pull_all(TOPIC, "CG_U"), [b"c-1", b"c-2"], 10)
        await asyncio.sleep(2.5)  # a few more rounds: nothing checked again, nothing doubled
        n = len(p.checks)
        await asyncio.sleep(2.5)
        assert len(p.checks) == n
        assert _bodies(await p.pull_all(TOPIC, "CG_U")) == [b"c-1", b"c-2"]
    finally:
        await p.close()


async def _eventually(pull: Any, want: list[bytes], timeout: float) -> None:
    """Poll ``pull()`` until its bodies are ``want`` (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    got: list[bytes] = []
    while time.monotonic() < deadline:
        got = _bodies(await pull())
        if got == want:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"after {timeout} s: {got!r}, not {want!r}")
