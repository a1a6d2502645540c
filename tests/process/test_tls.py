"""TLS on real NameServer and broker processes: 4.9.8's three modes, each with a TLS and a
plaintext client, both kinds at once in permissive mode, client certificates, bounded handshakes,
certificate rotation, and a broker that registers with its NameServer over TLS.

Certificates are made at test time with the ``openssl`` command (skipped without it) in tmp dirs.
The server modes run on uvloop and on asyncio's own loop (``FASTMQ_NO_UVLOOP=1``).
"""
from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import ssl
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from fastmq import ClientConfig, Message, Producer
from fastmq.errors import FastMQError
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.common.properties import load_properties
from fastmq.remoting import RemotingClient
from fastmq.remoting.tls import client_context, make_self_signed
from fastmq.testing import ServerProcess, broker_process, namesrv_process

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command is not installed")

LOOPS = {"uvloop": {}, "asyncio": {"FASTMQ_NO_UVLOOP": "1"}}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("certs")
    server_cert, server_key = make_self_signed(str(d), "server")
    client_cert, client_key = make_self_signed(str(d), "client")
    other_cert, other_key = make_self_signed(str(d), "other")
    return {k: Path(v) for k, v in dict(server_cert=server_cert, server_key=server_key, client_cert=client_cert,
                                        client_key=client_key, other_cert=other_cert, other_key=other_key).items()}


def _namesrv(tmp: Path, certs: dict[str, Path], mode: str, env: dict[str, str] | None = None,
             **extra: object) -> ServerProcess:
    ns = namesrv_process(tmp, **{"tls.server.mode": mode, "tls.server.certPath": certs["server_cert"],
                                 "tls.server.keyPath": certs["server_key"], "tls.test.mode.enable": "false",
                                 "tls.config.file": tmp / "absent-tls.properties", **extra})
    ns.env.update(env or {})
    return ns


