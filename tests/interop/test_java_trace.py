"""Message trace across implementations (opt-in), against fastmq's broker with ``traceTopicEnable``:

- Apache RocketMQ 4.9.8's Java client with trace on (``DefaultMQProducer(group, true)``,
  ``DefaultMQPushConsumer(group, true)``, driven by ``java/TracePeer.java``): fastmq's
  ``query_trace`` reads its Pub, SubBefore and SubAfter records;
- fastmq's clients with trace on: 4.9.8's ``mqadmin queryMsgTraceById``
  (``org.apache.rocketmq.tools.command.MQAdminStartup``) prints their Pub and consume records.

Needs ``FASTMQ_JAVA_CLASSPATH`` / ``FASTMQ_ROCKETMQ_CLASSPATH`` (see /work/java498/READY), javac and java.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from fastmq.aio import ConsumeStatus, Message, MessageExt, Producer, PushConsumer, query_trace
from fastmq.testing import EmbeddedCluster

CLASSPATH = os.environ.get("FASTMQ_JAVA_CLASSPATH", "")
RUN_CLASSPATH = os.environ.get("FASTMQ_ROCKETMQ_CLASSPATH") or CLASSPATH
OPENS = os.environ.get("FASTMQ_ROCKETMQ_JAVA_OPENS", "").split()
#: mqadmin reads its logback config from $ROCKETMQ_HOME/conf
ROCKETMQ_HOME = os.environ.get("FASTMQ_ROCKETMQ_HOME", "")
SOURCE = Path(__file__).resolve().parent / "java" / "TracePeer.java"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not CLASSPATH or shutil.which("javac") is None or shutil.which("java") is None,
    reason="FASTMQ_JAVA_CLASSPATH (RocketMQ 4.9.8's Java client), javac and java needed")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path_factory.mktemp("java-trace"), broker_conf={"traceTopicEnable": "true"}) as c:
        yield c


async def test_java_clients_traces_are_read_by_query_trace(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    out = tmp_path / "classes"
    comp = subprocess.run(["javac", "-cp", CLASSPATH, "-d", str(out), str(SOURCE)], capture_output=True, text=True,
                          timeout=180)
    assert comp.returncode == 0, comp.stderr[-3000:]
    topic, pg, cg = f"JavaTrace{uuid.uuid4().hex[:6]}", f"PG_JT_{uuid.uuid4().hex[:6]}", f"CG_JT_{uuid.uuid4().hex[:6]}"
    proc = await asyncio.to_thread(subprocess.run, [
        "java", "-Xmx256m", *OPENS, "-cp", f"{RUN_CLASSPATH}{os.pathsep}{out}", "TracePeer", cluster.namesrv_addr,
        topic, pg, cg, "60"], capture_output=True, text=True, timeout=150)
    lines = proc.stdout.splitlines()
    sent = [ln.split()[1] for ln in lines if ln.startswith("SENT ")]
    assert sent and any(ln.startswith("CONSUMED ") for ln in lines), proc.stdout[-2000:] + proc.stderr[-2000:]
    kinds: list[str] = []
    for _ in range(50):
        trace = await query_trace(sent[0], namesrv_addr=cluster.namesrv_addr)
        kinds = sorted(r.trace_type for r in trace)
        if kinds == ["Pub", "SubAfter", "SubBefore"]:
            break
        await asyncio.sleep(0.2)
    assert kinds == ["Pub", "SubAfter", "SubBefore"], kinds
    pub = next(r.context for r in trace if r.trace_type == "Pub")
    assert pub.group_name == pg and pub.beans[0].topic == topic and pub.beans[0].keys == "java-trace"
    after = next(r.context for r in trace if r.trace_type == "SubAfter")
    assert after.group_name == cg and after.success


@pytest.mark.skipif(not ROCKETMQ_HOME, reason="FASTMQ_ROCKETMQ_HOME (the 4.9.8 install, for mqadmin) not set")
async def test_mqadmin_query_msg_trace_by_id_shows_fastmq_traces(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    topic, pg, cg = f"PyTrace{uuid.uuid4().hex[:6]}", f"PG_PT_{uuid.uuid4().hex[:6]}", f"CG_PT_{uuid.uuid4().hex[:6]}"
    seen = asyncio.Event()

    async def listener(msgs: list[MessageExt]) -> str:
        seen.set()
        return ConsumeStatus.CONSUME_SUCCESS

    async with Producer(pg, namesrv_addr=ns, enable_trace=True) as producer:
        consumer = PushConsumer(cg, namesrv_addr=ns, enable_trace=True, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        sent = await producer.send(Message(topic, b"traced by fastmq", properties={"KEYS": "py-trace"}))
        await consumer.start()
        try:
            await asyncio.wait_for(seen.wait(), 30)
        finally:
            await consumer.shutdown()  # (sends the traces it holds)
    text = ""
    for _ in range(10):
        proc = await asyncio.to_thread(subprocess.run, [
            "java", "-Xmx256m", *OPENS, f"-Drocketmq.home.dir={ROCKETMQ_HOME}", f"-Duser.home={tmp_path}",
            "-cp", RUN_CLASSPATH, "org.apache.rocketmq.tools.command.MQAdminStartup",
            "queryMsgTraceById", "-n", ns, "-i", sent.msg_id], capture_output=True, text=True, timeout=120)
        text = proc.stdout
        if pg in text and cg in text:
            break
        await asyncio.sleep(1)
    assert "Pub" in text and pg in text and cg in text, text[-3000:] + proc.stderr[-2000:]
