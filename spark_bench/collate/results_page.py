"""benchmarks/RESULTS.md, made from the history file and the latest results kept beside it.

    fastmq-bench collate benchmarks/results --history benchmarks/results/history.csv \\
        --results-md benchmarks/RESULTS.md          (scripts/bench.sh --collate-only runs this)

The page opens with one table: each workload fastmq is compared on, fastmq's figure from the
latest run, the peer's figure from the same run (who the peer is: client, version, parser or
heap, and both sides' durability), their ratio, and what the run was measured on. Then the
regressions, then per suite the latest figures with their trend.

A Spark workload's runs are grouped by the shape they ran in (the history's ``shape``: the
workload's content, tasks and clients, slots, executors, master), shown as ``workload [shape]``:
runs of one workload name on another cluster are another figure, never compared with these. Lines
of a history written before shapes were recorded stay under the bare workload name.

A regression is flagged only when a figure is worse than its reference (the median of up to
five runs before) in each of its two latest runs, by more than the noise that unchanged code
shows for that figure: the largest distance from their median among runs of one commit in the
history (alternated A/B files and repeated runs), else the median of its suite's bands, else of
all bands. Superseded figures (``history.SUPERSEDED``) are kept in the history but never quoted.
No Spark: this reads a CSV and a few JSON files.
"""
from __future__ import annotations

import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..rocketmq_tools.result import find_summaries, read_summary, shape_load
from .history import superseded

__all__ = ["render", "noise_bands", "regressions"]

Key = tuple[str, str, str]   # suite, figure, peer
_MIN_BAND = 0.01
_REF_RUNS = 5
_MIN_FACTOR_FIGURES = 5   # timed figures a session needs before its machine factor is trusted
_SUPERSEDED_CELL = "not quoted ({note})"


