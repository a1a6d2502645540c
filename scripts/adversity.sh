#!/bin/sh
# The long adversity run (issue 15, item 6): many kill -9 rounds of a SYNC_FLUSH broker under load,
# each checked read-only with --check-store, then every acknowledged message consumed; and the
# bit-flip, disk-full, descriptor-limit, restart-memory and full-restart tests, the orderly
# hand-over, consumer memory with bodies inflating near 16 MiB, a second master claiming a
# live one's brokerName, and kill -9 right after topics acknowledged on a 5,000-topic broker
# (with the damaged-metadata-file cases). Not part of the default
# suite's budget: FASTMQ_ADVERSITY_LONG=1 raises the counts and sizes. FASTMQ_ADVERSITY_KILLS=N
# overrides the kills.
set -eu
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
FASTMQ_ADVERSITY_LONG=1 PYTHONPATH="$PWD" exec "$PY" -m pytest -q -s -p no:cacheprovider \
    tests/process/test_store_adversity.py tests/process/test_store_damage.py tests/process/test_store_disk_full.py \
    tests/process/test_store_fd_limit.py tests/process/test_store_restart_memory.py \
    tests/process/test_orderly_handover.py tests/process/test_store_full_restart.py \
    tests/process/test_consumer_inflate_memory.py tests/process/test_duplicate_master.py \
    tests/process/test_metadata_files.py "$@"
