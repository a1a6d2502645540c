"""One client's heavy requests against everyone else's latency (issue 32, item 2).

- topic creation on a broker holding 20,000 topics, 100 a second started on schedule (each
  answered once on disk): the rate done, each creation's own time, and the NameServer's route
  lookups meanwhile (p99; the goal is under 10 ms);
- a heartbeat naming a new consumer group, at 10 groups and after 2,000 (the goal: the same);
- 20 QUERY_MESSAGE walks of a 100k-entry key at once: other clients' sends and pulls meanwhile.

Each figure is measured once per round (``benchmark.pedantic``) and lands in ``extra_info``;
run ``python -m pytest benchmarks/test_hostile_stalls.py --benchmark-only -s`` to see them.
FASTMQ_STALL_TOPICS / _CREATE_SECONDS / _GROUPS / _KEYS shrink the shapes for a quick look; a
smoke run (``--benchmark-disable``, as scripts/test.sh runs benchmarks) takes ``SMOKE``'s shapes:
every path runs, nothing is measured.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from fastmq.protocol.bodies import DataVersion, TopicConfig
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.protocol.heartbeat import ConsumerData, HeartbeatData, build_subscription
from fastmq.remoting import RemotingClient
from fastmq.remoting.loop import run
from fastmq.testing import broker_process, namesrv_process

TOPICS = int(os.environ.get("FASTMQ_STALL_TOPICS", 20_000))
GROUPS = int(os.environ.get("FASTMQ_STALL_GROUPS", 2_000))
CREATE_PER_S = 100
CREATE_SECONDS = float(os.environ.get("FASTMQ_STALL_CREATE_SECONDS", 5.0))
#: The shapes of a smoke run (above 256 keys: the query window holds the first 256).
SMOKE = {"topics": 500, "create_seconds": 1.0, "groups": 100, "keys": 1_000, "query_seconds": 1.0}


def _shape(config: pytest.Config, name: str, full: float) -> Any:
    """``full``, or ``SMOKE[name]`` in a smoke run (timing disabled)."""
    return SMOKE[name] if config.getoption("benchmark_disable", False) else full


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def _ms(x: float) -> float:
    return round(x * 1000, 2)


def _write_topics(store: Path, n: int) -> None:
    """A topics.json of ``n`` user topics, as the broker writes it, so the broker starts with them."""
    cfg = store / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    table = {f"T{i:06d}": TopicConfig(f"T{i:06d}", 4, 4, 6).to_obj() for i in range(n)}
    (cfg / "topics.json").write_text(json.dumps({"dataVersion": DataVersion(1, 1).to_obj(),
                                                 "topicConfigTable": table}))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Any:
    tmp = tmp_path_factory.mktemp("stalls")
    topics = _shape(request.config, "topics", TOPICS)
    _write_topics(tmp / "store", topics)
    ns = namesrv_process(tmp).start()
    b = broker_process(tmp, ns.addr, brokerName="stall").start(timeout=120)
    try:
        if topics:
            run(_settled(ns.addr, f"T{topics - 1:06d}"))
        yield ns, b
    finally:
        b.stop()
        ns.stop()


async def _settled(ns_addr: str, topic: str) -> None:
    """Until the NameServer routes the broker's last topic, and a little after: the start-up
    registration of the whole table is not what the figures are about."""
    client = RemotingClient()
    try:
        deadline = time.monotonic() + 120
        while (await client.invoke(ns_addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                           {"topic": topic}), 10)).code != 0:
            assert time.monotonic() < deadline, "the broker's topics never reached the NameServer"
            await asyncio.sleep(0.2)
        await asyncio.sleep(2)
    finally:
        await client.close()


async def _timed(coro: Awaitable[Any]) -> float:
    t0 = time.perf_counter()
    await coro
    return time.perf_counter() - t0


async def _lookups_while(client: RemotingClient, ns_addr: str, work: Callable[[], Awaitable[Any]]) -> list[float]:
    """Route lookups every 2 ms on their own connection until ``work`` is done; their latencies."""
    lat: list[float] = []
    done = asyncio.Event()

    async def look() -> None:
        while not done.is_set():
            lat.append(await _timed(client.invoke(ns_addr, create_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T000001"}), 10)))
            await asyncio.sleep(0.002)
    task = asyncio.ensure_future(look())
    try:
        await work()
    finally:
        done.set()
        await task
    return lat


async def _create_topics(ns_addr: str, broker_addr: str, round_no: int, seconds: float) -> dict[str, float]:
    looker, creator = RemotingClient(), RemotingClient()
    create_lat: list[float] = []
    try:
        async def create(i: int) -> None:
            create_lat.append(await _timed(creator.invoke(broker_addr, create_request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": f"New{round_no}_{i}", "defaultTopic": "TBW102",
                                                      "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                                                      "topicFilterType": "SINGLE_TAG"}), 30)))

        async def work() -> None:
            # Open loop: a creation starts when due, answered or not the one before (as from
            # several admin clients), so the rate measured is what the broker sustains.
            nonlocal elapsed
            t0 = time.monotonic()
            tasks = []
            for i in range(n):
                await asyncio.sleep(max(0.0, t0 + i / CREATE_PER_S - time.monotonic()))
                tasks.append(asyncio.ensure_future(create(i)))
            await asyncio.gather(*tasks)
            elapsed = time.monotonic() - t0
        n = int(CREATE_PER_S * seconds)
        elapsed = float("nan")
        lookups = await _lookups_while(looker, ns_addr, work)
    finally:
        await looker.close()
        await creator.close()
    return {"lookup_p99_ms": _ms(_pct(lookups, 0.99)), "lookup_max_ms": _ms(max(lookups)),
            "create_p50_ms": _ms(_pct(create_lat, 0.5)), "create_p99_ms": _ms(_pct(create_lat, 0.99)),
            "creations_per_s_done": round(n / elapsed, 1)}


def test_topic_creation_on_a_big_broker(benchmark: Any, cluster: Any, request: pytest.FixtureRequest) -> None:
    ns, b = cluster
    topics, seconds = _shape(request.config, "topics", TOPICS), _shape(request.config, "create_seconds", CREATE_SECONDS)
    rounds = iter(range(100))
    out: dict[str, float] = {}
    benchmark.pedantic(lambda: out.update(run(_create_topics(ns.addr, b.addr, next(rounds), seconds))), rounds=1,
                       iterations=1)
    benchmark.extra_info.update(topics=topics, creations_per_s=CREATE_PER_S, **out)
    print(f"\n{topics} topics, {CREATE_PER_S} creations/s: {out}")


async def _heartbeats(broker_addr: str, groups: int) -> dict[str, float]:
    client = RemotingClient()
    lat: list[float] = []
    try:
        for i in range(groups):
            group = f"GID_STALL_{i}"
            hb = HeartbeatData(f"127.0.0.1@stall{i}", [], [ConsumerData(
                group, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                [build_subscription("T000001", "*")], False)])
            lat.append(await _timed(client.invoke(broker_addr, create_request(RequestCode.HEART_BEAT, {},
                                                                               hb.to_json()), 30)))
    finally:
        await client.close()
    first, last = lat[:10], lat[-10:]
    # (ten heartbeats are at the mercy of one stall of a shared machine; the medians of a hundred are not)
    return {"first_10_mean_ms": _ms(sum(first) / len(first)), "last_10_mean_ms": _ms(sum(last) / len(last)),
            "first_100_p50_ms": _ms(_pct(lat[:100], 0.5)), "last_100_p50_ms": _ms(_pct(lat[-100:], 0.5)),
            "last_100_p99_ms": _ms(_pct(lat[-100:], 0.99))}


def test_heartbeat_of_a_new_group(benchmark: Any, cluster: Any, request: pytest.FixtureRequest) -> None:
    _ns, b = cluster
    groups = _shape(request.config, "groups", GROUPS)
    out: dict[str, float] = {}
    benchmark.pedantic(lambda: out.update(run(_heartbeats(b.addr, groups))), rounds=1, iterations=1)
    benchmark.extra_info.update(groups=groups, **out)
    print(f"\nheartbeat naming a new group, {groups} groups: {out}")


KEYS = int(os.environ.get("FASTMQ_STALL_KEYS", 100_000))
HEAVY_QUERIES = 20
QUERY_SECONDS = 5.0


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Any:
    """A broker whose topic holds KEYS messages under the one key "hot"; (broker, begin, end) of a
    window holding only the oldest of them, so each query walks the whole chain."""
    from fastmq.aio import Message, Producer
    keys = _shape(request.config, "keys", KEYS)
    tmp = tmp_path_factory.mktemp("query")
    ns = namesrv_process(tmp).start()
    b = broker_process(tmp, ns.addr, brokerName="query", mappedFileSizeCommitLog=64 * 1024 * 1024).start()

    async def fill() -> tuple[int, int]:
        client = RemotingClient()
        p = Producer("PG_STALL_Q", namesrv_addr=ns.addr)
        try:
            r = await client.invoke(b.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "QTopic", "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
                "topicFilterType": "SINGLE_TAG"}), 10)
            assert r.code == 0, r.remark
            await p.start()
            begin = int(time.time() * 1000) - 1000
            sent = 0
            while sent < keys:
                n = min(256, keys - sent)
                await p.send_batch([Message("QTopic", b"q", properties={"KEYS": "hot"}) for _ in range(n)])
                sent += n
                if sent == 256:
                    end = int(time.time() * 1000)
                    await asyncio.sleep(2.0)  # the rest stored in later seconds, outside the window
            return begin, end
        finally:
            await p.shutdown()
            await client.close()
    try:
        begin, end = run(fill())
        yield b, begin, end
    finally:
        b.stop()
        ns.stop()


async def _others_while_queries(addr: str, begin: int, end: int, heavy: int, seconds: float) -> dict[str, float]:
    """``heavy`` clients repeating the long query; one other client's send and pull round trips."""
    lat: list[float] = []
    query_lat: list[float] = []
    stop = asyncio.Event()
    heavy_clients = [RemotingClient() for _ in range(heavy)]
    other = RemotingClient()

    async def query(c: RemotingClient) -> None:
        while not stop.is_set():
            query_lat.append(await _timed(c.invoke(addr, create_request(RequestCode.QUERY_MESSAGE, {
                "topic": "QTopic", "key": "hot", "maxNum": 32, "beginTimestamp": begin, "endTimestamp": end}), 60)))

    fields = {"producerGroup": "PG_STALL_O", "topic": "QTopic", "defaultTopic": "TBW102",
              "defaultTopicQueueNums": "1", "queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0",
              "properties": ""}
    pull = {"consumerGroup": "CG_STALL_O", "topic": "QTopic", "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
            "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}
    try:
        tasks = [asyncio.ensure_future(query(c)) for c in heavy_clients]
        await asyncio.sleep(0.5)
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            lat.append(await _timed(other.invoke(addr, create_request(RequestCode.SEND_MESSAGE, fields, b"o"), 10)))
            lat.append(await _timed(other.invoke(addr, create_request(RequestCode.PULL_MESSAGE, pull), 10)))
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        for c in heavy_clients + [other]:
            await c.close()
    return {"others_p50_ms": _ms(_pct(lat, 0.5)), "others_p99_ms": _ms(_pct(lat, 0.99)),
            "others_max_ms": _ms(max(lat)), "query_p50_ms": _ms(_pct(query_lat, 0.5)), "queries": len(query_lat)}


def test_sends_and_pulls_while_heavy_queries_run(benchmark: Any, indexed: Any, request: pytest.FixtureRequest) -> None:
    b, begin, end = indexed
    keys, seconds = _shape(request.config, "keys", KEYS), _shape(request.config, "query_seconds", QUERY_SECONDS)
    out: dict[str, float] = {}
    benchmark.pedantic(lambda: out.update(run(_others_while_queries(b.addr, begin, end, HEAVY_QUERIES, seconds))),
                       rounds=1, iterations=1)
    benchmark.extra_info.update(keys=keys, heavy_queries=HEAVY_QUERIES, **out)
    print(f"\n{HEAVY_QUERIES} queries walking {keys} entries of one key: {out}")
