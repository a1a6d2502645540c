"""fastmq's own TLS layer (fastmq.remoting.tls_protocol) over loopback sockets, on asyncio's loop and
on uvloop: data both ways in any size and in pieces, the handshake's bound, close_notify, EOF,
abort, a peer's garbage, and flow control both ways."""
from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
from pathlib import Path
from typing import Any, Callable, Coroutine

import pytest

from fastmq.remoting.tls import client_context, make_self_signed
from fastmq.remoting.tls_protocol import TlsTransport, open_tls_connection

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command is not installed")

try:
    import uvloop
    LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop,
                                                                  "uvloop": uvloop.new_event_loop}
except ImportError:
    LOOPS = {"asyncio": asyncio.new_event_loop}


@pytest.fixture(scope="module")
def server_ctx(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    cert, key = make_self_signed(str(tmp_path_factory.mktemp("tlsproto")), "server")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


def _run(kind: str, coro: Callable[[], Coroutine[Any, Any, None]]) -> None:
    loop = LOOPS[kind]()
    try:
        loop.run_until_complete(asyncio.wait_for(coro(), 30))
    finally:
        loop.close()


class _Buffered(asyncio.BufferedProtocol):
    """Collects what it reads into a small buffer (so it arrives in pieces); events recorded."""

    def __init__(self, size: int = 64 * 1024) -> None:
        self.transport: Any = None
        self.data = bytearray()
        self.buf = bytearray(size)
        self.events: list[str] = []
        self.lost: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        self.on_data: Callable[[], None] | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.events.append("made")

    def get_buffer(self, sizehint: int) -> Any:
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        self.data += self.buf[:nbytes]
        if self.on_data is not None:
            self.on_data()

    def eof_received(self) -> None:
        self.events.append("eof")

    def pause_writing(self) -> None:
        self.events.append("pause")

    def resume_writing(self) -> None:
        self.events.append("resume")

    def connection_lost(self, exc: Exception | None) -> None:
        self.events.append("lost")
        if not self.lost.done():
            self.lost.set_result(exc)

    async def until(self, n: int) -> None:
        while len(self.data) < n:
            await asyncio.sleep(0.001)


class _Plain(_Buffered, asyncio.Protocol):  # type: ignore[misc]
    """The same, as a plain Protocol (data_received)."""

    def data_received(self, data: bytes) -> None:
        self.data += data
        if self.on_data is not None:
            self.on_data()


async def _pair(server_ctx: ssl.SSLContext, server_app: Callable[[], _Buffered] = _Buffered,
                handshake_timeout: float = 10.0) -> tuple[Any, _Buffered, _Buffered, list[Any]]:
    """A listening TlsTransport server and a client connected to it: (server, client app,
    server app, the server side's handshake outcomes)."""
    loop = asyncio.get_running_loop()
    apps: list[_Buffered] = []
    outcomes: list[Any] = []

    def accept() -> TlsTransport:
        app = server_app()
        apps.append(app)
        waiter = loop.create_future()
        waiter.add_done_callback(lambda f: outcomes.append(f.exception()))
        return TlsTransport(loop, app, server_ctx, waiter, server_side=True, handshake_timeout=handshake_timeout)
    server = await loop.create_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, client = await open_tls_connection(_Buffered, "127.0.0.1", port, client_context(), server_hostname="127.0.0.1")
    while not apps or apps[0].transport is None:
        await asyncio.sleep(0.001)
    return server, client, apps[0], outcomes


@pytest.mark.parametrize("kind", list(LOOPS))
@pytest.mark.parametrize("plain_app", [False, True])
def test_data_both_ways_and_the_extra_info(server_ctx: ssl.SSLContext, kind: str, plain_app: bool) -> None:
    async def go() -> None:
        made = (lambda: _Plain()) if plain_app else (lambda: _Buffered(7))  # (7 bytes: records in pieces)
        server, client, app, outcomes = await _pair(server_ctx, made)
        t = client.transport
        assert outcomes == [None] and client.events == ["made"] and app.events == ["made"]
        assert t.get_extra_info("ssl_object").version() == "TLSv1.3"
        assert t.get_extra_info("peername")[1] == server.sockets[0].getsockname()[1]
        assert t.get_extra_info("sockname") == app.transport.get_extra_info("peername")
        assert t.get_extra_info("socket").fileno() >= 0 and t.get_extra_info("cipher")
        assert t.get_extra_info("peercert") == {}  # (not verified: client_context trusts any server)
        assert app.transport.get_extra_info("peercert") is None  # (no client certificate asked)
        assert t.get_extra_info("nothing", "default") == "default"
        sent = b"".join(bytes([i % 251]) * (i * 37 % 3000) for i in range(200))
        big = bytes(range(256)) * 8000  # ~2 MB: many records in one write
        t.write(sent)
        t.writelines([b"a", b"b"])
        t.write(big)
        await app.until(len(sent) + 2 + len(big))
        assert bytes(app.data) == sent + b"ab" + big
        app.transport.write(big)
        await client.until(len(big))
        assert bytes(client.data) == big
        assert not t.can_write_eof() and t.get_write_buffer_size() == 0
        t.close()
        assert t.is_closing()
        assert await client.lost is None and await app.lost is None
        assert app.events == ["made", "eof", "lost"]
        server.close()
        await server.wait_closed()
    _run(kind, go)


@pytest.mark.parametrize("kind", list(LOOPS))
def test_handshake_is_bounded(server_ctx: ssl.SSLContext, kind: str) -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        outcome = loop.create_future()
        apps = []

        def accept() -> TlsTransport:
            apps.append(_Buffered())
            return TlsTransport(loop, apps[-1], server_ctx, outcome, server_side=True, handshake_timeout=0.2)
        server = await loop.create_server(accept, "127.0.0.1", 0)
        sock = socket.create_connection(server.sockets[0].getsockname()[:2])
        sock.sendall(b"\x16\x03\x01\x00\x80" + b"\x01" * 10)  # a ClientHello's start, never finished
        with pytest.raises(ConnectionAbortedError, match="SSL handshake is taking longer"):
            await outcome
        sock.setblocking(False)
        await asyncio.sleep(0.05)
        with pytest.raises((ConnectionResetError, BlockingIOError)) as got:
            if sock.recv(100) == b"":
                raise ConnectionResetError  # closed: what matters
        assert got.type is ConnectionResetError
        assert apps[0].events == []  # the application never saw it
        sock.close()
        server.close()
        await server.wait_closed()
    _run(kind, go)


@pytest.mark.parametrize("kind", list(LOOPS))
def test_failed_handshake_is_reported_to_both_ends(server_ctx: ssl.SSLContext, kind: str) -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        outcome = loop.create_future()
        server = await loop.create_server(
            lambda: TlsTransport(loop, _Buffered(), server_ctx, outcome, server_side=True), "127.0.0.1", 0)
        strict = ssl.create_default_context()  # (does not trust the self-signed certificate)
        with pytest.raises(ssl.SSLCertVerificationError):
            await open_tls_connection(_Buffered, "127.0.0.1", server.sockets[0].getsockname()[1], strict,
                                      server_hostname="127.0.0.1")
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await outcome
        server.close()
        await server.wait_closed()
    _run(kind, go)


@pytest.mark.parametrize("kind", list(LOOPS))
def test_garbage_after_the_handshake_ends_the_connection(server_ctx: ssl.SSLContext, kind: str) -> None:
    async def go() -> None:
        server, client, app, _ = await _pair(server_ctx)
        raw = client.transport._raw  # the socket's transport, under the TLS layer
        raw.write(b"\x17\x03\x03\x00\x20" + b"\xee" * 32)  # an application-data record that does not decrypt
        exc = await app.lost
        assert isinstance(exc, ssl.SSLError)
        assert app.events == ["made", "lost"]
        await client.lost
        server.close()
        await server.wait_closed()
    _run(kind, go)


@pytest.mark.parametrize("kind", list(LOOPS))
def test_tcp_eof_without_close_notify_and_abort(server_ctx: ssl.SSLContext, kind: str) -> None:
    async def go() -> None:
        server, client, app, _ = await _pair(server_ctx)
        client.transport._raw.write_eof()  # a FIN with no close_notify before it
        assert await app.lost is None
        assert app.events == ["made", "eof", "lost"]
        await client.lost
        server2, client2, app2, _ = await _pair(server_ctx)
        client2.transport.abort()
        assert await client2.lost is None
        await app2.lost  # (an EOF or a reset: no close_notify came)
        assert "lost" in app2.events
        client2.transport.write(b"after the end")  # dropped, no error
        for s in (server, server2):
            s.close()
            await s.wait_closed()
    _run(kind, go)


@pytest.mark.parametrize("kind", list(LOOPS))
def test_flow_control_both_ways(server_ctx: ssl.SSLContext, kind: str) -> None:
    async def go() -> None:
        server, client, app, _ = await _pair(server_ctx)
        # the client stops reading: the server's writes back up and its application is told
        client.transport.pause_reading()
        assert not client.transport.is_reading()
        app.transport.set_write_buffer_limits(high=64 * 1024, low=16 * 1024)
        chunk = b"y" * 65536
        sent = 0
        while "pause" not in app.events:
            app.transport.write(chunk)
            sent += len(chunk)
            await asyncio.sleep(0.001)
        assert app.transport.get_write_buffer_size() > 0
        client.transport.resume_reading()
        await client.until(sent)
        while "resume" not in app.events:
            await asyncio.sleep(0.001)
        assert bytes(client.data) == b"y" * sent
        # the application pauses inside a read: what the BIO still holds comes after it resumes
        client.data.clear()
        client.buf = bytearray(1000)

        def pause_once() -> None:
            client.on_data = None
            client.transport.pause_reading()
        client.on_data = pause_once
        app.transport.write(b"z" * 50_000)
        while not client.data:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)
        assert len(client.data) < 50_000
        client.transport.resume_reading()
        await client.until(50_000)
        assert bytes(client.data) == b"z" * 50_000
        client.transport.close()
        await app.lost
        server.close()
        await server.wait_closed()
    _run(kind, go)


