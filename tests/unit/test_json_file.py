"""Atomic JSON state files: the write leaves old or new, never half; reads fall back to .bak."""
from __future__ import annotations

from fastmq.common.json_file import read_json, write_json_atomic


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


# ------------------------------------------------------------ load_json: RocketMQ's ConfigManager.load

import json
import threading
import time

import pytest

from fastmq.errors import ConfigError
from fastmq.common.json_file import JsonConfigFile, load_json


def _must_have_v(obj):
    return obj["v"]  # KeyError (a wrong shape) counts as damage


@pytest.mark.parametrize("damage", ['{"v": ', "", "   \n", '["a list"]', '{"w": 1}', "\xff\xfe"],
                         ids=["torn", "empty", "blank", "wrong-type", "wrong-shape", "not-utf8"])
def test_damaged_main_reads_backup(tmp_path, damage: str) -> None:
    p = tmp_path / "topics.json"
    p.with_name("topics.json.bak").write_text('{"v": 1}')
    p.write_bytes(damage.encode("latin-1"))
    assert load_json(p, _must_have_v) == 1


@pytest.mark.parametrize("bak", [None, "{torn", ""], ids=["no-bak", "torn-bak", "empty-bak"])
def test_damaged_main_and_no_good_backup_is_an_error_naming_the_file(tmp_path, bak: str | None) -> None:
    p = tmp_path / "consumerOffset.json"
    p.write_text("{torn")
    if bak is not None:
        p.with_name("consumerOffset.json.bak").write_text(bak)
    with pytest.raises(ConfigError, match=r"consumerOffset\.json"):
        load_json(p, _must_have_v)


def test_missing_files_are_a_first_start(tmp_path) -> None:
    assert load_json(tmp_path / "none.json", _must_have_v) is None


def test_a_file_that_failed_to_load_is_never_overwritten(tmp_path) -> None:
    p = tmp_path / "subscriptionGroup.json"
    p.write_text("{torn")
    f = JsonConfigFile(p, lambda: {"v": "empty table"})
    with pytest.raises(ConfigError):
        f.load(_must_have_v)
    f.changed(0)
    f.write_now()
    time.sleep(0.2)
    assert p.read_text() == "{torn" and not p.with_name("subscriptionGroup.json.bak").exists()


def test_after_loading_the_backup_the_damage_is_kept_aside_not_made_the_backup(tmp_path) -> None:
    p = tmp_path / "topics.json"
    p.with_name("topics.json.bak").write_text('{"v": 1}')
    p.write_text("{torn")
    state = {"v": 2}
    f = JsonConfigFile(p, lambda: state)
    assert f.load(_must_have_v) == 1
    f.write_now()
    assert json.loads(p.read_text()) == {"v": 2}
    assert json.loads(p.with_name("topics.json.bak").read_text()) == {"v": 1}
    assert p.with_name("topics.json.damaged").read_text() == "{torn"


# ------------------------------------------------------------ JsonConfigFile: coalesced background writes

def test_many_changes_make_few_writes_off_the_calling_thread(tmp_path) -> None:
    p = tmp_path / "topics.json"
    writers: list[str] = []
    table: dict[str, int] = {}
    lock = threading.Lock()

    def snapshot() -> dict:
        writers.append(threading.current_thread().name)
        with lock:
            return dict(table)

    f = JsonConfigFile(p, snapshot, delay=0.2)
    for i in range(300):
        with lock:
            table[f"T{i}"] = i
        f.changed()
    deadline = time.monotonic() + 10
    while (f.pending or not p.exists()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert json.loads(p.read_text()) == table
    assert 1 <= len(writers) <= 3 and threading.current_thread().name not in writers


def test_flush_writes_what_is_pending_now(tmp_path) -> None:
    p = tmp_path / "x.json"
    f = JsonConfigFile(p, lambda: {"v": 7}, delay=60)
    f.changed()
    assert f.pending and not p.exists()
    f.flush()
    assert not f.pending and json.loads(p.read_text()) == {"v": 7}
    f.flush()  # nothing pending: no write
    assert not p.with_name("x.json.bak").exists()


def test_a_failed_background_write_is_retried(tmp_path, monkeypatch) -> None:
    import fastmq.common.json_file as jf
    monkeypatch.setattr(jf, "RETRY_AFTER_FAILURE", 0.05)
    p = tmp_path / "x.json"
    blocker = p.with_name("x.json.tmp")
    blocker.mkdir()  # the temp file cannot be created: the write fails
    f = JsonConfigFile(p, lambda: {"v": 1}, delay=0.01)
    f.changed()
    deadline = time.monotonic() + 10
    while f.last_error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert f.pending and isinstance(f.last_error, OSError)
    blocker.rmdir()
    while f.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert json.loads(p.read_text()) == {"v": 1} and f.last_error is None
    with pytest.raises(OSError):  # flush() reports its own failure to the caller
        blocker.mkdir()
        f.write_now()
    assert f.pending
    blocker.rmdir()
    f.flush()


# ------------------------------------------------------------ the client's local offset store (broadcasting)

async def test_local_offset_store_reads_its_backup_and_refuses_when_both_are_damaged(tmp_path) -> None:
    from types import SimpleNamespace

    from fastmq.client.offset_store import LocalFileOffsetStore
    from fastmq.protocol.message_queue import MessageQueue

    mq = MessageQueue("T", "broker-a", 1)
    path = tmp_path / "offsets.json"
    store = LocalFileOffsetStore(SimpleNamespace(client_id="c"), "G", path)  # type: ignore[arg-type]
    store.update(mq, 42)
    await store.persist_all()
    path.with_name("offsets.json.bak").write_bytes(path.read_bytes())
    path.write_text("{torn")
    again = LocalFileOffsetStore(SimpleNamespace(client_id="c"), "G", path)  # type: ignore[arg-type]
    assert await again.read(mq, from_store=True) == 42
    path.with_name("offsets.json.bak").write_text("")
    broken = LocalFileOffsetStore(SimpleNamespace(client_id="c"), "G", path)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="offsets.json"):  # RocketMQ's readLocalOffset throws too
        await broken.read(mq, from_store=True)
    with pytest.raises(ConfigError):  # and nothing overwrites the damaged file
        await broken.persist_all()
    assert path.read_text() == "{torn"
