"""What one request/answer exchange between two processes costs on this machine, apart from any
fastmq code: an echo server (``round_trips``) with both ends on one vCPU or on two, and with the
server's work per request growing under the scheduler's own placement.

On a VM whose idle vCPUs halt at once (``haltpoll.guest_halt_poll_ns=0``), an exchange that
crosses vCPUs pays a wake-up of a halted vCPU each way; these figures say how much, so that the
sync-send latency of ``test_client_benchmarks.py`` can be read apart from the machine's share.

Real figures: ``.venv/bin/python -m pytest benchmarks/test_round_trip_benchmarks.py --benchmark-only -s``.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import pytest
from round_trips import echo_round_trip, pinned, time_round_trips

from fastmq.remoting.loop import run

N = 3000


async def _echo(tmp: Path, n: int, work_us: float = 0.0, server_cpu: int | None = None) -> np.ndarray:
    with contextlib.ExitStack() as stack:
        one = await echo_round_trip(tmp, stack, work_us, server_cpu)
        await one()
        return await time_round_trips(one, n)


def _report(benchmark, lat: np.ndarray, what: str) -> None:
    p50 = float(np.percentile(lat, 50))
    benchmark.extra_info["p50_us"] = round(p50, 1)
    print(f"\necho round trip, {what}: p50 {p50:.0f} us, p99 {np.percentile(lat, 99):.0f} us over {len(lat)}")


@pytest.mark.parametrize("placement", ["one vCPU", "two vCPUs"])
def test_echo_round_trip_by_placement(benchmark, tmp_path, placement: str) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if placement == "two vCPUs" and len(cpus) < 2:
        pytest.skip("one CPU available")
    server_cpu = cpus[0] if placement == "one vCPU" else cpus[1]
    out: list[np.ndarray] = []

    def go() -> None:
        with pinned([0], cpus[0]):
            out.append(run(_echo(tmp_path, N, server_cpu=server_cpu)))
    benchmark.pedantic(go, rounds=1, iterations=1)
    _report(benchmark, out[0], placement)


@pytest.mark.parametrize("work_us", [0, 5, 10, 15, 20, 30])
def test_echo_round_trip_by_server_work(benchmark, tmp_path, work_us: int) -> None:
    """The scheduler's own placement, the server busy ``work_us`` per request before answering."""
    out: list[np.ndarray] = []
    benchmark.pedantic(lambda: out.append(run(_echo(tmp_path, N, work_us))), rounds=1, iterations=1)
    _report(benchmark, out[0], f"{work_us} us of server work per request")
