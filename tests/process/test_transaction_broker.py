"""Issue 26, the broker side: half messages, END_TRANSACTION and the check service, on a real
``fastmq-broker`` process (pure or compiled, as the run's FASTMQ_NO_EXTENSIONS says).

Checks run every second here (``transactionCheckInterval=1000``) with ``transactionTimeOut=1000``:
the defaults (60 s, 6 s) are 4.9.8's and covered by the config tests.
"""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from fastmq.errors import FastMQError
from fastmq.protocol import topic as tv
from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.message import MessageConst, MessageSysFlag
from fastmq.testing.txprobe import COMMIT, ROLLBACK, UNKNOW, TxProbe
from tests.process.helpers import FAST, Cluster

pytestmark = pytest.mark.slow

TOPIC = "TxTopic"
GROUP = "PG_TX"


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


async def test_max_checks_move_the_half_to_check_max_topic(tmp_path: Path) -> None:
    c = Cluster(tmp_path, transactionCheckMax=3)
    c.start()
    p = await _probe(c, on_check=lambda m: None)  # never answers, like a producer stuck in UNKNOW
    try:
        h = await p.send_half(TOPIC, b"stuck")
        await _eventually(lambda: p.pull_all(tv.TRANS_CHECK_MAX_TIME_TOPIC, "CG_MAX", range(1)), [b"stuck"], 20)
        counts = [ck.msg.properties[MessageConst.TRANSACTION_CHECK_TIMES] for ck in p.checks]
        assert counts == ["1", "2", "3"]
        moved = (await p.pull_all(tv.TRANS_CHECK_MAX_TIME_TOPIC, "CG_MAX", range(1)))[0]
        assert moved.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == h.uniq
        assert moved.properties[MessageConst.REAL_TOPIC] == TOPIC
        await asyncio.sleep(2.5)
        assert len(p.checks) == 3  # given up: never checked again
        assert await p.pull_all(TOPIC, "CG_MAX") == []
        # RESUME_CHECK_HALF_MESSAGE (323) gives it another round of checks, answered this time
        from fastmq.protocol.codes import RequestCode
        from fastmq.protocol.command import create_request
        p.on_check = lambda m: COMMIT
        plain = await p.send(TOPIC, b"not-a-half", half=False)
        for msg_id in ("00" * 8 + "0000010000000000", plain.ext_fields["msgId"], "zz", None):
            bad = await p.remoting.invoke(c.addr, create_request(RequestCode.RESUME_CHECK_HALF_MESSAGE,
                                                                 {} if msg_id is None else {"msgId": msg_id}), 5)
            assert (bad.code, bad.remark) == (
                ResponseCode.SYSTEM_ERROR, "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC.")
        r = await p.remoting.invoke(c.addr, create_request(RequestCode.RESUME_CHECK_HALF_MESSAGE,
                                                           {"msgId": moved.msg_id}), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        await _eventually(lambda: p.pull_all(TOPIC, "CG_MAX"), [b"not-a-half", b"stuck"], 15)
        assert p.checks[3].msg.properties[MessageConst.TRANSACTION_CHECK_TIMES] == "1"
    finally:
        await p.close()
        c.stop()


async def test_check_back_reaches_a_producer_restarted_in_the_group(cluster: Cluster) -> None:
    first = await _probe(cluster)
    h = await first.send_half(TOPIC, b"survivor")
    await first.close()  # the producer dies before ending its transaction
    await asyncio.sleep(2.5)  # rounds with no channel for the group: the check is dropped, not lost
    second = await _probe(cluster, on_check=lambda m: COMMIT)
    try:
        await _eventually(lambda: second.pull_all(TOPIC, "CG_RS"), [b"survivor"], 15)
        assert second.checks and second.checks[0].header.msgId == h.uniq
        await asyncio.sleep(2.5)
        assert _bodies(await second.pull_all(TOPIC, "CG_RS")) == [b"survivor"]
    finally:
        await second.close()


async def test_kill9_between_half_and_end_then_checked_again(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    broker = c.start()
    port = broker.port
    p = await _probe(c)
    halves = [await p.send_half(TOPIC, f"k{i}".encode(), queue_id=i % 4) for i in range(6)]
    await p.end(halves[0], COMMIT)  # one ended before the crash
    await p.close()
    await asyncio.sleep(0.5)  # the topic table's write (0.1 s behind) is not the crash under test
    broker.kill()  # SIGKILL: the other halves were never ended
    c.start(port=port)
    want = {b"k0", b"k2", b"k4"}
    q = await _probe(c, on_check=lambda m: COMMIT if m.body in want else ROLLBACK)
    try:
        await _eventually(lambda: q.pull_all(TOPIC, "CG_K"), [b"k0", b"k2", b"k4"], 20)
        checked = {ck.msg.body for ck in q.checks}
        assert checked == {b"k1", b"k2", b"k3", b"k4", b"k5"}  # k0 was resolved before the kill
        await asyncio.sleep(2.5)
        assert _bodies(await q.pull_all(TOPIC, "CG_K")) == [b"k0", b"k2", b"k4"]
    finally:
        await q.close()
        c.stop()


async def test_kill9_between_commit_and_op_message_commits_once(tmp_path: Path) -> None:
    """The state a kill -9 leaves between the commit's two puts: the real message stored, its op
    message not. It is made exactly (the broker killed after the half, then the commit's first put
    done by the broker's own code on its store); after the restart nothing is stored twice, the
    consumer that had the message does not get it again, and the half counts as resolved."""
    from fastmq.broker.transaction.bridge import TransactionalMessageBridge
    from fastmq.store.config import MessageStoreConfig
    from fastmq.store.message_store import MessageStore

    c = Cluster(tmp_path)
    broker = c.start()
    port = broker.port
    p = await _probe(c)
    await p.send(TOPIC, b"before", half=False)
    h = await p.send_half(TOPIC, b"once")
    await p.close()
    await asyncio.sleep(0.5)  # (as above: the topic table's write is not the crash under test)
    broker.kill()
    store = MessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path / "store"),
                                            mappedFileSizeCommitLog=4 * 1024 * 1024), store_host=f"127.0.0.1:{port}")
    store.load()
    store.start()
    try:
        half = store.look_message_by_offset(h.commit_log_offset)
        assert half is not None and half.topic == tv.TRANS_HALF_TOPIC
        real = TransactionalMessageBridge.to_committed(half, h.commit_log_offset)
        assert real is not None
        assert (await store.put_messages([real])).ok
    finally:
        store.shutdown()
    c.start(port=port)
    q = await _probe(c, on_check=lambda m: COMMIT)  # a producer that would commit it again
    try:
        seen = await q.pull_all(TOPIC, "CG_ONCE")  # the group consumes it (and everything else)
        assert _bodies(seen) == [b"before", b"once"]
        await asyncio.sleep(4)  # several check rounds
        assert _bodies(await q.pull_all(TOPIC, "CG_ONCE")) == [b"before", b"once"]  # stored once
        ops = await q.pull_all(tv.TRANS_OP_HALF_TOPIC, "CG_SYS", range(1))
        assert [m.body for m in ops] == [str(h.queue_offset).encode()]  # resolved
    finally:
        await q.close()
        c.stop()


