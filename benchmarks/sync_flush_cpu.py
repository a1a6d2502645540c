"""CPU per lone send of a SYNC_FLUSH and an ASYNC_FLUSH broker, by thread (issue 18).

Starts a SYNC_FLUSH ``fastmq-broker`` (from the checkout on ``PYTHONPATH``), then an ASYNC_FLUSH
one, each in turn: ``perf stat --per-thread -e task-clock,context-switches`` on it during ``-n``
single sends in flight (SEND_MESSAGE_V2 of 128 B, as benchmarks/test_sync_flush_benchmarks.py
sends them); prints p50 and each thread's task-clock and context switches (threads under 5 ms
left out). With ``--pyspy OUT``, the SYNC_FLUSH broker is instead sampled by ``py-spy record
--threads --native --gil`` into OUT (raw), to see what holds the GIL::

    .venv/bin/python benchmarks/sync_flush_cpu.py -n 2000 > benchmarks/results/profiles/sync-flush-broker-per-thread-cpu.txt
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sync_flush_setup import flush_rig  # noqa: E402
from test_sync_flush_benchmarks import _p, one_in_flight  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--pyspy", type=Path, help="py-spy the SYNC_FLUSH broker into this file instead")
    args = ap.parse_args()
    with flush_rig("sync-flush-cpu") as rig:
        for mode in ("SYNC_FLUSH",) if args.pyspy else ("SYNC_FLUSH", "ASYNC_FLUSH"):
            b = rig.broker(mode, mode)
            assert b.proc is not None
            if args.pyspy:
                cmd = [str(Path(sys.executable).with_name("py-spy")), "record", "--threads", "--native", "--gil",
                       "-r", "500", "-f", "raw", "-o", str(args.pyspy), "-p", str(b.proc.pid)]
            else:
                cmd = ["perf", "stat", "--per-thread", "-e", "task-clock,context-switches", "-p", str(b.proc.pid)]
            prof = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)
            t0 = time.perf_counter()
            lat = one_in_flight(b.port, args.n)
            elapsed = time.perf_counter() - t0
            prof.send_signal(2)
            err = prof.communicate(timeout=60)[1]
            print(f"{mode} p50 {_p(lat, 50):.0f} us, elapsed {elapsed:.2f} s, n {args.n}")
            for line in err.splitlines() if not args.pyspy else []:
                parts = line.split()
                if len(parts) > 2 and parts[2] in ("msec", "context-switches"):
                    value = float(parts[1].replace(",", ""))
                    if parts[2] == "context-switches" or value > 5:
                        print("   ", " ".join(parts[:3]), f"({value / args.n * (1000 if parts[2] == 'msec' else 1):.1f} per send"
                              f"{', us' if parts[2] == 'msec' else ''})")
            rig.stop(b)  # (one broker at a time: the other's threads would share the CPUs measured)

if __name__ == "__main__":
    main()
