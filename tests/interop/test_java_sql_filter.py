"""SQL92 filters across implementations (opt-in):

- the Java 4.9.8 client's ``MessageSelector.bySql`` consumer against fastmq's broker with
  enablePropertyFilter=true (needs ``FASTMQ_JAVA_CLASSPATH`` and javac);
- fastmq's client against an Apache RocketMQ 4.9.8 broker started with enablePropertyFilter=true
  (needs ``FASTMQ_JAVA_SQL_NAMESRV``: its NameServer).

Each test is skipped, with the reason, when its peer is not set up.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import time

import pytest

from fastmq.aio import Message, MessageSelector, Producer
from fastmq.client.push_consumer import ConsumeStatus, PullConsumer, PushConsumer
from fastmq.errors import FilterRefusedError
from fastmq.testing import EmbeddedCluster
from fastmq.testing.java_peer import compile_java_peer, run_peer
from tests.support import wait_until

pytestmark = pytest.mark.fastmq_cluster(broker_conf={"enablePropertyFilter": "true",
                                                     "mappedFileSizeCommitLog": 16777216})

CLASSPATH = os.environ.get("FASTMQ_JAVA_CLASSPATH", "")
SQL_NAMESRV = os.environ.get("FASTMQ_JAVA_SQL_NAMESRV", "")
needs_java_client = pytest.mark.skipif(not CLASSPATH or shutil.which("javac") is None,
                                       reason="FASTMQ_JAVA_CLASSPATH (RocketMQ's Java client) and javac not both set")
needs_apache_sql = pytest.mark.skipif(
    not SQL_NAMESRV, reason="FASTMQ_JAVA_SQL_NAMESRV (an Apache RocketMQ broker with enablePropertyFilter=true) not set")

# 4.9.8's SqlFilterConsumer expression, on the Java peer's properties (tag TagJ, n = index)
JAVA_SQL = "(TAGS is not null and TAGS in ('TagJ', 'TagB')) and (n is not null and n between 3 and 7)"


def _unique(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{time.monotonic_ns() % 10**9}"


@pytest.fixture(scope="module")
def java_peer(tmp_path_factory) -> str:
    return compile_java_peer(tmp_path_factory.mktemp("java-peer"), CLASSPATH)


@needs_java_client
async def test_java_sql_consumer_on_a_fastmq_broker(java_peer, fastmq_cluster: EmbeddedCluster) -> None:
    """Java's producer sets n = 0..11; Java's bySql consumer gets n 3..7 only: its start passes
    CHECK_CLIENT_CONFIG, its pulls (no expression in them) use the heartbeat's subscription."""
    ns = fastmq_cluster.namesrv_addr
    topic = _unique("JavaSqlOnFastmq")
    sent, (result,), log = await asyncio.to_thread(run_peer, java_peer, ["produce", ns, topic, "12"], 120)
    assert result["ok"] == 12, log
    msgs, (done,), log = await asyncio.to_thread(
        run_peer, java_peer, ["consume", ns, topic, _unique("GID_JAVA_SQL"), "5", "60", f"sql={JAVA_SQL}"], 120)
    assert done["complete"], log
    await asyncio.sleep(0)
    assert sorted({m["body"] for m in msgs}) == [f"java-{i}" for i in range(3, 8)], log
    # and fastmq's own consumer, on the Java producer's messages
    got: list[bytes] = []
    c = PushConsumer(_unique("GID_FASTMQ_SQL"), namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(topic, MessageSelector.by_sql("n >= 10"))
    c.register_message_listener(lambda batch: got.extend(m.body for m in batch) or ConsumeStatus.CONSUME_SUCCESS)
    await c.start()
    try:
        assert await wait_until(lambda: len(set(got)) >= 2, 20), got
    finally:
        await c.shutdown()
    assert set(got) == {b"java-10", b"java-11"}


@needs_java_client
async def test_java_consumer_with_a_bad_expression_fails_to_start(java_peer, fastmq_cluster: EmbeddedCluster) -> None:
    ns = fastmq_cluster.namesrv_addr
    topic = _unique("JavaSqlBad")
    await asyncio.to_thread(run_peer, java_peer, ["produce", ns, topic, "1"], 120)
    _, (done,), log = await asyncio.to_thread(
        run_peer, java_peer, ["consume", ns, topic, _unique("GID_JAVA_SQL_BAD"), "1", "20", "sql=n > 'x'"], 120)
    assert not done["complete"] and "CODE: 23" in (done.get("error") or ""), log
    assert "Value ''x'' cannot be compared." in done["error"], log


@needs_apache_sql
async def test_fastmq_client_on_an_apache_broker_with_sql() -> None:
    """fastmq's push and lite pull consumers with by_sql against Apache RocketMQ 4.9.8."""
    topic = _unique("FastmqSqlOnApache")
    async with Producer(_unique("PG_SQL_APACHE"), namesrv_addr=SQL_NAMESRV) as p:
        for i in range(12):
            r = await p.send(Message(topic, f"a-{i}".encode(), properties={"TAGS": "TagA", "n": str(i),
                                                                         "region": "eu" if i % 2 else "us"}))
            assert r.status == "SEND_OK"
    want = {f"a-{i}".encode() for i in range(12) if i % 2 and i >= 4}
    got: list[bytes] = []
    c = PushConsumer(_unique("GID_SQL_APACHE"), namesrv_addr=SQL_NAMESRV,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(topic, MessageSelector.by_sql("region = 'eu' AND n >= 4"))
    c.register_message_listener(lambda batch: got.extend(m.body for m in batch) or ConsumeStatus.CONSUME_SUCCESS)
    await c.start()
    try:
        assert await wait_until(lambda: set(got) >= want, 40), got
        await asyncio.sleep(1)
    finally:
        await c.shutdown()
    assert set(got) == want
    pc = PullConsumer(_unique("GID_SQL_APACHE_PULL"), namesrv_addr=SQL_NAMESRV,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    pc.subscribe(topic, MessageSelector.by_sql("n < 2"))
    await pc.start()
    polled: list[bytes] = []
    try:
        deadline = time.monotonic() + 40
        while len(set(polled)) < 2 and time.monotonic() < deadline:
            polled += [m.body for m in await pc.poll(1.0)]
    finally:
        await pc.shutdown()
    assert set(polled) == {b"a-0", b"a-1"}
    bad = PushConsumer(_unique("GID_SQL_APACHE_BAD"), namesrv_addr=SQL_NAMESRV)
    bad.subscribe(topic, MessageSelector.by_sql("n > 'x'"))
    bad.register_message_listener(lambda batch: ConsumeStatus.CONSUME_SUCCESS)
    with pytest.raises(FilterRefusedError) as info:
        await bad.start()
    await bad.shutdown()
    assert info.value.code == 23 and "cannot be compared" in info.value.remark
