"""Sends with the broker's ACL on beside sends with it off, in one run (goal: within 15%).

Two brokers side by side, one with ``aclEnable=true``: the same signed SEND_MESSAGE_V2 frames
(signed once, before timing: what is measured is the broker's check, not the client's signing)
go to each, pipelined (2000 in flight on one connection) and one at a time. The broker without
ACL ignores the signature fields, so the two differ only in the check.

    python -m pytest benchmarks/test_acl_benchmarks.py --benchmark-only -s -p no:cacheprovider

Client and brokers share the 2-core machine. The interleaved test also counts each broker's own
CPU per send (from /proc), which other processes on the machine move less than the wall clock.
"""
from __future__ import annotations

import asyncio
import os
import statistics
import time

import pytest

from fastmq._ext.codec import FrameDecoder, encode_frame
from fastmq.client.acl import AclClientRPCHook, SessionCredentials
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
    topicPerms: [BenchAcl=PUB|SUB]
  - accessKey: BenchAdmin1
    secretKey: BenchSecret1
    admin: true
"""


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("acl-bench")
    (tmp / "ns").mkdir()
    ns = namesrv_process(tmp / "ns").start()
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(ACL_YML)
    started = []
    try:
        for name, conf in (("off", {}), ("on", {"aclEnable": "true", "aclFile": acl_file})):
            (tmp / name).mkdir()
            started.append((name, broker_process(tmp / name, ns.addr, brokerName=f"bench-{name}",
                                                 mappedFileSizeCommitLog=268435456, **conf).start()))
        run(_create_topics([b for _, b in started]))
        yield dict(started)
    finally:
        for _, b in started:
            b.stop()
        ns.stop()


async def _create_topics(brokers) -> None:
    client = RemotingClient(rpc_hook=AclClientRPCHook(SessionCredentials("BenchAdmin1", "BenchSecret1")))
    try:
        for b in brokers:
            r = await client.invoke(b.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "BenchAcl", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
                "perm": 6, "topicFilterType": "SINGLE_TAG"}), 10)
            assert r.code == 0, r.remark
    finally:
        await client.close()


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



@pytest.mark.parametrize("mode", ["pipelined", "one_in_flight"])
def test_interleaved_on_and_off(benchmark, brokers, mode: str) -> None:
    """Both brokers in every round, in alternating order, so the machine's load swings (other
    processes on the 2 shared cores) fall on both arms alike; the ratio of the medians is the figure."""
    if mode == "pipelined":
        frames, n = b"".join(_signed_frames(PIPELINE, 128)), PIPELINE
        arm = {k: (lambda b=b: run(pipelined(b.port, frames, n))) for k, b in brokers.items()}
    else:
        lone, n = _signed_frames(LONE, 128), LONE
        arm = {k: (lambda b=b: run(_one_at_a_time(b.port, lone))) for k, b in brokers.items()}
    times: dict[str, list[float]] = {"off": [], "on": []}
    # each broker's own CPU (all its threads) over its rounds: what the check costs the broker,
    # less moved than the wall clock by other processes taking turns on the 2 cores
    cpu = {"off": 0.0, "on": 0.0}
    rounds = [0]

    def pair() -> None:
        order = ("off", "on") if rounds[0] % 2 == 0 else ("on", "off")
        rounds[0] += 1
        for k in order:
            c0 = server_cpu(brokers[k])
            times[k].append(arm[k]())
            cpu[k] += server_cpu(brokers[k]) - c0
    pair()  # warm up
    times = {"off": [], "on": []}
    cpu = {"off": 0.0, "on": 0.0}
    rounds[0] = 0
    benchmark.pedantic(pair, rounds=20, iterations=1)
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    sent = n * len(times["off"])
    cpu_off, cpu_on = cpu["off"] / sent * 1e6, cpu["on"] / sent * 1e6
    benchmark.extra_info.update(mode=mode, size=128, msgs_per_round=n, off_us_per_send=round(off / n * 1e6, 2),
                                on_us_per_send=round(on / n * 1e6, 2), on_over_off=round(on / off, 3),
                                off_cpu_us_per_send=round(cpu_off, 2), on_cpu_us_per_send=round(cpu_on, 2),
                                cpu_on_over_off=round(cpu_on / cpu_off, 3) if cpu_off else None,
                                load=round(os.getloadavg()[0], 2))
    print(f"\nsigned sends {mode}, interleaved: ACL off {off / n * 1e6:.2f} us, on {on / n * 1e6:.2f} us "
          f"per send (on/off {on / off:.2f}); broker CPU off {cpu_off:.2f} us, on {cpu_on:.2f} us per send "
          f"(on/off {cpu_on / cpu_off if cpu_off else float('nan'):.2f}); load {os.getloadavg()[0]:.2f}")
