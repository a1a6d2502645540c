"""The ``tls.*`` keys as 4.9.8 reads them, and the first-byte sniffer's decisions (no sockets: a
stand-in transport)."""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from fastmq.errors import ConfigError
from fastmq.remoting.tls import (ReloadingContext, TlsConfig, TlsSniffer, client_context, load_tls_config,
                                 make_self_signed, split_tls_keys)


def test_defaults_are_4_9_8s(tmp_path: Path) -> None:
    cfg = load_tls_config({"tls.config.file": str(tmp_path / "absent")})
    assert (cfg.server_mode, cfg.enable, cfg.test_mode, cfg.need_client_auth) == ("permissive", False, True, "none")
    assert cfg.server_cert_path is None and cfg.handshake_timeout == 10.0


def test_config_file_under_the_c_file(tmp_path: Path) -> None:
    f = tmp_path / "tls.properties"
    f.write_text("tls.server.need.client.auth=optional\ntls.test.mode.enable=false\n"
                 "tls.server.mode=enforcing\ntls.client.authServer=true\n")
    cfg = load_tls_config({"tls.config.file": str(f), "tls.client.authServer": "false"})
    assert cfg.need_client_auth == "optional" and cfg.test_mode is False
    assert cfg.server_mode == "permissive"  # tls.server.mode is read from the -c file only
    assert cfg.client_auth_server is False  # the -c file wins


@pytest.mark.parametrize("props, needle", [
    ({"tls.server.mode": "strict"}, "must be one of"),
    ({"tls.server.need.client.auth": "always"}, "none, optional or require"),
    ({"tls.server.certPath": "/no/such.crt"}, "tls.server.certPath=/no/such.crt: no such file"),
    ({"tls.server.handshakeTimeoutSeconds": "soon"}, "expected a number of seconds"),
    ({"tls.server.handshakeTimeoutSeconds": "0"}, "must be > 0"),
])
def test_bad_values_name_the_key(tmp_path: Path, props: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_tls_config({"tls.config.file": str(tmp_path / "absent"), **props})


def test_split_keys() -> None:
    assert split_tls_keys({"tls.enable": "true", "listenPort": "1"}) == ({"tls.enable": "true"}, {"listenPort": "1"})


class _Transport:
    def __init__(self) -> None:
        self.protocol: Any = None
        self.aborted = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_protocol(self, protocol: Any) -> None:
        self.protocol = protocol

    def abort(self) -> None:
        self.aborted = True


class _App(asyncio.BufferedProtocol):
    def __init__(self) -> None:
        self.transport: Any = None
        self.data = bytearray()
        self.buf = bytearray(7)  # smaller than what is fed: the bytes arrive in pieces

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> Any:
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        self.data += self.buf[:nbytes]


@pytest.mark.parametrize("mode, first, handed", [
    ("disabled", b"\x00\x00\x00\x10plaintext-frame", True), ("disabled", b"\x16\x03\x01\x00\x05hello", False),
    ("permissive", b"\x00\x00\x00\x10plaintext-frame", True), ("enforcing", b"\x00\x00\x00\x10plaintext", False),
    ("enforcing", b"\x16\x03\x01\x00\x05hello", False),  # (no certificate: closed)
])
async def test_sniffer_decides_by_the_first_byte(mode: str, first: bytes, handed: bool) -> None:
    app, t, outcome = _App(), _Transport(), []
    s = TlsSniffer(mode, app, lambda: None, 5.0, done=lambda _s, ok: outcome.append(ok))
    s.connection_made(t)  # type: ignore[arg-type]
    s.data_received(first)
    if handed:
        assert t.protocol is app and app.transport is t and bytes(app.data) == first and outcome == [True]
    else:
        assert t.aborted and app.transport is None
        s.connection_lost(None)
        assert outcome == [False]


async def test_sniffer_closes_a_silent_peer() -> None:
    app, t, outcome = _App(), _Transport(), []
    s = TlsSniffer("permissive", app, lambda: None, 0.05, done=lambda _s, ok: outcome.append(ok))
    s.connection_made(t)  # type: ignore[arg-type]
    await asyncio.sleep(0.2)
    assert t.aborted
    s.connection_lost(None)
    assert outcome == [False]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command is not installed")
def test_reloading_context_follows_its_files(tmp_path: Path) -> None:
    """A slave's HA client context: remade when its certificate files change, the last good one
    kept (with an error logged) when a changed file does not load."""
    cfg = TlsConfig()
    cfg.client_cert_path, cfg.client_key_path = make_self_signed(str(tmp_path), "one")
    made = ReloadingContext(lambda: client_context(cfg), lambda: (cfg.client_cert_path or "", cfg.client_key_path or ""))
    first = made()
    assert first is not None and made() is first  # unchanged files: the same context
    os.utime(cfg.client_cert_path, (1, 1))
    second = made()
    assert second is not None and second is not first
    Path(cfg.client_key_path).write_text("not a key")
    assert made() is second
    os.remove(cfg.client_key_path)
    assert made() is second


def test_reloading_context_first_load_errors_raise(tmp_path: Path) -> None:
    made = ReloadingContext(lambda: None, lambda: (str(tmp_path / "absent.crt"),))
    with pytest.raises(ConfigError, match="absent.crt"):
        made()
