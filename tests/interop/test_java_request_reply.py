"""Request-reply across implementations (opt-in).

Against fastmq's broker: Apache RocketMQ 4.9.8's own RPC examples, unchanged from
``rocketmq-example-4.9.8.jar`` (``example.rpc.ResponseConsumer``, ``RequestProducer``,
``AsyncRequestProducer``), and each Java side with fastmq's other side. The examples dial
``127.0.0.1:9876`` (``setNamesrvAddr`` in their code), so fastmq's NameServer listens there: the
tests are skipped when the port is taken. Needs ``FASTMQ_ROCKETMQ_CLASSPATH`` (the 4.9.8 install,
see /work/java498/READY) and ``java``.

Against Apache's broker: fastmq's requester and responder, with ``FASTMQ_JAVA_NAMESRV`` set to the
NameServer of a running Apache 4.9.8 cluster (``autoCreateTopicEnable=true``), as the other
Apache-broker tests take it.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest
import pytest_asyncio

from fastmq.aio import ConsumeStatus, Message, MessageExt, Producer, PushConsumer, create_reply_message
from fastmq.errors import BrokerError, RequestTimeoutError, SendFailedError
from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.message import MessageConst
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, broker_process
from tests.process.helpers import create_topic

CLASSPATH = os.environ.get("FASTMQ_ROCKETMQ_CLASSPATH", "")
OPENS = os.environ.get("FASTMQ_ROCKETMQ_JAVA_OPENS", "").split()
JAVA_NAMESRV = os.environ.get("FASTMQ_JAVA_NAMESRV", "")
EXAMPLES_NAMESRV = "127.0.0.1:9876"
TOPIC = "RequestTopic"  # the examples' topic
RPC = "org.apache.rocketmq.example.rpc."

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


java_examples = pytest.mark.skipif(
    not CLASSPATH or shutil.which("java") is None or not _port_free(9876),
    reason="FASTMQ_ROCKETMQ_CLASSPATH (RocketMQ 4.9.8) and java needed, and port 9876 free (the examples dial it)")


@pytest.fixture(scope="module")
def fastmq_on_9876(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    if not CLASSPATH or shutil.which("java") is None or not _port_free(9876):
        pytest.skip("FASTMQ_ROCKETMQ_CLASSPATH and java needed, and port 9876 free")
    d = tmp_path_factory.mktemp("rpc-java")
    conf = d / "ns.properties"
    conf.write_text(f"listenPort=9876\nkvConfigPath={d / 'kv.json'}\nlogPath={d / 'ns.log'}\n")
    ns = ServerProcess(["fastmq-namesrv", "-c", str(conf)], 9876, d, env={"HOME": str(d)}).start()
    try:
        broker = broker_process(d, ns.addr).start()
        try:
            async def topic() -> int:
                c = RemotingClient()
                try:  # the topic before the consumers: ResponseConsumer starts at its last offset
                    return (await create_topic(c, broker.addr, TOPIC)).code
                finally:
                    await c.close()
            assert asyncio.run(topic()) == ResponseCode.SUCCESS
            yield ns, broker
        finally:
            assert broker.stop() == 0, broker.output()[-3000:]
    finally:
        ns.stop()


def _java(cls: str, run: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    out = run / f"{name}.out"
    with out.open("w") as sink:  # (the child keeps its own copy of the descriptor)
        proc = subprocess.Popen(["java", "-Xmx256m", *OPENS, f"-Duser.home={run}",
                                 f"-Drocketmq.namesrv.addr={EXAMPLES_NAMESRV}", "-cp", CLASSPATH, RPC + cls],
                                stdout=sink, stderr=subprocess.STDOUT)
    return proc, out


async def _wait_for(out: Path, text: str, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = out.read_text(errors="replace")
        if text in got:
            return got
        await asyncio.sleep(0.5)
    return out.read_text(errors="replace")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def java_responder(fastmq_on_9876: Any, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Path]:
    run = tmp_path_factory.mktemp("java-responder")
    proc, out = _java("ResponseConsumer", run, "responder")
    try:
        text = await _wait_for(out, "Consumer Started.", 60)
        assert "Consumer Started." in text, text[-3000:]
        await asyncio.sleep(3)  # its first rebalance places it on the queues
        yield out
    finally:
        _stop(proc)


@java_examples
async def test_java_request_producer_example(java_responder: Path, tmp_path: Path) -> None:
    proc = subprocess.run(["java", "-Xmx256m", *OPENS, f"-Duser.home={tmp_path}", "-cp", CLASSPATH,
                           RPC + "RequestProducer"], capture_output=True, text=True, timeout=120)
    assert "request to <RequestTopic> cost: " in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if "request to <RequestTopic>" in ln)
    assert "replyMessage: MessageExt" in line and "topic='DefaultCluster_REPLY_TOPIC'" in line, line
    assert "body=[114, 101, 112, 108, 121" in line  # "reply message contents."


@java_examples
async def test_java_async_request_producer_example(java_responder: Path, tmp_path: Path) -> None:
    """4.9.8's AsyncRequestProducer never shuts down: it is stopped once the reply is printed.
    Its callback's onSuccess runs twice at 4.9.8, with null when the send succeeds and with the
    reply when it comes (RequestResponseFuture.executeRequestCallback): the reply's line is asked for."""
    proc, out = _java("AsyncRequestProducer", tmp_path, "async")
    try:
        text = await _wait_for(out, "replyMessage: MessageExt", 60)
    finally:
        _stop(proc)
    assert "replyMessage: MessageExt" in text and "topic='DefaultCluster_REPLY_TOPIC'" in text, text[-3000:]


