"""SYNC_FLUSH against this disk's floor (issue 18): a raw ``fdatasync`` beside the broker's send.

- the floor: 128 B written and ``fdatasync``-ed on a file in the broker's store directory (same
  filesystem), one after another; two shapes: appended to a growing file (what a log does, the
  file size changes with every write) and rewritten in place in a 4 KiB file already on disk
  (no metadata at all: the least a durable write can cost here); and, in the one-in-flight
  test, a third shape: the broker's own file kind (a ``posix_fallocate``-d file whose pages were
  read once, written through a shared mapping, ``fdatasync``-ed). The append floor stays the
  headline: a log's writes move its end, as the broker's do. The mapped floor is beside it
  because measured here (benchmarks/probes/fsync_kinds.py; docs/performance.md)
  the broker's file kind syncs faster than a growing plain file (~0.7x: its blocks are
  reserved, so most syncs need no journal commit), so the ratio to the append floor flatters
  the broker a little; the ratio to the mapped floor does not;
- one SEND_MESSAGE_V2 of 128 B in flight on a SYNC_FLUSH broker, alternated in blocks with the
  floor (A B A B ...), p50/p99 and the ratio to the floor (issue 18 asks for <= 1.5x);
- 16 producers (16 connections, each one send in flight): msgs/s and messages per fdatasync,
  read from the broker's ``commitLogFlushTimesTotal`` through GET_BROKER_RUNTIME_INFO;
- the store alone, no network: an append and the wait for its group commit, on the real disk
  beside the floor, and on a tmpfs, where ``fdatasync`` returns at once (what the thread hand-offs
  themselves cost).

``extra_info`` keeps ``"fastmq send p50_us"`` beside ``"fdatasync floor p50_us"`` (a peer pair
``fastmq-bench collate`` turns into a ratio), and the ratios themselves.

Real figures: ``.venv/bin/python -m pytest benchmarks/test_sync_flush_benchmarks.py --benchmark-only -s``.
"""
from __future__ import annotations

import asyncio
import json
import mmap
import os
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np
import pytest
from test_broker_benchmarks import _one_in_flight

from fastmq._ext.codec import FrameDecoder, encode_frames
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import encode_record
from fastmq.remoting import RemotingClient
from fastmq.remoting.loop import run
from fastmq.store.commit_log import AppendRequest, CommitLog
from fastmq.store.config import MessageStoreConfig
from fastmq.testing import broker_process, namesrv_process

BODY = b"x" * 128
BLOCKS = 5  # per side, alternating
N_BLOCK = 200  # syncs or sends per block
BLOCKS_SHORT, N_SHORT = 15, 60  # the one-in-flight test's turns: short, so each pair sees one phase of the disk
PRODUCERS = 16
PER_PRODUCER = 150  # sends per connection per round
ROUNDS = 3


class SyncBroker(NamedTuple):
    port: int
    store: Path


@pytest.fixture(scope="module")
def sync_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncBroker]:
    tmp = tmp_path_factory.mktemp("sync-flush")
    ns = namesrv_process(tmp).start()
    b = broker_process(tmp, ns.addr, brokerName="bench", flushDiskType="SYNC_FLUSH",
                       mappedFileSizeCommitLog=268435456).start()
    try:
        yield SyncBroker(b.port, tmp / "store")
    finally:
        b.stop()
        ns.stop()


# ------------------------------------------------------------------------------ the floor

def fdatasync_floor(directory: Path, n: int, *, in_place: bool = False) -> list[float]:
    """µs of each of ``n`` writes of 128 B, each followed by ``fdatasync``, on a new file in
    ``directory`` (removed after): appended (``in_place`` False) or rewritten at offset 0 of a
    4 KiB file synced once before the timing."""
    path = directory / f"fdatasync-floor-{os.getpid()}.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    out: list[float] = []
    try:
        if in_place:
            os.write(fd, bytes(4096))
            os.fsync(fd)
        for _ in range(n):
            t0 = time.perf_counter()
            if in_place:
                os.pwrite(fd, BODY, 0)
            else:
                os.write(fd, BODY)
            os.fdatasync(fd)
            out.append((time.perf_counter() - t0) * 1e6)
    finally:
        os.close(fd)
        path.unlink()
    return out


