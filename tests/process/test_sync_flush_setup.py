"""benchmarks/sync_flush_setup.py, the setup the sync_flush_* scripts share: it starts what they
measure and leaves nothing behind (their brokers fallocate hundreds of MB), even when the
measurement fails half-way; and a script on it still takes its command line and writes its file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.probes.sync_flush_setup import flush_rig
from benchmarks.test_sync_flush_benchmarks import one_in_flight

ROOT = Path(__file__).resolve().parents[2]


def test_rig_runs_brokers_of_each_mode_and_leaves_nothing() -> None:
    with flush_rig("sync-flush-setup-test") as rig:
        sync = rig.broker("SYNC_FLUSH", "setup-S")
        plain = rig.broker("ASYNC_FLUSH", "setup-A", warm_start=None)
        assert len(one_in_flight(sync.port, 3)) == 3 and len(one_in_flight(plain.port, 3)) == 3
        assert (rig.dir / "SYNC_FLUSH" / "store" / "commitlog").is_dir()
        rig.stop(plain)
        assert plain.proc is not None and plain.proc.poll() is not None and rig.brokers == [sync]
        procs = [sync.proc, rig.namesrv.proc]
        where = rig.dir
    assert all(p is not None and p.poll() is not None for p in procs)
    assert not where.exists()


def test_rig_cleans_up_after_a_failed_measurement() -> None:
    with pytest.raises(RuntimeError, match="measurement failed"):
        with flush_rig("sync-flush-setup-test") as rig:
            b = rig.broker("SYNC_FLUSH", "setup-F", warm_start=None)
            where = rig.dir
            raise RuntimeError("measurement failed")
    assert b.proc is not None and b.proc.poll() is not None
    assert rig.namesrv.proc is not None and rig.namesrv.proc.poll() is not None
    assert not where.exists()


def test_split_script_command_line_and_result_file(tmp_path: Path) -> None:
    out = tmp_path / "split.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "probes" / "sync_flush_split.py"), "--rounds", "1",
                           "--block", "3", "--out", str(out)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["args"] == {"rounds": "1", "block": "3", "out": str(out)}
    [row] = doc["rounds"]
    assert set(row) == {"sync_send_p50_us", "async_send_p50_us", "broker_sync_mean_us", "floor_p50_us", "flushes",
                        "unexplained_us"}
    assert row["flushes"] >= 1  # the SYNC_FLUSH broker synced the timed sends
