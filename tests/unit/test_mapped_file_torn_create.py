"""A kill -9 between a store file's creation and its sizing leaves a short file of zeros; the
next start must finish it, not refuse the store (found by tests/process/test_transaction_broker.py's
kill in a commit stream, at the op topic's first consume-queue file)."""
from __future__ import annotations

from pathlib import Path

import pytest

from fastmq.store import StoreCorruptError
from fastmq.store.mapped_file import MappedFile

NAME = "00000000000000000000"


@pytest.mark.parametrize("size", [0, 4096])
@pytest.mark.parametrize("keep_fd", [True, False])
def test_a_short_file_of_zeros_is_finished(tmp_path: Path, size: int, keep_fd: bool) -> None:
    path = tmp_path / NAME
    path.write_bytes(b"\0" * size)
    mf = MappedFile(path, 65536, keep_fd=keep_fd)
    try:
        assert path.stat().st_size == 65536
    finally:
        mf.close()


def test_a_short_file_with_data_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / NAME
    path.write_bytes(b"\0" * 100 + b"x")
    with pytest.raises(StoreCorruptError, match="differs from the configured mapped file size"):
        MappedFile(path, 65536)
    assert path.stat().st_size == 101  # left as found