async def test_slave_holds_the_topics_refuses_end_and_never_checks(tmp_path: Path) -> None:
    from fastmq.testing import EmbeddedCluster

    ec = EmbeddedCluster(tmp_path, slave=True, broker_conf=FAST).start()
    master_probe = TxProbe(ec.broker_addr, GROUP)
    slave_probe = TxProbe(ec.slaves[0].addr, GROUP)
    try:
        await master_probe.heartbeat()
        await slave_probe.heartbeat()  # a channel of the group on the slave: a check would reach it
        h_open = await master_probe.send_half(TOPIC, b"open")
        h_done = await master_probe.send_half(TOPIC, b"done")
        r = await master_probe.end(h_done, COMMIT)
        assert r is not None and r.code == ResponseCode.SUCCESS, r.remark
        # replicated: the slave holds the half and op records at the master's offsets
        deadline = time.monotonic() + 20
        halves: list[Any] = []
        ops: list[Any] = []
        while time.monotonic() < deadline:
            halves = await slave_probe.pull_all(tv.TRANS_HALF_TOPIC, "CG_SLAVE", range(1))
            ops = await slave_probe.pull_all(tv.TRANS_OP_HALF_TOPIC, "CG_SLAVE", range(1))
            if len(halves) >= 2 and ops:
                break
            await asyncio.sleep(0.3)
        assert [m.body for m in halves[:2]] == [b"open", b"done"]
        assert [m.body for m in ops] == [str(h_done.queue_offset).encode()]
        # END_TRANSACTION on the slave is refused as 4.9 does
        slave_end = TxProbe(ec.slaves[0].addr, GROUP)
        try:
            r = await slave_end.end(h_open, COMMIT)
            assert r is not None and r.code == ResponseCode.SLAVE_NOT_AVAILABLE
        finally:
            await slave_end.close()
        # the master is killed: its slave must not start checking the open half
        await master_probe.close()
        ec.brokers[0].kill()
        await asyncio.sleep(4)  # four check intervals
        assert slave_probe.checks == []
    finally:
        await slave_probe.close()
        await master_probe.close()
        ec.slaves[0].stop()
        assert ec.namesrv is not None
        ec.namesrv.stop()


