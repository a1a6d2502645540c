#!/bin/sh
# A/B of the 16-producer SYNC_FLUSH benchmark: /work/main (1bba114, before) and the syncflush
# worktree (after: GroupCommitService lowers the GIL switch interval), alternated, one pytest
# run each turn, JSON kept here with the 1-minute load average in the name.
out=$(cd "$(dirname "$0")" && pwd)
for i in 1 2 3; do
  for side in before after; do
    if [ $side = before ]; then tree=/work/main; else tree=/work/wt/syncflush; fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    (cd $tree && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$tree timeout 600 /work/main/.venv/bin/python -m pytest \
      "$tree/benchmarks/test_sync_flush_benchmarks.py::test_sync_flush_16_producers" --benchmark-only -q \
      -p no:cacheprovider --benchmark-json="$out/$i-$side-load$load.json" >/dev/null 2>&1)
  done
done
