"""mypy strict over fastmq/, as configured in pyproject.toml ([tool.mypy]), with zero errors.

It runs in a subprocess from the repository root, so it reads the same configuration a
developer's ``python -m mypy`` reads. The cache is the git-ignored ``.mypy_cache`` there: a cold
run takes tens of seconds, a warm one about a second. Marked slow, so the suite's second (pure
Python) pass does not check the same sources twice.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_mypy_strict_reports_no_errors() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (it is in the `test` extra)")
    try:
        proc = subprocess.run([sys.executable, "-m", "mypy", "--no-color-output"], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"mypy did not finish in {exc.timeout} s:\n{exc.stdout or ''}{exc.stderr or ''}")
    assert proc.returncode == 0, f"mypy exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