@java_examples
async def test_fastmq_requester_java_responder(java_responder: Path) -> None:
    async with Producer(f"PG_PY_REQ_{uuid.uuid4().hex[:6]}", namesrv_addr=EXAMPLES_NAMESRV) as p:
        reply = await p.request(Message(TOPIC, b"from python"), timeout_ms=5000)
    assert reply.body == b"reply message contents."
    assert reply.properties[MessageConst.MESSAGE_TYPE] == "reply"
    assert MessageConst.REPLY_MESSAGE_ARRIVE_TIME in reply.properties


@java_examples
async def test_java_request_producer_fastmq_responder(fastmq_on_9876: Any, java_responder: Path,
                                                      tmp_path: Path) -> None:
    """The Java ResponseConsumer's group is "please_rename_unique_group_name"; a fastmq consumer of
    a group of its own also gets each request (another group) and answers it: the requester takes
    the first reply that comes and drops the other."""
    replier = Producer("PG_PY_REPLY", namesrv_addr=EXAMPLES_NAMESRV)
    await replier.start()
    answered: list[bytes] = []

    async def respond(msgs: list[MessageExt]) -> ConsumeStatus:
        for m in msgs:
            await replier.send(create_reply_message(m, b"python says hi"))
            answered.append(m.body)
        return ConsumeStatus.CONSUME_SUCCESS
    consumer = PushConsumer("CG_PY_RESPONDER", namesrv_addr=EXAMPLES_NAMESRV)
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(respond)
    await consumer.start()
    try:
        await asyncio.sleep(3)
        proc = await asyncio.to_thread(
            subprocess.run, ["java", "-Xmx256m", *OPENS, f"-Duser.home={tmp_path}", "-cp", CLASSPATH,
                             RPC + "RequestProducer"], capture_output=True, text=True, timeout=120)
        assert "replyMessage: MessageExt" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
        deadline = time.monotonic() + 10
        while b"Hello world" not in answered and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert b"Hello world" in answered
    finally:
        await consumer.shutdown()
        await replier.shutdown()


# ------------------------------------------------------------------ fastmq's client, Apache's broker

apache = pytest.mark.skipif(not JAVA_NAMESRV, reason="FASTMQ_JAVA_NAMESRV (an Apache RocketMQ cluster) not set")


@apache
async def test_fastmq_request_reply_against_apache_broker() -> None:
    topic = f"RpcApache_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    replier = Producer(f"PG_RPC_REPLY_{uuid.uuid4().hex[:6]}", namesrv_addr=JAVA_NAMESRV,
                       retry_times_when_send_failed=0)
    await replier.start()
    outcomes: dict[bytes, Any] = {}
    hold = asyncio.Event()

    async def respond(msgs: list[MessageExt]) -> ConsumeStatus:
        for m in msgs:
            assert m.properties[MessageConst.CLUSTER]  # the Apache broker added it
            if m.body.startswith(b"hold"):
                async def later(m: MessageExt = m) -> None:
                    await asyncio.wait_for(hold.wait(), 60)
                    try:
                        outcomes[m.body] = await replier.send(create_reply_message(m, b"late"))
                    except Exception as exc:
                        outcomes[m.body] = exc
                asyncio.ensure_future(later())
            elif not m.body.startswith(b"none"):
                outcomes[m.body] = await replier.send(create_reply_message(m, b"re: " + m.body))
        return ConsumeStatus.CONSUME_SUCCESS
    async with Producer("PG_RPC_SETUP", namesrv_addr=JAVA_NAMESRV) as p:
        await p.send(Message(topic, b"setup"))  # the topic, before the consumer
    consumer = PushConsumer(f"CG_RPC_{uuid.uuid4().hex[:6]}", namesrv_addr=JAVA_NAMESRV,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(respond)
    await consumer.start()
    requester = Producer(f"PG_RPC_REQ_{uuid.uuid4().hex[:6]}", namesrv_addr=JAVA_NAMESRV)
    await requester.start()
    try:
        reply = None
        for _ in range(10):
            try:
                reply = await requester.request(Message(topic, b"echo apache"), timeout_ms=3000)
                break
            except RequestTimeoutError:
                continue
        assert reply is not None and reply.body == b"re: echo apache"
        assert MessageConst.PUSH_REPLY_TIME in reply.properties
        with pytest.raises(RequestTimeoutError) as info:
            await requester.request(Message(topic, b"none here"), timeout_ms=1000)
        assert info.value.sent
        client_id = requester.instance.client_id
        waiting = asyncio.ensure_future(requester.request(Message(topic, b"hold on"), timeout_ms=30_000))
        await asyncio.sleep(2)
        await requester.shutdown()
        with pytest.raises(RequestTimeoutError):
            await waiting
        hold.set()
        deadline = time.monotonic() + 20
        while b"hold on" not in outcomes and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        outcome = outcomes[b"hold on"]
        assert isinstance(outcome, SendFailedError) and isinstance(outcome.__cause__, BrokerError)
        assert outcome.__cause__.code == ResponseCode.SYSTEM_ERROR
        assert f"push reply message fail, channel of <{client_id}> not found." in str(outcome.__cause__)
    finally:
        await requester.shutdown()
        await consumer.shutdown()
        await replier.shutdown()
