"""Every command answers ``--version`` with fastmq's version and whether the compiled extensions
are in use (STYLE.md 1.2), exits 0, and starts nothing."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Callable

import pytest

import fastmq
from fastmq._ext import USING_EXTENSIONS
from fastmq.broker.cli import main as broker_main
from fastmq.namesrv.cli import main as namesrv_main
from spark_bench.cli import main as bench_main

ROOT = Path(__file__).resolve().parents[2]
COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "fastmq-namesrv": namesrv_main, "fastmq-broker": broker_main, "fastmq-bench": bench_main}


def _twins(line: str) -> bool:
    """What a version line says of the compiled extensions: True in use, False not."""
    assert ("accelerated (compiled extensions in use)" in line) != ("pure Python (compiled extensions not in use)" in line), line
    return "accelerated" in line


@pytest.mark.parametrize("prog", sorted(COMMANDS))
def test_version_names_the_release_and_the_twins(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        COMMANDS[prog](["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith(f"{prog} {fastmq.__version__}, "), out
    assert _twins(out) is USING_EXTENSIONS


def test_version_is_pyprojects() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["version"] == fastmq.__version__


def test_a_pure_run_says_so() -> None:
    """FASTMQ_NO_EXTENSIONS is read at import, so a fresh interpreter (as the console script is)."""
    env = {**os.environ, "FASTMQ_NO_EXTENSIONS": "1", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "fastmq.namesrv", "--version"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert re.fullmatch(rf"fastmq-namesrv {re.escape(fastmq.__version__)}, .*\n", res.stdout)
    assert _twins(res.stdout) is False