async def test_a_consumer_group_gets_exactly_the_committed_once(tmp_path: Path) -> None:
    from fastmq.aio import PushConsumer
    from fastmq.client.push_consumer import ConsumeStatus

    c = Cluster(tmp_path, transactionCheckMax=2)
    c.start()
    assert c.ns is not None
    got: list[bytes] = []

    def listener(msgs: list[Any]) -> Any:
        got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    # i % 5: 0 committed at once, 1 rolled back at once, 2 committed on check, 3 rolled back on
    # check, 4 never answered (moved after the last check)
    def on_check(m: Any) -> int | None:
        kind = int(m.body.split(b"-")[1]) % 5
        return {2: COMMIT, 3: ROLLBACK}.get(kind)

    p = await _probe(c, on_check=on_check)
    consumer = PushConsumer("CG_ONCE_ALL", namesrv_addr=c.ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    try:
        await p.send(TOPIC, b"plain-0", half=False)
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(listener)
        await consumer.start()
        for i in range(20):
            h = await p.send_half(TOPIC, f"tx-{i}".encode(), queue_id=i % 4)
            state = {0: COMMIT, 1: ROLLBACK}.get(i % 5, UNKNOW)
            await p.end(h, state, oneway=True)
        want = sorted([b"plain-0"] + [f"tx-{i}".encode() for i in range(20) if i % 5 in (0, 2)])
        await _eventually(lambda: p.pull_all(tv.TRANS_CHECK_MAX_TIME_TOPIC, "CG_MAXALL", range(1)),
                          sorted(f"tx-{i}".encode() for i in range(20) if i % 5 == 4), 30)
        deadline = time.monotonic() + 20
        while sorted(got) != want and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await asyncio.sleep(2)  # more rounds: nothing new, nothing twice
        assert sorted(got) == want
    finally:
        await consumer.shutdown()
        await p.close()
        c.stop()


async def test_keys_from_update_broker_config(cluster: Cluster) -> None:
    from fastmq.protocol.codes import RequestCode
    from fastmq.protocol.command import create_request

    p = await _probe(cluster)
    try:
        async def update(body: bytes) -> Any:
            return await p.remoting.invoke(cluster.addr, create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, body), 5)

        r = await update(b"transactionCheckMax=2\ntransactionTimeOut=1500\n"
                         b"endTransactionThreadPoolNums=3\nendTransactionPoolQueueCapacity=5000\n")
        assert r.code == ResponseCode.SUCCESS, r.remark
        r = await p.remoting.invoke(cluster.addr, create_request(RequestCode.GET_BROKER_CONFIG, {}), 5)
        text = (r.body or b"").decode()
        assert "transactionCheckMax=2\n" in text and "transactionTimeOut=1500\n" in text
        assert "endTransactionThreadPoolNums=3\n" in text and "endTransactionPoolQueueCapacity=5000\n" in text
        # 4.9.8's runtime info shows the end-transaction pool (fastmq has none: nothing queues)
        r = await p.remoting.invoke(cluster.addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5)
        table = json.loads(r.body or b"{}")["table"]
        assert (table["EndTransactionQueueSize"], table["EndTransactionThreadPoolQueueCapacity"]) == ("0", "5000")
        for bad in (b"transactionCheckInterval=0\n", b"transactionCheckMax=0\n", b"transactionTimeOut=x\n"):
            r = await update(bad)
            assert r.code == ResponseCode.SYSTEM_ERROR, bad
        # the new maximum applies from the next round: two checks, then moved
        await p.send_half(TOPIC, b"two-checks")
        await _eventually(lambda: p.pull_all(tv.TRANS_CHECK_MAX_TIME_TOPIC, "CG_UPD", range(1)), [b"two-checks"], 20)
        assert [ck.msg.properties[MessageConst.TRANSACTION_CHECK_TIMES] for ck in p.checks] == ["1", "2"]
        # halves take the send fast path once the half topic exists: a refusal switched on while
        # the broker runs still reaches them, and switched off lets them through again
        r = await update(b"rejectTransactionMessage=true\n")
        assert r.code == ResponseCode.SUCCESS, r.remark
        for _ in range(2):
            r = await p.send(TOPIC, b"refused", half=True)
            assert r.code == ResponseCode.NO_PERMISSION, r.remark
        r = await update(b"rejectTransactionMessage=false\n")
        assert r.code == ResponseCode.SUCCESS, r.remark
        for _ in range(2):  # (rolled back: no check of them reaches the module's later tests)
            r = await p.end(await p.send_half(TOPIC, b"taken-again"), ROLLBACK)
            assert r is not None and r.code == ResponseCode.SUCCESS, r.remark
    finally:
        await p.close()


