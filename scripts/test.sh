#!/usr/bin/env bash
# The whole test suite: sets up .venv, builds the extensions, runs pytest on
# tests/ and benchmarks/ (benchmarks as smoke tests, timing disabled).
# Twin-sensitive tests run both the compiled and the pure twin in one run; a
# second pass with FASTMQ_NO_EXTENSIONS=1 checks the pure selection end to end.
source "$(dirname "$0")/_venv.sh"
python -m pytest tests benchmarks --benchmark-disable -p no:cacheprovider "$@"
FASTMQ_NO_EXTENSIONS=1 python -m pytest tests -m "not slow and not cpp_client" --no-extensions -p no:cacheprovider -q "$@"