class MappedFloor:
    """The floor on the broker's file kind: a ``posix_fallocate``-d file of ``size`` bytes, its
    pages read once (the broker's MappedFile.warm), written 128 B at a time through a shared
    mapping and ``fdatasync``-ed after each write; removed by :meth:`close`."""

    def __init__(self, directory: Path, size: int = 64 << 20) -> None:
        self.path = directory / f"mapped-floor-{os.getpid()}.bin"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.posix_fallocate(self.fd, 0, size)
        os.fsync(self.fd)
        buf = bytearray(1 << 20)
        for off in range(0, size, len(buf)):
            os.preadv(self.fd, [buf], off)
        self.mm = mmap.mmap(self.fd, size)
        self.pos = 0

    def run(self, n: int) -> list[float]:
        """µs of each of ``n`` appends of 128 B through the mapping, each followed by ``fdatasync``."""
        out: list[float] = []
        for _ in range(n):
            if self.pos + len(BODY) > len(self.mm):
                self.pos = 0
            t0 = time.perf_counter()
            self.mm[self.pos:self.pos + len(BODY)] = BODY
            os.fdatasync(self.fd)
            out.append((time.perf_counter() - t0) * 1e6)
            self.pos += len(BODY)
        return out

    def close(self) -> None:
        self.mm.close()
        os.close(self.fd)
        self.path.unlink()


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


# ------------------------------------------------------------------------------ the broker

def _frame(i: int) -> bytes:
    h = SendMessageRequestHeader("PG_SYNC_BENCH", "SyncFlushBench", "TBW102", 4, i % 4, 0, 1_700_000_000_000, 0,
                                 f"UNIQ_KEY\x01{i:032X}\x02WAIT\x01true\x02", 0, False, None, False)
    return encode_frames([create_request(RequestCode.SEND_MESSAGE_V2, h.to_v2_fields(), BODY)])


def one_in_flight(port: int, n: int, start: int = 0) -> list[float]:
    """µs of each of ``n`` sends, each waiting for its answer on a blocking socket."""
    return _one_in_flight(port, [_frame(start + i) for i in range(n)])


async def _producers(port: int, producers: int, per_producer: int) -> float:
    """``producers`` connections, each sending ``per_producer`` messages one at a time; seconds."""
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(producers)]
    for _, w in conns:
        w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    frames = [[_frame(c * per_producer + i) for i in range(per_producer)] for c in range(producers)]

    async def produce(c: int) -> None:
        reader, writer = conns[c]
        dec = FrameDecoder()
        for frame in frames[c]:
            writer.write(frame)
            got: list[Any] = []
            while not got:
                chunk = await asyncio.wait_for(reader.read(65536), 30)
                assert chunk, "broker closed the connection"
                got = dec.feed(chunk)
            assert got[0].code == 0, (got[0].code, got[0].remark)
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(produce(c) for c in range(producers)))
        return time.perf_counter() - t0
    finally:
        for _, w in conns:
            w.close()


async def _runtime_info(port: int) -> dict[str, str]:
    client = RemotingClient()
    try:
        r = await client.invoke(f"127.0.0.1:{port}", create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5)
        assert r.code == 0, r.remark
        table: dict[str, str] = json.loads(r.body)["table"]
        return table
    finally:
        await client.close()


def _counters(port: int) -> tuple[int, int, int] | None:
    """(puts, commit-log flushes, µs in them) from the broker, or None from a broker that has
    no flush counter (an older fastmq measured for a before/after)."""
    t = run(_runtime_info(port))
    if "commitLogFlushTimesTotal" not in t:
        return None
    return int(t["putMessageTimesTotal"]), int(t["commitLogFlushTimesTotal"]), int(t["commitLogFlushMicrosTotal"])


def _alternate(blocks: int, a: Callable[[], list[float]], b: Callable[[], list[float]]) -> tuple[list[float], list[float]]:
    ra: list[float] = []
    rb: list[float] = []
    for i in range(blocks):
        for fn, out in ([(a, ra), (b, rb)] if i % 2 == 0 else [(b, rb), (a, ra)]):
            out.extend(fn())
    return ra, rb


# ------------------------------------------------------------------------------ benchmarks

@pytest.mark.parametrize("shape", ["append", "in_place"])
def test_fdatasync_floor(benchmark: Any, sync_broker: SyncBroker, shape: str) -> None:
    """The floor alone, in the store's directory: p50/p99 of write 128 B + fdatasync."""
    n = 20 if benchmark.disabled else BLOCKS * N_BLOCK
    samples: list[float] = []
    benchmark.pedantic(lambda: samples.extend(fdatasync_floor(sync_broker.store, n, in_place=shape == "in_place")),
                       rounds=1, iterations=1)
    benchmark.extra_info.update(shape=shape, p50_us=round(_p(samples, 50), 1), p99_us=round(_p(samples, 99), 1))
    print(f"\nfdatasync floor ({shape}, 128 B): p50 {_p(samples, 50):.0f} us, p99 {_p(samples, 99):.0f} us over {n}")


