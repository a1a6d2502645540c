"""Medians over alternated e2e_tail_probe.py runs, by variant: which one lowered what.

    python benchmarks/probes/e2e_tail_summary.py 'benchmarks/results/probes/lever-*.json' \
        --out benchmarks/results/probes/lever-summary.json

A run's variant is the letter between dashes in its file name (``lever-3-B-after-77b7c6c.json``:
B). Per variant: the e2e and publish percentiles, the e2e p99 less the publish p99 (what the
consumer side adds to the tail: on a shared machine the producer's and broker's stalls move both
together), which hop was the largest for the slowest 1% of messages (summed over the runs)
and each hop's mean over that 1% (median over the runs), the consumer process's wake-ups,
preemptions and CPU per second at 1,000 msgs/s (loop thread and consume threads), and the hand-off hop (pull answer decoded -> listener). Also the
correlation of e2e p99 with publish p99 over all the runs.
"""
from __future__ import annotations

import argparse
import glob
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any


def _row(d: dict[str, Any]) -> dict[str, float]:
    pm = d["processes"]["e2e_tail_probe.py-consume"]["per_message"]["per_1000_msgs_at_rate"]
    pool = next(k for k in pm if k.startswith("Consume_"))
    hops = d["hops"]["all"]
    return {
        "e2e_p50_us": d["e2e_us"]["p50"], "e2e_p99_us": d["e2e_us"]["p99"],
        "publish_p50_us": d["publish_us"]["p50"], "publish_p99_us": d["publish_us"]["p99"],
        "e2e_p99_less_publish_p99_us": d["e2e_us"]["p99"] - d["publish_us"]["p99"],
        "consumer_loop_wakeups_per_s": pm["MainThread"]["wakeups"],
        "consumer_loop_preempted_per_s": pm["MainThread"]["preempted"],
        "consumer_loop_cpu_ms_per_s": pm["MainThread"]["cpu_ms"],
        "consume_threads_wakeups_per_s": pm[pool]["wakeups"],
        "consume_threads_preempted_per_s": pm[pool]["preempted"],
        "consume_threads_cpu_ms_per_s": pm[pool]["cpu_ms"],
        "handoff_p50_us": hops["to_listener_thread_us"]["p50"],
        "handoff_mean_us": hops["to_listener_thread_us"]["mean"],
        "load_avg_1m": d["load_avg"][0],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pattern")
    ap.add_argument("--out")
    a = ap.parse_args()
    by: dict[str, list[dict[str, float]]] = {}
    files: dict[str, list[str]] = {}
    slow: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(glob.glob(a.pattern)):
        m = re.search(r"-([A-Z])-", Path(f).name)
        if m is None:
            continue
        d = json.loads(Path(f).read_text())
        by.setdefault(m.group(1), []).append(_row(d))
        slow.setdefault(m.group(1), []).append(d["hops"]["slowest_1pct"])
        files.setdefault(m.group(1), []).append(Path(f).name)
    out: dict[str, Any] = {"pattern": a.pattern, "variants": {}}
    for v, rows in sorted(by.items()):
        hops = list(slow[v][0]["largest_hop_counts"])  # (the probe's hop names, in its order)
        out["variants"][v] = {"runs": len(rows), "files": files[v],
                              "median": {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]},
                              "slowest_1pct_largest_hop_counts": {h: sum(s["largest_hop_counts"][h] for s in slow[v])
                                                                  for h in hops},
                              "slowest_1pct_hop_mean_us_median": {
                                  h: round(statistics.median(s[h + "_us"]["mean"] for s in slow[v]), 1) for h in hops}}
    everything = [r for rows in by.values() for r in rows]
    if len(everything) > 2:
        out["corr_e2e_p99_publish_p99"] = round(statistics.correlation(
            [r["publish_p99_us"] for r in everything], [r["e2e_p99_us"] for r in everything]), 3)
    text = json.dumps(out, indent=1) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
