"""Every program in ``examples/`` runs against a real cluster and exits 0.

One ``fastmq-namesrv`` + ``fastmq-broker`` pair serves the module; each example runs as a user
runs it, ``python examples/<name>.py`` with ``NAMESRV_ADDR`` set, in a process of its own. The
examples are found by globbing, so a new one is tested without touching this file.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from fastmq.testing import running_cluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
# each example bounds its own wait at about 30 s; this only catches one that hangs past it
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # (enablePropertyFilter: sql_filter.py subscribes with a SQL92 expression)
    with running_cluster(tmp_path_factory.mktemp("examples-cluster"), enablePropertyFilter="true") as (ns, _broker):
        yield ns.addr


def test_examples_found() -> None:
    assert len(EXAMPLES) >= 8, EXAMPLES  # a moved directory must not pass as "nothing to run"


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(example: Path, namesrv: str, tmp_path: Path) -> None:
    env = {**os.environ, "NAMESRV_ADDR": namesrv,
           # this checkout's fastmq, as the test itself imports it
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           # broadcasting consumers keep offsets under ~/.rocketmq_offsets: not the user's home here
           "rocketmq.client.localOffsetStoreDir": str(tmp_path / "offsets")}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(example)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    took = time.monotonic() - t0
    assert proc.returncode == 0, (f"{example.name} exited {proc.returncode} after {took:.1f} s\n"
                                  f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
