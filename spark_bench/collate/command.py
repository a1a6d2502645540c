"""``fastmq-bench collate``: any number of load runs and pytest-benchmark files, compared in one report.

    fastmq-bench collate RUN_DIRS... [--pytest-benchmark FILES...] --out DIR
                         [--baseline DIR] [--fail-on-regression PCT] [--master URL]
    fastmq-bench collate RESULTS_DIR... --history FILE [--prune] [--results-md FILE]
    python -m spark_bench.collate ...     (the same program)

Every figure is loaded into one Spark DataFrame (``load`` reads, ``compare`` joins,
``report`` renders; ``fastmq-bench rocketmq-tools`` summaries found under the directories get
their own table, ``tools``). ``DIR/collated.md`` and ``DIR/collated.html`` hold the figures side by
side, the ratios between drivers of one run, between compiled and pure twins and between fastmq and
its peers, and the changes between commits with regressions flagged; plots are PNG files beside them.

``--history`` appends every input's figures to the compact history (``history``), ``--prune``
then keeps only the latest run of each suite, and ``--results-md`` writes the results page from
the history without Spark (``results_page``): that is how ``scripts/bench.sh`` makes
benchmarks/RESULTS.md.

Exit status: 0 done, 1 a regression past ``--fail-on-regression``, 2 a bad input or option.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from pathlib import Path

from .compare import Comparison, compare, spark_session, to_frame
from .load import CollateError, load_inputs
from . import history, results_page
from .report import build_blocks, render_html, render_markdown, write_plots

__all__ = ["CollateError", "add_arguments", "main", "run"]

PROG = "fastmq-bench collate"
DEFAULT_FLAG_PCT = 5.0


def _pct(text: str) -> float:
    try:
        v = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"a percentage must be a finite number >= 0, got {text!r}")
    return v


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``collate``, on ``parser`` (a subcommand's parser of ``fastmq-bench``)."""
    parser.add_argument("dirs", nargs="*", metavar="DIR",
                        help="a result directory (holding result.json) or a directory searched for them")
    parser.add_argument("--pytest-benchmark", nargs="+", default=[], metavar="FILE", dest="pytest_benchmark",
                        help="pytest-benchmark JSON files (--benchmark-json or autosave output)")
    parser.add_argument("--out", metavar="DIR", help="where collated.md, collated.html and the plots go (made if "
                        "missing); this part runs on Spark")
    parser.add_argument("--history", metavar="FILE", help="append every input's figures to this history file "
                        "(one CSV line per figure per run; benchmarks/results/history.csv)")
    parser.add_argument("--prune", action="store_true", help="with --history: then delete the result files below "
                        "the history's directory that are not the latest of any suite")
    parser.add_argument("--results-md", metavar="FILE", dest="results_md", help="with --history: write the "
                        "results page (summary beside the peers, regressions, trends) from the history to FILE; "
                        "benchmarks/RESULTS.md is made so")
    parser.add_argument("--baseline", metavar="DIR", help="results to compare against (result directories "
                        "and/or pytest-benchmark files below DIR); without it, each figure is compared with "
                        "the newest older one of another commit")
    parser.add_argument("--fail-on-regression", type=_pct, metavar="PCT", dest="fail_on_regression",
                        help="exit 1 when a throughput falls or a p99 latency rises by more than PCT percent")
    parser.add_argument("--flag-pct", type=_pct, default=DEFAULT_FLAG_PCT, metavar="PCT", dest="flag_pct",
                        help=f"flag such changes in the report past PCT percent (default {DEFAULT_FLAG_PCT:g})")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--write-md", metavar="FILE", dest="write_md",
                        help="also write the Markdown report to FILE (image links made relative to it), "
                             "headed 'generated, do not edit' and the command (benchmarks/RESULTS.md is made by "
                             "--results-md)")
    parser.add_argument("--note", action="append", default=[], metavar="TEXT",
                        help="a paragraph for the report's header (repeatable)")


def _command_text(args: argparse.Namespace) -> str:
    given = getattr(args, "command_text", None)
    if given:
        return str(given)
    return shlex.join(["fastmq-bench", *sys.argv[1:]])