def _f(v: float | None, unit: str = "") -> str:
    if v is None:
        return "—"
    if unit == "s":
        for scale, u in ((1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s")):
            if abs(v) < scale * 999.5 or u == "s":
                return f"{_digits(v / scale)} {u}"
    text = _digits(v)
    return f"{text} µs" if unit == "us" else f"{text} {unit}".rstrip() if unit in ("ms", "/s") else text


def _digits(v: float) -> str:
    """Three significant digits at most, thousands separated, never an exponent."""
    digits = 0 if abs(v) >= 99.95 else (1 if abs(v) >= 9.995 else 2)
    return f"{v:,.{digits}f}"


def _by_key(lines: list[dict[str, str]]) -> dict[Key, list[dict[str, str]]]:
    out: dict[Key, list[dict[str, str]]] = defaultdict(list)
    for x in lines:
        out[(x["suite"], x["figure"], x["peer"])].append(x)
    for v in out.values():
        v.sort(key=lambda x: (x["date"], x["run"]))
    return out


Bands = tuple[dict[Key, float], dict[tuple[str, str], float], dict[str, float], float]


def _kind(figure: str) -> str:
    """What a figure measures, without which benchmark measured it: its last word (p99_us,
    median, instructions, tps, msgs/s ...)."""
    return figure.split(" / ", 1)[0].rsplit(" ", 1)[-1]


def noise_bands(lines: list[dict[str, str]]) -> Bands:
    """Per figure, the largest relative distance of a run from its commit's median, over every
    commit measured more than once; per suite and kind of figure (``_kind``), per kind, and
    overall, the median of those bands."""
    groups: dict[tuple[Key, str], list[float]] = defaultdict(list)
    for x in lines:
        if x["note"] or not x["better"]:
            continue
        groups[((x["suite"], x["figure"], x["peer"]), x["commit"].removesuffix("+dirty"))].append(float(x["value"]))
    bands: dict[Key, float] = {}
    for (key, _), vals in groups.items():
        if len(vals) < 2:
            continue
        med = statistics.median(vals)
        if med == 0:
            continue
        dev = max(abs(v / med - 1) for v in vals)
        bands[key] = max(bands.get(key, 0.0), dev, _MIN_BAND)
    per_suite: dict[tuple[str, str], list[float]] = defaultdict(list)
    per_kind: dict[str, list[float]] = defaultdict(list)
    for (suite, figure, _), b in bands.items():
        per_suite[(suite, _kind(figure))].append(b)
        per_kind[_kind(figure)].append(b)
    suites = {k: _upper(v) for k, v in per_suite.items()}
    kinds = {k: _upper(v) for k, v in per_kind.items()}
    overall = _upper(list(bands.values())) if bands else 0.2
    return bands, suites, kinds, overall


def _upper(bands: list[float]) -> float:
    """The band a figure never measured twice on one commit is given: the upper quartile of the
    bands of its kind (a figure's own noise is not known, so the flag errs towards silence)."""
    return sorted(bands)[(3 * len(bands)) // 4] if bands else 0.2


def _band(key: Key, bands: Bands) -> tuple[float, str]:
    per, suites, kinds, overall = bands
    kind = _kind(key[1])
    if key in per:
        return per[key], "this figure"
    if (key[0], kind) in suites:
        return suites[(key[0], kind)], f"{kind} in its suite"
    if kind in kinds:
        return kinds[kind], f"{kind} in all suites"
    return overall, "all figures"


def _stamp(run: str) -> str:
    m = re.search(r"\d{8}T\d{6}Z", run)
    return m.group(0) if m else run


def _runs(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """One line per measuring session, oldest first, superseded ones left out: the runs of one
    stamp (both sides of an A/B pair, which share the machine's state of that moment) count as
    one, their median the value and the newest of them naming it."""
    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for x in rows:
        if not x["note"]:
            groups[_stamp(x["run"])].append(x)
    out = []
    for xs in groups.values():
        last = max(xs, key=lambda x: x["date"])
        out.append({**last, "value": repr(statistics.median(float(x["value"]) for x in xs))} if len(xs) > 1 else last)
    return sorted(out, key=lambda x: (x["date"], x["run"]))


def _ours(peer: str) -> bool:
    return peer.startswith("fastmq")


def normalised(lines: list[dict[str, str]]) -> list[dict[str, str]]:
    """fastmq's own figures, each divided by its peer's figure of the same run when the run has
    one that is not superseded (the peer shares the machine's mood: the ratio moves less than
    either figure), its figure then named ``... / PEER``."""
    peers: dict[tuple[str, str, str], dict[str, str]] = {}
    for x in lines:
        if not _ours(x["peer"]) and not x["note"]:
            peers.setdefault((x["run"], x["suite"], x["figure"]), x)
    out = []
    for x in lines:
        if not _ours(x["peer"]):
            continue
        p = peers.get((x["run"], x["suite"], x["figure"]))
        if p is not None and float(p["value"]):
            x = {**x, "figure": f"{x['figure']} / {p['peer']}", "value": repr(float(x["value"]) / float(p["value"])),
                 "unit": "x"}
        out.append(x)
    return out


def regressions(lines: list[dict[str, str]]) -> list[dict[str, Any]]:
    """fastmq's figures (``normalised``) worse than their reference by more than their noise band
    in both of their two latest runs.

    Timed medians (unit ``s``) are first divided by their session's machine factor when it is
    above 1: the median, over every timed figure of that session, of its value over its own
    reference. This VM flips whole runs between two speeds, which moves every timing alike; a
    figure is flagged when it moved beyond that and beyond its band. (Instruction counts are the
    check on a change that slows everything.)"""
    lines = normalised(lines)
    bands = noise_bands(lines)
    cands = []
    moves: dict[str, list[float]] = defaultdict(list)
    for key, rows in _by_key(lines).items():
        better = rows[-1]["better"]
        runs = _runs(rows)
        if not better or len(runs) < 3:
            continue
        last2, before = runs[-2:], runs[:-2][-_REF_RUNS:]
        ref = statistics.median(float(x["value"]) for x in before)
        if ref == 0:
            continue
        cands.append((key, better, ref, last2, len(before), rows[-1]["unit"]))
        if rows[-1]["unit"] == "s":
            for x in last2:
                moves[_stamp(x["run"])].append(float(x["value"]) / ref)
    factors = {st: statistics.median(v) for st, v in moves.items() if len(v) >= _MIN_FACTOR_FIGURES}
    out = []
    for key, better, ref, last2, n_before, unit in cands:
        band, basis = _band(key, bands)
        # a session that slowed every timing excuses that much slowness; a fast one accuses nothing
        machine = [max(factors.get(_stamp(x["run"]), 1.0), 1.0) if unit == "s" else 1.0 for x in last2]
        worse = [(float(x["value"]) / (ref * m) - 1) * (1 if better == "lower" else -1) for x, m in zip(last2, machine)]
        if all(w > band for w in worse):
            out.append({"key": key, "ref": ref, "runs": last2, "worse": worse, "band": band, "basis": basis,
                        "unit": unit, "ref_runs": n_before, "machine": machine})
    return sorted(out, key=lambda r: -min(r["worse"]))


# ---------------------------------------------------------------- the summary table


def _measured(date: str, commit: str, load: str) -> str:
    return f"{date[:16].replace('T', ' ')}, {commit or '?'}, load {load or '?'}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "—"


def _tools_rows(root: Path) -> list[list[str]]:
    tools = root / "rocketmq-tools"
    rows = []
    for s in find_summaries(tools) if tools.is_dir() else []:
        doc = read_summary(s)
        env = doc.get("env") or {}
        java = env.get("java") or {}
        settings = doc.get("settings") or {}
        jv = str(java.get("java") or "").split('"')[1::2][:1]
        rmq = str(java.get("version") or "").replace("V", "").replace("_", ".") or "4.x"
        heap = java.get("heap") or settings.get("java_broker_heap") or "?"
        flush = settings.get("flush", "?")
        commit = str(doc.get("commit") or "") + ("+dirty" if doc.get("dirty") else "")
        for shape in doc.get("shapes", []):
            load = shape_load(s, doc, shape)
            f = ((shape.get("fastmq") or {}).get("median")) or {}
            j = ((shape.get("java") or {}).get("median")) or {}
            metric, unit = ("tps", "/s") if f.get("tps") is not None else ("send_p50_us", "us")
            client = {"producer": "Apache's benchmark Producer", "drain": "Apache's benchmark Consumer",
                      "spark": "fastmq-bench run"}.get(str(shape.get("kind")), "Apache's benchmark tools")
            if shape.get("consumer") and shape.get("kind") == "producer":
                client += " + Consumer"
            peer = f"Apache RocketMQ {rmq} broker, Java {jv[0] if jv else '?'}, heap {heap}; {client}; both {flush}"
            started = str(doc.get("started_at") or "")
            note = superseded("Apache RocketMQ broker", started)
            peer_cell, ratio = ((f"{peer}; " + _SUPERSEDED_CELL.format(note=note), "—") if note
                                else (f"{_f(j.get(metric), unit)}: {peer}", _ratio(f.get(metric), j.get(metric))))
            rows.append([f"rocketmq-tools {shape['shape']} ({metric})", _f(f.get(metric), unit), peer_cell, ratio,
                         _measured(started, commit, load), str(shape["shape"])])
    # one row per shape: the newest summary that measured it
    newest: dict[str, list[str]] = {}
    for r in rows:
        if r[-1] not in newest or r[4] > newest[r[-1]][4]:
            newest[r[-1]] = r
    return [r[:-1] for r in sorted(newest.values(), key=lambda r: r[0])]


#: (suite, the figure's test, fastmq's peer name, the peer's name, metric, what the peer is)
_PAIRS = (
    ("test_sync_flush_benchmarks", "test_sync_flush_one_in_flight_vs_floor", "fastmq send", "fdatasync floor",
     "p50_us", "the disk's fdatasync of a 128 B append to a plain file, beside a SYNC_FLUSH broker"),
    ("test_blocking_vs_redis", "test_blocking_send_p50_vs_xadd", "fastmq send", "redis-py XADD", "p50_us",
     "redis-py blocking XADD to redis-server, AOF everysec; fastmq blocking send, ASYNC_FLUSH"),
    ("test_blocking_vs_redis", "test_blocking_send_async_vs_pipelined_xadd", "fastmq send_async",
     "redis-py pipelined_XADD", "msgs/s", "redis-py pipelined XADD, AOF everysec; fastmq send_async, ASYNC_FLUSH"),
    ("test_blocking_vs_redis", "test_blocking_push_consumer_vs_xreadgroup", "fastmq plain_listener",
     "redis-py XREADGROUP+XACK", "msgs/s",
     "redis-py XREADGROUP + XACK, AOF everysec; fastmq PushConsumer, ASYNC_FLUSH"),
    ("test_asyncio_vs_redis", "test_asyncio_send_p50_vs_xadd", "fastmq await_send", "redis.asyncio XADD", "p50_us",
     "redis.asyncio XADD, AOF everysec; fastmq await send, ASYNC_FLUSH"),
    ("test_asyncio_vs_redis", "test_asyncio_send_async_vs_pipelined_xadd", "fastmq aio_send_async",
     "redis.asyncio pipelined_XADD", "msgs/s", "redis.asyncio pipelined XADD, AOF everysec; fastmq send_async, "
     "ASYNC_FLUSH"),
    ("test_asyncio_vs_redis", "test_asyncio_push_consumer_vs_xreadgroup", "fastmq aio_async_listener",
     "redis.asyncio XREADGROUP+XACK", "msgs/s", "redis.asyncio XREADGROUP + XACK, AOF everysec; fastmq "
     "PushConsumer, ASYNC_FLUSH"),
    ("test_request_reply_vs_redis", "test_request_reply_round_trip_vs_redis", "fastmq request",
     "redis.asyncio XADD+BLPOP", "p50_us", "request-reply, one in flight: redis.asyncio XADD to a request stream + "
     "BLPOP on a reply list (responder XREADGROUP, LPUSH + XACK), AOF everysec; fastmq request, ASYNC_FLUSH"),
    ("test_blocking_vs_redis", "test_blocking_send_async_semaphore_vs_pipelined_xadd", "fastmq send_async_semaphore",
     "redis-py pipelined_XADD", "msgs/s", "redis-py pipelined XADD, AOF everysec; fastmq send_async, each send "
     "waited for through a semaphore, ASYNC_FLUSH"),
    ("test_blocking_vs_redis", "test_blocking_push_consumer_vs_xreadgroup", "fastmq plain_listener_from_start",
     "redis-py XREADGROUP+XACK_from_start", "msgs/s", "timed from start(): redis-py XREADGROUP + XACK, AOF everysec; "
     "fastmq PushConsumer, ASYNC_FLUSH"),
    ("test_asyncio_vs_redis", "test_asyncio_send_async_futures_vs_pipelined_xadd", "fastmq aio_send_async_futures",
     "redis.asyncio pipelined_XADD", "msgs/s", "redis.asyncio pipelined XADD, AOF everysec; fastmq send_async, "
     "each send's future awaited, ASYNC_FLUSH"),
    ("test_asyncio_vs_redis", "test_asyncio_push_consumer_vs_xreadgroup", "fastmq aio_async_listener_from_start",
     "redis.asyncio XREADGROUP+XACK_from_start", "msgs/s", "timed from start(): redis.asyncio XREADGROUP + XACK, "
     "AOF everysec; fastmq PushConsumer, ASYNC_FLUSH"),
) + tuple(
    # benchmarks/test_e2e_vs_redis.py: producer and consumer in one process or two, two rates
    ("test_e2e_vs_redis", f"test_{api}_e2e_vs_redis[{shape}]", ours, client, f"e2e_{rate}_{p}_us",
     f"e2e, {shape.replace('_', ' ')}, {rate} msgs/s: {client} XADD + XREADGROUP BLOCK + XACK, AOF everysec; "
     f"fastmq Producer + PushConsumer, ASYNC_FLUSH{how}")
    for api, client in (("blocking", "redis-py"), ("asyncio", "redis.asyncio"))
    for shape in ("one_process", "two_processes") for rate in ("1k", "10k") for p in ("p50", "p99")
    # at 10k both producers wait as Redis's does (one send, or a batch of what is due), then
    # fastmq's send_async for every message
    for ours, how in ((("fastmq waited", ", sends waited as Redis's are (a batch of what is due)"),
                       ("fastmq", ", send_async")) if rate == "10k" else (("fastmq", ""),)))
#: Spark workloads: the figure compared, fastmq's driver, the peer's driver and what it is
_WORKLOAD_FIGURE = {"max-rate-128b": "e2e msgs/s", "max-rate-1kb": "e2e msgs/s"}
_DRIVER_PEER = {"redis-streams": "Redis Streams through redis-py (the redis-streams driver), AOF matched to "
                                 "the broker's flush; fastmq ASYNC_FLUSH"}


def _pair_rows(lines: list[dict[str, str]]) -> list[list[str]]:
    by_run: dict[tuple[str, str], dict[str, dict[str, str]]] = defaultdict(dict)
    for x in lines:
        by_run[(x["suite"], x["run"])][f"{x['figure']}|{x['peer']}"] = x
    rows = []
    for suite, test, ours, theirs, metric, what in _PAIRS:
        fig = f"{test} {metric}"
        runs = sorted(((k, v) for k, v in by_run.items() if k[0] == suite and f"{fig}|{ours}" in v),
                      key=lambda kv: kv[1][f"{fig}|{ours}"]["date"])
        if not runs:
            continue
        got = runs[-1][1]
        a, b = got[f"{fig}|{ours}"], got.get(f"{fig}|{theirs}")
        unit = "us" if metric.endswith("_us") else "/s"
        suffix = "_from_start" if ours.endswith("_from_start") else "_waited" if ours.endswith(" waited") else ""
        label = f"{test.removeprefix('test_')}{suffix} ({metric.replace('_us', '')})"
        if b is not None and b["note"]:
            rows.append([label, _f(float(a["value"]), unit), f"{what}; " + _SUPERSEDED_CELL.format(note=b["note"]),
                         "—", _measured(a["date"], a["commit"], a["load"])])
            continue
        bv = float(b["value"]) if b is not None else None
        rows.append([label, _f(float(a["value"]), unit), f"{_f(bv, unit)}: {what}", _ratio(float(a["value"]), bv),
                     _measured(a["date"], a["commit"], a["load"])])
    return rows


#: what a feature costs fastmq, feature on beside off in one run: (suite, figure, what it says)
_COSTS = (
    ("test_trace_overhead", "test_sends_with_trace_on_beside_trace_off sync_overhead_pct",
     "message trace, one send in flight: wall time per send, % over trace off (median of the rounds' ratios)"),
    ("test_trace_overhead", "test_sends_with_trace_on_beside_trace_off async_overhead_pct",
     "message trace, pipelined send_async: wall time per send, % over trace off (median of the rounds' ratios)"),
    ("test_acl_benchmarks", "test_interleaved_on_and_off[producer] on_over_off",
     "ACL, Producer sends: wall time, signed over unsigned"),
    ("test_acl_benchmarks", "test_interleaved_on_and_off[one_in_flight] on_over_off",
     "ACL, raw sends one in flight: wall time, signed over unsigned"),
    ("test_acl_benchmarks", "test_interleaved_on_and_off[pipelined] on_over_off",
     "ACL, raw sends pipelined: wall time, signed over unsigned"),
    ("test_tls_benchmarks", "test_tls_sends_beside_plaintext tls/plain one in flight",
     "TLS, one send in flight: p50, TLS over plaintext"),
    ("test_tls_benchmarks", "test_tls_sends_beside_plaintext plain/tls 64 in flight",
     "TLS, 64 in flight: sends/s, plaintext over TLS"),
)


def _cost_rows(lines: list[dict[str, str]]) -> list[list[str]]:
    """The latest figure of each of :data:`_COSTS`."""
    rows = []
    for suite, figure, what in _COSTS:
        got = [x for x in lines if x["suite"] == suite and x["figure"] == figure and not x["note"]]
        if got:
            x = max(got, key=lambda x: (x["date"], x["run"]))
            rows.append([what, _digits(float(x["value"])), _measured(x["date"], x["commit"], x["load"])])
    return rows


def _shaped(lines: list[dict[str, str]]) -> list[dict[str, str]]:
    """The history with each Spark line's suite named with its shape (``workload [shape]``), so
    that everything grouped by suite groups a workload's runs by the shape they ran in."""
    return [{**x, "suite": f"{x['suite']} [{x['shape']}]"} if x.get("shape") else x for x in lines]


def _workload_rows(lines: list[dict[str, str]], root: Path) -> list[list[str]]:
    latest_run: dict[str, str] = {}
    for x in lines:
        # the latest kept run of each workload and shape (a run of unknown shape is not quoted)
        if x["run"].startswith("runs/") and x["peer"] == "fastmq" and (root / x["run"]).exists():
            if x["suite"] not in latest_run or x["run"] > latest_run[x["suite"]]:
                latest_run[x["suite"]] = x["run"]
    rows = []
    for workload, run in sorted(latest_run.items()):
        figure = _WORKLOAD_FIGURE.get(workload.split(" [", 1)[0], "e2e p99")
        got = {x["peer"]: x for x in lines if x["run"] == run and x["suite"] == workload and x["figure"] == figure}
        a = got.get("fastmq")
        if a is None:
            continue
        unit = a["unit"]
        for driver, what in _DRIVER_PEER.items():
            b = got.get(driver)
            if b is None:
                continue
            cell = (f"{what}; " + _SUPERSEDED_CELL.format(note=b["note"]) if b["note"]
                    else f"{_f(float(b['value']), unit)}: {what}")
            rows.append([f"{workload} ({figure})", _f(float(a["value"]), unit), cell,
                         "—" if b["note"] else _ratio(float(a["value"]), float(b["value"])),
                         _measured(a["date"], a["commit"], a["load"])])
    return rows


# ---------------------------------------------------------------- the page


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    def esc(c: str) -> str:
        return c.replace("|", "\\|")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return out


def _suite_details(lines: list[dict[str, str]], root: Path) -> list[str]:
    bands = noise_bands(lines)
    # fastmq's own figures show the band the regression check uses (of their ratio to a peer, if any)
    norm = normalised(lines)
    norm_bands = noise_bands(norm)
    norm_keys: dict[Key, Key] = {}
    for x in norm:
        base = (x["suite"], x["figure"].split(" / ", 1)[0], x["peer"])
        norm_keys.setdefault(base, (x["suite"], x["figure"], x["peer"]))
    by_key = _by_key(lines)
    def kept(run: str) -> bool:   # still below the results directory: the latest run of its suite
        return (root / run).exists() or (root / f"{run}.json").exists()
    suites: dict[str, list[Key]] = defaultdict(list)
    for key, rows in by_key.items():
        if rows[-1]["better"] and not rows[-1]["note"] and kept(rows[-1]["run"]):
            suites[key[0]].append(key)
    out: list[str] = []
    for suite in sorted(suites):
        out += ["", f"### {suite}", ""]
        table = []
        for key in sorted(suites[suite], key=lambda k: (k[1], k[2])):
            runs = _runs(by_key[key])
            if not runs:
                continue
            last = runs[-1]
            trend = " → ".join(_f(float(x["value"]), last["unit"]) for x in runs[-5:])
            nk = norm_keys.get(key)
            band, basis = _band(nk, norm_bands) if nk is not None else _band(key, bands)
            if nk is not None and nk[1] != key[1]:
                basis += f"; of the ratio to {nk[1].split(' / ', 1)[1]}"
            table.append([key[1], key[2], _f(float(last["value"]), last["unit"]), trend,
                          f"±{band * 100:.0f}% ({basis})", f"{last['date'][:10]} {last['commit']}", str(len(runs))])
        out += _table(["figure", "whose", "latest", "last runs (oldest first)", "noise band", "latest run",
                       "runs"], table)
    return out


def render(history: list[dict[str, str]], root: Path, command: str) -> str:
    """The whole page."""
    history = _shaped(history)
    summary = _tools_rows(root) + _pair_rows(history) + _workload_rows(history, root)
    regs = regressions(history)
    superseded = sum(1 for x in history if x["note"])
    runs = len({x["run"] for x in history})
    out = ["<!-- generated by fastmq-bench collate --results-md, do not edit -->", "",
           "# fastmq benchmark results", "",
           f"Generated, do not edit: `{command}` (what `scripts/bench.sh --collate-only` runs). How the figures "
           "are made: [docs/benchmarking.md](../docs/benchmarking.md); where the time goes: "
           "[docs/performance.md](../docs/performance.md).", "",
           "## Summary: fastmq beside each peer, latest run", "",
           *_table(["workload (figure)", "fastmq", "peer: who, and both sides' durability", "ratio",
                    "measured on (UTC, commit, load)"], summary), "",
           "Ratio: fastmq's figure over the peer's, from the same run (for µs lower is better, for /s higher). "
           "The machine is a shared 2-core VM; its load moves wall-clock figures between runs, so read ratios "
           "within a run and trends over several. Peer figures marked *not quoted* were measured with a peer set-up "
           "since fixed; they stay in the history, marked, and are not compared.", "",
           "## What a feature costs, latest run", "",
           *_table(["feature and figure", "value", "measured on (UTC, commit, load)"], _cost_rows(history)), "",
           "Each figure is the feature on beside off in one run, sides alternated within it.", "",
           "## Regressions", ""]
    if regs:
        out += ["Worse than the median of the runs before in each of the two latest runs, beyond the figure's "
                "noise band:", ""]
        out += _table(["suite", "figure", "whose", "reference", "two latest runs", "worse by", "noise band"],
                      [[r["key"][0], r["key"][1], r["key"][2], _f(r["ref"], r["unit"]),
                        ", ".join(f"{_f(float(x['value']), r['unit'])} ({x['date'][:10]} {x['commit']}"
                                  f"{f', machine x{m:.2f}' if m != 1.0 else ''})"
                                  for x, m in zip(r["runs"], r["machine"])),
                        " / ".join(f"{w * 100:.0f}%" for w in r["worse"]),
                        f"±{r['band'] * 100:.0f}% ({r['basis']})"] for r in regs])
    else:
        out += ["None: no figure is worse than its reference beyond its noise band in both of its two latest "
                "runs."]
    out += ["", "A figure is flagged only when it is worse than its reference (the median of up to "
            f"{_REF_RUNS} sessions before) in both of its two latest sessions by more than its noise band: the "
            "largest distance from their median among runs of one commit (repeated runs, alternated A/B files), "
            "else the upper quartile of the bands of its kind (in its suite, then in all). fastmq's figures are "
            "divided by their peer's of the same run where there is a peer still quoted, and timed medians by "
            "their session's machine factor when that session slowed every timing (`machine x1.8`: the median "
            "timing of the session was 1.8 times its reference).", "",
            "## Details: the latest figures of each suite and their trend", "",
            f"From `benchmarks/results/history.csv` ({len(history)} figures of {runs} runs, {superseded} marked "
            "superseded and left out here). Only figures that count for regressions (throughput, p99 latency, "
            "instruction counts, median times of many-round benchmarks) are listed; the runs of one stamp (both "
            "sides of an A/B pair) count as one session, shown as their median."]
    out += _suite_details(history, root)
    return "\n".join(out) + "\n"
