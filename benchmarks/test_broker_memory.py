"""The broker's resident memory under a sustained load of pipelined sends and pulls (issue 3).

One broker (64 MiB commit-log files, so they roll over during the run) takes SEND_MESSAGE_V2
frames written back to back on one connection while a consumer on another connection pulls every
queue behind them. ``/proc/<pid>/status`` is sampled once a second; the report separates the heap
(``RssAnon``) from touched pages of the mapped store files (``RssFile``), since the latter grows
with every new commit-log file by design and the kernel reclaims it under pressure.

Real figures (60 s by default; ``FASTMQ_MEM_BENCH_SECONDS`` changes it)::

    .venv/bin/python -m pytest benchmarks/test_broker_memory.py --benchmark-only -s

Under ``--benchmark-disable`` (how scripts/test.sh runs benchmarks) the load lasts a few seconds,
as a smoke test of both paths. Nothing asserts on timing; the one memory check is a loose bound on
heap growth after warm-up (``ANON_GROWTH_LIMIT_MIB``: a leak of a few dozen bytes per message
passes it within a minute), the rest is recorded.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fastmq._ext.codec import FrameDecoder, encode_frames
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.remoting.loop import run
from fastmq.testing import broker_process, namesrv_process

TOPIC = "MemTopic"
QUEUES = 4
WINDOW = 1000          # sends written per round on the producer connection
BODY = b"x" * 256
SMOKE_SECONDS = 3.0
DEFAULT_SECONDS = 60.0
_STATUS_KEYS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")
ANON_GROWTH_LIMIT_MIB = 256


@dataclass
class Sample:
    t: float                  # seconds since the load started
    kib: dict[str, int]       # the _STATUS_KEYS read from /proc/<pid>/status


@dataclass
class LoadCounters:
    sent: int = 0
    pulled: int = 0
    pulls: int = 0
    pull_codes: dict[int, int] = field(default_factory=dict)


def status_kib(pid: int) -> dict[str, int]:
    """The memory lines of ``/proc/<pid>/status`` in KiB (missing keys are left out)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in _STATUS_KEYS:
            out[key] = int(rest.split()[0])
    return out


def slope_mib_per_min(samples: list[Sample], key: str) -> float:
    """Least-squares slope of ``key`` over ``samples``, MiB per minute (0 with fewer than two)."""
    pts = [(s.t, s.kib.get(key, 0) / 1024) for s in samples]
    if len(pts) < 2:
        return 0.0
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mv = sum(v for _, v in pts) / n
    den = sum((t - mt) ** 2 for t, _ in pts)
    if den == 0:
        return 0.0
    return sum((t - mt) * (v - mv) for t, v in pts) / den * 60


def _send_frames(n: int) -> bytes:
    out = []
    for i in range(n):
        h = SendMessageRequestHeader("PG_MEM", TOPIC, "TBW102", QUEUES, i % QUEUES, 0, 1_700_000_000_000, 0,
                                     f"UNIQ_KEY\x01{i:032X}\x02", 0, False, None, False)
        out.append(create_request(RequestCode.SEND_MESSAGE_V2, h.to_v2_fields(), BODY))
    return encode_frames(out)


def _pull_request(queue_id: int, offset: int):
    # Suspend flag set: a consumer that has caught up is held by long polling instead of spinning.
    return create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "CG_MEM", "topic": TOPIC, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": 0x4 | 0x2, "commitOffset": 0, "suspendTimeoutMillis": 1000, "subVersion": 0,
        "subscription": "*", "expressionType": "TAG"})


async def _producer(port: int, frames: bytes, until: float, c: LoadCounters) -> None:
    """Rounds of ``WINDOW`` pre-encoded sends on one connection until ``until`` (monotonic)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    dec = FrameDecoder()
    try:
        while time.monotonic() < until:
            writer.write(frames)
            got = 0
            while got < WINDOW:
                chunk = await asyncio.wait_for(reader.read(1 << 20), 30)
                assert chunk, "broker closed the producer connection"
                for r in dec.feed(chunk):
                    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
                    got += 1
            c.sent += got
    finally:
        writer.close()


async def _consumer(port: int, until: float, c: LoadCounters) -> None:
    """One pull in flight per queue on one connection, each from where the last one ended."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    dec = FrameDecoder()
    offsets = [0] * QUEUES
    by_opaque: dict[int, int] = {}
    try:
        def pull(q: int) -> None:
            cmd = _pull_request(q, offsets[q])
            by_opaque[cmd.opaque] = q
            writer.write(encode_frames([cmd]))

        for q in range(QUEUES):
            pull(q)
        while by_opaque:
            chunk = await asyncio.wait_for(reader.read(1 << 20), 30)
            assert chunk, "broker closed the consumer connection"
            for r in dec.feed(chunk):
                q = by_opaque.pop(r.opaque)
                c.pulls += 1
                c.pull_codes[r.code] = c.pull_codes.get(r.code, 0) + 1
                f = r.ext_fields or {}
                if "nextBeginOffset" in f:
                    nxt = int(f["nextBeginOffset"])
                    if r.code == ResponseCode.SUCCESS:
                        c.pulled += nxt - offsets[q]     # consume-queue offsets count messages
                    offsets[q] = nxt
                if time.monotonic() < until:
                    pull(q)
    finally:
        writer.close()


