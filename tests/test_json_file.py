"""Atomic JSON state files: the write leaves old or new, never half; reads fall back to .bak."""
from __future__ import annotations

from fastmq.store.json_file import read_json, write_json_atomic


def test_round_trip_and_backup(tmp_path) -> None:
    p = tmp_path / "config" / "topics.json"
    assert read_json(p) is None
    write_json_atomic(p, {"v": 1})
    write_json_atomic(p, {"v": 2})
    assert read_json(p) == {"v": 2}
    assert read_json(p.with_name("topics.json.bak")) == {"v": 1}
    assert not p.with_name("topics.json.tmp").exists()


def test_torn_main_file_falls_back_to_backup(tmp_path) -> None:
    p = tmp_path / "offsets.json"
    write_json_atomic(p, {"v": 1})
    write_json_atomic(p, {"v": 2})
    p.write_text('{"v": ')  # as if a non-atomic writer had died mid-write
    assert read_json(p) == {"v": 1}


def test_crash_between_renames(tmp_path) -> None:
    p = tmp_path / "offsets.json"
    write_json_atomic(p, {"v": 1})
    p.rename(p.with_name("offsets.json.bak"))  # the state after the first rename only
    assert read_json(p) == {"v": 1}
