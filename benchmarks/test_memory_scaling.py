"""Resident memory per connection, per queue and per 10^6 messages of backlog, at growing counts
(issue 18: "report the broker's and the client's resident memory ... and keep each flat").

Each benchmark starts a real ``fastmq-namesrv`` and ``fastmq-broker``, takes a base reading once
the one-time costs are paid (a first client, a first topic, a first batch of messages), then
grows the count step by step and reads ``/proc/<pid>/status`` once the process settled (see
benchmarks/memory_probe.py for what RssAnon, RssFile and VmPTE count). A figure is the KiB gained
since the base reading divided by the units added; "flat" means the figure at a larger count is
no larger than at the smaller one before it, within what the readings can tell (each total known
to 1 MiB: a figure over few units, such as 8 queues, says little).

- per connection: a child process (memory_clients.py) holds N producers, each its own client
  instance with a NameServer and a broker connection, each registered by its heartbeat and idle
  after one send. Broker: KiB per connection; client process: KiB per producer (two connections).
- per queue: topics of 8 queues created until 8, 1,024 and 10,000 queues exist, two 128 B
  messages written to each queue. KiB per queue, heap (RssAnon) and mapped queue pages (RssFile).
- per 10^6 messages of backlog: 128 B messages (each with its own UNIQ_KEY, so the index is
  written as by real producers) sent to 8 queues of a broker with RocketMQ's default 1 GiB
  commit-log files and never consumed; KiB per 10^6 messages at 10^6 and 2*10^6. RssFile counts
  here: pages of the commit log, queues and index kept mapped are the broker's resident memory
  until it gives them back (the store does, once written to disk; see MessageStore.release_cold_pages).

Real figures, with the counts above::

    .venv/bin/python -m pytest benchmarks/test_memory_scaling.py --benchmark-only -s

Under ``--benchmark-disable`` (how scripts/test.sh runs benchmarks) the counts are small (a smoke
test of the paths, a few seconds each) and flatness is recorded, not asserted. Larger counts are
opt-in, as comma-separated lists: ``FASTMQ_MEM_CONNS=100,1000,4000``, ``FASTMQ_MEM_QUEUES=8,1024,
10000,20000``, ``FASTMQ_MEM_BACKLOG=1000000,2000000,3000000``. Nothing here is timed.
"""
from __future__ import annotations

import asyncio
import os
import resource
import select
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memory_probe import KEYS, Point, flat, marginal, memory_kib, per_unit, settled_kib

from fastmq._ext.codec import FrameDecoder, encode_frames
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.remoting.loop import run
from fastmq.testing import EmbeddedCluster

BODY = b"x" * 128
QUEUES_PER_TOPIC = 8
WINDOW = 2000                # requests written before their answers are read
SLACK_KIB = 1024             # what a total is known to when judging "flat" (see memory_probe.flat)
_KEY_MARK = b"Z" * 32        # where each message's own UNIQ_KEY is spliced into a frame template
_SMOKE = {"CONNS": (10, 40), "QUEUES": (8, 64, 256), "BACKLOG": (20_000, 40_000)}
_FULL = {"CONNS": (100, 1000), "QUEUES": (8, 1024, 10_000), "BACKLOG": (1_000_000, 2_000_000)}
_MILLION = 1_000_000
# creating 10,000 queues, and removing their directories afterwards, outlasts the suite's 300 s
pytestmark = pytest.mark.timeout(1200)


def _counts(name: str, disabled: bool) -> tuple[int, ...]:
    env = os.environ.get(f"FASTMQ_MEM_{name}")
    if env:
        return tuple(sorted(int(x) for x in env.split(",") if x.strip()))
    return (_SMOKE if disabled else _FULL)[name]


def _raise_fd_limit(want: int) -> None:
    """Lift this process's soft descriptor limit towards ``want`` (the servers inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))


class Raw:
    """One plain remoting connection to the broker: windows of requests, every answer checked."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.dec = FrameDecoder()

    @classmethod
    async def open(cls, port: int) -> "Raw":
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def exchange(self, frames: bytes, n: int) -> None:
        """Write ``n`` encoded requests at once and read their ``n`` answers, each SUCCESS."""
        self.writer.write(frames)
        got = 0
        while got < n:
            chunk = await asyncio.wait_for(self.reader.read(1 << 20), 60)
            assert chunk, "the broker closed the connection"
            for r in self.dec.feed(chunk):
                assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
                got += 1

    async def create_topics(self, names: list[str]) -> None:
        for i in range(0, len(names), 64):  # concurrent creations share one write of topics.json
            part = names[i:i + 64]
            await self.exchange(encode_frames([create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": t, "defaultTopic": "TBW102", "readQueueNums": QUEUES_PER_TOPIC,
                "writeQueueNums": QUEUES_PER_TOPIC, "perm": 6, "topicFilterType": "SINGLE_TAG"}) for t in part]),
                len(part))

    async def send_each_queue(self, topics: list[str], per_queue: int) -> None:
        cmds = [create_request(RequestCode.SEND_MESSAGE_V2, _send_header(t, q).to_v2_fields(), BODY)
                for t in topics for q in range(QUEUES_PER_TOPIC) for _ in range(per_queue)]
        for i in range(0, len(cmds), WINDOW):
            await self.exchange(encode_frames(cmds[i:i + WINDOW]), len(cmds[i:i + WINDOW]))

    def close(self) -> None:
        self.writer.close()