async def _ask(addr: str, ctx: ssl.SSLContext | None) -> int:
    """One GET_ROUTEINFO_BY_TOPIC on a new connection: its answer's code."""
    client = RemotingClient(ssl=ctx, connect_timeout=5)
    try:
        resp = await client.invoke(addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuch"}), 5)
        return resp.code
    finally:
        await client.close()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the peer closes ``sock`` (EOF or reset) within ``seconds``."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


@pytest.mark.parametrize("loop", list(LOOPS))
@pytest.mark.parametrize("mode", ["disabled", "permissive", "enforcing"])
async def test_modes_with_tls_and_plain_clients(tmp_path: Path, certs, mode: str, loop: str) -> None:
    with _namesrv(tmp_path, certs, mode, LOOPS[loop]) as ns:
        for tls, allowed in ((False, mode != "enforcing"), (True, mode != "disabled")):
            ctx = client_context() if tls else None
            if allowed:
                assert await _ask(ns.addr, ctx) == ResponseCode.TOPIC_NOT_EXIST
            else:
                with pytest.raises(FastMQError):
                    await _ask(ns.addr, ctx)
        # refused connections leave the server up and serving the allowed kind
        assert await _ask(ns.addr, None if mode != "enforcing" else client_context()) == ResponseCode.TOPIC_NOT_EXIST
        assert ns.alive()
        out = ns.output()
    if mode == "enforcing":
        assert "plaintext to a TLS-only server" in out
    if mode == "disabled":
        assert "a TLS hello to a plaintext-only server" in out


def test_tls_hello_to_plaintext_server_is_closed_cleanly(tmp_path: Path, certs) -> None:
    with _namesrv(tmp_path, certs, "disabled") as ns:
        ctx = client_context()
        with socket.create_connection(("127.0.0.1", ns.port), timeout=5) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        assert asyncio.run(_ask(ns.addr, None)) == ResponseCode.TOPIC_NOT_EXIST
        assert ns.alive()


def test_half_open_connections_are_bounded(tmp_path: Path, certs) -> None:
    with _namesrv(tmp_path, certs, "permissive", serverChannelMaxIdleTimeSeconds=1,
                  **{"tls.server.handshakeTimeoutSeconds": 1}) as ns:
        silent = socket.create_connection(("127.0.0.1", ns.port), timeout=5)
        torn = socket.create_connection(("127.0.0.1", ns.port), timeout=5)
        torn.sendall(b"\x16\x03\x01\x02\x00" + b"\x01" * 20)  # a ClientHello record cut short
        try:
            t0 = time.monotonic()
            assert _closed_within(silent, 8) and _closed_within(torn, 8)
            assert time.monotonic() - t0 < 8
        finally:
            silent.close()
            torn.close()
        assert asyncio.run(_ask(ns.addr, client_context())) == ResponseCode.TOPIC_NOT_EXIST
        assert "nothing sent within" in ns.output() and "TLS handshake failed" in ns.output()


def test_client_certificate_required(tmp_path: Path, certs) -> None:
    with _namesrv(tmp_path, certs, "enforcing", **{"tls.server.need.client.auth": "require",
                                                   "tls.server.trustCertPath": certs["client_cert"]}) as ns:
        with pytest.raises(FastMQError):
            asyncio.run(_ask(ns.addr, client_context()))  # no certificate
        wrong = client_context()
        wrong.load_cert_chain(str(certs["other_cert"]), str(certs["other_key"]))
        with pytest.raises(FastMQError):
            asyncio.run(_ask(ns.addr, wrong))  # one the server does not trust
        right = client_context()
        right.load_cert_chain(str(certs["client_cert"]), str(certs["client_key"]))
        assert asyncio.run(_ask(ns.addr, right)) == ResponseCode.TOPIC_NOT_EXIST
        assert ns.alive()


def _ha_tls_keys(tmp: Path, certs: dict[str, Path]) -> dict[str, object]:
    """A broker's keys for enforcing TLS on every port, its HA link's included."""
    return {"tls.server.mode": "enforcing", "tls.enable": "true", "tls.server.certPath": certs["server_cert"],
            "tls.server.keyPath": certs["server_key"], "tls.config.file": tmp / "absent", "haTlsEnable": "true"}


def _ha_port(broker) -> int:
    """The replication port a started broker listens on, from its ``-c`` file."""
    conf = (broker.workdir / "broker.conf").read_text()
    return int(next(line.split("=", 1)[1] for line in conf.splitlines() if line.startswith("haListenPort=")))


def _served_cert(port: int) -> bytes:
    ctx = client_context()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            der = s.getpeercert(binary_form=True)
            assert der is not None
            return der


def test_certificate_files_reloaded_when_changed(tmp_path: Path, certs) -> None:
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "server.crt", live / "server.key"
    shutil.copy(certs["server_cert"], cert)
    shutil.copy(certs["server_key"], key)
    with _namesrv(tmp_path, {**certs, "server_cert": cert, "server_key": key}, "enforcing") as ns:
        first = _served_cert(ns.port)
        time.sleep(0.02)  # (a new mtime)
        shutil.copy(certs["other_cert"], cert)
        shutil.copy(certs["other_key"], key)
        deadline = time.monotonic() + 5
        while _served_cert(ns.port) == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _served_cert(ns.port) != first
        key.write_text("not a key")  # a broken file keeps the loaded certificate
        assert asyncio.run(_ask(ns.addr, client_context())) == ResponseCode.TOPIC_NOT_EXIST
        assert "keeping the loaded certificate" in ns.output()


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory, certs
                ) -> Iterator[tuple[ServerProcess, ServerProcess, ServerProcess]]:
    """An enforcing NameServer (so the broker must register over TLS: tls.enable=true), a
    permissive one (the broker registers over TLS, the plaintext producer asks in plaintext) and a
    permissive broker registered with both."""
    tmp = tmp_path_factory.mktemp("tls-cluster")
    (tmp / "plain").mkdir()
    with _namesrv(tmp, certs, "enforcing") as ns, _namesrv(tmp / "plain", certs, "permissive") as plain_ns:
        b = broker_process(tmp, f"{ns.addr};{plain_ns.addr}", **{"tls.server.mode": "permissive", "tls.enable": "true",
                                            "tls.server.certPath": certs["server_cert"],
                                            "tls.server.keyPath": certs["server_key"],
                                            "tls.config.file": tmp / "absent-tls.properties"})
        with b:
            yield ns, plain_ns, b


