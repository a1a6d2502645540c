"""A Java 4.9.8 TransactionMQProducer against fastmq's broker (opt-in).

Runs ``tests/interop/java/TxExampleProducer.java`` (the shape of 4.9.8's transaction example: 10
messages, local transaction UNKNOW, check-back by index % 3) with checks every second and three
checks at most; the outcome must be the one Apache's broker gives: 1, 4, 7 committed, 2, 5, 8
rolled back, 0, 3, 6, 9 moved to TRANS_CHECK_MAX_TIME_TOPIC after the last check.

Needs ``FASTMQ_JAVA_CLASSPATH`` (RocketMQ's Java client, see /work/java498/READY) and javac;
skipped with the reason otherwise.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from fastmq.protocol import topic as tv
from tests.process.helpers import Cluster
from fastmq.testing.txprobe import TxProbe

CLASSPATH = os.environ.get("FASTMQ_JAVA_CLASSPATH", "")
#: the whole 4.9.8 install's classpath when the build provides one (the client needs
#: commons-validator at run time, which the client-only classpath may leave out)
RUN_CLASSPATH = os.environ.get("FASTMQ_ROCKETMQ_CLASSPATH") or CLASSPATH
SOURCE = Path(__file__).resolve().parent / "java" / "TxExampleProducer.java"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not CLASSPATH or shutil.which("javac") is None,
    reason="FASTMQ_JAVA_CLASSPATH (RocketMQ 4.9.8's Java client) and javac not both set")]


async def test_java_transaction_example_ends_as_on_apache_broker(tmp_path: Path) -> None:
    out = tmp_path / "classes"
    comp = subprocess.run(["javac", "-cp", CLASSPATH, "-d", str(out), str(SOURCE)], capture_output=True, text=True,
                          timeout=180)
    assert comp.returncode == 0, comp.stderr[-3000:]
    c = Cluster(tmp_path / "cluster", transactionCheckMax=3)
    (tmp_path / "cluster").mkdir()
    c.start()
    assert c.ns is not None
    log = (tmp_path / "java.out").open("w")
    java = subprocess.Popen(["java", "-Xmx256m", "-cp", f"{RUN_CLASSPATH}{os.pathsep}{out}", "TxExampleProducer",
                             c.ns.addr, "TopicTest1234", "please_rename_unique_group_name", "120"],
                            stdout=log, stderr=subprocess.STDOUT)
    probe = TxProbe(c.addr, "PG_OBSERVER")
    want_committed = [f"Hello RocketMQ {i}".encode() for i in (1, 4, 7)]
    want_moved = [f"Hello RocketMQ {i}".encode() for i in (0, 3, 6, 9)]
    committed: list[bytes] = []
    moved: list[bytes] = []
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and java.poll() is None:
            await asyncio.sleep(1)
            if "Exception in thread \"main\"" in (tmp_path / "java.out").read_text(errors="replace"):
                break
            try:
                committed = sorted(m.body for m in await probe.pull_all("TopicTest1234", "CG_JAVA_TX"))
                moved = sorted(m.body for m in await probe.pull_all(tv.TRANS_CHECK_MAX_TIME_TOPIC, "CG_JAVA_TX",
                                                                      range(1)))
            except Exception:  # the topics appear with the first sends
                continue
            if committed == want_committed and moved == want_moved:
                break
        await asyncio.sleep(3)  # a few more rounds change nothing
        committed = sorted(m.body for m in await probe.pull_all("TopicTest1234", "CG_JAVA_TX"))
        moved = sorted(m.body for m in await probe.pull_all(tv.TRANS_CHECK_MAX_TIME_TOPIC, "CG_JAVA_TX", range(1)))
    finally:
        java.kill()
        java.wait(10)
        log.close()
        await probe.close()
        c.stop()
    text = (tmp_path / "java.out").read_text(errors="replace")
    assert text.count(" SEND_OK ") == 10, text[-3000:]
    assert committed == want_committed, text[-3000:]
    assert moved == want_moved, text[-3000:]
    checks = [ln.split() for ln in text.splitlines() if ln.startswith("CHECK ")]
    assert {int(c[1]) for c in checks if c[1] != "null"} == set(range(10))
    assert sum(1 for c in checks if c[1] in ("0", "3", "6", "9")) == 12  # three checks each
