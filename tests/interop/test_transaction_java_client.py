"""Apache RocketMQ's Java TransactionMQProducer against fastmq's broker (opt-in, as the other Java
tests are): set ``FASTMQ_JAVA_CLASSPATH`` to a classpath holding the RocketMQ 4.x Java client.

``tests/java_peer/TxPeer.java`` runs RocketMQ's transaction example shape (ten messages, the
listener deciding by index % 3) against a ``fastmq-broker`` whose check runs every second; the
committed ones and the UNKNOW ones its check commits are consumed, the rolled-back ones never.
Beside test_java_transactions.py (every local transaction UNKNOW, settled by checks up to the
discard), this one has the Java client end transactions from ``executeLocalTransaction`` too.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from fastmq.aio import Message, Producer
from fastmq.protocol.message import MessageSysFlag
from fastmq.testing import EmbeddedCluster
from tests.support import read_topic

CLASSPATH = os.environ.get("FASTMQ_JAVA_CLASSPATH", "")
PEER_SOURCE = Path(__file__).resolve().parent / "java" / "TxPeer.java"

pytestmark = [pytest.mark.java_rocketmq, pytest.mark.slow,
              pytest.mark.skipif(not CLASSPATH or shutil.which("javac") is None,
                                 reason="FASTMQ_JAVA_CLASSPATH (RocketMQ's Java client) and javac not both set")]


@pytest.fixture(scope="module")
def tx_peer(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("tx-peer")
    proc = subprocess.run(["javac", "-cp", CLASSPATH, "-d", str(out), str(PEER_SOURCE)], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return f"{CLASSPATH}{os.pathsep}{out}"


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    conf = {"transactionCheckInterval": 1000, "transactionTimeOut": 1000}
    with EmbeddedCluster(tmp_path_factory.mktemp("tx-java-cluster"), broker_conf=conf) as cluster:
        yield cluster.namesrv_addr


def _run_peer(cp: str, args: list[str], timeout: float) -> tuple[dict[str, list[dict]], str]:
    proc = subprocess.run(["java", "-Xmx256m", "-cp", cp, "TxPeer", *args], capture_output=True, text=True,
                          timeout=timeout)
    lines: dict[str, list[dict]] = {"SENT": [], "CHECK": [], "DONE": []}
    for ln in proc.stdout.splitlines():
        kind, _, rest = ln.partition(" ")
        if kind in lines:
            lines[kind].append(json.loads(rest))
    return lines, proc.stdout[-2000:] + proc.stderr[-2000:]




async def test_java_transaction_producer_on_fastmq_broker(tx_peer: str, namesrv: str) -> None:
    topic = f"TxJava_{uuid.uuid4().hex[:8]}"
    async with Producer("PG_TX_JAVA_PLAIN", namesrv_addr=namesrv) as plain:
        await plain.send(Message(topic, b"start"))  # the broker creates the topic
    lines, log = await asyncio.to_thread(_run_peer, tx_peer, [namesrv, topic, "PG_TX_JAVA", "10", "30"], 120)
    assert len(lines["SENT"]) == 10 and all(s["status"] == "SEND_OK" for s in lines["SENT"]), log
    assert lines["DONE"] and lines["DONE"][0]["checked"] == lines["DONE"][0]["unknown"] == 4, log
    assert {c["index"] for c in lines["CHECK"]} == {0, 3, 6, 9}
    assert all(c["topic"] == topic for c in lines["CHECK"])  # the real topic, not the half topic
    expected = {f"tx-{i}".encode() for i in range(10) if i % 3 != 2} | {b"start"}
    got = await read_topic(namesrv, topic, expected, 30, 2)
    assert sorted(m.body for m in got) == sorted(expected), log
    assert all(m.sys_flag & 0xC == MessageSysFlag.TRANSACTION_COMMIT_TYPE for m in got if m.body != b"start")
