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
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from test_sync_flush_benchmarks import _p, fdatasync_floor, one_in_flight  # noqa: E402

from tests.support import broker_process, namesrv_process  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sync-flush-syscalls"))
    ns = namesrv_process(tmp).start()
    b = broker_process(tmp, ns.addr, brokerName="syscalls", flushDiskType="SYNC_FLUSH",
                       mappedFileSizeCommitLog=268435456)
    rows = []
    try:
        b.start()
        assert b.proc is not None
        one_in_flight(b.port, 50, start=1_000_000)
        for r in range(args.rounds):
            out = tmp / f"strace-{r}.txt"
            st = subprocess.Popen(["perf", "trace", "-e", "fdatasync", "-o", str(out), "-p",
                                   f"{b.proc.pid},{os.getpid()}"], stderr=subprocess.DEVNULL)
            time.sleep(1.0)
            broker_tids = {int(t) for t in os.listdir(f"/proc/{b.proc.pid}/task")}
            sends = one_in_flight(b.port, args.n, start=r * args.n)
            floor = fdatasync_floor(tmp / "store", args.n)
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
    finally:
        b.stop()
        ns.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps({"rounds": rows, "loadavg": os.getloadavg(),
                                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))


if __name__ == "__main__":
    main()
