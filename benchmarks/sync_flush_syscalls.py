"""The broker's own fdatasync calls during lone SYNC_FLUSH sends, beside the floor (issue 18).

Starts one SYNC_FLUSH ``fastmq-broker`` (from the checkout on ``PYTHONPATH``), then for
``--rounds`` rounds, with ``perf trace -e fdatasync`` on the broker and on this process (a
tracepoint, not ptrace: the traced processes run at their usual speed): a block of single sends
in flight, and a block of the floor (128 B appended to a plain file in the broker's store
directory and ``fdatasync``-ed) right after. Prints and keeps p50 of the send, of the broker's
fdatasync syscalls, of the floor's (the same measure on both), and of the floor as the
benchmark times it: when the broker's syscall is near the floor's but the send is far above it,
the time goes around the syscall, not in it::

    .venv/bin/python benchmarks/sync_flush_syscalls.py --rounds 6 --n 60 \\
        --out benchmarks/results/profiles/sync-flush-syscalls-$(date -u +%Y%m%dT%H%M%SZ).json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sync_flush_setup import flush_rig  # noqa: E402
from test_sync_flush_benchmarks import _p, fdatasync_floor, one_in_flight  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    with flush_rig("sync-flush-syscalls") as rig:
        b = rig.broker("SYNC_FLUSH", "syscalls")
        assert b.proc is not None
        for r in range(args.rounds):
            out = rig.dir / f"strace-{r}.txt"
            st = subprocess.Popen(["perf", "trace", "-e", "fdatasync", "-o", str(out), "-p",
                                   f"{b.proc.pid},{os.getpid()}"], stderr=subprocess.DEVNULL)
            time.sleep(1.0)
            broker_tids = {int(t) for t in os.listdir(f"/proc/{b.proc.pid}/task")}
            sends = one_in_flight(b.port, args.n, start=r * args.n)
            floor = fdatasync_floor(b.workdir / "store", args.n)
            time.sleep(0.2)
            st.send_signal(signal.SIGINT)
            st.wait(10)
            calls: dict[bool, list[float]] = {True: [], False: []}
            for ms, tid in re.findall(r"\(\s*([0-9.]+) ms\): \S*?/(\d+) fdatasync", out.read_text()):
                calls[int(tid) in broker_tids].append(float(ms) * 1000)
            rows.append({"send_p50_us": round(_p(sends, 50), 1), "floor_p50_us": round(_p(floor, 50), 1),
                         "broker_fdatasync_p50_us": round(_p(calls[True], 50), 1) if calls[True] else None,
                         "broker_fdatasync_calls": len(calls[True]),
                         "floor_fdatasync_p50_us": round(_p(calls[False], 50), 1) if calls[False] else None,
                         "floor_fdatasync_calls": len(calls[False])})
            print(rows[-1])
    if args.out:
        args.out.write_text(json.dumps({"rounds": rows, "loadavg": os.getloadavg(),
                                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))


if __name__ == "__main__":
    main()
