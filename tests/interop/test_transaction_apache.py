"""fastmq's TransactionProducer against Apache RocketMQ 4.9.8's broker (opt-in, as the other Java
tests are): set ``FASTMQ_JAVA_NAMESRV`` to the NameServer of a running Apache cluster whose broker
allows topic auto-creation.

The check-back test waits for the Apache broker's first check round: ``transactionTimeOut`` (6 s)
then up to ``transactionCheckInterval`` (60 s at 4.9.8); ``FASTMQ_JAVA_TX_CHECK_WAIT_S`` bounds
that wait (default 100 s), for a broker configured with a shorter interval. Passed against the
4.9.8 build of the java498 branch (NamesrvStartup + BrokerStartup, ``transactionCheckInterval=2000``),
as did ``examples/transaction.py`` with ``TX_CHECK_WAIT_S=20``.
"""
from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import pytest

from fastmq.aio import LocalTransactionState, Message, MessageExt, Producer, TransactionProducer
from fastmq.protocol.message import MessageConst, MessageSysFlag
from tests.support import read_topic

JAVA_NAMESRV = os.environ.get("FASTMQ_JAVA_NAMESRV", "")
CHECK_WAIT_S = float(os.environ.get("FASTMQ_JAVA_TX_CHECK_WAIT_S", "100"))

pytestmark = [pytest.mark.java_rocketmq, pytest.mark.slow,
              pytest.mark.skipif(not JAVA_NAMESRV, reason="FASTMQ_JAVA_NAMESRV (an Apache RocketMQ cluster) not set")]

COMMIT, ROLLBACK, UNKNOW = (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE,
                            LocalTransactionState.UNKNOW)


def _unique(prefix: str) -> str:
    """A topic or group no earlier run left on a long-lived cluster."""
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


class ByBody:
    """``commit`` / ``rollback`` / ``unknow-<then>`` by the body's first word; records checks."""

    def __init__(self) -> None:
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return {b"commit": COMMIT, b"rollback": ROLLBACK}.get(msg.body.split()[0], UNKNOW)

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg)
        return {b"unknow-commit": COMMIT, b"unknow-rollback": ROLLBACK}.get(msg.body.split()[0], UNKNOW)




def _committed_once(got: list[MessageExt], body: bytes, transaction_id: str) -> None:
    (m,) = [m for m in got if m.body == body]
    assert m.sys_flag & 0xC == MessageSysFlag.TRANSACTION_COMMIT_TYPE
    assert m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == transaction_id
    # 4.9.8 keeps the half's properties string: TRAN_MSG is still there (see test_transaction_e2e.py)
    assert m.properties.get(MessageConst.TRANSACTION_PREPARED) in (None, "true")


async def test_commit_and_rollback_on_apache_broker() -> None:
    topic = _unique("TxApache")
    async with Producer(_unique("PG_PLAIN"), namesrv_addr=JAVA_NAMESRV) as plain:
        await plain.send(Message(topic, b"start"))  # the broker creates the topic
    listener = ByBody()
    async with TransactionProducer(_unique("PG_TX"), namesrv_addr=JAVA_NAMESRV, listener=listener) as p:
        committed = await p.send_message_in_transaction(Message(topic, b"commit 1"))
        rolled = await p.send_message_in_transaction(Message(topic, b"rollback 1"))
        assert (committed.status, committed.local_transaction_state) == ("SEND_OK", COMMIT)
        assert rolled.local_transaction_state is ROLLBACK
        got = await read_topic(JAVA_NAMESRV, topic, {b"commit 1"}, 30, 3)
    assert sorted(m.body for m in got) == [b"commit 1", b"start"]
    _committed_once(got, b"commit 1", committed.transaction_id)


async def test_check_back_from_apache_broker() -> None:
    topic = _unique("TxApacheCheck")
    async with Producer(_unique("PG_PLAIN"), namesrv_addr=JAVA_NAMESRV) as plain:
        await plain.send(Message(topic, b"start"))
    listener = ByBody()
    async with TransactionProducer(_unique("PG_TX"), namesrv_addr=JAVA_NAMESRV, listener=listener) as p:
        to_commit = await p.send_message_in_transaction(Message(topic, b"unknow-commit 1"))
        await p.send_message_in_transaction(Message(topic, b"unknow-rollback 1"))
        assert to_commit.local_transaction_state is UNKNOW
        deadline = time.monotonic() + CHECK_WAIT_S
        while len({m.body for m in listener.checked}) < 2:
            assert time.monotonic() < deadline, "the Apache broker did not check both halves in time"
            await asyncio.sleep(0.5)
        got = await read_topic(JAVA_NAMESRV, topic, {b"unknow-commit 1"}, 30, 3)
    checked = {m.body: m for m in listener.checked}
    assert checked[b"unknow-commit 1"].topic == topic  # the real topic, not the half topic
    assert checked[b"unknow-commit 1"].properties[MessageConst.PRODUCER_GROUP] == p.group
    assert sorted(m.body for m in got) == [b"start", b"unknow-commit 1"]
    _committed_once(got, b"unknow-commit 1", to_commit.transaction_id)