def _send_header(topic: str, queue_id: int, uniq_key: str = "") -> SendMessageRequestHeader:
    props = f"UNIQ_KEY\x01{uniq_key}\x02" if uniq_key else None
    return SendMessageRequestHeader("PG_MEM", topic, "TBW102", QUEUES_PER_TOPIC, queue_id, 0, 1_700_000_000_000, 0,
                                    props, 0, False, None, False)


class KeyedFrames:
    """SEND_MESSAGE_V2 frames for ``topic``, round-robin over its queues, each message with its
    own UNIQ_KEY: one template per queue, the 32 hex digits spliced in (encoding two million
    requests one by one would take the benchmark longer than the broker takes to store them)."""

    def __init__(self, topic: str) -> None:
        self.parts = []
        for q in range(QUEUES_PER_TOPIC):
            cmd = create_request(RequestCode.SEND_MESSAGE_V2, _send_header(topic, q, _KEY_MARK.decode()).to_v2_fields(),
                                 BODY)
            frame = encode_frames([cmd])
            i = frame.index(_KEY_MARK)
            self.parts.append((frame[:i], frame[i + len(_KEY_MARK):]))

    def window(self, start: int, n: int) -> bytes:
        parts, k = self.parts, len(self.parts)
        return b"".join(parts[i % k][0] + b"%032X" % i + parts[i % k][1] for i in range(start, start + n))


def _figures(points: list[Point], keys: tuple[str, ...], unit: int = 1) -> dict[str, float]:
    """Per-unit KiB since the base (``RssAnon@1000``) and since the previous count (``RssAnon+1000``)."""
    out = {f"{k}@{p.count}": per_unit(p, k, unit) for k in keys for p in points}
    for k in keys:
        out.update({f"{k}+{p.count}": m for p, m in zip(points, marginal(points, k, unit))})
    return out


def _flatness(points: list[Point], keys: tuple[str, ...], unit: int = 1) -> dict[str, bool]:
    return {k: flat(points, k, unit, SLACK_KIB) for k in keys}


def _report(title: str, what: str, points: list[Point], unit: int = 1) -> str:
    lines = [f"\n{title}"]
    steps = {k: marginal(points, k, unit) for k in KEYS}
    for i, p in enumerate(points):
        cells = ", ".join(f"{k} {per_unit(p, k, unit):8.2f} ({steps[k][i]:8.2f})" for k in KEYS)
        lines.append(f"  {p.count:>9,} {what}: KiB per {'10^6 ' if unit == _MILLION else ''}{what.rstrip('s')} "
                     f"(since the count before): {cells}"
                     f"  (VmRSS {p.kib['VmRSS'] / 1024:.1f} MiB, base {p.base['VmRSS'] / 1024:.1f})")
    return "\n".join(lines)


@pytest.fixture
def cluster(tmp_path: Path):
    started: list[Any] = []

    def start(**conf: object) -> tuple[Any, Any]:
        c = EmbeddedCluster(tmp_path, broker_conf={"brokerName": "mem", **conf})
        started.append(c)
        c.start()
        return c.namesrv, c.brokers[0]
    try:
        yield start
    finally:
        for c in reversed(started):
            c.stop()
        shutil.rmtree(tmp_path / "mem", ignore_errors=True)  # up to gigabytes of commit log


