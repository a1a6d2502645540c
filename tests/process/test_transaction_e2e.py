"""Transactions end to end: fastmq's TransactionProducer (asyncio and blocking) against a real
``fastmq-broker`` process. A committed message is consumed once, a rolled-back one never, an
UNKNOW one is settled by the broker's check, also when the check reaches a producer restarted in
the group.

The broker checks every second here (``transactionCheckInterval=1000``, ``transactionTimeOut=1000``);
4.9.8's defaults (60 s, 6 s) would make each check-back test wait a minute.
"""
from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any, Iterator

import pytest

import fastmq
from fastmq import _blocking
from fastmq.aio import LocalTransactionState, Message, MessageExt, Producer, TransactionProducer
from fastmq.protocol.message import MessageConst, MessageSysFlag
from fastmq.testing import EmbeddedCluster
from tests.support import read_topic

pytestmark = pytest.mark.slow

FAST = {"transactionCheckInterval": 1000, "transactionTimeOut": 1000}
COMMIT, ROLLBACK, UNKNOW = (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE,
                            LocalTransactionState.UNKNOW)


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedCluster(tmp_path_factory.mktemp("tx-cluster"), broker_conf=FAST) as cluster:
        yield cluster.namesrv_addr


class ByBody:
    """Decides by the body's first word: ``commit``, ``rollback``, or ``unknow-<then>`` (UNKNOW
    now, ``<then>`` when checked); records the checks it answered."""

    def __init__(self) -> None:
        self.checked: list[bytes] = []
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        word = msg.body.split()[0]
        return {b"commit": COMMIT, b"rollback": ROLLBACK}.get(word, UNKNOW)

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        with self.lock:
            self.checked.append(msg.body)
        word = msg.body.split()[0]
        return {b"unknow-commit": COMMIT, b"unknow-rollback": ROLLBACK}.get(word, UNKNOW)


async def _plain(namesrv: str, topic: str, body: bytes) -> None:
    """A plain send: creates the topic (its queues) before the halves, and marks the end of a read."""
    async with Producer(f"PG_PLAIN_{uuid.uuid4().hex[:6]}", namesrv_addr=namesrv) as p:
        await p.send(Message(topic, body))




def _check_committed(got: list[MessageExt], body: bytes, transaction_id: str) -> None:
    (m,) = [m for m in got if m.body == body]  # exactly once
    assert m.sys_flag & 0xC == MessageSysFlag.TRANSACTION_COMMIT_TYPE
    assert m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == transaction_id
    # (not asserted: whether TRAN_MSG, REAL_TOPIC and REAL_QID are still there. 4.9.8's
    # EndTransactionProcessor clears them from the map after it has set the properties string
    # the store writes, so an Apache broker's committed message keeps them.)


async def test_commit_rollback_and_check_back(namesrv: str) -> None:
    topic, run = "TxE2E", uuid.uuid4().hex[:8].encode()
    await _plain(namesrv, topic, b"start " + run)
    listener = ByBody()
    bodies = {w: w + b" " + run for w in (b"commit", b"rollback", b"unknow-commit", b"unknow-rollback")}
    results = {}
    async with TransactionProducer("PG_TX_E2E", namesrv_addr=namesrv, listener=listener) as p:
        for word, body in bodies.items():
            results[word] = await p.send_message_in_transaction(Message(topic, body), arg=word)
        assert results[b"commit"].local_transaction_state is COMMIT
        assert results[b"rollback"].local_transaction_state is ROLLBACK
        assert results[b"unknow-commit"].local_transaction_state is UNKNOW
        # the producer stays up while the broker checks the two UNKNOW ones (every second)
        got = await read_topic(namesrv, topic, {bodies[b"commit"], bodies[b"unknow-commit"]}, 30, 3)
        deadline = time.monotonic() + 15
        while not {bodies[b"unknow-commit"], bodies[b"unknow-rollback"]} <= set(listener.checked):
            assert time.monotonic() < deadline, f"checked only {listener.checked}"
            await asyncio.sleep(0.2)
    mine = [m for m in got if m.body.endswith(run)]
    assert sorted(m.body for m in mine) == sorted([b"start " + run, bodies[b"commit"], bodies[b"unknow-commit"]])
    _check_committed(got, bodies[b"commit"], results[b"commit"].transaction_id)
    _check_committed(got, bodies[b"unknow-commit"], results[b"unknow-commit"].transaction_id)
    # settled ones are not checked again (rollback and commit were never UNKNOW)
    assert bodies[b"commit"] not in listener.checked and bodies[b"rollback"] not in listener.checked


async def test_check_back_reaches_a_restarted_producer(namesrv: str) -> None:
    """A producer that left a transaction UNKNOW and died: another producer of the group,
    started later, gets the check and commits it."""
    topic, run = "TxE2ERestart", uuid.uuid4().hex[:8].encode()
    await _plain(namesrv, topic, b"start " + run)
    group = f"PG_TX_RESTART_{run.decode()}"
    first = ByBody()
    async with TransactionProducer(group, namesrv_addr=namesrv, listener=first) as p:
        r = await p.send_message_in_transaction(Message(topic, b"unknow-commit " + run))
        assert r.local_transaction_state is UNKNOW
    second = ByBody()

    async def check(msg: MessageExt) -> LocalTransactionState:  # a coroutine check, this time
        second.checked.append(msg.body)
        assert msg.topic == topic and msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == r.transaction_id
        return COMMIT
    second.check_local_transaction = check  # type: ignore[method-assign]
    async with TransactionProducer(group, namesrv_addr=namesrv, listener=second):
        got = await read_topic(namesrv, topic, {b"unknow-commit " + run}, 30, 1)
    assert second.checked[:1] == [b"unknow-commit " + run]
    _check_committed(got, b"unknow-commit " + run, r.transaction_id)


def test_blocking_facade(namesrv: str) -> None:
    topic, run = "TxE2EBlocking", uuid.uuid4().hex[:8].encode()
    _blocking.call(_plain(namesrv, topic, b"start " + run), 30)
    listener = ByBody()
    with fastmq.TransactionProducer("PG_TX_E2E_BLOCKING", namesrv_addr=namesrv, listener=listener) as p:
        committed = p.send_message_in_transaction(fastmq.Message(topic, b"commit " + run))
        p.send_message_in_transaction(fastmq.Message(topic, b"rollback " + run))
        checked = p.send_message_in_transaction(fastmq.Message(topic, b"unknow-commit " + run))
        assert checked.local_transaction_state is fastmq.LocalTransactionState.UNKNOW
        got = _blocking.call(read_topic(namesrv, topic, {b"commit " + run, b"unknow-commit " + run}, 30, 2), 60)
    assert sorted(m.body for m in got if m.body.endswith(run)) == [b"commit " + run, b"start " + run,
                                                                    b"unknow-commit " + run]
    _check_committed(got, b"commit " + run, committed.transaction_id)
    _check_committed(got, b"unknow-commit " + run, checked.transaction_id)
    assert set(listener.checked) == {b"unknow-commit " + run}
