"""TLS sends beside plaintext sends in one run, and the cost of TLS handshakes (issue 29).

One ``fastmq-namesrv`` and one ``fastmq-broker`` in ``tls.server.mode=permissive`` with a
certificate made by ``openssl`` at start; two RemotingClients, one plaintext and one TLS, send
100-byte SEND_MESSAGE requests to the same broker, alternating rounds so both see the same
machine. Figures (``extra_info``): the time per send at one in flight (p50) and the sends per
second with 64 in flight, plaintext and TLS, and their ratios (issue 29's goals: within 1.5x at
one in flight, 2x pipelined); the time to open (connect + handshake + first answer) and close
``HANDSHAKES`` TLS connections one after another, beside the same with plaintext.

Each ratio is the median of ``ROUNDS`` paired rounds' ratios (a plaintext round, then a TLS round
at once), not the ratio of the two kinds' overall figures: this shared VM runs whole stretches of
seconds at a different speed, and a pair taken back to back sees the same stretch, where one
kind's rounds might fall in a fast stretch and the other's in a slow one. The ratio of the overall
medians is kept beside it.
Run ``python -m pytest benchmarks/test_tls_benchmarks.py --benchmark-only -s`` to see them.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import RemotingCommand, create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.remoting import RemotingClient
from fastmq.remoting.loop import run
from fastmq.remoting.tls import client_context, make_self_signed
from fastmq.testing import ServerProcess, broker_process, namesrv_process

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command is not installed")

TOPIC = "TlsBench"
SENDS = int(os.environ.get("FASTMQ_TLS_BENCH_SENDS", 2_000))
HANDSHAKES = int(os.environ.get("FASTMQ_TLS_BENCH_HANDSHAKES", 1_000))
PIPELINE = 64
#: Paired rounds (plaintext then TLS) of each measure.
ROUNDS = 9


def _send() -> RemotingCommand:
    h = SendMessageRequestHeader(producerGroup="PG", topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=4,
                                 queueId=0, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0, properties="")
    return create_request(RequestCode.SEND_MESSAGE, h.to_fields(), b"x" * 100)


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("tls-bench")
    cert, key = make_self_signed(str(tmp), "bench")
    keys = {"tls.server.mode": "permissive", "tls.server.certPath": cert, "tls.server.keyPath": key,
            "tls.config.file": Path(tmp) / "absent"}
    with namesrv_process(tmp) as ns, broker_process(tmp, ns.addr, **keys) as b:
        yield b


async def _serial(client: RemotingClient, addr: str, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = await client.invoke(addr, _send(), 10)
        times.append(time.perf_counter() - t0)
        assert r.code == 0, r.remark
    return times


async def _pipelined(client: RemotingClient, addr: str, n: int) -> float:
    sem = asyncio.Semaphore(PIPELINE)

    async def one() -> None:
        async with sem:
            r = await client.invoke(addr, _send(), 30)
            assert r.code == 0, r.remark
    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return n / (time.perf_counter() - t0)


async def _handshakes(addr: str, n: int, tls: bool) -> float:
    """Seconds to open, use once and close ``n`` connections one after another."""
    ctx = client_context() if tls else None
    t0 = time.perf_counter()
    for _ in range(n):
        c = RemotingClient(ssl=ctx)
        try:
            r = await c.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 10)
            assert r.code == 0
        finally:
            await c.close()
    return time.perf_counter() - t0


def test_tls_sends_beside_plaintext(benchmark: Any, tls_broker: ServerProcess,
                                    request: pytest.FixtureRequest) -> None:
    quick = request.config.getoption("benchmark_disable", False)
    sends, handshakes = (50, 10) if quick else (SENDS, HANDSHAKES)
    addr = tls_broker.addr
    figures: dict[str, Any] = {}

    async def measure() -> None:
        plain, tls = RemotingClient(), RemotingClient(ssl=client_context())
        try:
            await _serial(plain, addr, 20)  # warm: connections, topic creation
            await _serial(tls, addr, 20)
            serial: dict[str, list[float]] = {"plain": [], "tls": []}
            piped: dict[str, list[float]] = {"plain": [], "tls": []}
            serial_ratios: list[float] = []
            piped_ratios: list[float] = []
            for _ in range(ROUNDS):  # alternating rounds: each pair sees the same stretch of machine
                p50: dict[str, float] = {}
                for kind, c in (("plain", plain), ("tls", tls)):
                    times = await _serial(c, addr, max(1, sends // ROUNDS))
                    serial[kind] += times
                    p50[kind] = statistics.median(times)
                serial_ratios.append(p50["tls"] / p50["plain"])
                for kind, c in (("plain", plain), ("tls", tls)):
                    piped[kind].append(await _pipelined(c, addr, max(PIPELINE, sends * 3 // ROUNDS)))
                piped_ratios.append(piped["plain"][-1] / piped["tls"][-1])
            for kind in ("plain", "tls"):
                figures[f"{kind} one in flight p50_us"] = round(statistics.median(serial[kind]) * 1e6, 1)
                figures[f"{kind} {PIPELINE} in flight sends_per_s"] = round(statistics.median(piped[kind]))
            figures["tls/plain one in flight"] = round(statistics.median(serial_ratios), 2)
            figures[f"plain/tls {PIPELINE} in flight"] = round(statistics.median(piped_ratios), 2)
            figures["tls/plain one in flight, overall medians"] = round(
                figures["tls one in flight p50_us"] / figures["plain one in flight p50_us"], 2)
            figures["tls/plain one in flight, lowest pair"] = round(min(serial_ratios), 2)
            figures["tls/plain one in flight, highest pair"] = round(max(serial_ratios), 2)
            for kind, flag in (("plain", False), ("tls", True)):
                secs = await _handshakes(addr, handshakes, flag)
                figures[f"{kind} {handshakes} connections s"] = round(secs, 2)
                figures[f"{kind} connection ms"] = round(secs / handshakes * 1000, 2)
        finally:
            await plain.close()
            await tls.close()

    run(measure())

    def one_tls_send() -> None:
        async def go() -> None:
            c = RemotingClient(ssl=client_context())
            try:
                await _serial(c, addr, 1)
            finally:
                await c.close()
        run(go())

    benchmark.pedantic(one_tls_send, rounds=5, iterations=1)  # (a fresh TLS connection and one send)
    figures["load_average_1m"] = round(os.getloadavg()[0], 2)
    benchmark.extra_info.update(figures)
    print("\n" + "\n".join(f"{k}: {v}" for k, v in figures.items()))
