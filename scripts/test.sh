#!/usr/bin/env bash
# The whole test suite: sets up .venv, builds the extensions, runs pytest on
# tests/ and benchmarks/ (benchmarks as smoke tests, timing disabled).
# Twin-sensitive tests run both the compiled and the pure twin in one run; a
# second pass with FASTMQ_NO_EXTENSIONS=1 checks the pure selection end to end. Each pass ends
# with its 30 slowest setups, calls and teardowns, so a CI log shows where the time went.
#
#   scripts/test.sh            everything (CI runs exactly this)
#   scripts/test.sh --quick    the unit layer only (tests/unit: no server processes), its property
#                              tests at a fifth of their examples: under a minute
#
# Further arguments go to pytest. The layers are tests/{unit,process,interop,spark}, each also
# a marker: e.g. `scripts/test.sh -m "unit or interop"`.
source "$(dirname "$0")/_venv.sh"
if [ "${1:-}" = "--quick" ]; then
    shift
    FASTMQ_TEST_QUICK=1 exec python -m pytest tests/unit -q -p no:cacheprovider "$@"
fi
python -m pytest tests benchmarks --benchmark-disable -p no:cacheprovider --durations=30 "$@"
FASTMQ_NO_EXTENSIONS=1 python -m pytest tests -m "not slow and not cpp_client" --no-extensions -p no:cacheprovider -q --durations=30 "$@"
