"""The report of ``fastmq-bench collate``: one list of blocks, rendered as Markdown and as HTML, plus plots.

Blocks are ``("h2", text)``, ``("p", text)``, ``("table", headers, rows)`` and ``("img", file, alt)``;
both renderers read the same list, so the Markdown and the HTML page can never disagree.
"""
from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path
from typing import Any

from .compare import Comparison
from .load import PERCENTILES, Inputs
from .tools import tool_blocks

__all__ = ["build_blocks", "fmt", "render_html", "render_markdown", "write_plots"]

Block = tuple[Any, ...]
_RUN_COLS = ["publish msgs/s", "publish MB/s", "publish p50", "publish p99", "publish p99.9", "publish max",
             "e2e msgs/s", "e2e p50", "e2e p99", "e2e p99.9", "sent_ok", "received", "errors", "lost",
             "duplicates"]
DASH = "—"


def fmt(value: float | None, unit: str = "") -> str:
    """A figure as a person reads it: 3 significant digits for times, thousands separators for rates."""
    if value is None:
        return DASH
    v = float(value)
    if unit == "s":
        for scale, name in ((1e-6, "ns"), (1e-3, "µs"), (1.0, "ms")):
            if abs(v) < scale:
                return f"{_sig(v / scale * 1e3)} {name}"
        return f"{_sig(v)} s"
    if unit == "us":
        return f"{_sig(v)} µs" if abs(v) < 10_000 else f"{v / 1000:,.1f} ms"
    if unit == "x":
        return f"{v:.2f}x" if abs(v) < 10 else f"{v:.1f}x"
    if unit == "%":
        return f"{v:+.1f}%"
    if abs(v) >= 1000 or v == int(v):
        return f"{v:,.0f}"
    return _sig(v)