def test_sync_flush_one_in_flight_vs_floor(benchmark: Any, sync_broker: SyncBroker) -> None:
    """One send in flight on the SYNC_FLUSH broker, in short blocks taking turns with the three
    floors in the same directory; p50/p99 over all, and the median of the blocks' ratios (a
    shared disk's speed moves tenfold within a minute: a block and the floor blocks beside it
    see the same phase)."""
    blocks, n = (1, 20) if benchmark.disabled else (BLOCKS_SHORT, N_SHORT)
    one_in_flight(sync_broker.port, 50, start=1_000_000)  # warm-up: topic creation, first pages
    before = _counters(sync_broker.port)
    sends: list[list[float]] = []
    floor: list[list[float]] = []
    in_place: list[list[float]] = []
    mapped: list[list[float]] = []
    mapped_floor = MappedFloor(sync_broker.store)
    steps: list[tuple[list[list[float]], Callable[[int], list[float]]]] = [
        (sends, lambda i: one_in_flight(sync_broker.port, n, start=(i + 1) * n)),
        (floor, lambda i: fdatasync_floor(sync_broker.store, n)),
        (in_place, lambda i: fdatasync_floor(sync_broker.store, n, in_place=True)),
        (mapped, lambda i: mapped_floor.run(n))]

    def turns() -> None:
        for i in range(blocks):
            k = i % len(steps)
            for out, fn in steps[k:] + steps[:k]:  # (each first in turn)
                out.append(fn(i))
    try:
        benchmark.pedantic(turns, rounds=1, iterations=1)
    finally:
        mapped_floor.close()
    after = _counters(sync_broker.port)
    every = {name: [x for block in v for x in block]
             for name, v in (("s", sends), ("f", floor), ("i", in_place), ("m", mapped))}
    s50, f50, i50, m50 = (_p(every[k], 50) for k in "sfim")
    by_block = statistics.median(_p(a, 50) / _p(b, 50) for a, b in zip(sends, floor))
    by_block_in_place = statistics.median(_p(a, 50) / _p(b, 50) for a, b in zip(sends, in_place))
    by_block_mapped = statistics.median(_p(a, 50) / _p(b, 50) for a, b in zip(sends, mapped))
    info: dict[str, Any] = {
        "fastmq send p50_us": round(s50, 1), "fastmq send p99_us": round(_p(every["s"], 99), 1),
        "fdatasync floor p50_us": round(f50, 1), "fdatasync floor p99_us": round(_p(every["f"], 99), 1),
        "in_place_floor_p50_us": round(i50, 1), "mapped_floor_p50_us": round(m50, 1),
        "ratio_to_floor": round(s50 / f50, 3), "ratio_to_in_place_floor": round(s50 / i50, 3),
        "ratio_to_mapped_floor": round(s50 / m50, 3),
        "block_ratio_to_floor": round(by_block, 3), "block_ratio_to_in_place_floor": round(by_block_in_place, 3),
        "block_ratio_to_mapped_floor": round(by_block_mapped, 3), "loadavg_1m": round(os.getloadavg()[0], 2)}
    if before is not None and after is not None:
        flushes = after[1] - before[1]
        info["msgs_per_flush"] = round((after[0] - before[0]) / max(1, flushes), 3)
        info["broker_sync_mean_us"] = round((after[2] - before[2]) / max(1, flushes), 1)
    benchmark.extra_info.update(info)
    print(f"\none send in flight, SYNC_FLUSH, 128 B: p50 {s50:.0f} us (p99 {_p(every['s'], 99):.0f}); fdatasync floor "
          f"(append) p50 {f50:.0f} us, in place {i50:.0f} us, mapped {m50:.0f} us; ratio {s50 / f50:.2f}x "
          f"(in place {s50 / i50:.2f}x, mapped {s50 / m50:.2f}x), median of {len(sends)} blocks' ratios "
          f"{by_block:.2f}x (in place {by_block_in_place:.2f}x, mapped {by_block_mapped:.2f}x); "
          f"{ {k: v for k, v in info.items() if k in ('msgs_per_flush', 'broker_sync_mean_us')} }")


