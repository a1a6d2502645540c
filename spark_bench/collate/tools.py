"""The report's table of ``fastmq-bench rocketmq-tools`` runs: fastmq's broker beside Apache
RocketMQ's under RocketMQ's own benchmark tools, one row per (kept run, shape).

These figures are not joined with the other rows: a run compares two brokers measured alternately
on one machine, and its ratio is the figure that means something on a noisy machine, so each kept
run is shown as it is, newest first, with its stamp and commit.
"""
from __future__ import annotations

from typing import Any

__all__ = ["tool_blocks"]

_DASH = "—"


def _n(v: Any, digits: int = 0) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return _DASH
    return f"{v:,.{digits}f}"


def _x(v: Any) -> str:
    return _DASH if not isinstance(v, (int, float)) or isinstance(v, bool) else f"{v:.2f}x"


def _pair(a: Any, b: Any, digits: int = 0) -> str:
    if a is None and b is None:
        return _DASH
    return f"{_n(a, digits)} / {_n(b, digits)}"


def _pct(v: Any) -> str:
    return _DASH if not isinstance(v, (int, float)) or isinstance(v, bool) else f"{v:.0%}"


def _status(doc: dict[str, Any]) -> str:
    return "ok" if doc.get("status") == "ok" else f"**{str(doc.get('status')).upper()}**: {doc.get('reason') or ''}"


def _about(doc: dict[str, Any]) -> str:
    env, st = doc.get("env") or {}, doc.get("settings") or {}
    java, fm = env.get("java") or {}, env.get("fastmq") or {}
    java_text = ", ".join(str(x) for x in (java.get("version"), java.get("java"),
                                            java.get("heap") and f"heap {java['heap']}") if x)
    fm_text = ", ".join(str(x) for x in (fm.get("version"), fm.get("extensions") and
                                          f"extensions {fm['extensions']}") if x)
    return (f"`{doc.get('stamp')}` at `{doc.get('commit')}`{' (dirty)' if doc.get('dirty') else ''}: "
            f"Java broker {java_text or 'unknown'}; {fm_text or 'fastmq'}; {st.get('rounds')} round(s) of "
            f"{st.get('windows')} x 10 s kept per run (first line dropped), order {'/'.join(st.get('order') or [])}, "
            f"warm-up {st.get('warmup_windows')} line(s); {env.get('cpus')} CPUs, load average at start "
            f"{env.get('loadavg_start') or _DASH}; {_status(doc)}.")


def _latencies(fm: dict[str, Any], jm: dict[str, Any]) -> str:
    """A Spark row's send latency percentiles (the tools print none)."""
    if all(m.get(k) is None for m in (fm, jm) for k in ("send_p50_us", "send_p99_us")):
        return _DASH
    return "; ".join(f"{_n(m.get('send_p50_us'))} / {_n(m.get('send_p99_us'))}" for m in (fm, jm))


def tool_blocks(summaries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The report's blocks for these summaries (none when there are none)."""
    if not summaries:
        return []
    docs = sorted(summaries, key=lambda d: (str(d.get("stamp")), str(d.get("commit"))), reverse=True)
    head = ["run (UTC stamp)", "commit", "shape", "ok runs fastmq / Java", "fastmq TPS", "Java TPS",
            "fastmq / Java TPS", "fastmq CPU µs/msg", "Java CPU µs/msg", "CPU fastmq / Java",
            "avg RT ms fastmq / Java", "consumer TPS fastmq / Java", "send failures fastmq / Java",
            "broker RSS MB fastmq / Java", "machine busy", "send p50 / p99 µs fastmq; Java"]
    rows = []
    for d in docs:
        for s in d["shapes"]:
            f, j = s["fastmq"], s["java"]
            fm, jm, r = f["median"], j["median"], s.get("ratio") or {}
            rows.append([str(d.get("stamp")), str(d.get("commit")) + ("-dirty" if d.get("dirty") else ""),
                         str(s.get("shape")), f"{f.get('ok_runs', 0)} / {j.get('ok_runs', 0)}",
                         _n(fm.get("tps")), _n(jm.get("tps")), _x(r.get("tps")),
                         _n(fm.get("cpu_us_per_msg"), 1), _n(jm.get("cpu_us_per_msg"), 1), _x(r.get("cpu_us_per_msg")),
                         _pair(fm.get("avg_rt_ms"), jm.get("avg_rt_ms"), 2),
                         _pair(fm.get("consumer_tps"), jm.get("consumer_tps")),
                         _pair(f.get("send_failures"), j.get("send_failures")),
                         _pair(fm.get("broker_rss_mb"), jm.get("broker_rss_mb")),
                         _pct(fm.get("machine_busy")), _latencies(fm, jm)])
    blocks: list[tuple[Any, ...]] = [
        ("h2", "RocketMQ's benchmark tools: fastmq's broker beside Apache RocketMQ's (fastmq-bench rocketmq-tools)"),
        ("p", "Apache RocketMQ's own `org.apache.rocketmq.example.benchmark` Producer (and Consumer, in the "
              "`-consumer` shapes) with default flags except `-n -w -s -t`, run against a fastmq broker and a Java "
              "broker (ASYNC_FLUSH both, one machine), alternately, each broker with its own NameServer. A run "
              "drops the tool's first 10 s line and keeps the next ones; TPS is the tool's Send TPS over them. "
              "Each figure is the median over the runs of a shape. CPU µs/msg is the broker process's utime+stime "
              "over the kept span / (TPS x span). fastmq / Java TPS above 1: fastmq faster; CPU fastmq / Java above "
              "1: fastmq spends more per message. Machine busy: all CPUs, during fastmq's runs. `drainN-sB` rows: a "
              "backlog of N messages (filled by fastmq's producer in batches) drained by the benchmark Consumer "
              "with default flags; TPS (and consumer TPS) is its rate over the 10 s lines busy throughout, CPU per "
              "message over the same lines. `spark-W` rows: `fastmq-bench run W` (the Spark workload) against each "
              "broker; TPS is its publish rate, consumer TPS its end-to-end rate, the last column its send latency, "
              "CPU per message over the span in which the broker's put count grew. Result files: "
              "benchmarks/results/rocketmq-tools/<stamp>-<commit>/ (summary.json, one JSON and one log per run)."),
        ("table", head, rows),
    ]
    blocks += [("p", _about(d)) for d in docs]
    return blocks
