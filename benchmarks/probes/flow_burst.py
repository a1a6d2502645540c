"""A burst of ``send_async`` started at once, and pipelined rounds, against a fresh cluster.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/probes/flow_burst.py burst 200000
    PYTHONPATH=$PWD .venv/bin/python benchmarks/probes/flow_burst.py rate 20000

``burst N``: N ``await p.send_async(...)`` in a row at default settings, then gathered; prints how
many failed, the time, and how long shutdown (unregister) took. ``rate N``: five rounds of N
gathered, msgs/s sorted. The client and servers are the code on PYTHONPATH (so one command
measures two commits).
"""
from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or str(Path(__file__).resolve().parents[2]))

from fastmq.aio import Message, Producer  # noqa: E402
from fastmq.testing import running_cluster  # noqa: E402


async def burst(ns: str, n: int) -> None:
    p = Producer("PG_BURST", namesrv_addr=ns)
    await p.start()
    await p.send(Message("BurstT", b"x"))
    t = time.monotonic()
    futs = [await p.send_async(Message("BurstT", b"m%d" % i)) for i in range(n)]
    res = await asyncio.gather(*futs, return_exceptions=True)
    failed = sum(isinstance(r, BaseException) for r in res)
    took = time.monotonic() - t
    t = time.monotonic()
    await p.shutdown()
    print(f"burst: {n:,} send_async at once: {failed:,} failed, {took:.1f} s; shutdown {time.monotonic() - t:.2f} s")


async def rate(ns: str, n: int) -> None:
    async with Producer("PG_RATE", namesrv_addr=ns) as p:
        await p.send(Message("RateT", b"x"))
        rates = []
        for _ in range(5):
            t = time.perf_counter()
            futs = [await p.send_async(Message("RateT", b"x" * 128)) for _ in range(n)]
            await asyncio.gather(*futs)
            rates.append(round(n / (time.perf_counter() - t)))
        print(f"rate: {n:,} send_async of 128 B gathered, 5 rounds: {sorted(rates)} msgs/s")


if __name__ == "__main__":
    what, count = sys.argv[1], int(sys.argv[2])
    with tempfile.TemporaryDirectory() as d:
        with running_cluster(Path(d), mappedFileSizeCommitLog=256 * 1024 * 1024) as (ns, _):
            asyncio.run((burst if what == "burst" else rate)(ns.addr, count))
