"""What one or more ``fastmq-bench rocketmq-tools`` result directories say about the consumer shape.

    python -m benchmarks.probes.consumer_shape_report DIR [DIR ...] [--out FILE]

Per run (both brokers): TPS, the broker's CPU per message and its cores on a CPU and waiting for
one (run-queue), each tool JVM's CPU per message, the broker's pulls per second and per message,
the messages per pull that found some, and the Consumer's store-to-consume latency over the kept
windows. Per py-spy file (``--py-spy`` runs): the share of the broker's main-thread samples idle in
the event loop's poll and the frames that took the most samples. The figures are read from the
run files; nothing is measured here.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

_COLUMNS = (("tps", "TPS", 0), ("cpu_us_per_msg", "broker us/msg", 1), ("broker_cpu_cores", "broker cores", 2),
            ("broker_runq_cores", "broker runq cores", 2), ("producer_cpu_us_per_msg", "producer JVM us/msg", 1),
            ("consumer_cpu_us_per_msg", "consumer JVM us/msg", 1), ("pulls_per_s", "pulls/s", 0),
            ("pulls_per_msg", "pulls/msg", 2), ("msgs_per_found_pull", "msgs/found pull", 2),
            ("s2c_ms", "consumer S2C ms", 1), ("machine_busy", "machine busy", 2))
# frames where the loop thread waits for I/O (uvloop's poll shows as the run call with --idle)
_IDLE = ("epoll_wait", "select (selectors.py", "poll (selectors.py", "run_forever", "Runner.run")


def run_rows(d: Path) -> list[dict[str, Any]]:
    """One row per kept run file of ``d``, in run order."""
    rows = []
    for f in sorted(d.glob("run-*.json"), key=lambda p: (json.loads(p.read_text()).get("started_at", ""), p.name)):
        doc = json.loads(f.read_text())
        fig = dict(doc.get("figures") or {})
        if not fig:
            continue
        if fig.get("pulls_per_s") and fig.get("tps"):
            fig["pulls_per_msg"] = fig["pulls_per_s"] / fig["tps"]
        span = (-5.0, float(fig.get("span_s", 30.0)) + 5.0)
        s2c = [c["avg_s2c_ms"] for c in doc.get("consumer_lines", [])
               if c.get("avg_s2c_ms") is not None and span[0] < c["t"] <= span[1]]
        if s2c:
            fig["s2c_ms"] = statistics.fmean(s2c)
        rows.append({"dir": d.name, "run": f.stem.removeprefix("run-"), "load": doc.get("loadavg_before", ""), **fig})
    return rows


def fold_summary(path: Path, top: int = 20) -> list[str]:
    """The idle share and the top self and inclusive frames of the broker's main (event-loop)
    thread in one py-spy raw (folded) file; the other threads (flush, timers) wait nearly always."""
    total, idle, others = 0, 0, 0
    self_frames: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = stack.split(";")
        if not frames[0].startswith("<module>"):
            others += count
            continue
        total += count
        for frame in set(frames):
            inclusive[frame] += count
        leaf = frames[-1]
        if any(k in leaf for k in _IDLE):
            idle += count
        self_frames[leaf] += count
    if not total:
        return [f"{path.name}: no samples"]
    out = [f"{path.name}: main thread {total} samples (other threads {others}); {idle / total:.1%} in the "
           "loop's poll, the rest running or runnable (py-spy cannot tell those apart: see broker runq cores)",
           "  self:"]
    out += [f"  {n / total:6.1%}  {frame}" for frame, n in self_frames.most_common(top)]
    out.append("  inclusive:")
    out += [f"  {n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top + 10)]
    return out


def report(dirs: list[Path]) -> str:
    lines = []
    for d in dirs:
        lines.append(f"== {d.name}")
        head = "run".ljust(34) + "".join(f"{label:>21s}" for _, label, _ in _COLUMNS) + "  load before"
        lines.append(head)
        for r in run_rows(d):
            cells = "".join(f"{'-' if r.get(k) is None else format(r[k], f',.{p}f'):>21s}" for k, _, p in _COLUMNS)
            lines.append(r["run"].ljust(34) + cells + "  " + " ".join(str(r["load"]).split()[:3]))
        for f in sorted(d.glob("run-*-pyspy.folded")):
            lines += fold_summary(f)
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("dirs", nargs="+", type=Path)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    text = report(a.dirs)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
