"""KVConfigManager: RocketMQ's kvConfig.json format, atomic rewrites, loading at start."""
from __future__ import annotations

import json
import logging
import os

import pytest

from fastmq.namesrv.kv_config import KVConfigManager


def test_round_trip_in_rocketmq_format(tmp_path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put("ORDER_TOPIC_CONFIG", "T", "b1:4;b2:4")
    kv.put("ns", "k", "v")
    kv.put("ns", "k", "v2")
    kv.delete("ns", "k")
    kv.delete("ns", "missing")          # nothing to delete: no error
    kv.delete("no-such-ns", "k")
    assert json.loads(path.read_text()) == {"configTable": {"ORDER_TOPIC_CONFIG": {"T": "b1:4;b2:4"}, "ns": {}}}
    again = KVConfigManager(path)
    again.load()
    assert again.get("ORDER_TOPIC_CONFIG", "T") == "b1:4;b2:4" and again.get("ns", "k") is None
    assert again.get_namespace("ORDER_TOPIC_CONFIG") == {"T": "b1:4;b2:4"}
    assert again.get_namespace("nothing") is None
    assert not (tmp_path / "namesrv" / "kvConfig.json.tmp").exists()   # the temp file was renamed


def test_reads_a_file_a_java_nameserver_wrote(tmp_path) -> None:
    path = tmp_path / "kvConfig.json"
    # fastjson's pretty form, as RocketMQ's KVConfigManager.persist writes it.
    path.write_text('{\n\t"configTable":{\n\t\t"ORDER_TOPIC_CONFIG":{\n\t\t\t"TopicTest":"broker-a:8"\n\t\t}\n\t}\n}')
    kv = KVConfigManager(path)
    kv.load()
    assert kv.get("ORDER_TOPIC_CONFIG", "TopicTest") == "broker-a:8"


def test_missing_file_is_an_empty_table(tmp_path) -> None:
    kv = KVConfigManager(tmp_path / "none" / "kvConfig.json")
    kv.load()
    assert kv.table == {}


def test_torn_file_falls_back_to_previous_copy(tmp_path) -> None:
    path = tmp_path / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put("ns", "a", "1")
    kv.put("ns", "b", "2")
    path.write_text("{ torn")  # a crash mid-write of the main file: the backup has the state before
    again = KVConfigManager(path)
    again.load()
    assert again.get("ns", "a") == "1"


def test_write_failure_keeps_memory_and_old_file(tmp_path, caplog) -> None:
    path = tmp_path / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put("ns", "a", "1")
    before = path.read_text()
    (tmp_path / "kvConfig.json.tmp").mkdir()     # the temp file cannot be created
    with caplog.at_level(logging.ERROR, logger="fastmq.namesrv"):
        kv.put("ns", "b", "2")
    assert kv.get("ns", "b") == "2" and path.read_text() == before
    assert "persist kvconfig" in caplog.text


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_unwritable_directory_is_logged_not_raised(tmp_path, caplog) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        kv = KVConfigManager(d / "kvConfig.json")
        with caplog.at_level(logging.ERROR, logger="fastmq.namesrv"):
            kv.put("ns", "k", "v")
        assert kv.get("ns", "k") == "v" and "persist kvconfig" in caplog.text
    finally:
        d.chmod(0o700)


def test_print_all_logs_every_item(caplog) -> None:
    kv = KVConfigManager("/nonexistent/kv.json")
    kv.table = {"ns": {"k": "v"}, "other": {"x": "y"}}
    with caplog.at_level(logging.INFO, logger="fastmq.namesrv"):
        kv.print_all()
    assert "configTable SIZE: 2" in caplog.text
    assert "configTable NS: ns Key: k Value: v" in caplog.text and "NS: other Key: x Value: y" in caplog.text


async def test_request_writes_off_the_loop_and_answers_once_on_disk(tmp_path) -> None:
    """Guards against kvConfig.json's fsync'd rewrite stalling every NameServer request: the
    handler's write runs on a worker thread, and the answer still waits for it (RocketMQ 4.9
    answers PUT_KV_CONFIG once the file is written)."""
    import asyncio
    import threading

    from fastmq.namesrv.config import NamesrvConfig
    from fastmq.namesrv.controller import NamesrvController
    from fastmq.namesrv.processor import DefaultRequestProcessor
    from fastmq.protocol.codes import RequestCode
    from fastmq.protocol.command import create_request

    path = tmp_path / "kvConfig.json"
    ctl = NamesrvController(NamesrvConfig(kvConfigPath=str(path),
                                          configStorePath=str(tmp_path / "namesrv.properties")))
    proc = DefaultRequestProcessor(ctl)
    writers: list[threading.Thread] = []
    snapshot = ctl.kv_config.file.snapshot

    def recording_snapshot():
        writers.append(threading.current_thread())
        return snapshot()
    ctl.kv_config.file.snapshot = recording_snapshot

    resp = proc.process_request(None, create_request(RequestCode.PUT_KV_CONFIG,
                                                     {"namespace": "ns", "key": "k", "value": "v"}))
    assert asyncio.iscoroutine(resp), "the write must not happen inside the synchronous handler"
    assert not path.exists() and not writers
    answer = await resp
    assert answer.code == 0
    assert json.loads(path.read_text()) == {"configTable": {"ns": {"k": "v"}}}  # on disk when answered
    assert writers and all(t is not threading.main_thread() for t in writers)

    resp = proc.process_request(None, create_request(RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}))
    assert (await resp).code == 0
    assert json.loads(path.read_text()) == {"configTable": {"ns": {}}}
    n = len(writers)
    # nothing to delete: answered at once, nothing rewritten
    resp = proc.process_request(None, create_request(RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}))
    assert not asyncio.iscoroutine(resp) and resp.code == 0 and len(writers) == n
