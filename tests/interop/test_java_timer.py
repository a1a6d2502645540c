"""Timer messages from the Java 4.9.8 client (opt-in): ``putUserProperty("TIMER_DELIVER_MS", ...)``
on a fastmq broker holds each message until its time, and the Java consumer then receives them.

Skipped, with the reason, without ``FASTMQ_JAVA_CLASSPATH`` (``source /work/java498/READY``) and javac.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import time

import pytest

from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.message import MessageConst, decode_records
from fastmq.testing import EmbeddedCluster
from fastmq.testing.java_peer import compile_java_peer, run_peer
from tests.support import pull_request

CLASSPATH = os.environ.get("FASTMQ_JAVA_CLASSPATH", "")
pytestmark = [
    pytest.mark.fastmq_cluster(broker_conf={"mappedFileSizeCommitLog": 16777216}),
    pytest.mark.skipif(not CLASSPATH or shutil.which("javac") is None,
                       reason="FASTMQ_JAVA_CLASSPATH (RocketMQ's Java client) and javac not both set"),
]


@pytest.fixture(scope="module")
def java_peer(tmp_path_factory) -> str:
    return compile_java_peer(tmp_path_factory.mktemp("java-peer"), CLASSPATH)


async def test_java_client_timer_property(java_peer, fastmq_cluster: EmbeddedCluster, client) -> None:
    ns, a = fastmq_cluster.namesrv_addr, fastmq_cluster.broker_addr
    topic = f"JavaTimer_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    sent, (result,), log = await asyncio.to_thread(run_peer, java_peer, ["produce", ns, topic, "5", "timer=4000"], 120)
    assert result["ok"] == 5, log
    done_at = int(time.time() * 1000)

    async def pulled() -> list:
        out = []
        for q in range(4):
            r = await client.invoke(a, pull_request(topic, q, 0), 5)
            if r.code == ResponseCode.SUCCESS:
                out += decode_records(r.body)
        return out

    early = await pulled()
    # held: (the JVM's start and shutdown after the sends take well under the 4 s)
    assert not early or int(time.time() * 1000) - done_at > 3000, [m.body for m in early]
    msgs, (done,), log = await asyncio.to_thread(
        run_peer, java_peer, ["consume", ns, topic, f"GID_JAVA_TIMER_{os.getpid()}", "5", "60"], 120)
    assert done["complete"], log
    assert sorted({m["body"] for m in msgs}) == [f"java-{i}" for i in range(5)], log
    for m in await pulled():
        p = m.properties
        assert int(p[MessageConst.TIMER_DEQUEUE_MS]) >= int(p[MessageConst.TIMER_DELIVER_MS])
        assert p["userProp"].startswith("value-") and m.tags == "TagJ"
