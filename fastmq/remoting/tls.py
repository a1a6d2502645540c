"""TLS on remoting connections, as RocketMQ 4.9.8 configures it (TlsSystemConfig, TlsHelper).

Servers run in one of three modes (``tls.server.mode``): ``disabled`` takes plaintext only,
``enforcing`` takes TLS only, ``permissive`` (4.9.8's default) takes both. Every accepted
connection starts with :class:`TlsSniffer`, which looks at the first byte the peer sends: 0x16
opens a TLS handshake record. The sniffed bytes are then handed on, never dropped: asyncio's
``start_tls`` discards what the old protocol had already read (python/cpython#142352), so for TLS
the sniffer puts fastmq's own TLS layer (:class:`fastmq.remoting.tls_protocol.TlsTransport`) over
the same transport and feeds it the bytes it read. That works on asyncio's loop and on uvloop
alike, since it only uses the transport interface. (asyncio's ``sslproto.SSLProtocol``, and
uvloop's compiled copy of it, did this job before: per request they cost several times what
OpenSSL's own work on the record does; see that module.)

The keys are 4.9.8's, read from the ``-c`` properties file and from the file ``tls.config.file``
names (``tls.server.mode``, ``tls.enable`` and ``tls.config.file`` only from the ``-c`` file, as
4.9.8 reads those from system properties only).
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..common.properties import load_properties
from ..errors import ConfigError
from .tls_protocol import TlsTransport

__all__ = ["TlsConfig", "TlsSniffer", "TLS_MODES", "load_tls_config", "load_tls_file", "make_self_signed", "split_tls_keys", "client_context",
           "TLS_RECORD_HANDSHAKE", "DEFAULT_HANDSHAKE_TIMEOUT", "ReloadingContext", "switching_server_context"]

log = logging.getLogger("fastmq.remoting")

TLS_MODES = ("disabled", "permissive", "enforcing")
#: The first byte of a TLS record carrying a handshake (a ClientHello opens with it).
TLS_RECORD_HANDSHAKE = 0x16
#: Seconds a TLS connection may take to finish its handshake (Netty's
#: SslHandler default is 10 s).
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
#: 4.9.8's default ``tls.config.file``.
DEFAULT_TLS_CONFIG_FILE = "/etc/rocketmq/tls.properties"

# key -> TlsConfig field; the first three are read from the -c file only
_KEYS = {
    "tls.server.mode": "server_mode", "tls.enable": "enable", "tls.config.file": "config_file",
    "tls.test.mode.enable": "test_mode",
    "tls.server.need.client.auth": "need_client_auth",
    "tls.server.keyPath": "server_key_path", "tls.server.keyPassword": "server_key_password",
    "tls.server.certPath": "server_cert_path", "tls.server.authClient": "server_auth_client",
    "tls.server.trustCertPath": "server_trust_cert_path",
    "tls.client.keyPath": "client_key_path", "tls.client.keyPassword": "client_key_password",
    "tls.client.certPath": "client_cert_path", "tls.client.authServer": "client_auth_server",
    "tls.client.trustCertPath": "client_trust_cert_path",
    "tls.server.handshakeTimeoutSeconds": "handshake_timeout",  # fastmq's own
}
_MAIN_ONLY = frozenset({"tls.server.mode", "tls.enable", "tls.config.file"})
_BOOLS = frozenset({"enable", "test_mode", "server_auth_client", "client_auth_server"})


@dataclass
class TlsConfig:
    """4.9.8's ``tls.*`` keys (defaults as in TlsSystemConfig)."""

    server_mode: str = "permissive"
    enable: bool = False
    config_file: str = DEFAULT_TLS_CONFIG_FILE
    #: with no certificate configured, a self-signed one is made (on the first TLS hello) and
    #: clients trust any server certificate
    test_mode: bool = True
    need_client_auth: str = "none"
    server_key_path: str | None = None
    server_key_password: str | None = None
    server_cert_path: str | None = None
    server_auth_client: bool = False
    server_trust_cert_path: str | None = None
    client_key_path: str | None = None
    client_key_password: str | None = None
    client_cert_path: str | None = None
    client_auth_server: bool = False
    client_trust_cert_path: str | None = None
    #: seconds a TLS connection may take to finish its handshake
    #: (fastmq's own key, ``tls.server.handshakeTimeoutSeconds``; Netty's SslHandler takes 10 s)
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT

    def validate(self) -> None:
        """Raise ConfigError for a mode or client-auth value 4.9.8 does not know."""
        if self.server_mode not in TLS_MODES:
            raise ConfigError(f"tls.server.mode={self.server_mode}: must be one of {', '.join(TLS_MODES)}")
        if self.need_client_auth not in ("none", "optional", "require"):
            raise ConfigError(f"tls.server.need.client.auth={self.need_client_auth}: must be none, optional "
                              "or require")
        for key in ("server_cert_path", "server_key_path", "server_trust_cert_path", "client_cert_path",
                    "client_key_path", "client_trust_cert_path"):
            path = getattr(self, key)
            if path and not os.path.isfile(path):
                raise ConfigError(f"tls.{key.replace('_', '.', 1).split('.')[0]}.{_java(key)}={path}: no such file")

    def server_context(self) -> ssl.SSLContext | None:
        """The server's SSLContext: from the certificate files, else self-signed in test mode,
        else None (TLS hellos are then closed). Raises ConfigError for unreadable files."""
        if self.server_cert_path and self.server_key_path:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            try:
                ctx.load_cert_chain(self.server_cert_path, self.server_key_path, self.server_key_password)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"tls.server.certPath/keyPath: cannot load {self.server_cert_path}: {exc}") from exc
        elif self.test_mode:
            made = _self_signed_context()
            if made is None:
                return None
            ctx = made
        else:
            return None
        if self.need_client_auth != "none":
            ctx.verify_mode = ssl.CERT_REQUIRED if self.need_client_auth == "require" else ssl.CERT_OPTIONAL
            if self.server_trust_cert_path:
                ctx.load_verify_locations(self.server_trust_cert_path)
            else:
                ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return ctx


