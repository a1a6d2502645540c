"""A mergeable latency histogram: what each load generator ships back to the driver.

Log-linear buckets, as HdrHistogram lays them out: values below 2**SUB are counted exactly, and
every power of two above that is split into 2**SUB equal buckets, so any recorded value is known
to within 1 / 2**SUB (here 1/2048: three significant digits, as HdrHistogram's default) from 1 ns
to about 4.9 hours. A percentile reports the highest value its bucket can hold (HdrHistogram's
"highest equivalent value"), so it is never below the true one and at most 1/2048 above it. The counts are one
numpy int64 array: merging the histograms of many executors is an element-wise sum, and the wire
form (msgpack) is the array's bytes plus a few totals.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import msgpack
import numpy as np

__all__ = ["LatencyHistogram", "PERCENTILES"]

#: The percentiles every report carries, by name.
PERCENTILES = (("p50", 50.0), ("p75", 75.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9),
               ("max", 100.0))

SUB = 11                     # 2048 sub-buckets per power of two: 3 significant digits
_SUBN = 1 << SUB
MAX_EXP = 44                 # 2**44 ns ~ 4.9 h: more than any benchmark runs
N_BUCKETS = (MAX_EXP - SUB + 1) * _SUBN + _SUBN


def _index(v: np.ndarray) -> np.ndarray:
    """Bucket index of each value (ns, int64 >= 0)."""
    v = np.clip(v, 0, (1 << MAX_EXP) - 1).astype(np.int64)
    exp = np.zeros_like(v)
    big = v >= _SUBN
    # floor(log2(v)) exactly: frexp of a float64 is exact for integers below 2**53
    exp[big] = np.frexp(v[big].astype(np.float64))[1].astype(np.int64) - 1
    idx = v.copy()
    shift = exp[big] - SUB
    idx[big] = (exp[big] - SUB + 1) * _SUBN + (np.right_shift(v[big], shift) - _SUBN)
    return idx


def _highest_equivalent(idx: np.ndarray) -> np.ndarray:
    """The largest value each bucket holds."""
    idx = idx.astype(np.int64)
    out = idx.copy()
    big = idx >= _SUBN
    block = idx[big] // _SUBN            # 1, 2, ...
    within = idx[big] % _SUBN
    shift = block - 1                    # bucket width is 2**shift
    out[big] = np.left_shift(_SUBN + within + 1, shift) - 1
    return out


@dataclass
class LatencyHistogram:
    counts: np.ndarray = field(default_factory=lambda: np.zeros(N_BUCKETS, dtype=np.int64))
    total: int = 0
    min_ns: int = 0
    max_ns: int = 0
    sum_ns: int = 0

    def record(self, ns: int) -> None:
        self.record_many(np.asarray([ns], dtype=np.int64))

    def record_many(self, ns: np.ndarray) -> None:
        """Record many latencies (nanoseconds) at once."""
        ns = np.asarray(ns, dtype=np.int64)
        if ns.size == 0:
            return
        np.add.at(self.counts, _index(ns), 1)
        lo, hi = int(ns.min()), int(ns.max())
        self.min_ns = lo if self.total == 0 else min(self.min_ns, lo)
        self.max_ns = max(self.max_ns, hi)
        self.total += int(ns.size)
        self.sum_ns += int(ns.sum())

    def merge(self, other: "LatencyHistogram") -> "LatencyHistogram":
        """Add ``other`` into this histogram (returns self)."""
        if other.total:
            self.counts += other.counts
            self.min_ns = other.min_ns if self.total == 0 else min(self.min_ns, other.min_ns)
            self.max_ns = max(self.max_ns, other.max_ns)
            self.total += other.total
            self.sum_ns += other.sum_ns
        return self

    def percentile(self, p: float) -> int:
        """The value at percentile ``p`` (0-100): the highest value of the bucket holding the
        ``ceil(total * p / 100)``-th smallest sample (never below it, within 1/2048 of it),
        capped at the exact maximum; exact at 0 and 100."""
        if self.total == 0:
            return 0
        if p <= 0:
            return self.min_ns
        if p >= 100:
            return self.max_ns
        rank = int(np.ceil(self.total * p / 100.0))
        idx = int(np.searchsorted(np.cumsum(self.counts), rank))
        value = int(_highest_equivalent(np.asarray([idx]))[0])
        return min(max(value, self.min_ns), self.max_ns)

    @property
    def mean_ns(self) -> float:
        return self.sum_ns / self.total if self.total else 0.0

    def percentiles_us(self) -> dict[str, float]:
        """p50 ... p99.9 and max in microseconds (3 significant digits kept: ns / 1000)."""
        return {name: self.percentile(p) / 1000 for name, p in PERCENTILES}

    def cdf(self, points: int = 200) -> list[tuple[float, float]]:
        """(percentile, value in µs) pairs for a latency CDF plot, denser towards the tail."""
        if not self.total:
            return []
        ps = 100 - 100 / np.logspace(0, 5, points)   # 0 ... 99.999
        return [(float(p), self.percentile(float(p)) / 1000) for p in ps] + [(100.0, self.max_ns / 1000)]

    def to_bytes(self) -> bytes:
        nz = np.nonzero(self.counts)[0]
        return msgpack.packb({"i": nz.astype(np.int32).tobytes(), "c": self.counts[nz].tobytes(),
                              "t": self.total, "lo": self.min_ns, "hi": self.max_ns, "s": self.sum_ns})

    @classmethod
    def from_bytes(cls, data: bytes) -> "LatencyHistogram":
        d = msgpack.unpackb(data)
        h = cls()
        idx = np.frombuffer(d["i"], dtype=np.int32)
        h.counts[idx] = np.frombuffer(d["c"], dtype=np.int64)
        h.total, h.min_ns, h.max_ns, h.sum_ns = d["t"], d["lo"], d["hi"], d["s"]
        return h