def run(args: argparse.Namespace) -> int:
    """Collate as ``args`` (from ``add_arguments``) say; prints errors, returns the exit status."""
    try:
        return _run(args)
    except CollateError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if not (args.out or args.history):
        raise CollateError("give --out (the collation on Spark) and/or --history (and --results-md)")
    if (args.prune or args.results_md) and not args.history:
        raise CollateError("--prune and --results-md work on the history: give --history FILE")
    status = _collate(args) if args.out else 0
    if args.history:
        hist = Path(args.history)
        root = hist.parent
        added = history.append(hist, history.extract(root, [Path(d) for d in args.dirs],
                                                     [Path(f) for f in args.pytest_benchmark]))
        print(f"{PROG}: {added} figure(s) added to {hist}")
        if args.prune:
            gone = history.prune(root)
            print(f"{PROG}: {len(gone)} file(s) below {root} pruned (not the latest of any suite)")
        if args.results_md:
            md = Path(args.results_md)
            md.parent.mkdir(parents=True, exist_ok=True)
            md.write_text(results_page.render(history.read(hist), root, _command_text(args)), encoding="utf-8")
            print(f"{PROG}: wrote {md}")
    return status


def _collate(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CollateError(f"--out {args.out}: exists and is not a directory")
    inputs = load_inputs(list(args.dirs), list(args.pytest_benchmark), args.baseline)
    for w in inputs.warnings:
        print(f"{PROG}: warning: {w}", file=sys.stderr)
    flag = args.flag_pct if args.fail_on_regression is None else min(args.flag_pct, args.fail_on_regression)
    cmp = Comparison()
    if inputs.rows:   # rocketmq-tools summaries alone are tabled as they are: no JVM for nothing to join
        spark, made = spark_session(args.master)
        try:
            with tempfile.TemporaryDirectory(prefix="fastmq-collate-") as scratch:
                cmp = compare(to_frame(spark, inputs.rows, Path(scratch)), flag)
        finally:
            if made:
                spark.stop()
    out.mkdir(parents=True, exist_ok=True)
    command = _command_text(args)
    header = [f"Generated, do not edit. Made by `{command}`"] + list(args.note)
    blocks = build_blocks(inputs, cmp, flag, args.fail_on_regression, header)
    write_plots(cmp, out)
    (out / "collated.md").write_text(render_markdown(blocks), encoding="utf-8")
    (out / "collated.html").write_text(render_html(blocks), encoding="utf-8")
    if args.write_md:
        md = Path(args.write_md)
        md.parent.mkdir(parents=True, exist_ok=True)
        prefix = os.path.relpath(out.resolve(), md.parent.resolve()).replace(os.sep, "/") + "/"
        body = render_markdown(blocks, "" if prefix == "./" else prefix)
        md.write_text("<!-- generated by fastmq-bench collate, do not edit -->\n\n" + body, encoding="utf-8")
    print(f"{PROG}: {len(inputs.result_files)} run(s), {len(inputs.pytest_files)} pytest-benchmark file(s), "
          f"{len(inputs.tool_files)} rocketmq-tools summary(ies), "
          f"{len(cmp.changes)} figure(s) compared across commits, {len(cmp.regressions)} flagged; "
          f"report in {out / 'collated.md'}")
    if args.fail_on_regression is not None:
        failing = [c for c in cmp.changes if c["gate"] and c["worse_pct"] > args.fail_on_regression]
        for c in failing:
            who = " / ".join(x for x in (c["variant"], c["peer"]) if x)
            name = c["suite"] if c["source"] == "run" else c["case"]   # a run's case also carries its shape
            print(f"{PROG}: regression: {name}{f' [{who}]' if who else ''} {c['metric']}: "
                  f"{c['prev_value']:g} -> {c['value']:g} ({c['change_pct']:+.1f}%, against "
                  f"{'baseline ' if c['vs_baseline'] else ''}{c['prev_commit'] or c['prev_origin']}), "
                  f"more than {args.fail_on_regression:g}%", file=sys.stderr)
        if failing:
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m spark_bench.collate``: parse ``argv`` and collate."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args(argv)
    argv_list = sys.argv[1:] if argv is None else list(argv)
    args.command_text = shlex.join(["python", "-m", "spark_bench.collate", *argv_list])
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
