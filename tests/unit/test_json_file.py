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


# ------------------------------------------------------------ PrettyTable: only changed entries encoded

def _sorted_deep(obj):
    """``obj`` with every object's keys in sorted order (what ``sort_keys`` does while encoding)."""
    if isinstance(obj, dict):
        return {k: _sorted_deep(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [_sorted_deep(v) for v in obj]
    return obj


def test_pretty_table_writes_json_dumps_bytes_in_table_order_and_encodes_only_changes() -> None:
    from fastmq.common.json_file import PrettyTable, pretty_object
    encoded: list[str] = []

    def to_obj(v: dict) -> dict:
        encoded.append(v["name"])
        return v

    table = {f"T{i}": {"name": f"T{i}", "n": i, "s": "a\nb \u00e9\u4e2d", "l": [1, {"x": None}], "e": {}}
             for i in (3, 1, 2, 7, 5)}
    table["\u00e9t\u00e9"] = {"name": "\u00e9t\u00e9", "q": "\"", "f": 1.5, "b": True}
    pt: PrettyTable[dict] = PrettyTable(to_obj)
    pt.BLOCK = 2  # several blocks, some reused and some not

    def check() -> None:
        text = pretty_object({"dataVersion": {"timestamp": 2, "counter": 1}, "table": pt.encode(table),
                              "after": []}).text
        # the entries in the table's order; every other object sorted
        expected = {"after": [], "dataVersion": {"counter": 1, "timestamp": 2},
                    "table": {k: _sorted_deep(v) for k, v in table.items()}}
        assert text == json.dumps(expected, indent=4, ensure_ascii=False)

    check()
    assert sorted(encoded) == sorted(table)
    encoded.clear()
    check()
    assert encoded == []  # nothing changed: nothing encoded
    table["T1"] = {"name": "T1", "n": 100}  # replaced
    table["T0"] = {"name": "T0"}  # added
    del table["T2"]  # the blocks after it shift: their entries' texts are reused
    check()
    assert sorted(encoded) == ["T0", "T1"]
    table.clear()
    check()
    assert pretty_object({}).text == "{}"


# ------------------------------------------------------------ durable(): answered after the write

async def test_durable_waits_for_a_write_that_holds_the_change_and_groups_concurrent_ones(tmp_path) -> None:
    import asyncio
    p = tmp_path / "topics.json"
    table: dict[str, int] = {}
    writers: list[str] = []
    lock = threading.Lock()

    def snapshot() -> dict:
        writers.append(threading.current_thread().name)
        time.sleep(0.02)  # a write that takes a while, so concurrent changes pile up behind it
        with lock:
            return dict(table)

    f = JsonConfigFile(p, snapshot, delay=60)  # only durable() makes it write soon

    async def create(i: int) -> None:
        with lock:
            table[f"T{i}"] = i
        f.changed()
        await f.durable()
        assert f"T{i}" in json.loads(p.read_text())  # on disk when answered

    await asyncio.wait_for(asyncio.gather(*(create(i) for i in range(50))), 20)
    assert json.loads(p.read_text()) == table
    assert 1 <= len(writers) < 25 and threading.current_thread().name not in writers
    await asyncio.wait_for(f.durable(), 5)  # nothing new: at once, no write
    assert len(writers) < 25 and not f.pending


async def test_durable_raises_when_its_write_failed_and_waits_again_after(tmp_path) -> None:
    import asyncio
    p = tmp_path / "x.json"
    blocker = p.with_name("x.json.tmp")
    blocker.mkdir()  # the temp file cannot be created: the write fails
    f = JsonConfigFile(p, lambda: {"v": 1}, delay=60)
    f.changed()
    with pytest.raises(OSError):
        await asyncio.wait_for(f.durable(), 5)
    assert f.pending and not p.exists()  # still to be written (the background retry is tested above)
    blocker.rmdir()
    await asyncio.wait_for(f.durable(), 5)  # the change is still not on disk: this call writes it
    assert json.loads(p.read_text()) == {"v": 1}


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
