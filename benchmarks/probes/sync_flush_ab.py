"""SYNC_FLUSH before and after: two checkouts' brokers side by side, alternated, beside the floor.

Starts one SYNC_FLUSH ``fastmq-broker`` per checkout (each with ``PYTHONPATH`` set to it, stores
on the same filesystem), then for ``--rounds`` rounds, each checkout in turn (the order flipped
every round): a block of single sends in flight (p50), a block of the raw ``fdatasync`` floor
(128 B appended and synced, in that broker's store directory), and 16 producers each with one
send in flight (msgs/s, and fdatasync calls counted by ``perf stat`` on the broker's process:
an older broker has no ``commitLogFlushTimesTotal``). Prints one summary line per checkout and
writes everything as JSON::

    .venv/bin/python benchmarks/probes/sync_flush_ab.py /work/main . --rounds 10 \\
        --out benchmarks/results/probes/sync-flush-ab-$(date -u +%Y%m%dT%H%M%SZ).json

``perf`` needs the ``syscalls:sys_enter_fdatasync`` tracepoint (root, or perf_event_paranoid
low enough); without it messages per fdatasync are left out.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sync_flush_setup import flush_rig  # noqa: E402  (first: it puts this checkout on the path)
from test_sync_flush_benchmarks import _p, _producers, fdatasync_floor, one_in_flight  # noqa: E402

from fastmq.remoting.loop import run  # noqa: E402
from fastmq.testing import ServerProcess  # noqa: E402


def _count_fdatasync(pid: int, fn: Any) -> tuple[Any, int | None]:
    """``fn()``'s result and the fdatasync calls the process made meanwhile (None without perf)."""
    if shutil.which("perf") is None:
        return fn(), None
    perf = subprocess.Popen(["perf", "stat", "-x", ",", "-e", "syscalls:sys_enter_fdatasync", "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)  # attached
    try:
        out = fn()
    finally:
        perf.send_signal(2)
        _, err = perf.communicate(timeout=10)
    m = re.search(r"^(\d+),", err, re.M)
    return out, int(m.group(1)) if m else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path, help="checkout measured first (e.g. /work/main)")
    ap.add_argument("after", type=Path, help="checkout measured second (e.g. .)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--block", type=int, default=60, help="sends and floor syncs per block (short: the disk's speed drifts)")
    ap.add_argument("--producers", type=int, default=16)
    ap.add_argument("--per-producer", type=int, default=100)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    procs: dict[str, ServerProcess] = {}
    # per block or round (kept in the JSON); the p50s printed are over every sample
    figures: dict[str, dict[str, list[float]]] = {k: {"send_p50_us": [], "floor_p50_us": [], "msgs_per_s": [],
                                                      "fdatasync_calls": [], "msgs": []} for k in sides}
    samples: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in sides}
    with flush_rig("sync-flush-ab") as rig:  # (two brokers' stores: hundreds of MB fallocated)
        for name, tree in sides.items():
            b = procs[name] = rig.broker("SYNC_FLUSH", f"ab-{name}", sub=name, env={"PYTHONPATH": str(tree)},
                                         warm_start=0)
            run(_producers(b.port, args.producers, 5))
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                b = procs[name]
                f = figures[name]
                sends = one_in_flight(b.port, args.block, start=(r + 1) * 1_000_000)
                floor = fdatasync_floor(b.workdir / "store", args.block)
                samples[name][0].extend(sends)
                samples[name][1].extend(floor)
                f["send_p50_us"].append(round(_p(sends, 50), 1))
                f["floor_p50_us"].append(round(_p(floor, 50), 1))
            for name in order:
                b = procs[name]
                assert b.proc is not None
                n = args.producers * args.per_producer
                elapsed, calls = _count_fdatasync(b.proc.pid, lambda: run(_producers(b.port, args.producers,
                                                                                      args.per_producer)))
                figures[name]["msgs_per_s"].append(n / elapsed)
                figures[name]["msgs"].append(n)
                if calls is not None:
                    figures[name]["fdatasync_calls"].append(calls)
    summary: dict[str, Any] = {}
    for name, f in figures.items():
        s50, f50 = _p(samples[name][0], 50), _p(samples[name][1], 50)
        row: dict[str, Any] = {"tree": str(sides[name]), "send_p50_us": round(s50, 1), "floor_p50_us": round(f50, 1),
                               "ratio_to_floor": round(s50 / f50, 3),
                               "block_ratio_to_floor": round(statistics.median(
                                   a / b for a, b in zip(f["send_p50_us"], f["floor_p50_us"])), 3),
                               "msgs_per_s_16": round(statistics.median(f["msgs_per_s"]))}
        if f["fdatasync_calls"]:
            row["msgs_per_fdatasync_16"] = round(sum(f["msgs"]) / max(1, sum(f["fdatasync_calls"])), 2)
        summary[name] = row
        print(f"{name}: {row}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "args": {
            k: str(v) for k, v in vars(args).items()}, "summary": summary, "rounds": figures}, indent=1) + "\n")


if __name__ == "__main__":
    main()
