"""What one Spark task measures: acknowledgements and receipts, counted and timed.

Every event carries its own timestamp (wall clock, ns): an acknowledgement counts towards
throughput and latency when it lands inside the run's common measured window, and goes into
the per-interval figures by the interval it lands in. Latency runs from the message's
*intended* send time (its slot in the schedule at a target rate, else the moment the send
started), so a stalled broker shows as latency rather than as fewer samples.

Events are appended to plain lists on the hot path and folded into histograms in numpy batches.
Every message is also marked by (producer, sequence) so the driver can find the lost and the
duplicated: producers mark what was acknowledged, consumers what arrived and how often.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .histogram import LatencyHistogram

__all__ = ["Plan", "Recorder", "Marks"]

_FLUSH_AT = 8192


@dataclass(frozen=True)
class Plan:
    """Absolute times (epoch ns) the driver decided for every task of a run."""

    t0_ns: int                # load starts (warm-up begins)
    window_start_ns: int      # measured window: [window_start, window_end)
    window_end_ns: int
    interval_ns: int

    @property
    def intervals(self) -> int:
        return max(1, -(-(self.window_end_ns - self.window_start_ns) // self.interval_ns))

    def to_json(self) -> dict[str, int]:
        return {"t0_ns": self.t0_ns, "window_start_ns": self.window_start_ns,
                "window_end_ns": self.window_end_ns, "interval_ns": self.interval_ns}


class _Series:
    """One kind of event (publish or end-to-end): times and latencies, window and intervals."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.t: list[int] = []
        self.lat: list[int] = []
        self.total = LatencyHistogram()
        self.per_interval: dict[int, LatencyHistogram] = {}
        self.counts = np.zeros(plan.intervals, dtype=np.int64)
        self.in_window = 0

    def flush(self) -> None:
        if not self.t:
            return
        t = np.asarray(self.t, dtype=np.int64)
        lat = np.maximum(np.asarray(self.lat, dtype=np.int64), 0)
        self.t, self.lat = [], []
        p = self.plan
        keep = (t >= p.window_start_ns) & (t < p.window_end_ns)
        if not keep.any():
            return
        t, lat = t[keep], lat[keep]
        self.in_window += int(t.size)
        self.total.record_many(lat)
        idx = (t - p.window_start_ns) // p.interval_ns
        np.add.at(self.counts, idx, 1)
        for i in np.unique(idx):
            self.per_interval.setdefault(int(i), LatencyHistogram()).record_many(lat[idx == i])


class Marks:
    """Which sequence numbers of each producer were seen, and how often (capped at 255)."""

    def __init__(self) -> None:
        self.by_producer: dict[int, bytearray] = {}
        self.duplicates = 0

    def mark(self, pid: int, seq: int) -> None:
        b = self.by_producer.get(pid)
        if b is None:
            b = self.by_producer[pid] = bytearray(max(1024, seq + 1))
        elif seq >= len(b):
            b.extend(bytes(max(len(b), seq + 1 - len(b))))
        if b[seq]:
            self.duplicates += 1
            if b[seq] < 255:
                b[seq] += 1
        else:
            b[seq] = 1

    def packed(self) -> dict[int, bytes]:
        """Per producer: one bit per sequence number seen at least once."""
        return {pid: np.packbits(np.frombuffer(bytes(b), dtype=np.uint8) > 0).tobytes()
                for pid, b in self.by_producer.items()}


class Recorder:
    """One task's measurements; ``result()`` is what it returns to the driver."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.publish = _Series(plan)
        self.e2e = _Series(plan)
        self.errors: dict[str, int] = {}
        self.error_intervals = np.zeros(plan.intervals, dtype=np.int64)
        self.sent_ok = 0
        self.received = 0
        self.acked = Marks()
        self.seen: dict[str, Marks] = {}   # consumer group -> what it received

    def set_plan(self, plan: Plan) -> None:
        """Adopt the driver's plan; what was counted before it (a backlog, or a message that
        arrived before this task heard the plan) stays counted, and lands in the window only if
        its timestamp does."""
        self.plan = self.publish.plan = self.e2e.plan = plan
        for s in (self.publish, self.e2e):
            s.counts = np.zeros(plan.intervals, dtype=np.int64)
            s.flush()
        self.error_intervals = np.zeros(plan.intervals, dtype=np.int64)

    def acked_one(self, pid: int, seq: int, intended_ns: int, ack_ns: int, timed: bool = True) -> None:
        self.sent_ok += 1
        self.acked.mark(pid, seq)
        if timed:
            s = self.publish
            s.t.append(ack_ns)
            s.lat.append(ack_ns - intended_ns)
            if len(s.t) >= _FLUSH_AT:
                s.flush()

    def error(self, kind: str, at_ns: int, n: int = 1) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + n
        p = self.plan
        if p.window_start_ns <= at_ns < p.window_end_ns:
            self.error_intervals[(at_ns - p.window_start_ns) // p.interval_ns] += n

    def received_one(self, group: str, pid: int, seq: int, intended_ns: int, now_ns: int) -> None:
        self.received += 1
        marks = self.seen.get(group)
        if marks is None:
            marks = self.seen[group] = Marks()
        marks.mark(pid, seq)
        s = self.e2e
        s.t.append(now_ns)
        s.lat.append(now_ns - intended_ns)
        if len(s.t) >= _FLUSH_AT:
            s.flush()

    def flush(self) -> None:
        self.publish.flush()
        self.e2e.flush()

    def interval_snapshot(self, i: int) -> dict[str, Any]:
        """Interval ``i`` so far: counts, errors and p99 (µs) for the driver's progress line."""
        self.flush()
        out: dict[str, Any] = {"i": i, "errors": sum(self.errors.values())}
        for name, s in (("publish", self.publish), ("e2e", self.e2e)):
            out[name] = int(s.counts[i]) if i < s.counts.size else 0
            h = s.per_interval.get(i)
            out[name + "_hist"] = h.to_bytes() if h is not None else None
        return out

    def result(self) -> dict[str, Any]:
        """Counts, histograms (wire form), per-interval rows and marks, for the driver."""
        self.flush()
        rows = []
        for i in range(self.plan.intervals):
            ph, eh = self.publish.per_interval.get(i), self.e2e.per_interval.get(i)
            rows.append({"interval": i, "publish_msgs": int(self.publish.counts[i]),
                         "e2e_msgs": int(self.e2e.counts[i]), "errors": int(self.error_intervals[i]),
                         "publish_p99_us": ph.percentile(99) / 1000 if ph else None,
                         "e2e_p99_us": eh.percentile(99) / 1000 if eh else None})
        return {"sent_ok": self.sent_ok, "received": self.received, "errors": dict(self.errors),
                "publish_in_window": self.publish.in_window, "e2e_in_window": self.e2e.in_window,
                "publish_hist": self.publish.total.to_bytes(), "e2e_hist": self.e2e.total.to_bytes(),
                "publish_intervals": {i: h.to_bytes() for i, h in self.publish.per_interval.items()},
                "e2e_intervals": {i: h.to_bytes() for i, h in self.e2e.per_interval.items()},
                "interval_rows": rows, "acked": self.acked.packed(),
                "seen": {g: m.packed() for g, m in self.seen.items()},
                "duplicates": sum(m.duplicates for m in self.seen.values())}
