#!/usr/bin/env bash
# Before and after in one run: the benchmarks of an older commit (A) and of this checkout (B),
# alternated A B A B ... on this machine, each commit's runs merged into their medians and kept in
# benchmarks/results/, then scripts/bench.sh --collate-only: both files go into the history (a pair
# of one stamp counts as one session there; repeated pairs of one commit set the noise band that
# RESULTS.md's regressions must exceed) and RESULTS.md is regenerated. Compare the two files with
# `fastmq-bench collate --pytest-benchmark A.json B.json --out DIR` (Spark) for a side-by-side table.
#
#   scripts/bench_ab.sh BASE_REV [ROUNDS] [pytest arguments, e.g. -k "codec or selector"]
#
# ROUNDS (default 3) is how many times each commit runs. BASE_REV is checked out into a temporary
# worktree and its extensions built there; this checkout must be committed (a dirty tree's figures
# would be named after a commit that does not hold them).
source "$(dirname "$0")/_venv.sh"

base_rev="${1:?usage: scripts/bench_ab.sh BASE_REV [ROUNDS] [pytest arguments]}"
shift
rounds=3
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
    rounds="$1"
    shift
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "bench_ab.sh: commit your changes first (this checkout is the B side)" >&2
    exit 2
fi
head_dir="$PWD"
base_sha="$(git rev-parse --verify "$base_rev^{commit}")" || exit 2
head_sha="$(git rev-parse HEAD)"
scratch="$(mktemp -d)"
cleanup() {
    git worktree remove --force "$scratch/base" >/dev/null 2>&1
    rm -rf "$scratch"
}
trap cleanup EXIT

git worktree add --detach -q "$scratch/base" "$base_sha"
# pip builds the extensions in an isolated environment, so the venv itself may lack what an
# in-place build needs (pyproject.toml's build-system requires)
python -m pip install -q "setuptools>=77" "Cython>=3.1,<4" >&2
(cd "$scratch/base" && python setup.py -q build_ext --inplace >"$scratch/build.log" 2>&1) || {
    cat "$scratch/build.log" >&2
    echo "bench_ab.sh: building $base_rev's extensions failed" >&2
    exit 1
}

# the head side runs from this checkout with PYTHONPATH too, so it needs its own in-place build
# (an editable install keeps its compiled modules elsewhere)
python setup.py -q build_ext --inplace >"$scratch/build-head.log" 2>&1 || {
    cat "$scratch/build-head.log" >&2
    echo "bench_ab.sh: building this checkout's extensions failed" >&2
    exit 1
}

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
for i in $(seq 1 "$rounds"); do
    for side in base head; do
        if [ "$side" = base ]; then tree="$scratch/base"; else tree="$head_dir"; fi
        out="$scratch/$side-$i.json"
        echo "bench_ab.sh: round $i of $rounds, $side ($(git -C "$tree" rev-parse --short HEAD))" >&2
        # the tree's own code: PYTHONPATH wins over the editable install, in the servers the benchmarks start too
        (cd "$tree" && PYTHONPATH="$tree" python -m pytest benchmarks --benchmark-only -p no:cacheprovider \
            -q --benchmark-json "$out" "$@") || {
            echo "bench_ab.sh: the $side benchmarks failed in round $i; no result kept" >&2
            exit 1
        }
    done
done

results="$head_dir/benchmarks/results"
mkdir -p "$results"
for side in base head; do
    if [ "$side" = base ]; then sha="$base_sha"; else sha="$head_sha"; fi
    fastmq-bench median "$scratch/$side"-*.json \
        --out "$results/pytest-$stamp-${sha:0:7}-ab-median-of-$rounds.json" || exit 1
done
exec "$head_dir/scripts/bench.sh" --collate-only