def _sig(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def _unit_of(metric: str, unit: str) -> str:
    if unit:
        return unit
    m = metric.replace(" ", "_")
    return "us" if m.endswith("_us") else ""


def _run_table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    by_run: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        run = by_run.setdefault((r["run_key"], r["variant"]), {"_": r})
        run[r["metric"]] = r["value"]
    head = ["run", "started (UTC)", "commit", "driver", "status"] + [c.replace(" p", " p") for c in _RUN_COLS] + [
        "shape", "measured on"]
    out = []
    for (run_key, driver), f in sorted(by_run.items(), key=lambda kv: (kv[1]["_"]["when"], kv[0])):
        r = f["_"]
        ok = r["status"] == "ok"
        status = "ok" if ok else f"**{r['status'].upper()}**: {r['reason'] or 'no reason given'}"
        # a failed run's figures are not the run's, but its counts say what happened before the failure
        cells = [fmt(f.get(c), "us" if c.split(" ")[-1] in PERCENTILES else "") if ok or c in _COUNTS else DASH
                 for c in _RUN_COLS]
        shape = r["case"][len(r["suite"]):].strip(" []") or DASH
        out.append([run_key, r["when"][:19].replace("T", " "), r["commit"] or DASH, driver, status] + cells
                   + [shape, r["env"] or DASH])
    return head, out


_COUNTS = {"sent_ok", "received", "errors", "lost", "duplicates"}


def _newest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (case, variant, peer, metric), the row of the newest non-baseline file."""
    best: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for r in rows:
        if r["baseline"]:
            continue
        k = (r["case"], r["variant"], r["peer"], r["metric"])
        if k not in best or (r["when"], r["origin"]) > (best[k]["when"], best[k]["origin"]):
            best[k] = r
    return list(best.values())


def _pytest_tables(rows: list[dict[str, Any]], twins: list[dict[str, Any]]) -> list[Block]:
    speed = {}
    for t in twins:   # newest file wins: twins are ordered by time
        speed[t["case"]] = t["speedup"]
    cases: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)   # group -> case -> figures
    for r in _newest(rows):
        c = cases[r["suite"]].setdefault(r["case"], {"extra": []})
        if r["peer"] or r["metric"] not in ("median", "ops", "rounds", "mean", "min", "stddev"):
            who = f"{r['peer']} " if r["peer"] else ""
            twin = f" ({r['variant']})" if r["variant"] else ""
            c["extra"].append(f"{who}{r['metric']}{twin} {fmt(r['value'], _unit_of(r['metric'], r['unit']))}")
        else:
            c[(r["variant"] or "one", r["metric"])] = r["value"]
    blocks: list[Block] = []
    for group in sorted(cases):
        head = ["case", "median", "ops/s", "pure twin: median", "pure ops/s", "speed-up (pure / compiled)",
                "rounds", "figures (extra_info)"]
        body = []
        for case in sorted(cases[group]):
            f = cases[group][case]
            twin = ("c", "median") in f or ("py", "median") in f
            c_med, c_ops = (f.get(("c", "median")), f.get(("c", "ops"))) if twin else (
                f.get(("one", "median")), f.get(("one", "ops")))
            rounds = f.get(("c", "rounds"), f.get(("py", "rounds"), f.get(("one", "rounds"))))
            body.append([case.split("::")[-1], fmt(c_med, "s"), fmt(c_ops),
                         fmt(f.get(("py", "median")), "s") if twin else DASH,
                         fmt(f.get(("py", "ops"))) if twin else DASH,
                         fmt(speed.get(case), "x") if case in speed else DASH, fmt(rounds),
                         "; ".join(sorted(f["extra"])) or DASH])
        blocks.append(("h3", group))
        blocks.append(("table", head, body))
    return blocks


def build_blocks(inputs: Inputs, cmp: Comparison, flag_pct: float, fail_pct: float | None,
                 header: list[str]) -> list[Block]:
    """The whole report; ``header`` paragraphs come first (the command that made it)."""
    b: list[Block] = [("h1", "fastmq benchmark results")]
    b += [("p", h) for h in header]
    files = ([f"{len(inputs.result_files)} load run(s) (result.json)"] if inputs.result_files else []) + (
        [f"{len(inputs.pytest_files)} pytest-benchmark file(s)"] if inputs.pytest_files else []) + (
        [f"{len(inputs.tool_files)} rocketmq-tools run(s) (summary.json)"] if inputs.tool_files else [])
    b.append(("p", "Collated: " + ", ".join(files) + "."))

    regs = cmp.regressions
    b.append(("h2", f"Regressions (throughput down or p99 latency up by more than {flag_pct:g}%)"))
    if regs:
        b.append(("table", ["figure", "before", "now", "change", "against"],
                  [[_figure_name(c), fmt(c["prev_value"], _unit_of(c["metric"], c["unit"])),
                    fmt(c["value"], _unit_of(c["metric"], c["unit"])), fmt(c["change_pct"], "%"),
                    _against(c)] for c in regs]))
    else:
        b.append(("p", "None flagged." if cmp.changes else "Nothing to compare: every figure comes from one commit "
                  "(give --baseline DIR, or results of another commit)."))
    if fail_pct is not None:
        failing = [c for c in cmp.changes if c["gate"] and c["worse_pct"] > fail_pct]
        b.append(("p", f"--fail-on-regression {fail_pct:g}: " + (f"{len(failing)} figure(s) past it." if failing
                                                                 else "passed.")))

    runs = [r for r in cmp.figures if r["source"] == "run" and not r["baseline"]]
    if runs:
        b.append(("h2", "Load runs (fastmq-bench run)"))
        b.append(("p", "Throughput is messages in the measured window / the window; latencies in µs "
                       "(publish: send to acknowledgement; e2e: born timestamp to receipt). Failed and partial "
                       "runs are listed with their reason and take part in no comparison."))
        for wl in sorted({r["suite"] for r in runs}):
            b.append(("h3", f"Workload {wl}"))
            head, body = _run_table([r for r in runs if r["suite"] == wl])
            b.append(("table", head, body))
            shapes = sorted({r["case"] for r in runs if r["suite"] == wl})
            if len(shapes) > 1:
                b.append(("p", f"Not compared with each other: these runs of {wl} differ in shape (the workload's "
                               "content, or tasks, clients per task, slots, executors): "
                               + "; ".join(c[len(wl):].strip(" []") for c in shapes) + "."))
        b.append(("img", "runs_throughput.png", "throughput per workload and driver"))
        b.append(("img", "runs_latency.png", "latency percentiles per workload and driver"))
        incomplete = [r for r in runs if r["status"] != "ok" and r["metric"] == "publish msgs/s"
                      and r["value"] is not None]
        if incomplete:
            b.append(("p", "Figures of incomplete runs, as measured up to the failure (not complete, not "
                           "compared): " + "; ".join(f"{r['run_key']} {r['variant']} ({r['status']}) publish "
                                                     f"{fmt(r['value'])} msgs/s" for r in incomplete) + "."))
    b += tool_blocks(inputs.tool_summaries)
    if cmp.drivers:
        b.append(("h2", "Drivers side by side (same run, same workload)"))
        b.append(("p", "Each cell: reference / other, then the two figures. Above 1 is better for the reference "
                       "in msgs/s, worse in latency."))
        b.append(("table", ["workload", "run", "reference", "other"] + list(_DRIVER_COLS), _driver_rows(cmp.drivers)))
    ptb = [r for r in cmp.figures if r["source"] == "pytest"]
    if ptb:
        b.append(("h2", "pytest-benchmark (benchmarks/)"))
        b.append(("p", "Per case, the newest file that has it. Times are per call (median of the rounds); "
                       "ops/s is pytest-benchmark's 1/mean. Where a case has compiled and pure twins, the first "
                       "two figures are the compiled twin's and the speed-up is the pure median / the compiled "
                       "median, measured in the same file. Benchmarks of one round time a whole workload once: "
                       "their figures are in the last column."))
        srcs = sorted({(r["when"], r["origin"], r["commit"], r["env"]) for r in ptb if not r["baseline"]})
        b.append(("table", ["file", "run at (UTC)", "commit", "measured on"],
                  [[Path(o).name, w[:19].replace("T", " "), c or DASH, e or DASH] for w, o, c, e in srcs]))
        b += _pytest_tables(ptb, cmp.twins)
        if cmp.twins:
            b.append(("img", "pytest_speedup.png", "compiled twin speed-up over the pure twin"))
    if cmp.peers:
        b.append(("h2", "fastmq beside its peers (same benchmark)"))
        b.append(("table", ["benchmark", "figure", "fastmq", "value", "peer", "value", "fastmq / peer"],
                  [[p["case"].split("::")[-1], p["metric"], p["ref"], fmt(p["ref_value"], _unit_of(p["metric"], "")),
                    p["other"], fmt(p["other_value"], _unit_of(p["metric"], "")), fmt(p["ratio"], "x")]
                   for p in cmp.peers]))
    if cmp.changes:
        b.append(("h2", "Between commits"))
        b.append(("p", "The newest figure against the baseline's, or against the newest older figure of "
                       f"another commit. Flagged: a gated figure (throughput, p99) worse by more than {flag_pct:g}%."))
        b.append(("table", ["figure", "before", "commit", "now", "commit", "change", "flag"],
                  [[_figure_name(c), fmt(c["prev_value"], _unit_of(c["metric"], c["unit"])),
                    (c["prev_commit"] or DASH) + (" (baseline)" if c["vs_baseline"] else ""),
                    fmt(c["value"], _unit_of(c["metric"], c["unit"])), c["commit"] or DASH,
                    fmt(c["change_pct"], "%"), "**REGRESSION**" if c["regression"] else ""]
                   for c in cmp.changes]))
        if _history(cmp):
            b.append(("img", "history.png", "gated figures over time"))
    return b


_DRIVER_COLS = ("publish msgs/s", "publish p50", "publish p99", "e2e msgs/s", "e2e p50", "e2e p99")


def _driver_rows(drivers: list[dict[str, Any]]) -> list[list[str]]:
    rows: dict[tuple[str, str, str, str], dict[str, dict[str, Any]]] = {}
    for d in drivers:
        rows.setdefault((d["workload"], d["run_key"], d["ref"], d["other"]), {})[d["metric"]] = d
    out = []
    for key in sorted(rows):
        cells = []
        for m in _DRIVER_COLS:
            d = rows[key].get(m)
            cells.append(DASH if d is None else f"{fmt(d['ratio'], 'x')} ({fmt(d['ref_value'], _lat(m))} / "
                                                f"{fmt(d['other_value'], _lat(m))})")
        out.append(list(key) + cells)
    return out


def _lat(metric: str) -> str:
    return "us" if metric.split(" ")[-1] in PERCENTILES else ""


def _figure_name(c: dict[str, Any]) -> str:
    case = c["suite"] if c.get("source") == "run" else c["case"].split("::")[-1]
    who = " / ".join(x for x in (c["variant"], c["peer"]) if x)
    return f"{case}{f' [{who}]' if who else ''} {c['metric']}"


def _against(c: dict[str, Any]) -> str:
    return f"{'baseline ' if c['vs_baseline'] else ''}{c['prev_commit'] or Path(c['prev_origin']).name}"


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: list[Block], img_prefix: str = "") -> str:
    """Markdown; image paths get ``img_prefix`` (the report's directory seen from the Markdown file)."""
    out: list[str] = []
    for blk in blocks:
        kind = blk[0]
        if kind in ("h1", "h2", "h3"):
            out += ["#" * int(kind[1]) + " " + blk[1], ""]
        elif kind == "p":
            out += [blk[1], ""]
        elif kind == "img":
            out += [f"![{blk[2]}]({img_prefix}{blk[1]})", ""]
        elif kind == "table":
            head, rows = blk[1], blk[2]
            out.append("| " + " | ".join(_md_cell(h) for h in head) + " |")
            out.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("")
    return "\n".join(out)


def _inline(s: str) -> str:
    # the Markdown we emit uses **bold** and `code` only
    parts = html.escape(s).split("**")
    s = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = s.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _text_class(cell: str) -> str:
    # prose (more than a few words) wraps and reads left-aligned; figures stay right-aligned
    return " class='t'" if len(cell) > 24 and " " in cell else ""


def render_html(blocks: list[Block], title: str = "fastmq benchmark results") -> str:
    """One self-contained page (images beside it)."""
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>", f"<title>{html.escape(title)}</title>",
           # a wide table scrolls inside its own box instead of running off a 1280 px page, and long
           # text cells (a reason, what a run was measured on) wrap
           "<style>body{font-family:sans-serif;margin:2em}.tw{overflow-x:auto;max-width:100%}"
           "table{border-collapse:collapse;margin:1em 0}"
           "td,th{border:1px solid #bbb;padding:2px 6px;font-size:13px}td{text-align:right}"
           "td.t{text-align:left;min-width:12em;max-width:32em;white-space:normal}"
           "td:first-child{text-align:left}img{max-width:100%}</style></head><body>"]
    for blk in blocks:
        kind = blk[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{_inline(blk[1])}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{_inline(blk[1])}</p>")
        elif kind == "img":
            out.append(f"<p><img src='{html.escape(blk[1])}' alt='{html.escape(blk[2])}'></p>")
        elif kind == "table":
            out.append("<div class='tw'><table><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in blk[1]) + "</tr>")
            out += ["<tr>" + "".join(f"<td{_text_class(str(c))}>{_inline(str(c))}</td>" for c in row) + "</tr>"
                    for row in blk[2]]
            out.append("</table></div>")
    out.append("</body></html>")
    return "\n".join(out)


def write_plots(cmp: Comparison, out: Path) -> list[str]:
    """PNG plots for the blocks' ``img`` entries; returns the files written."""
    import matplotlib
    matplotlib.use("Agg")   # no display on a build machine
    import matplotlib.pyplot as plt

    written = []
    newest: dict[tuple[str, str], dict[str, Any]] = {}   # (workload, driver) -> metric -> value, ok runs
    order: dict[tuple[str, str], str] = {}
    for r in cmp.figures:
        if r["source"] != "run" or r["status"] != "ok" or r["baseline"]:
            continue
        k = (r["suite"], r["variant"])
        if k not in order or r["when"] > order[k]:
            order[k] = r["when"]
            newest[k] = {}
        if r["when"] == order[k]:
            newest[k][r["metric"]] = r["value"]
    if newest:
        keys = sorted(newest)
        fig, axes = plt.subplots(1, 2, figsize=(11, 0.5 * len(keys) + 2.5))
        for ax, part in zip(axes, ("publish", "e2e")):
            ax.barh([f"{w} / {d}" for w, d in keys], [newest[k].get(f"{part} msgs/s") or 0 for k in keys])
            ax.set_title(f"{part} throughput (msgs/s)")
            ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(out / "runs_throughput.png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, part in zip(axes, ("publish", "e2e")):
            for k in keys:
                ys = [newest[k].get(f"{part} {p}") for p in PERCENTILES]
                pts = [(p, y) for p, y in zip(PERCENTILES, ys) if y]
                if pts:
                    ax.plot([p for p, _ in pts], [y for _, y in pts], marker="o", label=f"{k[0]} / {k[1]}")
            ax.set_yscale("log")
            ax.set_title(f"{part} latency (µs)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "runs_latency.png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        written += ["runs_throughput.png", "runs_latency.png"]
    if cmp.twins:
        latest: dict[str, float] = {}
        for t in cmp.twins:
            latest[t["case"].split("::")[-1]] = t["speedup"]
        names = sorted(latest)
        fig, ax = plt.subplots(figsize=(9, 0.28 * len(names) + 1.5))
        ax.barh(names, [latest[n] for n in names])
        ax.axvline(1.0, color="k", linewidth=0.8)
        ax.set_title("compiled twin speed-up (pure median / compiled median)")
        ax.tick_params(axis="y", labelsize=7)
        ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(out / "pytest_speedup.png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        written.append("pytest_speedup.png")
    if _history(cmp):
        series = _history(cmp)
        fig, ax = plt.subplots(figsize=(10, 4.5))
        for name, pts in series.items():
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.axhline(1.0, color="k", linewidth=0.8)
        ax.set_title("gated figures over time, relative to their first value (above 1 = better)")
        ax.legend(fontsize=6, loc="best")
        fig.autofmt_xdate()
        fig.savefig(out / "history.png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        written.append("history.png")
    return written


def _history(cmp: Comparison, most: int = 12) -> dict[str, list[tuple[str, float]]]:
    """The gated figures that changed the most, each as (time, value / first value, better = up)."""
    from datetime import datetime

    seen: dict[str, list[tuple[str, float, str]]] = defaultdict(list)
    for r in cmp.figures:
        if r["gate"] and r["status"] == "ok" and not r["baseline"] and r["value"] and r["when"]:
            seen[_figure_name(r)].append((r["when"], float(r["value"]), r["better"]))
    series: dict[str, list[tuple[Any, float]]] = {}
    for name, pts in seen.items():
        pts.sort()
        if len({p[0] for p in pts}) < 2:
            continue
        first = pts[0][1]
        series[name] = [(datetime.fromisoformat(w.replace("Z", "+00:00")),
                         (v / first) if better == "higher" else (first / v)) for w, v, better in pts]
    worst = sorted(series, key=lambda n: min(y for _, y in series[n]))[:most]
    return {n: series[n] for n in worst}
