"""A lone SYNC_FLUSH send split into its parts: the same send on an ASYNC_FLUSH broker, the
broker's own sync, and the disk's floor, block by block.

Starts a SYNC_FLUSH and an ASYNC_FLUSH ``fastmq-broker`` of this checkout (stores on the same
filesystem) and, for ``--rounds`` rounds: a block of single sends in flight on each, the mean
time of the SYNC broker's commit-log syncs in that block (``commitLogFlushMicrosTotal`` /
``commitLogFlushTimesTotal`` from GET_BROKER_RUNTIME_INFO) and a block of the raw
``fdatasync`` floor. A SYNC send that costs the ASYNC send plus the broker's sync has no
hand-off left; the rest is the disk and the send itself::

    .venv/bin/python benchmarks/probes/sync_flush_split.py --rounds 6 \\
        --out benchmarks/results/probes/sync-flush-split-$(date -u +%Y%m%dT%H%M%SZ).json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sync_flush_setup import flush_rig  # noqa: E402
from test_sync_flush_benchmarks import _counters, _p, fdatasync_floor, one_in_flight  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--block", type=int, default=200)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with flush_rig("sync-flush-split") as rig:
        sync_port = rig.broker("SYNC_FLUSH", "split-S", warm_start=0).port
        async_port = rig.broker("ASYNC_FLUSH", "split-A", warm_start=0).port
        for r in range(args.rounds):
            before = _counters(sync_port)
            sends = one_in_flight(sync_port, args.block, start=(r + 1) * 1_000_000)
            after = _counters(sync_port)
            plain = one_in_flight(async_port, args.block, start=(r + 1) * 1_000_000)
            floor = fdatasync_floor(rig.dir / "SYNC_FLUSH" / "store", args.block)
            assert before is not None and after is not None
            flushes = after[1] - before[1]
            row = {"sync_send_p50_us": round(_p(sends, 50), 1), "async_send_p50_us": round(_p(plain, 50), 1),
                   "broker_sync_mean_us": round((after[2] - before[2]) / max(1, flushes), 1),
                   "floor_p50_us": round(_p(floor, 50), 1), "flushes": flushes}
            row["unexplained_us"] = round(row["sync_send_p50_us"] - row["async_send_p50_us"]
                                          - row["broker_sync_mean_us"], 1)
            rows.append(row)
            print(row)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        "tree": str(HERE.parents[1]), "load": os.getloadavg(),
                                        "args": {k: str(v) for k, v in vars(args).items()}, "rounds": rows},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