async def test_kill9_in_a_stream_of_commits_loses_and_doubles_nothing(tmp_path: Path) -> None:
    """A natural crash point: the broker is killed while a stream of oneway commits arrives, so
    some are done, some not, and maybe one is cut between its real message and its op message.
    After the restart the checks (answered commit) finish the rest: every message once."""
    c = Cluster(tmp_path)
    broker = c.start()
    port = broker.port
    p = await _probe(c)
    n = 120
    halves = [await p.send_half(TOPIC, f"s{i:03d}".encode(), queue_id=i % 4) for i in range(n)]
    await asyncio.sleep(0.5)  # the topic table's write is not the crash under test
    for k, h in enumerate(halves):
        try:
            await p.end(h, COMMIT, oneway=True)
        except FastMQError:  # the broker is gone: the rest of the stream is lost with it
            break
        if k == n // 2:
            broker.proc.kill()  # SIGKILL at once, with commits still arriving
        if k % 8 == 0:
            await asyncio.sleep(0)
    broker.stop()
    await p.close()
    c.start(port=port)
    q = await _probe(c, on_check=lambda m: COMMIT)
    try:
        want = sorted(f"s{i:03d}".encode() for i in range(n))
        deadline = time.monotonic() + 30
        got: list[bytes] = []
        while time.monotonic() < deadline:
            got = _bodies(await q.pull_all(TOPIC, "CG_STREAM"))
            if len(got) >= n:
                break
            await asyncio.sleep(0.3)
        await asyncio.sleep(3)  # more rounds
        got = _bodies(await q.pull_all(TOPIC, "CG_STREAM"))
        assert got == want, (len(got), len(set(got)))
    finally:
        await q.close()
        c.stop()


