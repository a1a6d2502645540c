"""Sends with the broker's ACL on beside sends with it off, in one run (goal: within 15%).

Two brokers side by side, one with ``aclEnable=true``: the same signed SEND_MESSAGE_V2 frames
(signed once, before timing: what is measured is the broker's check, not the client's signing)
go to each, pipelined (2000 in flight on one connection) and one at a time. The broker without
ACL ignores the signature fields, so the two differ only in the check.

    python -m pytest benchmarks/test_acl_benchmarks.py --benchmark-only -s -p no:cacheprovider

Client and brokers share the 2-core machine. The interleaved test also counts each broker's own
CPU per send (from /proc) and the client's (this process's), which other processes on the machine
move less than the wall clock. Its ``producer`` mode sends with fastmq's asyncio Producer instead
of frames signed in advance: with credentials to the broker with ACL on, without to the other, so
the client's signing counts too.
"""
from __future__ import annotations

import asyncio
import os
import statistics
import time

import pytest

from fastmq._ext.codec import FrameDecoder, encode_frame
from fastmq.aio import Message, Producer
from fastmq.client.acl import AclClientRPCHook, SessionCredentials
from fastmq.client.instance import ClientConfig
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.remoting import RemotingClient
from fastmq.remoting.loop import run
from fastmq.testing import broker_process, namesrv_process

from benchmarks.pipelined import pipelined
from benchmarks.server_cpu import server_cpu

PIPELINE = 2000
LONE = 200
CREDS = SessionCredentials("BenchUser1", "BenchSecret1")
ACL_YML = """\
accounts:
  - accessKey: BenchUser1
    secretKey: BenchSecret1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [BenchAcl=PUB|SUB, BenchAclOn=PUB|SUB]
  - accessKey: BenchAdmin1
    secretKey: BenchSecret1
    admin: true
"""


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory):
    ns = namesrv_process(tmp_path_factory.mktemp("acl-bench-ns")).start()
    yield ns
    ns.stop()


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, namesrv):
    tmp = tmp_path_factory.mktemp("acl-bench")
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(ACL_YML)
    started = []
    try:
        for name, conf in (("off", {}), ("on", {"aclEnable": "true", "aclFile": acl_file})):
            (tmp / name).mkdir()
            started.append((name, broker_process(tmp / name, namesrv.addr, brokerName=f"bench-{name}",
                                                 mappedFileSizeCommitLog=268435456, **conf).start()))
        run(_create_topics(dict(started)))
        yield dict(started)
    finally:
        for _, b in started:
            b.stop()


#: the producer mode's topic on each broker (BenchAcl is on both: a route to it names both)
PRODUCER_TOPICS = {"off": "BenchAclOff", "on": "BenchAclOn"}


async def _create_topics(brokers) -> None:
    client = RemotingClient(rpc_hook=AclClientRPCHook(SessionCredentials("BenchAdmin1", "BenchSecret1")))
    try:
        for name, b in brokers.items():
            for topic in ("BenchAcl", PRODUCER_TOPICS[name]):
                r = await client.invoke(b.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                    "topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
                    "perm": 6, "topicFilterType": "SINGLE_TAG"}), 10)
                assert r.code == 0, r.remark
    finally:
        await client.close()