@pytest.mark.parametrize("kind", list(LOOPS))
def test_remoting_requests_over_tls(tmp_path: Path, kind: str) -> None:
    """A RemotingServer (permissive: the sniffer hands the first bytes on) and a RemotingClient,
    their Connections reading through the layer's direct path: one at a time, then many in flight
    with bodies of up to several records each, every answer matched to its request."""
    from fastmq.protocol.command import RemotingCommand, create_request
    from fastmq.remoting import RemotingClient, RemotingServer
    from fastmq.remoting.processor import RequestProcessor
    from fastmq.remoting.tls import TlsConfig

    class Echo(RequestProcessor):
        def process_request(self, conn: Any, request: Any) -> Any:
            assert conn.transport.get_extra_info("ssl_object") is not None
            return RemotingCommand(0, opaque=request.opaque, flag=1, body=request.body)

    async def go() -> None:
        cert, key = make_self_signed(str(tmp_path), "echo")
        server = RemotingServer("127.0.0.1", 0, tls=TlsConfig(server_cert_path=cert, server_key_path=key,
                                                              config_file=str(tmp_path / "absent")))
        server.register_default_processor(Echo())
        await server.start()
        client = RemotingClient(ssl=client_context())
        addr = f"127.0.0.1:{server.port}"
        try:
            for i in range(20):
                body = bytes([i]) * (i * 997)
                r = await client.invoke(addr, create_request(14, {}, body), 5)
                assert r.code == 0 and (r.body or b"") == body
            bodies = [bytes([i % 256]) * ((i * 7919) % 70_000) for i in range(300)]
            rs = await asyncio.gather(*(client.invoke(addr, create_request(14, {}, b), 10) for b in bodies))
            assert [r.body or b"" for r in rs] == bodies
            conn = client.open_connection(addr)
            assert conn is not None and conn.transport.get_extra_info("peercert") == {}
        finally:
            await client.close()
            await server.close()
    _run(kind, go)
