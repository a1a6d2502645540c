"""Fixtures the process tests share: ``small_disk``, a small tmpfs for the disk-full tests."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.process.helpers import FS_SIZE, MiB


@pytest.fixture
def small_disk(tmp_path: Path):
    """A FS_SIZE tmpfs mounted under ``tmp_path`` (the test is skipped without the right to mount)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE}", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a {FS_SIZE // MiB} MiB tmpfs (needs root / CAP_SYS_ADMIN): "
                    f"{(r.stderr or r.stdout).strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
