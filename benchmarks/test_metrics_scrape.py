"""A Prometheus scrape of a broker with 10^4 queues (issue 30: under 100 ms).

The broker starts with 2,500 topics of 4 queues (a topics.json written before it starts), one
message in every queue and one consumer group with a committed offset on every queue, so each
scrape sums bytes in and lag over 10^4 consume queues (lag timestamps read within each
scrape's 10 ms budget, see fastmq/broker/metrics.py). Each round is one
``GET /metrics`` with urllib over loopback, timed from the request to the last byte.
FASTMQ_SCRAPE_TOPICS shrinks the shape for a quick look (the test suite's smoke run, with
``--benchmark-disable``, uses 50 topics); the figures are the client's time per scrape and the
broker's CPU per scrape (the steadier one on a shared machine). Run
``python -m pytest benchmarks/test_metrics_scrape.py --benchmark-only -s`` to see the figures.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from fastmq.protocol.bodies import DataVersion, TopicConfig
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.remoting import RemotingClient
from fastmq.remoting.loop import run
from fastmq.testing import ServerProcess, broker_process, free_port, namesrv_process

TOPICS = int(os.environ.get("FASTMQ_SCRAPE_TOPICS", 2_500))
QUEUES = 4
GROUP = "ScrapeGroup"


def _write_topics(store: Path, topics: int) -> None:
    cfg = store / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    table = {f"S{i:05d}": TopicConfig(f"S{i:05d}", QUEUES, QUEUES, 6).to_obj() for i in range(topics)}
    (cfg / "topics.json").write_text(json.dumps({"dataVersion": DataVersion(1, 1).to_obj(),
                                                 "topicConfigTable": table}))


async def _fill(addr: str, topics: int) -> None:
    """One message per queue and the group's offset 0 on each, 200 requests in flight."""
    client = RemotingClient()
    try:
        sem = asyncio.Semaphore(200)

        async def one(topic: str, qid: int) -> None:
            async with sem:
                h = SendMessageRequestHeader(producerGroup="PG", topic=topic, defaultTopic="TBW102",
                                             defaultTopicQueueNums=4, queueId=qid, sysFlag=0,
                                             bornTimestamp=int(time.time() * 1000), flag=0, properties="")
                r = await client.invoke(addr, create_request(RequestCode.SEND_MESSAGE, h.to_fields(), b"x" * 100), 30)
                assert r.code == 0, r.remark
                r = await client.invoke(addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": GROUP, "topic": topic, "queueId": qid, "commitOffset": 0}), 30)
                assert r.code == 0, r.remark
        await asyncio.gather(*(one(f"S{i:05d}", q) for i in range(topics) for q in range(QUEUES)))
    finally:
        await client.close()


@pytest.fixture(scope="module")
def scraped(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[ServerProcess, str, int]]:
    # as a smoke test (--benchmark-disable, the test suite) a small shape: the fill takes a minute
    topics = min(TOPICS, 50) if request.config.getoption("benchmark_disable", False) else TOPICS
    tmp = tmp_path_factory.mktemp("scrape")
    _write_topics(tmp / "store", topics)
    port = free_port()
    ns = namesrv_process(tmp).start()
    b = broker_process(tmp, ns.addr, brokerName="scrape", metricsExporterType="PROM",
                       metricsPromExporterPort=port, mappedFileSizeCommitLog=64 * 1024 * 1024).start(timeout=120)
    try:
        run(_fill(b.addr, topics))
        yield b, f"http://127.0.0.1:{port}/metrics", topics
    finally:
        b.stop()
        ns.stop()


def test_scrape_of_ten_thousand_queues(benchmark: Any, scraped: tuple[ServerProcess, str, int]) -> None:
    broker, url, topics = scraped
    times: list[float] = []

    def scrape() -> int:
        began = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as r:
            body = r.read()
        times.append(time.perf_counter() - began)
        return len(body)

    size = scrape()  # the first scrape also reads every queue's entries since the start once
    first_ms = times.pop() * 1000
    cpu0 = broker.cpu_seconds()
    benchmark.pedantic(scrape, rounds=30, iterations=1)
    # the broker's own CPU per scrape (idle otherwise): on a shared VM the steadier figure
    cpu_ms = (broker.cpu_seconds() - cpu0) / 30 * 1000
    s = sorted(times)
    benchmark.extra_info.update({"queues": topics * QUEUES, "body_bytes": size, "first_scrape_ms": round(first_ms, 1),
                                 "p50_ms": round(s[len(s) // 2] * 1000, 1), "max_ms": round(s[-1] * 1000, 1),
                                 "broker_cpu_ms_per_scrape": round(cpu_ms, 1),
                                 "load_average_1m": round(os.getloadavg()[0], 2)})
    print(f"\nscrape of {topics * QUEUES} queues: {size} bytes, first {first_ms:.1f} ms, "
          f"p50 {s[len(s) // 2] * 1000:.1f} ms, max {s[-1] * 1000:.1f} ms, broker CPU {cpu_ms:.1f} ms a scrape, "
          f"load {os.getloadavg()[0]:.2f}")