async def _sampler(pid: int, t0: float, until: float, out: list[Sample]) -> None:
    while True:
        now = time.monotonic()
        out.append(Sample(now - t0, status_kib(pid)))
        if now >= until:
            return
        await asyncio.sleep(min(1.0, max(0.0, until - now)))


async def _load(port: int, pid: int, seconds: float, frames: bytes) -> tuple[list[Sample], LoadCounters]:
    c = LoadCounters()
    samples: list[Sample] = []
    t0 = time.monotonic()
    until = t0 + seconds
    await asyncio.gather(_producer(port, frames, until, c), _consumer(port, until, c), _sampler(pid, t0, until, samples))
    return samples, c


@pytest.fixture
def broker(tmp_path):
    ns = namesrv_process(tmp_path).start()
    b = broker_process(tmp_path, ns.addr, brokerName="mem", mappedFileSizeCommitLog=64 * 1024 * 1024).start()
    try:
        yield b
    finally:
        b.stop()
        ns.stop()
        # A minute of load leaves gigabytes of commit log; do not keep them in pytest's basetemp.
        shutil.rmtree(tmp_path / "store", ignore_errors=True)


def test_resident_memory_sustained_load(benchmark, broker) -> None:
    """Send and pull for the configured time; RSS after warm-up, at the end, its max and slope."""
    assert broker.proc is not None
    pid = broker.proc.pid
    default = SMOKE_SECONDS if benchmark.disabled else DEFAULT_SECONDS
    seconds = float(os.environ.get("FASTMQ_MEM_BENCH_SECONDS", default))
    warmup = min(10.0, seconds / 4)
    frames = _send_frames(WINDOW)
    result: list = []
    benchmark.pedantic(lambda: result.append(run(_load(broker.port, pid, seconds, frames))), rounds=1, iterations=1)
    samples, c = result[0]
    assert c.sent > 0 and c.pulls > 0, "both the send and the pull path must have run"
    assert ResponseCode.SUCCESS in c.pull_codes, c.pull_codes
    steady = [s for s in samples if s.t >= warmup] or samples[-1:]

    def mib(s: Sample, key: str) -> float:
        return round(s.kib.get(key, 0) / 1024, 1)

    info: dict[str, object] = {"seconds": seconds, "warmup_s": warmup, "samples": len(samples),
                               "sent": c.sent, "pulled": c.pulled, "pulls": c.pulls,
                               "pull_codes": {str(k): v for k, v in c.pull_codes.items()},
                               "commit_log_files": len(list((broker.workdir / "store" / "commitlog").iterdir()))}
    lines = [f"\nbroker memory over {seconds:.0f} s (warm-up {warmup:.0f} s), {c.sent:,} sent "
             f"({c.sent / seconds:,.0f}/s), {c.pulled:,} pulled in {c.pulls:,} pulls, "
             f"{info['commit_log_files']} commit-log files"]
    for key in _STATUS_KEYS:
        vals = {"after_warmup": mib(steady[0], key), "end": mib(samples[-1], key),
                "max": round(max(s.kib.get(key, 0) for s in samples) / 1024, 1),
                "slope_mib_per_min": round(slope_mib_per_min(steady, key), 2)}
        info[key] = vals
        lines.append(f"  {key:8} after warm-up {vals['after_warmup']:7.1f} MiB, end {vals['end']:7.1f}, "
                     f"max {vals['max']:7.1f}, slope {vals['slope_mib_per_min']:+.2f} MiB/min")
    benchmark.extra_info.update(info)
    print("\n".join(lines))
    anon = info["RssAnon"]
    assert anon["max"] - anon["after_warmup"] < ANON_GROWTH_LIMIT_MIB, f"broker heap grew under load: {anon}"