def test_sync_flush_16_producers(benchmark: Any, sync_broker: SyncBroker) -> None:
    """16 connections, each one send in flight: msgs/s and messages per fdatasync (group commit)."""
    per = 10 if benchmark.disabled else PER_PRODUCER
    rounds = 1 if benchmark.disabled else ROUNDS
    run(_producers(sync_broker.port, PRODUCERS, 10))  # warm-up
    rates: list[float] = []
    per_flush: list[float] = []
    sync_us: list[float] = []
    floors: list[float] = []

    def one_round() -> None:
        floors.extend(fdatasync_floor(sync_broker.store, 100 if not benchmark.disabled else 10))
        before = _counters(sync_broker.port)
        elapsed = run(_producers(sync_broker.port, PRODUCERS, per))
        after = _counters(sync_broker.port)
        rates.append(PRODUCERS * per / elapsed)
        if before is not None and after is not None:
            flushes = max(1, after[1] - before[1])
            per_flush.append((after[0] - before[0]) / flushes)
            sync_us.append((after[2] - before[2]) / flushes)
    benchmark.pedantic(one_round, rounds=rounds, iterations=1)
    rate, f50 = statistics.median(rates), _p(floors, 50)
    info: dict[str, Any] = {"producers": PRODUCERS, "msgs_per_s": round(rate), "floor_p50_us": round(f50, 1),
                            # what one producer at the floor would reach: 1e6 / floor
                            "msgs_per_s_over_one_at_floor": round(rate * f50 / 1e6, 2)}
    if per_flush:
        info["msgs_per_flush"] = round(statistics.median(per_flush), 2)
        info["broker_sync_mean_us"] = round(statistics.median(sync_us), 1)
    benchmark.extra_info.update(info)
    print(f"\n{PRODUCERS} producers, one in flight each, SYNC_FLUSH, 128 B: {rate:,.0f} msgs/s "
          f"(rounds {min(rates):,.0f}-{max(rates):,.0f}); floor p50 {f50:.0f} us; {info}")


async def _append_and_wait(cl: CommitLog, n: int, wait: bool) -> list[float]:
    rec = encode_record(topic="SyncFlushBench", body=BODY, properties={}, queue_id=0,
                        born_host=("127.0.0.1", 5000), store_host=("127.0.0.1", 10911))
    one = [AppendRequest(rec, "SyncFlushBench", 0, 0)]
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        d = cl.put_records(one)[-1]
        if wait:
            await cl.wait_flushed(d.commit_log_offset + d.size)
        out.append((time.perf_counter() - t0) * 1e6)
    return out


@pytest.mark.parametrize("disk", ["real", "none"])
def test_group_commit_in_process(benchmark: Any, tmp_path: Path, disk: str) -> None:
    """A CommitLog under SYNC_FLUSH on this process's event loop: append 128 B and await its
    group commit, one at a time. ``real``: beside the floor in the same directory; ``none``: the
    store on a tmpfs (/dev/shm), where fdatasync returns at once, so the figure is the wake of the
    flush thread and the answer's way back, beside the append alone. (A tmpfs rather than a
    no-op ``os.fdatasync``: the group commit's compiled wait-then-sync calls libc's.)"""
    shm = None
    if disk == "none":
        if not Path("/dev/shm").is_dir():
            pytest.skip("no /dev/shm")
        shm = Path(tempfile.mkdtemp(prefix="sync-flush-none", dir="/dev/shm"))
    store = (shm or tmp_path) / "store"
    cl = CommitLog(MessageStoreConfig(storePathRootDir=str(store), flushDiskType="SYNC_FLUSH",
                                      mappedFileSizeCommitLog=64 << 20))
    cl.load()
    cl.start()
    blocks, n = (1, 20) if benchmark.disabled else (BLOCKS, N_BLOCK * (5 if disk == "none" else 1))
    try:
        run(_append_and_wait(cl, 50, True))  # warm-up
        if disk == "real":
            def other() -> list[float]:
                return fdatasync_floor(store, n)
        else:
            def other() -> list[float]:
                return run(_append_and_wait(cl, n, False))
        out: list[tuple[list[float], list[float]]] = []
        benchmark.pedantic(lambda: out.append(_alternate(blocks, lambda: run(_append_and_wait(cl, n, True)), other)),
                           rounds=1, iterations=1)
    finally:
        cl.shutdown()
        cl.close()
        if shm is not None:
            shutil.rmtree(shm, ignore_errors=True)
    waited, beside = out[0]
    w50, b50 = _p(waited, 50), _p(beside, 50)
    if disk == "real":
        benchmark.extra_info.update({"fastmq append+wait p50_us": round(w50, 1), "fdatasync floor p50_us": round(b50, 1),
                                     "ratio_to_floor": round(w50 / b50, 3)})
        print(f"\nin-process append + group commit, real disk: p50 {w50:.0f} us; floor {b50:.0f} us; {w50 / b50:.2f}x")
    else:
        benchmark.extra_info.update(wait_p50_us=round(w50, 1), append_only_p50_us=round(b50, 1),
                                    handoff_us=round(w50 - b50, 1))
        print(f"\nin-process append + group commit, tmpfs (no disk): p50 {w50:.1f} us; append alone {b50:.1f} us; "
              f"hand-offs {w50 - b50:.1f} us")
