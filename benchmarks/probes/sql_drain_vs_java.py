"""Draining a backlog through a SQL92 filter: fastmq's broker beside Apache RocketMQ 4.9.8's.

    python -m benchmarks.probes.sql_drain_vs_java --java-broker HOST:PORT \\
        --java-pid PID [--messages 20000] [--rounds 3]

Both brokers (fastmq's started here with enablePropertyFilter=true, Apache's already running with
it, its process id given so its CPU can be read) get the same backlog on one queue: ``messages``
messages of 128 bytes, one in ten with ``region = 'eu'``. Each round drains the queue from offset 0
with pulls of 32 carrying the subscription ``region = 'eu'`` (as a pull consumer with
postSubscriptionWhenPull does), then with the tag filter ``TagEu`` (the same one in ten tagged so).
Per scanned message it prints the wall time of the drain (one client, pulls one at a time: network
and both sides; the median of the rounds) and the broker's CPU time (/proc/PID/stat; over all the
rounds), as JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import encode_properties
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _send(topic: str, i: int):
    eu = i % 10 == 0
    props = {"TAGS": "TagEu" if eu else "TagUs", "region": "eu" if eu else "us", "amount": str(i)}
    h = SendMessageRequestHeader(producerGroup="PG_DRAIN", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=1,
                                 queueId=0, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
                                 properties=encode_properties(props).decode())
    return create_request(RequestCode.SEND_MESSAGE_V2, h.to_v2_fields(), b"x" * 128)


async def _fill(c: RemotingClient, addr: str, topic: str, n: int) -> None:
    r = await c.invoke(addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
        "topicFilterType": "SINGLE_TAG"}), 10)
    assert r.code == ResponseCode.SUCCESS, r.remark
    for start in range(0, n, 100):
        rs = await asyncio.gather(*(c.invoke(addr, _send(topic, i), 10) for i in range(start, min(n, start + 100))))
        assert all(r.code == ResponseCode.SUCCESS for r in rs), [r.remark for r in rs if r.code]


async def _drain(c: RemotingClient, addr: str, topic: str, n: int, expr: str, etype: str) -> int:
    off, got = 0, 0
    while off < n:
        r = await c.invoke(addr, create_request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "GID_DRAIN", "topic": topic, "queueId": 0, "queueOffset": off, "maxMsgNums": 32,
            "sysFlag": 0x4, "commitOffset": 0, "suspendTimeoutMillis": 0, "subVersion": 1,
            "subscription": expr, "expressionType": etype}), 10)
        if r.code == ResponseCode.SUCCESS:
            got += r.body.count(b"region\x01eu")
        elif r.code not in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_NOT_FOUND):
            raise RuntimeError(f"pull: {r.code} {r.remark}")
        off = int(r.ext_fields["nextBeginOffset"])
    return got


async def _measure(addr: str, pid: int, n: int, rounds: int) -> dict[str, dict[str, float]]:
    c = RemotingClient(connect_timeout=3)
    topic = f"SqlDrain{os.getpid()}{int(time.time())}"
    out: dict[str, dict[str, float]] = {}
    try:
        await _fill(c, addr, topic, n)
        await asyncio.sleep(1)  # (the consume queue is written behind the commit log)
        for name, expr, etype in (("sql", "region = 'eu'", "SQL92"), ("tag", "TagEu", "TAG")):
            await _drain(c, addr, topic, n, expr, etype)  # warm: pages, caches, the JIT
            walls, cpus = [], []
            for _ in range(rounds):
                c0, t0 = _cpu(pid), time.perf_counter()
                got = await _drain(c, addr, topic, n, expr, etype)
                walls.append((time.perf_counter() - t0) / n * 1e6)
                cpus.append((_cpu(pid) - c0) / n * 1e6)
                assert got == n // 10, got
            # (CPU is read in clock ticks of 10 ms: summed over the rounds, not a median of a few ticks)
            out[name] = {"wall_us_per_scanned": round(statistics.median(walls), 3),
                         "broker_cpu_us_per_scanned": round(sum(cpus) / rounds, 3)}
    finally:
        await c.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--java-broker", required=True)
    ap.add_argument("--java-pid", type=int, required=True)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    res = {"apache-4.9.8": asyncio.run(_measure(a.java_broker, a.java_pid, a.messages, a.rounds))}
    with tempfile.TemporaryDirectory() as d:
        cl = EmbeddedCluster(d, broker_conf={"enablePropertyFilter": "true"}).start()
        try:
            b = cl.brokers[0]
            res["fastmq"] = asyncio.run(_measure(b.addr, b.pid or 0, a.messages, a.rounds))
        finally:
            cl.stop()
    print(json.dumps({"messages": a.messages, "matching": 0.1, **res}, indent=1))


if __name__ == "__main__":
    main()
