"""Config that survives, against real fastmq-broker / fastmq-namesrv processes (issue 15, item 9):
a value no config file can keep (a line break, another control character) is refused through
UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG and changes nothing; what is persisted is written as
``java.util.Properties.store`` writes it and reloads to the same value at the next start; ``-c``
files are read as Java reads them (ISO-8859-1, ``\\uXXXX``, no split at U+2028); logs roll by
size with the configured level, size and count."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import javaproperties
import pytest

from fastmq.common.properties import load_properties
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, broker_process, free_port, namesrv_process

pytestmark = pytest.mark.slow

#: Values a config file can keep only escaped: separators, comment marks, backslashes, blanks,
#: Latin-1 and beyond (U+2028 is a line break to Python's splitlines, not to Java).
ODD = "a b=c:d#e!f\\g \u00e9\u2028\u4e2d\U0001F600"  # (String values are trimmed, as 4.9 does)
HOSTILE = ["line\nbreak", "cr\rhere", "nul\x00", "esc\x1b[31m", "del\x7f", "next\x85line"]


def _body(**kv: str) -> bytes:
    return javaproperties.dumps(kv, timestamp=False).encode("latin-1")


async def _update(client: RemotingClient, addr: str, code: int, body: bytes):
    return await client.invoke(addr, create_request(code, {}, body), 10)


def _broker_config(text: str) -> dict[str, str]:
    # GET_BROKER_CONFIG is 4.9's properties2String: key=value lines, unescaped
    return dict(line.split("=", 1) for line in text.split("\n") if "=" in line)


async def test_broker_refuses_unstorable_values_and_reloads_what_it_stores(tmp_path: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    broker = broker_process(tmp_path, ns.addr, logMaxBytes=1048576, logBackups=3)
    conf = tmp_path / "broker.conf"
    client = RemotingClient()
    try:
        broker.start()
        before = conf.read_bytes()
        for bad in HOSTILE:
            r = await _update(client, broker.addr, RequestCode.UPDATE_BROKER_CONFIG, _body(regionId=bad))
            assert r.code == ResponseCode.SYSTEM_ERROR and "control character" in r.remark, (bad, r.code, r.remark)
            r = await _update(client, broker.addr, RequestCode.UPDATE_BROKER_CONFIG,
                              _body(maxMessageSize="1024", **{f"key{bad}": "v"}))
            assert r.code == ResponseCode.SYSTEM_ERROR, bad  # all or nothing: maxMessageSize not applied either
        assert conf.read_bytes() == before
        r = await client.invoke(broker.addr, create_request(RequestCode.GET_BROKER_CONFIG, {}), 10)
        assert _broker_config(r.body.decode())["maxMessageSize"] != "1024"

        # storable: written escaped, applied now, and the same after a restart from the rewritten -c
        r = await _update(client, broker.addr, RequestCode.UPDATE_BROKER_CONFIG,
                          _body(regionId=ODD, msgTraceTopicName="Trace\u00e9", brokerClusterName="Later\u00e9"))
        assert r.code == ResponseCode.SUCCESS, r.remark
        stored = load_properties(conf)
        assert stored["regionId"] == ODD and dict(javaproperties.loads(conf.read_text("latin-1"))) == stored
        conf.read_bytes().decode("ascii")  # Properties.store's form: ASCII with \uXXXX escapes
        assert stored["logMaxBytes"] == "1048576" and stored["logPath"].endswith("broker.log")  # kept
        assert broker.stop() == 0, broker.output()[-3000:]
        broker.start()
        await client.close()
        client = RemotingClient()
        r = await client.invoke(broker.addr, create_request(RequestCode.GET_BROKER_CONFIG, {}), 10)
        got = _broker_config(r.body.decode())
        assert (got["regionId"], got["msgTraceTopicName"], got["brokerClusterName"]) == (ODD, "Trace\u00e9",
                                                                                           "Later\u00e9")
    finally:
        await client.close()
        broker.stop()
        ns.stop()


async def test_namesrv_refuses_unstorable_values_and_records_what_reloads(tmp_path: Path) -> None:
    store = tmp_path / "ns-config" / "namesrv.properties"
    ns = namesrv_process(tmp_path, configStorePath=store)
    client = RemotingClient()
    try:
        ns.start()
        for bad in HOSTILE:
            r = await _update(client, ns.addr, RequestCode.UPDATE_NAMESRV_CONFIG, _body(productEnvName=bad))
            assert r.code == ResponseCode.SYSTEM_ERROR and "control character" in r.remark, (bad, r.code, r.remark)
        assert not store.exists()
        r = await _update(client, ns.addr, RequestCode.UPDATE_NAMESRV_CONFIG, _body(productEnvName=ODD))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert load_properties(store)["productEnvName"] == ODD
        assert dict(javaproperties.loads(store.read_text("latin-1")))["productEnvName"] == ODD
        # the record is a valid -c file: a NameServer started from it has the value
        assert ns.stop() == 0
        port = free_port()
        text = store.read_text("latin-1").replace(f"listenPort={ns.port}\n", f"listenPort={port}\n")
        again_conf = tmp_path / "again.properties"
        again_conf.write_text(text, "latin-1")
        again = ServerProcess(["fastmq-namesrv", "-c", str(again_conf)], port, tmp_path, env={"HOME": str(tmp_path)})
        with again:
            r = await client.invoke(again.addr, create_request(RequestCode.GET_NAMESRV_CONFIG, {}), 10)
            assert f"productEnvName={ODD}\n" in r.body.decode()
    finally:
        await client.close()
        ns.stop()


def test_c_files_are_read_as_java_reads_them(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    # ISO-8859-1 bytes, a \u escape, a continuation, ':' and blank separators, a U+2028 that Java
    # keeps inside the value (written as an escape: the file itself is Latin-1)
    conf.write_bytes(b"brokerClusterName=Caf\xe9\nbrokerName : b\\u00e9\\\n    -x\nregionId r\\u2028s\n"
                     b"! comment\nmsgTraceTopicName=T\\\\U\n")
    out = subprocess.run([str(Path(ServerProcess(["fastmq-broker"], 0, tmp_path).argv[0])), "-c", str(conf), "-p"],
                         capture_output=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.decode("utf-8").split("\n")
    assert "brokerClusterName=Caf\u00e9" in lines and "brokerName=b\u00e9-x" in lines
    assert "regionId=r\u2028s" in lines and "msgTraceTopicName=T\\U" in lines


# ------------------------------------------------------------------ logs

def _run_cli(tmp_path: Path, prog: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    exe = ServerProcess([prog], 0, tmp_path).argv[0]
    return subprocess.run([exe, *args], capture_output=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "HOME": str(tmp_path)})


@pytest.mark.parametrize("args, message", [
    (["--log-level", "LOUD"], "logLevel=LOUD"), (["--log-backups", "0"], "logBackups=0"),
    (["--log-max-bytes", "-1"], "logMaxBytes=-1")])
def test_bad_log_options_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    for prog in ("fastmq-namesrv", "fastmq-broker"):
        r = _run_cli(tmp_path, prog, *args)
        assert r.returncode == 2 and message in r.stderr.decode(), (prog, r.returncode, r.stderr)


def test_bad_log_keys_in_the_file_exit_2(tmp_path: Path) -> None:
    conf = tmp_path / "b.conf"
    conf.write_text("logLevel=chatty\n")
    r = _run_cli(tmp_path, "fastmq-broker", "-c", str(conf), "-p")
    assert r.returncode == 2 and "logLevel=chatty" in r.stderr.decode(), r.stderr


async def test_logs_roll_at_the_configured_size(tmp_path: Path) -> None:
    """The NameServer with options, the broker with config keys: both roll their log files."""
    log_file = tmp_path / "rolled" / "ns.log"
    ns = namesrv_process(tmp_path)
    ns.argv += ["--log-file", str(log_file), "--log-max-bytes", "4000", "--log-backups", "2", "--log-level", "DEBUG"]
    broker: ServerProcess | None = None
    client = RemotingClient()
    try:
        ns.start()
        broker = broker_process(tmp_path, ns.addr, logMaxBytes=3000, logBackups=1, logLevel="WARN")
        for i in range(200):  # each put logs an INFO line
            r = await client.invoke(ns.addr, create_request(RequestCode.PUT_KV_CONFIG,
                                                            {"namespace": "N", "key": f"k{i}", "value": "v" * 40}), 10)
            assert r.code == ResponseCode.SUCCESS
        assert log_file.with_name("ns.log.1").exists() and log_file.with_name("ns.log.2").exists()
        assert not log_file.with_name("ns.log.3").exists()
        for p in (log_file, log_file.with_name("ns.log.1"), log_file.with_name("ns.log.2")):
            assert p.stat().st_size <= 4000 + 1000, p  # one line may cross the limit
        assert not (tmp_path / "ns.log").exists()  # --log-file won over the file's logPath

        broker.start()
        blog = tmp_path / "broker.log"
        for i in range(60):  # WARN: an unknown-key update logs a warning line each time
            r = await client.invoke(broker.addr, create_request(RequestCode.UPDATE_BROKER_CONFIG, {},
                                                                f"noSuchKey{i}=v\n".encode()), 10)
            assert r.code == ResponseCode.SUCCESS
        deadline = time.monotonic() + 10
        while not blog.with_name("broker.log.1").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert blog.with_name("broker.log.1").exists() and not blog.with_name("broker.log.2").exists()
        text = blog.read_text() + blog.with_name("broker.log.1").read_text()
        assert " INFO " not in text and " WARNING " in text  # logLevel=WARN
    finally:
        await client.close()
        if broker is not None:
            broker.stop()
        ns.stop()
