"""A run's outputs: result.json, intervals.parquet (written by Spark), PNG plots, report.html."""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

__all__ = ["write_outputs", "summary_line"]

_SCHEMA = ("run_id string, workload string, driver string, task int, host string, interval int, t_s double, "
           "publish_msgs long, e2e_msgs long, errors long, publish_p99_us double, e2e_p99_us double")


def write_outputs(spark: Any, out: Path, result: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Everything for one (workload, driver) into ``out`` (created).

    The rows came back to the driver through Spark, but Spark's parquet writer runs on an
    executor: on a cluster whose executors do not share the driver's ``out`` directory the file
    lands on their disks and the driver's copy is empty. The driver checks what arrived and
    fails the run, naming the reason, rather than report OK with data missing."""
    out.mkdir(parents=True, exist_ok=True)
    hists = result.pop("_hists", None)
    if rows:
        target = out / "intervals.parquet"
        problem = None
        try:
            spark.createDataFrame(rows, _SCHEMA).coalesce(1).write.mode("overwrite").parquet(str(target))
            if not any(f.stat().st_size for f in target.glob("part-*")):
                problem = (f"intervals.parquet: the executors wrote {len(rows)} interval rows where the driver "
                           f"cannot see them ({target} has no data file): give --out a directory the driver and "
                           "every executor share")
        except Exception as exc:  # a write refused on the executors' side
            problem = f"intervals.parquet could not be written: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        if problem:
            result["status"] = "failed"
            result["reason"] = f"{result['reason']}; {problem}" if result.get("reason") else problem
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    measured = any(h.total for h in (hists or {}).values()) or any(
        x["publish_msgs_per_s"] or x["e2e_msgs_per_s"] for x in result["intervals"])
    pngs = _plots(out, result, hists) if measured else []
    _html(out, result, pngs)


def _plots(out: Path, result: dict[str, Any], hists: dict[str, Any] | None) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    made = []
    title = f"{result['workload']['name']} / {result['driver']}"
    iv = result["intervals"]
    if iv:
        fig, ax = plt.subplots(figsize=(8, 4))
        t = [x["t_s"] for x in iv]
        ax.plot(t, [x["publish_msgs_per_s"] for x in iv], label="publish")
        if result["e2e"] is not None:
            ax.plot(t, [x["e2e_msgs_per_s"] for x in iv], label="consume")
        if result["target_rate"]:
            ax.axhline(result["target_rate"], linestyle="--", color="grey", label="target")
        ax.set(xlabel="seconds into the window", ylabel="msgs/s", title=f"{title}: throughput")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "throughput.png")
        plt.close(fig)
        made.append("throughput.png")
    lat = [(k, result[k]["latency_us"]) for k in ("publish", "e2e") if result.get(k) and result[k]["latency_us"]]
    if lat:
        fig, ax = plt.subplots(figsize=(8, 4))
        names = list(lat[0][1])
        width = 0.8 / len(lat)
        for j, (k, v) in enumerate(lat):
            ax.bar([i + j * width for i in range(len(names))], [v[n] for n in names], width, label=k)
        ax.set_xticks([i + width * (len(lat) - 1) / 2 for i in range(len(names))], names)
        ax.set(ylabel="µs", yscale="log", title=f"{title}: latency percentiles")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "percentiles.png")
        plt.close(fig)
        made.append("percentiles.png")
    if hists:
        import numpy as np
        fig, ax = plt.subplots(figsize=(8, 4))
        for k, h in hists.items():
            pts = h.cdf()
            if pts:
                ps = np.array([p for p, _ in pts[:-1]])
                ax.plot(np.log10(100 / (100 - ps)), [v for _, v in pts[:-1]], label=k)
        ticks = [0, 1, 2, 3, 4, 5]
        ax.set_xticks(ticks, ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"])
        ax.set(ylabel="µs", yscale="log", xlabel="percentile", title=f"{title}: latency by percentile")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "cdf.png")
        plt.close(fig)
        made.append("cdf.png")
    return made


def summary_line(r: dict[str, Any]) -> str:
    """One line for the terminal: status and the headline figures."""
    head = f"{r['workload']['name']} / {r['driver']}: {r['status'].upper()}"
    if r["status"] != "ok":
        head += f" - {r['reason']}"
    pub = r.get("publish")
    if pub and pub.get("latency_us"):
        head += (f"\n  publish {pub['msgs_per_s']:,.0f} msgs/s ({pub['mb_per_s']:.2f} MB/s)"
                 f"{' of target ' + format(r['target_rate'], ',.0f') if r['target_rate'] else ''}, "
                 f"p50 {pub['latency_us']['p50']:,.0f} us p99 {pub['latency_us']['p99']:,.0f} us")
    e2e = r.get("e2e")
    if e2e and e2e.get("latency_us"):
        head += (f"\n  consume {e2e['msgs_per_s']:,.0f} msgs/s, e2e p50 {e2e['latency_us']['p50']:,.0f} us "
                 f"p99 {e2e['latency_us']['p99']:,.0f} us")
    if r.get("sent_ok") is not None:
        head += (f"\n  sent_ok {r['sent_ok']} received {r['received']} lost {r['lost']} duplicates {r['duplicates']}"
                 f" errors {r['errors'] or 0} broker {r['broker']}")
    if r["env"].get("compiled") is False:
        head += "\n  measured the PURE-PYTHON twins (no compiled extensions)"
    return head


def _html(out: Path, r: dict[str, Any], pngs: list[str]) -> None:
    def cell(v: Any, none: str = "unknown") -> str:
        # never a blank: a missing value says why it is missing
        return html.escape(none if v is None else (f"{v:,.1f}" if isinstance(v, float) else str(v)))
    rows = []
    for k in ("publish", "e2e"):
        f = r.get(k)
        if f and f.get("latency_us"):
            rows.append(f"<tr><th>{k}</th><td>{cell(f['msgs_per_s'])}</td><td>{cell(f['mb_per_s'])}</td>"
                        + "".join(f"<td>{cell(v)}</td>" for v in f["latency_us"].values()) + "</tr>")
    names = "".join(f"<th>{n} µs</th>" for n in ("p50", "p75", "p90", "p95", "p99", "p99.9", "max"))
    env = r["env"]
    sh = r.get("shape") or {}
    shape = (f"{sh['tasks']} tasks ({sh.get('tasks_from')}), at most {sh.get('clients_per_task')} clients per task"
             if sh.get("tasks") else "tasks not laid out")
    table = (f'<div style="overflow-x:auto"><table border="1" cellpadding="4"><tr><th></th><th>msgs/s</th>'
             f'<th>MB/s</th>{names}</tr>{"".join(rows)}</table></div>' if rows else "<p>No latency measured.</p>")
    page = f"""<!doctype html><meta charset="utf-8"><title>{html.escape(r['workload']['name'])} / {html.escape(r['driver'])}</title>
<h1>{html.escape(r['workload']['name'])} / {html.escape(r['driver'])}: {html.escape(r['status'])}</h1>
{f"<p>{html.escape(r['reason'])}</p>" if r['reason'] else ''}
<p>run {html.escape(r['run_id'])}, started {html.escape(r['started_at'])}; fastmq {cell(env.get('fastmq_version'))}
(commit {cell(env.get('commit'))}), compiled extensions: {cell(env.get('compiled'))}; Spark
{cell(env.get('spark_version'))} on {cell(env.get('master'))}, {cell(env.get('cores'))} slots, {shape}; window
{cell(r['window_s'])} s, target rate {cell(r['target_rate'], 'none (as fast as the producers go)')}</p>
{table}
<p>sent_ok {cell(r['sent_ok'], 'not counted')}, received {cell(r['received'], 'not counted')}, lost
{cell(r['lost'], 'not counted')}, duplicates {cell(r['duplicates'], 'not counted')}, errors
{html.escape(json.dumps(r['errors']))}, broker {cell(r['broker'] and json.dumps(r['broker']), 'not read')}</p>
{''.join(f'<p><img src="{p}" alt="{p}"></p>' for p in pngs) or '<p>No message was measured in this run: nothing to plot.</p>'}
"""
    (out / "report.html").write_text(page)
