#!/usr/bin/env bash
# The main job: sets up .venv (builds the extensions), then starts a local cluster from the
# embedded default configuration and runs demo traffic through it (fastmq/demo.py).
source "$(dirname "$0")/_venv.sh"
exec python -m fastmq.demo "$@"