def test_permissive_broker_takes_both_kinds_at_once(tls_cluster) -> None:
    ns, plain_ns, broker = tls_cluster
    errors: list[BaseException] = []
    sent: dict[str, int] = {}

    def run(kind: str, tls: bool) -> None:
        try:
            config = ClientConfig(namesrv_addr=ns.addr if tls else plain_ns.addr, tls=tls)
            with Producer(f"TlsBoth{kind}", client_config=config) as p:
                n = 0
                for i in range(50):
                    assert p.send(Message("TlsBoth", f"{kind}{i}".encode())).status == "SEND_OK"
                    n += 1
                sent[kind] = n
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k, t)) for k, t in (("tls", True), ("plain", False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sent == {"tls": 50, "plain": 50}
    assert broker.alive()
    out = broker.output()
    assert f"register broker[0]to name server {ns.addr} OK" in out  # over TLS: that one is enforcing
    assert f"register broker[0]to name server {plain_ns.addr} OK" in out


def test_keys_from_tls_config_file_and_bad_values(tmp_path: Path, certs) -> None:
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(f"tls.server.certPath={certs['server_cert']}\ntls.server.keyPath={certs['server_key']}\n"
                        "tls.test.mode.enable=false\n")
    ns = namesrv_process(tmp_path, **{"tls.server.mode": "enforcing", "tls.config.file": tls_file})
    with ns:
        assert asyncio.run(_ask(ns.addr, client_context())) == ResponseCode.TOPIC_NOT_EXIST
    exe = str(Path(sys.executable).with_name("fastmq-namesrv"))
    for line, needle in (("tls.server.mode=strict", "must be one of disabled, permissive, enforcing"),
                         ("tls.server.need.client.auth=always", "must be none, optional or require"),
                         (f"tls.server.certPath={tmp_path / 'missing.crt'}", "no such file")):
        bad = tmp_path / "bad.properties"
        bad.write_text(line + "\n")
        out = subprocess.run([exe, "-c", str(bad)], capture_output=True, text=True, timeout=30)
        assert out.returncode == 2 and needle in out.stderr, out


def test_slave_syncs_from_its_master_over_tls(tmp_path: Path, certs) -> None:
    """Everything enforcing: the slave's registration and its pulls of the master's tables go
    over TLS with tls.enable=true, and with haTlsEnable=true the commit log's HA link too (beyond
    4.9.8, whose HA link is plain TCP): a SYNC_MASTER's sends are acknowledged by its slave over
    it, and a plaintext peer on the replication port is closed. Then the master's certificate
    files are replaced: the replication port serves the new certificate to new connections
    without a restart, and a slave that connects again replicates over it."""
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "server.crt", live / "server.key"
    shutil.copy(certs["server_cert"], cert)
    shutil.copy(certs["server_key"], key)
    keys = _ha_tls_keys(tmp_path, certs)
    with _namesrv(tmp_path, certs, "enforcing") as ns:
        master = broker_process(tmp_path, ns.addr, brokerRole="SYNC_MASTER",
                                **{**keys, "tls.server.certPath": cert, "tls.server.keyPath": key}).start()
        try:
            with Producer("TlsSlaveP", client_config=ClientConfig(namesrv_addr=ns.addr, tls=True)) as p:
                assert p.send(Message("TlsSlaveTopic", b"x")).status == "SLAVE_NOT_AVAILABLE"  # no slave yet
                d = tmp_path / "slave"
                d.mkdir()
                ha = _ha_port(master)
                with socket.create_connection(("127.0.0.1", ha), timeout=5) as plain:
                    plain.sendall(b"\0" * 8)  # a slave's offset report, in plaintext
                    assert _closed_within(plain, 15)
                with broker_process(d, ns.addr, brokerId=1, brokerRole="SLAVE", haMasterAddress=f"127.0.0.1:{ha}",
                                    **keys) as slave:
                    deadline = time.monotonic() + 20
                    while "update slave topic config from master" not in slave.output() and time.monotonic() < deadline:
                        time.sleep(0.1)
                    out = slave.output()
                    assert "update slave topic config from master" in out, out[-3000:]
                    assert "failed" not in out, out[-3000:]
                    assert "TlsSlaveTopic" in (d / "store" / "config" / "topics.json").read_text()
                    status = ""
                    while status != "SEND_OK" and time.monotonic() < deadline:  # once the slave acks over TLS
                        status = p.send(Message("TlsSlaveTopic", b"y")).status
                    assert status == "SEND_OK", (master.output()[-2500:], slave.output()[-2500:])
                    assert "HA connected to master" in slave.output()
                    # rotation: new files, picked up by the next connection to the replication port
                    first = _served_cert(ha)
                    time.sleep(0.02)  # (a new mtime)
                    shutil.copy(certs["other_cert"], cert)
                    shutil.copy(certs["other_key"], key)
                    deadline = time.monotonic() + 10
                    while _served_cert(ha) == first and time.monotonic() < deadline:
                        time.sleep(0.05)
                    assert _served_cert(ha) != first
                    assert slave.stop() == 0  # its HA connection closes; the next one meets the new certificate
                    deadline = time.monotonic() + 15
                    while status == "SEND_OK" and time.monotonic() < deadline:
                        status = p.send(Message("TlsSlaveTopic", b"z")).status
                    assert status != "SEND_OK"
                    slave.start()
                    deadline = time.monotonic() + 20
                    while status != "SEND_OK" and time.monotonic() < deadline:
                        status = p.send(Message("TlsSlaveTopic", b"w")).status
                    assert status == "SEND_OK", (master.output()[-2500:], slave.output()[-2500:])
                    assert "TLS certificate reloaded" in master.output()
        finally:
            assert master.stop() == 0


def test_slave_reads_its_client_certificate_again_for_each_ha_connection(tmp_path: Path, certs) -> None:
    """A master that needs client certificates (``tls.server.need.client.auth=require``, trusting
    one certificate) and a slave whose ``tls.client.*`` files hold another at start: its HA
    connections are refused and the master's sends wait for a slave in vain. The slave's files
    are then replaced by the trusted certificate, without a restart: its next HA connection
    presents it, and the sends are acknowledged by the slave."""
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "client.crt", live / "client.key"
    shutil.copy(certs["other_cert"], cert)
    shutil.copy(certs["other_key"], key)
    server = _ha_tls_keys(tmp_path, certs)
    trusted = client_context()
    trusted.load_cert_chain(str(certs["client_cert"]), str(certs["client_key"]))
    with _namesrv(tmp_path, certs, "enforcing") as ns:
        master = broker_process(tmp_path, ns.addr, brokerRole="SYNC_MASTER",
                                **{**server, "tls.server.need.client.auth": "require",
                                   "tls.server.trustCertPath": certs["client_cert"]}).start()
        try:
            with Producer("TlsSlaveCertP", client_config=ClientConfig(namesrv_addr=ns.addr, tls=trusted)) as p:
                assert p.send(Message("TlsSlaveCertTopic", b"x")).status == "SLAVE_NOT_AVAILABLE"  # no slave yet
                d = tmp_path / "slave"
                d.mkdir()
                ha = _ha_port(master)
                with broker_process(d, ns.addr, brokerId=1, brokerRole="SLAVE", haMasterAddress=f"127.0.0.1:{ha}",
                                    **server, **{"tls.client.certPath": cert, "tls.client.keyPath": key}) as slave:
                    # refused while it presents the untrusted certificate (a few attempts, 1 s apart)
                    deadline = time.monotonic() + 4
                    while time.monotonic() < deadline:
                        status = p.send(Message("TlsSlaveCertTopic", b"y")).status
                        assert status != "SEND_OK", (master.output()[-2500:], slave.output()[-2500:])
                        time.sleep(0.2)
                    assert slave.alive()
                    time.sleep(0.02)  # (a new mtime)
                    shutil.copy(certs["client_cert"], cert)
                    shutil.copy(certs["client_key"], key)
                    deadline = time.monotonic() + 30
                    while status != "SEND_OK" and time.monotonic() < deadline:
                        status = p.send(Message("TlsSlaveCertTopic", b"z")).status
                    assert status == "SEND_OK", (master.output()[-2500:], slave.output()[-2500:])
                    assert "HA client TLS certificate reloaded" in slave.output()
        finally:
            assert master.stop() == 0


async def test_config_rewrite_keeps_the_tls_keys(tmp_path: Path, certs) -> None:
    """UPDATE_BROKER_CONFIG rewrites the -c file: its tls.* keys stay in it (the next start is
    still TLS), and GET_BROKER_CONFIG does not show the key password."""
    ns = _namesrv(tmp_path, certs, "permissive").start()
    broker = broker_process(tmp_path, ns.addr, **{"tls.server.mode": "enforcing", "tls.server.keyPassword": "",
                                                  "tls.server.certPath": certs["server_cert"],
                                                  "tls.server.keyPath": certs["server_key"],
                                                  "tls.config.file": tmp_path / "absent"})
    client = RemotingClient(ssl=client_context())
    try:
        broker.start()
        r = await client.invoke(broker.addr, create_request(RequestCode.UPDATE_BROKER_CONFIG, {},
                                                            b"maxMessageSize=1048576\n"), 10)
        assert r.code == ResponseCode.SUCCESS, r.remark
        r = await client.invoke(broker.addr, create_request(RequestCode.GET_BROKER_CONFIG, {}), 10)
        shown = r.body.decode()
        assert "tls.server.mode=enforcing" in shown and "keyPassword" not in shown
        stored = load_properties(tmp_path / "broker.conf")
        assert stored["maxMessageSize"] == "1048576" and stored["tls.server.mode"] == "enforcing"
        assert stored["tls.server.certPath"] == str(certs["server_cert"]) and "tls.server.keyPassword" in stored
    finally:
        await client.close()
        assert broker.stop() == 0
        ns.stop()