class _Producers:
    """An asyncio Producer per broker on one loop of its own: with credentials for the broker
    with ACL on, without for the other. A round: ``n`` send_async of 128 bytes, all awaited."""

    def __init__(self, namesrv_addr: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.producers = {
            "off": Producer("PG_BENCH_OFF", namesrv_addr=namesrv_addr),
            "on": Producer("PG_BENCH_ON", client_config=ClientConfig(namesrv_addr=namesrv_addr, credentials=CREDS))}
        for k, p in self.producers.items():
            self.loop.run_until_complete(p.start())
            self.loop.run_until_complete(self._first(p, PRODUCER_TOPICS[k]))

    @staticmethod
    async def _first(p: Producer, topic: str) -> None:
        for _ in range(50):  # the route appears with the brokers' registration of the topic
            try:
                await p.send(Message(topic, b"warm"))
                return
            except Exception:
                await asyncio.sleep(0.2)
        await p.send(Message(topic, b"warm"))

    def round(self, key: str, n: int) -> float:
        p, topic, body = self.producers[key], PRODUCER_TOPICS[key], b"x" * 128

        async def go() -> float:
            t0 = time.perf_counter()
            futs = [await p.send_async(Message(topic, body)) for _ in range(n)]
            for r in await asyncio.gather(*futs):
                assert r.status == "SEND_OK", r
            return time.perf_counter() - t0
        return self.loop.run_until_complete(go())

    def close(self) -> None:
        for p in self.producers.values():
            self.loop.run_until_complete(p.shutdown())
        self.loop.close()


def _signed_frames(n: int, size: int) -> list[bytes]:
    hook = AclClientRPCHook(CREDS)
    frames = []
    for i in range(n):
        h = SendMessageRequestHeader("PG_BENCH", "BenchAcl", "TBW102", 4, i % 4, 0, 1_700_000_000_000, 0,
                                     f"UNIQ_KEY\x01{i:032X}\x02WAIT\x01true\x02", 0, False, None, False)
        req = create_request(RequestCode.SEND_MESSAGE_V2, h.to_v2_fields(), b"x" * size)
        req.opaque = i + 1
        hook(req)
        frames.append(encode_frame(req))
    return frames


async def _one_at_a_time(port: int, frames: list[bytes]) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    dec = FrameDecoder()
    t0 = time.perf_counter()
    for f in frames:
        writer.write(f)
        got: list = []
        while not got:
            chunk = await asyncio.wait_for(reader.read(1 << 16), 30)
            assert chunk, "broker closed the connection"
            got = dec.feed(chunk)
        assert got[0].code == 0, (got[0].code, got[0].remark)
    writer.close()
    return time.perf_counter() - t0


@pytest.mark.parametrize("acl", ["off", "on"])
def test_pipelined_signed_sends(benchmark, brokers, acl: str) -> None:
    b = brokers[acl]
    frames = b"".join(_signed_frames(PIPELINE, 128))
    run(pipelined(b.port, frames, PIPELINE))  # warm up
    elapsed = benchmark.pedantic(lambda: run(pipelined(b.port, frames, PIPELINE)), rounds=15, iterations=1)
    rate = PIPELINE / (benchmark.stats.stats.median if benchmark.stats else elapsed)
    benchmark.extra_info.update(acl=acl, size=128, msgs_per_round=PIPELINE, msgs_per_s=round(rate))
    print(f"\nsigned SEND_MESSAGE_V2, ACL {acl}, {PIPELINE} in flight: {rate:,.0f} msgs/s")


@pytest.mark.parametrize("acl", ["off", "on"])
def test_one_in_flight_signed_sends(benchmark, brokers, acl: str) -> None:
    b = brokers[acl]
    frames = _signed_frames(LONE, 128)
    run(_one_at_a_time(b.port, frames[:20]))  # warm up
    elapsed = benchmark.pedantic(lambda: run(_one_at_a_time(b.port, frames)), rounds=10, iterations=1)
    per = (benchmark.stats.stats.median if benchmark.stats else elapsed) / LONE
    benchmark.extra_info.update(acl=acl, size=128, msgs_per_round=LONE, us_per_send=round(per * 1e6, 1))
    print(f"\nsigned SEND_MESSAGE_V2, ACL {acl}, one in flight: {per * 1e6:,.0f} us per send")



@pytest.mark.parametrize("mode", ["pipelined", "one_in_flight", "producer"])
def test_interleaved_on_and_off(benchmark, namesrv, brokers, mode: str) -> None:
    """Both brokers in every round, in alternating order, so the machine's load swings (other
    processes on the 2 shared cores) fall on both arms alike; the ratio of the medians is the figure."""
    producers = None
    if mode == "producer":
        producers, n = _Producers(namesrv.addr), PIPELINE
        arm = {k: (lambda k=k: producers.round(k, n)) for k in brokers}
    elif mode == "pipelined":
        frames, n = b"".join(_signed_frames(PIPELINE, 128)), PIPELINE
        arm = {k: (lambda b=b: run(pipelined(b.port, frames, n))) for k, b in brokers.items()}
    else:
        lone, n = _signed_frames(LONE, 128), LONE
        arm = {k: (lambda b=b: run(_one_at_a_time(b.port, lone))) for k, b in brokers.items()}
    times: dict[str, list[float]] = {"off": [], "on": []}
    # each broker's own CPU (all its threads) over its rounds: what the check costs the broker,
    # less moved than the wall clock by other processes taking turns on the 2 cores
    cpu = {"off": 0.0, "on": 0.0}
    # the client's CPU (this process: the sender, or the Producer and its loop) over its rounds
    client = {"off": 0.0, "on": 0.0}
    rounds = [0]

    def pair() -> None:
        order = ("off", "on") if rounds[0] % 2 == 0 else ("on", "off")
        rounds[0] += 1
        for k in order:
            c0, p0 = server_cpu(brokers[k]), time.process_time()
            times[k].append(arm[k]())
            client[k] += time.process_time() - p0
            cpu[k] += server_cpu(brokers[k]) - c0
    try:
        pair()  # warm up
        times = {"off": [], "on": []}
        cpu = {"off": 0.0, "on": 0.0}
        client = {"off": 0.0, "on": 0.0}
        rounds[0] = 0
        benchmark.pedantic(pair, rounds=20, iterations=1)
    finally:
        if producers is not None:
            producers.close()
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    sent = n * len(times["off"])
    cpu_off, cpu_on = cpu["off"] / sent * 1e6, cpu["on"] / sent * 1e6
    cl_off, cl_on = client["off"] / sent * 1e6, client["on"] / sent * 1e6
    benchmark.extra_info.update(mode=mode, size=128, msgs_per_round=n, off_us_per_send=round(off / n * 1e6, 2),
                                on_us_per_send=round(on / n * 1e6, 2), on_over_off=round(on / off, 3),
                                off_cpu_us_per_send=round(cpu_off, 2), on_cpu_us_per_send=round(cpu_on, 2),
                                cpu_on_over_off=round(cpu_on / cpu_off, 3) if cpu_off else None,
                                off_client_cpu_us_per_send=round(cl_off, 2), on_client_cpu_us_per_send=round(cl_on, 2),
                                client_cpu_on_over_off=round(cl_on / cl_off, 3) if cl_off else None,
                                load=round(os.getloadavg()[0], 2))
    print(f"\nsigned sends {mode}, interleaved: ACL off {off / n * 1e6:.2f} us, on {on / n * 1e6:.2f} us "
          f"per send (on/off {on / off:.2f}); broker CPU off {cpu_off:.2f} us, on {cpu_on:.2f} us per send "
          f"(on/off {cpu_on / cpu_off if cpu_off else float('nan'):.2f}); client CPU off {cl_off:.2f} us, "
          f"on {cl_on:.2f} us per send (on/off {cl_on / cl_off if cl_off else float('nan'):.2f}); "
          f"load {os.getloadavg()[0]:.2f}")
