#!/usr/bin/env bash
# Real benchmark timings (scripts/test.sh only smoke-runs benchmarks/ with timing disabled):
# runs pytest on benchmarks/ with timing and keeps pytest-benchmark's JSON in benchmarks/results/;
# then adds every figure found below benchmarks/results/ to benchmarks/results/history.csv, keeps
# only the latest run of each suite there, and regenerates benchmarks/RESULTS.md from the history
# (docs/benchmarking.md).
#
#   scripts/bench.sh                    every benchmark
#   scripts/bench.sh -k "codec or selector"   a subset: arguments go to pytest
#   BENCH_TAG=busy scripts/bench.sh ... a word added to the file name (say why the run is special)
#   scripts/bench.sh --collate-only     the history, the pruning and RESULTS.md only, run nothing
# Besides pytest-benchmark's files, this reads the result directories kept below
# benchmarks/results/: fastmq-bench run's result.json under runs/, fastmq-bench rocketmq-tools'
# summary.json under rocketmq-tools/.
source "$(dirname "$0")/_venv.sh"

RESULTS=benchmarks/results
mkdir -p "$RESULTS"

if [ "${1:-}" = "--collate-only" ]; then
    shift
else
    stamp="$(date -u +%Y%m%dT%H%M%SZ)"
    commit="$(git rev-parse --short HEAD 2>/dev/null || echo nocommit)"
    if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
        commit="$commit-dirty"
    fi
    out="$RESULTS/pytest-$stamp-$commit${BENCH_TAG:+-$BENCH_TAG}.json"
    rc=0
    python -m pytest benchmarks --benchmark-only -p no:cacheprovider --benchmark-json "$out" "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then
        # a run with a failed benchmark is not a result: keep nothing that could be read as one
        rm -f "$out"
        echo "bench.sh: pytest exited $rc; no result kept, RESULTS.md not regenerated" >&2
        exit "$rc"
    fi
    # --benchmark-json keeps every round's raw timing (tens of MB); the statistics are what is compared
    python - "$out" <<'EOF'
import json, sys
path = sys.argv[1]
doc = json.load(open(path))
for b in doc["benchmarks"]:
    b["stats"].pop("data", None)
with open(path, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
EOF
    echo "bench.sh: kept $out" >&2
fi

fastmq-bench collate "$RESULTS" --history "$RESULTS/history.csv" --prune --results-md benchmarks/RESULTS.md
