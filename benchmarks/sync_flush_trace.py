"""Where a lone SYNC_FLUSH send's time goes: the same send on an ASYNC_FLUSH broker and on a
SYNC_FLUSH one, beside the fdatasync floor, alternated in short blocks; then ``strace`` of the
SYNC_FLUSH broker's threads during one block (issue 18).

The ASYNC_FLUSH send is everything but the disk (network, decoding, the store's put, the
answer); SYNC_FLUSH minus ASYNC_FLUSH is what the flush adds, to be set against the floor.
The trace (``strace -f -tt -T``) shows, per send, when the request was read, when the flush
thread was woken, how long its sync took, and when the answer was written::

    .venv/bin/python benchmarks/sync_flush_trace.py --blocks 10 --n 60 \\
        --out benchmarks/results/profiles/sync-flush-trace-$(date -u +%Y%m%dT%H%M%SZ)

writes ``<out>.json`` (the figures) and ``<out>.strace.txt`` (the trace) when ``--out`` is given.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sync_flush_setup import flush_rig  # noqa: E402
from test_sync_flush_benchmarks import _p, fdatasync_floor, one_in_flight  # noqa: E402

_TRACED = "trace=msync,fdatasync,fsync,futex,write,writev,sendto,sendmsg,recvfrom,read,epoll_wait,epoll_pwait"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--trace-n", type=int, default=30, help="sends traced with strace (0: no trace)")
    ap.add_argument("--out", type=Path, help="path prefix of the result files")
    ap.add_argument("--variant-env", default=None,
                    help="KEY=VALUE: a second SYNC_FLUSH broker with this in its environment, in the same turns")
    args = ap.parse_args()
    with flush_rig("sync-flush-trace") as rig:
        brokers = {mode: rig.broker(mode, f"trace-{mode}") for mode in ("SYNC_FLUSH", "ASYNC_FLUSH")}
        if args.variant_env:
            key, _, value = args.variant_env.partition("=")
            brokers["variant"] = rig.broker("SYNC_FLUSH", "trace-variant", sub="variant", env={key: value})
        store = rig.dir / "SYNC_FLUSH" / "store"
        start = 0
        blocks: dict[str, list[list[float]]] = {"sync": [], "async": [], "floor": []}
        if "variant" in brokers:
            blocks["variant"] = []
        for i in range(args.blocks):
            steps = [("sync", lambda: one_in_flight(brokers["SYNC_FLUSH"].port, args.n, start=start)),
                     ("async", lambda: one_in_flight(brokers["ASYNC_FLUSH"].port, args.n, start=start)),
                     ("floor", lambda: fdatasync_floor(store, args.n))]
            if "variant" in brokers:
                steps.append(("variant", lambda: one_in_flight(brokers["variant"].port, args.n, start=start)))
            k = i % len(steps)
            for name, fn in steps[k:] + steps[:k]:
                blocks[name].append(fn())
            start += args.n
        every = {k: [x for blk in v for x in blk] for k, v in blocks.items()}
        summary = {k: {"p50_us": round(_p(v, 50), 1), "p99_us": round(_p(v, 99), 1)} for k, v in every.items()}
        summary["ratios"] = {
            "sync_to_floor_median_of_blocks": round(statistics.median(
                _p(s, 50) / _p(f, 50) for s, f in zip(blocks["sync"], blocks["floor"])), 3),
            "sync_minus_async_p50_us": round(summary["sync"]["p50_us"] - summary["async"]["p50_us"], 1)}
        if "variant" in blocks:
            summary["ratios"]["variant_to_floor_median_of_blocks"] = round(statistics.median(
                _p(s, 50) / _p(f, 50) for s, f in zip(blocks["variant"], blocks["floor"])), 3)
        load = os.getloadavg()
        print(json.dumps(summary), f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        trace = ""
        if args.trace_n and shutil.which("strace"):
            out = rig.dir / "strace.txt"
            pid = brokers["SYNC_FLUSH"].proc.pid  # type: ignore[union-attr]
            st = subprocess.Popen(["strace", "-f", "-tt", "-T", "-e", _TRACED, "-o", str(out), "-p", str(pid)],
                                  stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # attached to every thread
            traced = one_in_flight(brokers["SYNC_FLUSH"].port, args.trace_n, start=start)
            st.send_signal(signal.SIGINT)
            st.wait(10)
            trace = out.read_text()
            summary["traced_sends_p50_us"] = round(_p(traced, 50), 1)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            Path(f"{args.out}.json").write_text(json.dumps({"summary": summary, "blocks": blocks, "loadavg": load,
                                                            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                                                           indent=1))
            if trace:
                Path(f"{args.out}.strace.txt").write_text(trace)


if __name__ == "__main__":
    main()