async def test_check_immunity_time_delays_the_check(cluster: Cluster) -> None:
    """CHECK_IMMUNITY_TIME_IN_SECONDS: the half is not checked before that many seconds; meanwhile
    it is re-appended marked with its first queue offset, so a commit of the first half still
    resolves the copies (here: nothing stored twice, the check finds it committed)."""
    p = await _probe(cluster, on_check=lambda m: COMMIT)
    try:
        imm = {MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS: "4"}
        t0 = time.monotonic()
        waiting = await p.send_half(TOPIC, b"imm-wait", extra=imm)
        ended = await p.send_half(TOPIC, b"imm-ended", extra=imm)
        await asyncio.sleep(1.6)  # a round has re-appended both, marked
        r = await p.end(ended, COMMIT)
        assert r is not None and r.code == ResponseCode.SUCCESS, r.remark
        await p.wait_checks(1, 15)
        assert p.checks, "never checked"
        first = p.checks[0]
        assert first.at - t0 >= 3.5  # not before the immunity time (4 s, born before t0 + 0.1)
        assert first.msg.body == b"imm-wait"
        assert first.msg.properties[MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET] == str(waiting.queue_offset)
        await _eventually(lambda: p.pull_all(TOPIC, "CG_IMM"), [b"imm-ended", b"imm-wait"], 10)
        await asyncio.sleep(3)
        assert _bodies(await p.pull_all(TOPIC, "CG_IMM")) == [b"imm-ended", b"imm-wait"]
        assert all(ck.msg.body == b"imm-wait" for ck in p.checks)
    finally:
        await p.close()


async def test_check_progress_survives_a_restart(tmp_path: Path) -> None:
    """The check service's progress is CID_RMQ_SYS_TRANS's offsets in consumerOffset.json: after a
    restart, resolved halves (and the copies checks made) are not checked again."""
    import json

    c = Cluster(tmp_path)
    broker = c.start()
    port = broker.port
    p = await _probe(c, on_check=lambda m: COMMIT if m.body == b"via-check" else None)
    try:
        await p.send_half(TOPIC, b"via-check")
        h = await p.send_half(TOPIC, b"direct")
        await p.end(h, ROLLBACK)
        await _eventually(lambda: p.pull_all(TOPIC, "CG_P"), [b"via-check"], 15)
        await asyncio.sleep(2.5)  # rounds pass the check's copy and both op messages
    finally:
        await p.close()
    broker.stop()
    table = json.loads((tmp_path / "store" / "config" / "consumerOffset.json").read_text())["offsetTable"]
    half_key = f"{tv.TRANS_HALF_TOPIC}@{tv.TRANS_SYS_GROUP}"
    op_key = f"{tv.TRANS_OP_HALF_TOPIC}@{tv.TRANS_SYS_GROUP}"
    assert int(table[half_key]["0"]) == 3  # two halves and the one copy a check made
    assert int(table[op_key]["0"]) == 2  # both op messages accounted for
    c.start(port=port)
    q = await _probe(c, on_check=lambda m: COMMIT)
    try:
        await asyncio.sleep(3.5)
        assert q.checks == []
        assert _bodies(await q.pull_all(TOPIC, "CG_P")) == [b"via-check"]
    finally:
        await q.close()
        c.stop()


async def test_ends_under_sync_flush_wait_for_the_flush(tmp_path: Path) -> None:
    """SYNC_FLUSH: a commit and a rollback on the batch path are answered once flushed, a oneway
    commit is stored all the same, and only the committed messages reach a consumer."""
    c = Cluster(tmp_path, flushDiskType="SYNC_FLUSH")
    c.start()
    try:
        p = await _probe(c)
        try:
            r = await p.send(TOPIC, b"plain", half=False)
            assert r.code == ResponseCode.SUCCESS
            h1, h2, h3 = [await p.send_half(TOPIC, body, queue_id=0) for body in (b"c1", b"r2", b"c3")]
            r1 = await p.end(h1, COMMIT)
            r2 = await p.end(h2, ROLLBACK)
            assert r1 is not None and r1.code == ResponseCode.SUCCESS, r1.remark
            assert r2 is not None and r2.code == ResponseCode.SUCCESS, r2.remark
            await p.end(h3, COMMIT, oneway=True)
            got: list[Any] = []
            deadline = time.monotonic() + 10
            while len(got) < 3 and time.monotonic() < deadline:
                got = await p.pull_all(TOPIC, "CG_SYNC")
                await asyncio.sleep(0.05)
            assert _bodies(got) == [b"c1", b"c3", b"plain"]
        finally:
            await p.close()
    finally:
        c.stop()