def _java(field: str) -> str:
    # server_cert_path -> certPath (only for error texts)
    parts = field.split("_")[1:]
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


def split_tls_keys(props: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(tls keys, the rest)`` of one properties file."""
    tls = {k: v for k, v in props.items() if k.startswith("tls.")}
    return tls, {k: v for k, v in props.items() if k not in tls}


def _bind(cfg: TlsConfig, props: Mapping[str, str], source: str, main: bool) -> None:
    for key, raw in props.items():
        name = _KEYS.get(key)
        if name is None or (not main and key in _MAIN_ONLY):
            log.warning("%s: unknown TLS key ignored: %s", source, key)
            continue
        value = raw.strip()
        if name in _BOOLS:
            setattr(cfg, name, value.lower() == "true")
        elif name == "handshake_timeout":
            try:
                cfg.handshake_timeout = float(value)
            except ValueError:
                raise ConfigError(f"{key}={value!r}: expected a number of seconds") from None
            if not cfg.handshake_timeout > 0:
                raise ConfigError(f"{key}={value}: must be > 0")
        else:
            setattr(cfg, name, value or None if name.endswith(("_path", "_password")) else value)


def load_tls_config(props: Mapping[str, str], source: str = "config") -> TlsConfig:
    """The TLS keys of a ``-c`` file, overlaid on those of its ``tls.config.file`` (when that file
    exists: 4.9.8 ignores a missing one). Raises ConfigError."""
    cfg = TlsConfig()
    main = {k: v for k, v in props.items() if k.startswith("tls.")}
    _bind(cfg, {k: v for k, v in main.items() if k in _MAIN_ONLY}, source, True)
    if os.path.isfile(cfg.config_file):
        try:
            _bind(cfg, load_properties(cfg.config_file), cfg.config_file, False)
        except OSError as exc:
            raise ConfigError(f"tls.config.file={cfg.config_file}: {exc}") from exc
    _bind(cfg, {k: v for k, v in main.items() if k not in _MAIN_ONLY}, source, True)
    cfg.server_mode = cfg.server_mode.lower()
    cfg.need_client_auth = cfg.need_client_auth.lower()
    cfg.validate()
    return cfg


def load_tls_file(path: str | None) -> TlsConfig:
    """The TLS keys of the ``-c`` properties file at ``path`` (None: the defaults, with
    ``tls.config.file`` still read). Raises ConfigError."""
    return load_tls_config(load_properties(path) if path else {}, path or "config")


def client_context(cfg: TlsConfig | None = None) -> ssl.SSLContext:
    """The client's SSLContext: trusts any server in test mode or unless ``tls.client.authServer``
    (as 4.9.8's client does), else verifies against ``tls.client.trustCertPath`` or the system
    store; presents ``tls.client.certPath`` when set."""
    cfg = cfg or TlsConfig()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if cfg.client_auth_server and not cfg.test_mode:
        if cfg.client_trust_cert_path:
            ctx.load_verify_locations(cfg.client_trust_cert_path)
        else:
            ctx.load_default_certs()
        ctx.check_hostname = False  # 4.9.8 checks the chain, not the name (brokers are reached by IP)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.client_cert_path and cfg.client_key_path:
        ctx.load_cert_chain(cfg.client_cert_path, cfg.client_key_path, cfg.client_key_password)
    return ctx


class ReloadingContext:
    """An SSLContext remade when one of its files changes, for the connections made after.

    ``make`` builds the context (raising ConfigError, OSError or ssl.SSLError); ``files`` says
    which files it reads (none: made once). Calling the object returns the current context; a
    changed file that fails to load keeps the last good one, with an error in the log (the first
    load's error is raised).
    """

    def __init__(self, make: Callable[[], ssl.SSLContext | None], files: Callable[[], tuple[str, ...]],
                 what: str = "TLS certificate") -> None:
        self.make = make
        self.files = files
        self.what = what
        self.context: ssl.SSLContext | None = None
        self._stamp: tuple[float, ...] | None = None

    def __call__(self) -> ssl.SSLContext | None:
        files = self.files()
        try:
            stamp = tuple(os.stat(f).st_mtime for f in files)
        except OSError as exc:
            if self._stamp is None:
                raise ConfigError(f"{self.what}: {exc}") from exc
            log.error("%s files: %s; keeping the loaded certificate", self.what, exc)
            return self.context
        if stamp != self._stamp:
            try:
                self.context = self.make()
                if self._stamp is not None:
                    log.info("%s reloaded from %s", self.what, ", ".join(files))
            except (ConfigError, OSError, ssl.SSLError) as exc:
                if self._stamp is None:
                    raise ConfigError(f"{self.what}: {exc}") if not isinstance(exc, ConfigError) else exc
                log.error("%s: %s; keeping the loaded certificate", self.what, exc)
            self._stamp = stamp
        return self.context


def switching_server_context(current: Callable[[], ssl.SSLContext | None]) -> ssl.SSLContext | None:
    """A server SSLContext for a listener that takes one context for good (``start_server``'s
    ``ssl``): each handshake switches to what ``current`` returns then (through the SNI callback,
    which OpenSSL calls on every ClientHello, with or without a server name), so a rotated
    certificate serves new connections without a restart. None when ``current`` has none."""
    first = current()
    if first is None:
        return None
    base = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # (its own object: the callback is set on it only)
    base.verify_mode = first.verify_mode
    made = [first]

    def pick(sock: ssl.SSLObject | ssl.SSLSocket, name: str | None, ctx: ssl.SSLContext) -> None:
        try:
            now = current() or made[0]
        except ConfigError as exc:  # (only on a first load, which ``first`` already did)
            log.error("%s", exc)
            now = made[0]
        made[0] = now
        sock.context = now
    base.sni_callback = pick
    return base


_SELF_SIGNED: list[ssl.SSLContext | None] = []


def make_self_signed(directory: str, name: str = "fastmq") -> tuple[str, str]:
    """Write a self-signed certificate and key (PEM) into ``directory`` with the ``openssl``
    command; returns ``(cert path, key path)``. Raises OSError when openssl is missing or fails."""
    exe = shutil.which("openssl")
    if exe is None:
        raise OSError("the openssl command is not installed")
    cert, key = os.path.join(directory, f"{name}.crt"), os.path.join(directory, f"{name}.key")
    subprocess.run([exe, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "3650", "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def _self_signed_context() -> ssl.SSLContext | None:
    # Made once per process, when first needed: plaintext-only servers never pay for it.
    if not _SELF_SIGNED:
        ctx: ssl.SSLContext | None = None
        try:
            with tempfile.TemporaryDirectory(prefix="fastmq-tls-") as d:
                cert, key = make_self_signed(d)
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.load_cert_chain(cert, key)
            log.warning("TLS test mode: serving a self-signed certificate (set tls.server.certPath and "
                        "tls.server.keyPath, or tls.test.mode.enable=false)")
        except (OSError, subprocess.SubprocessError, ssl.SSLError) as exc:
            log.error("TLS test mode: cannot make a self-signed certificate (%s); TLS connections are closed", exc)
        _SELF_SIGNED.append(ctx)
    return _SELF_SIGNED[0]


def _feed(proto: asyncio.BufferedProtocol, data: bytes) -> None:
    view = memoryview(data)
    while view:
        buf = memoryview(proto.get_buffer(len(view)))
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        proto.buffer_updated(n)
        view = view[n:]


class TlsSniffer(asyncio.Protocol):
    """The first protocol of every accepted connection: reads the first bytes, decides plaintext
    or TLS by the mode, and hands the connection and those bytes to ``app``, the remoting
    protocol made for it at accept.

    ``context`` returns the server's SSLContext (None: TLS hellos are closed). A peer that does
    not finish its TLS handshake within ``timeout`` seconds is closed, and one that sends nothing
    within ``silence`` seconds (the server's idle timeout; default ``timeout``; 0: no limit). ``done`` is
    called once, with this sniffer and whether ``app`` got the connection (False: closed first,
    refused, or a failed handshake; ``app`` never saw it).
    """

    def __init__(self, mode: str, app: asyncio.BaseProtocol, context: Callable[[], ssl.SSLContext | None],
                 timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
                 done: Callable[["TlsSniffer", bool], None] | None = None, silence: float | None = None) -> None:
        self.silence = timeout if silence is None else silence
        self.mode = mode
        self.app = app
        self.context = context
        self.timeout = timeout
        self.done = done
        self.transport: Any = None
        self._timer: asyncio.TimerHandle | None = None
        self._handed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        if self.silence > 0:
            self._timer = asyncio.get_running_loop().call_later(self.silence, self._expire)

    def abort(self) -> None:
        """Close the connection now (the server is closing), whatever phase it is in."""
        if self.transport is not None:
            self.transport.abort()

    def _finish(self, ok: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        done, self.done = self.done, None
        if done is not None:
            done(self, ok)

    def _peer(self) -> Any:
        return self.transport.get_extra_info("peername")

    def _expire(self) -> None:
        self._timer = None
        log.info("closing %s: nothing sent within %g s", self._peer(), self.silence)
        self.transport.abort()

    def _refuse(self, why: str) -> None:
        log.warning("closing connection from %s: %s (tls.server.mode=%s)", self._peer(), why, self.mode)
        self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        t = self.transport
        if data[0] == TLS_RECORD_HANDSHAKE:
            if self.mode == "disabled":
                return self._refuse("a TLS hello to a plaintext-only server")
            ctx = self.context()
            if ctx is None:
                return self._refuse("a TLS hello and no certificate")
            loop = asyncio.get_running_loop()
            # the TLS layer built here rather than by start_tls so that the bytes already read
            # reach it; the waiter says how the handshake ended
            waiter = loop.create_future()
            tls = TlsTransport(loop, self.app, ctx, waiter, server_side=True, handshake_timeout=self.timeout)
            waiter.add_done_callback(self._handshake_over)
            self._handed = True
            t.set_protocol(tls)
            tls.connection_made(t)
            tls.feed(data)
            return None
        if self.mode == "enforcing":
            return self._refuse("plaintext to a TLS-only server")
        self._handed = True
        app = self.app
        t.set_protocol(app)
        app.connection_made(t)
        self._finish(True)
        if isinstance(app, asyncio.BufferedProtocol):
            _feed(app, data)
        else:
            app.data_received(data)  # type: ignore[attr-defined]
        return None

    def _handshake_over(self, fut: "asyncio.Future[None]") -> None:
        exc = fut.exception() if not fut.cancelled() else None
        # (a peer gone mid-handshake may end it with no exception: the app then never connected)
        ok = exc is None and getattr(self.app, "transport", None) is not None
        if not ok:
            log.warning("closing connection from %s: TLS handshake failed (%s)", self._peer(),
                        exc or "closed by the peer")
        self._finish(ok)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._handed:
            self._finish(False)
