"""Prometheus's text exposition format (version 0.0.4), written by hand: what the broker's and the
NameServer's ``/metrics`` answer (RocketMQ 5's ``metricsExporterType=PROM``).

The servers collect their figures when a scrape arrives and write them here; nothing is kept
between scrapes but the counters the servers already had. Label values are escaped as the format
asks (backslash, double quote, new line); names are the caller's constants.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping

__all__ = ["Exposition", "labels", "pairs", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _pairs(pairs: Mapping[str, object]) -> str:
    """``name="value",...`` (escaped), the inside of a label set."""
    parts = []
    for k, v in pairs.items():
        text = ("true" if v else "false") if v is True or v is False else str(v)
        parts.append(f'{k}="{_escape(text)}"')
    return ",".join(parts)


pairs = _pairs


def labels(pairs: Mapping[str, object]) -> str:
    """``{name="value",...}`` for ``pairs`` (booleans as ``true``/``false``, as OpenTelemetry writes them)."""
    return "{" + _pairs(pairs) + "}" if pairs else ""


def _number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Exposition:
    """One scrape's answer, built a metric family at a time."""

    def __init__(self, common: Mapping[str, object] | None = None) -> None:
        #: labels every sample carries (RocketMQ 5: cluster, node_type, node_id), rendered once
        self.common = dict(common or {})
        self._prefix = _pairs(self.common)  # rendered once: a broker's scrape has 10^4 samples
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        """Start a family: its HELP and TYPE lines (``kind``: counter, gauge or histogram)."""
        self._lines.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")

    def sample(self, name: str, value: float | int, extra: Mapping[str, object] | str | None = None) -> None:
        """One sample; ``extra`` labels follow the common ones (a name in both is written twice,
        so callers keep them apart). ``extra`` may be :func:`pairs`' rendering, for labels a
        scrape writes many times."""
        inner = self._prefix
        if extra:
            more = extra if type(extra) is str else _pairs(extra)  # type: ignore[arg-type]
            inner = f"{inner},{more}" if inner else more
        self._lines.append(f"{name}{{{inner}}} {_number(value)}\n" if inner else f"{name} {_number(value)}\n")

    def gauge(self, name: str, help_text: str, rows: Iterable[tuple[Mapping[str, object] | str | None, float | int]],
              kind: str = "gauge") -> None:
        """A whole family of ``(labels, value)`` rows."""
        self.family(name, kind, help_text)
        for extra, value in rows:
            self.sample(name, value, extra)

    def histogram(self, name: str, help_text: str, bounds: Iterable[float],
                  rows: Iterable[tuple[Mapping[str, object], list[int], float]]) -> None:
        """A histogram family: each row is (labels, counts per bucket with the +Inf bucket last, sum).
        The ``_bucket`` lines are cumulative, as the format asks."""
        self.family(name, "histogram", help_text)
        les = [_number(float(b)) for b in bounds] + ["+Inf"]
        lines = self._lines
        common = self._prefix
        for extra, counts, total in rows:
            # each row's labels rendered once, its lines written here: a broker's scrape may
            # hold a row per topic, 10^4 of them
            text = _pairs(extra)
            inner = f"{common},{text}" if common and text else common or text
            head = f"{name}_bucket{{{inner}," if inner else f"{name}_bucket{{"
            running = 0
            for le, n in zip(les, counts):
                running += n
                lines.append(f'{head}le="{le}"}} {running}\n')
            tail = f"{{{inner}}}" if inner else ""
            lines.append(f"{name}_sum{tail} {_number(float(total))}\n{name}_count{tail} {running}\n")

    def text(self) -> bytes:
        return "".join(self._lines).encode("utf-8")