class _Clients:
    """The memory_clients.py child: ``grow(n)`` returns once it holds ``n`` producers."""

    def __init__(self, namesrv: str, topic: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("memory_clients.py")), namesrv, topic],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def grow(self, n: int, timeout: float = 360.0) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"the client process did not reach {n} producers in {timeout} s"
        line = self.proc.stdout.readline().strip()
        assert line == f"ok {n}", f"client process: {line or 'exited ' + str(self.proc.poll())}"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(90)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_memory_per_connection(benchmark, cluster) -> None:
    """Broker KiB per registered idle connection and client KiB per producer, at each count."""
    counts = _counts("CONNS", benchmark.disabled)
    _raise_fd_limit(2 * max(counts) + 512)
    ns, broker = cluster()
    topic = "MemConnTopic"

    async def topic_ready() -> None:
        raw = await Raw.open(broker.port)
        try:
            await raw.create_topics([topic])
        finally:
            raw.close()
    run(topic_ready())
    clients = _Clients(ns.addr, topic)
    bpts: list[Point] = []
    cpts: list[Point] = []

    def measure() -> None:
        clients.grow(1)  # the base: one producer (the first connection's one-time costs paid)
        bbase, cbase = settled_kib(broker.proc.pid, at_least_s=1.0), settled_kib(clients.proc.pid, at_least_s=1.0)
        for n in counts:
            clients.grow(1 + n)
            bpts.append(Point(n, settled_kib(broker.proc.pid, at_least_s=1.0), bbase))
            cpts.append(Point(n, settled_kib(clients.proc.pid, at_least_s=1.0), cbase))
    try:
        benchmark.pedantic(measure, rounds=1, iterations=1)
    finally:
        clients.close()
    keys = ("RssAnon", "VmRSS")
    info = {"counts": ",".join(map(str, counts)),
            "broker KiB/connection": _figures(bpts, keys), "client KiB/producer": _figures(cpts, keys),
            "broker flat": _flatness(bpts, keys), "client flat": _flatness(cpts, keys)}
    benchmark.extra_info.update(info)
    print(_report("broker, per idle registered connection (beyond a first one)", "connections", bpts))
    print(_report("client process, per producer (a NameServer and a broker connection each)", "producers", cpts))
    if not benchmark.disabled:
        assert all(info["broker flat"].values()) and all(info["client flat"].values()), info


def test_memory_per_queue(benchmark, cluster) -> None:
    """Broker KiB per queue (topics of 8 queues, two messages in each queue) at each count."""
    counts = _counts("QUEUES", benchmark.disabled)
    _ns, broker = cluster()
    points: list[Point] = []

    async def measure() -> None:
        raw = await Raw.open(broker.port)
        try:
            await raw.create_topics(["MemQWarm"])  # one-time costs before the base reading
            await raw.send_each_queue(["MemQWarm"], 2)
            base = settled_kib(broker.proc.pid, at_least_s=2.5)
            made = 0
            for target in counts:
                names = [f"MemQ{i}" for i in range(made, -(-target // QUEUES_PER_TOPIC))]
                await raw.create_topics(names)
                await raw.send_each_queue(names, 2)
                made += len(names)
                # at least two page-release rounds (once a second, after the queues' flush)
                points.append(Point(made * QUEUES_PER_TOPIC, settled_kib(broker.proc.pid, at_least_s=2.5, max_s=20),
                                    base))
        finally:
            raw.close()
    benchmark.pedantic(lambda: run(measure()), rounds=1, iterations=1)
    keys = ("RssAnon", "RssFile", "VmRSS")
    info = {"counts": ",".join(str(p.count) for p in points), "broker KiB/queue": _figures(points, keys + ("VmPTE",)),
            "broker flat": _flatness(points, keys)}
    benchmark.extra_info.update(info)
    print(_report("broker, per queue (two 128 B messages in each)", "queues", points))
    if not benchmark.disabled:
        assert all(info["broker flat"].values()), info


def test_memory_per_million_backlog(benchmark, cluster) -> None:
    """Broker KiB per 10^6 stored, unconsumed 128 B messages at each count (1 GiB commit-log files)."""
    counts = _counts("BACKLOG", benchmark.disabled)
    _ns, broker = cluster(mappedFileSizeCommitLog=1 << 30)
    topic = "MemBacklog"
    frames = KeyedFrames(topic)
    warm = min(20_000, counts[0] // 2)
    points: list[Point] = []

    async def send(raw: Raw, start: int, end: int) -> None:
        for i in range(start, end, WINDOW):
            n = min(WINDOW, end - i)
            await raw.exchange(frames.window(i, n), n)

    async def measure() -> None:
        raw = await Raw.open(broker.port)
        try:
            await raw.create_topics([topic])
            await send(raw, 0, warm)
            base = settled_kib(broker.proc.pid, at_least_s=3.0)
            sent = warm
            for target in counts:
                await send(raw, sent, warm + target)
                sent = warm + target
                points.append(Point(target, settled_kib(broker.proc.pid, at_least_s=3.0, max_s=20), base))
        finally:
            raw.close()
    benchmark.pedantic(lambda: run(measure()), rounds=1, iterations=1)
    keys = ("RssAnon", "RssFile", "VmRSS")
    info = {"counts": ",".join(map(str, counts)), "broker KiB/1e6 msgs": _figures(points, keys, _MILLION),
            "broker flat": _flatness(points, keys, _MILLION),
            "broker MiB at end": {k: round(points[-1].kib[k] / 1024, 1) for k in keys}}
    benchmark.extra_info.update(info)
    print(_report("broker, per 10^6 messages of backlog (128 B bodies, never consumed)", "messages", points, _MILLION))
    if not benchmark.disabled:
        assert all(info["broker flat"].values()), info


def test_memory_probe_reads_this_process() -> None:
    """The probe reads every key, and VmRSS is at least the heap and file pages it sums."""
    kib = memory_kib(os.getpid())
    assert set(kib) == set(KEYS)
    assert kib["VmRSS"] >= kib["RssAnon"] > 0
