"""Bad input on both ends of a remoting connection: it costs only that connection, is logged and
reported to the listener, and everyone else keeps being served."""
from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import pytest

from fastmq._ext.codec import FrameDecoder, RemotingCommand, encode_frame
from fastmq.errors import RemotingConnectError, RemotingSendRequestError
from fastmq.protocol.command import create_request, response_for
from fastmq.remoting import Connection, ConnectionListener, RemotingClient, RemotingServer, RequestProcessor
from tests.support import addr_of

ECHO, WEIRD, UNENCODABLE = 101, 102, 103


class Echo(RequestProcessor):
    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_for(request, 0, ext_fields={"v": (request.ext_fields or {}).get("v", "")})


class Weird(RequestProcessor):
    def process_request(self, conn: Connection, request: RemotingCommand) -> Any:
        return {"not": "a command"}


class Unencodable(RequestProcessor):
    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        resp = response_for(request, 0)
        resp.ext_fields = {"n": 5}  # type: ignore[dict-item]  # not str -> str: the codec refuses it
        return resp


class Recorder(ConnectionListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_connect(self, conn: Connection) -> None:
        self.events.append(("connect", conn.remote_addr))

    def on_close(self, conn: Connection) -> None:
        self.events.append(("close", conn.remote_addr))

    def on_exception(self, conn: Connection, exc: BaseException) -> None:
        self.events.append(("exception", exc))

    def exceptions(self) -> list[BaseException]:
        return [e[1] for e in self.events if e[0] == "exception"]


class Raising(ConnectionListener):
    """A listener whose every hook fails: the server must not care."""

    def on_connect(self, conn: Connection) -> None:
        raise RuntimeError("listener bug")

    on_close = on_idle = on_connect  # type: ignore[assignment]

    def on_exception(self, conn: Connection, exc: BaseException) -> None:
        raise RuntimeError("listener bug")


async def wait_for_condition(cond, rounds: int = 200, delay: float = 0.02) -> bool:
    for _ in range(rounds):
        if cond():
            return True
        await asyncio.sleep(delay)
    return cond()


def _make_server(listener: ConnectionListener | None = None, **kw: Any) -> RemotingServer:
    srv = RemotingServer("127.0.0.1", 0, listener=listener, **kw)
    srv.register_processor(ECHO, Echo())
    srv.register_processor(WEIRD, Weird())
    srv.register_processor(UNENCODABLE, Unencodable())
    return srv


@pytest.fixture
async def server():
    srv = _make_server(Recorder())
    await srv.start()
    try:
        yield srv
    finally:
        await srv.close()


def frame(total: int, mark: int, payload: bytes = b"") -> bytes:
    return struct.pack(">II", total, mark) + payload


def json_frame(header: object, *, raw: bytes | None = None) -> bytes:
    h = raw if raw is not None else json.dumps(header).encode()
    return frame(4 + len(h), len(h), h)


async def send_and_expect_hangup(port: int, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection; return what came back before the server closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)  # b"" then EOF: the server hung up
    except ConnectionResetError:
        return b""  # aborted while we were still writing: a hang-up too
    finally:
        writer.transport.abort()
        await asyncio.sleep(0)


GARBAGE = {
    "http": b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n",
    "oversized_length": frame(64 * 1024 * 1024, 0),
    "max_uint32_length": frame(0xFFFFFFFF, 0),
    "header_past_frame": frame(10, 0x100, b"{}" + b"\0" * 4),
    "unknown_serialize_type": frame(8, 0x05000004, b"{}{}"),
    "invalid_json": json_frame(None, raw=b"{]"),
    "invalid_utf8": json_frame(None, raw=b"\xff\xfe"),
    "json_array_header": json_frame([1, 2, 3]),
    "code_not_a_number": json_frame({"code": "abc", "flag": 0, "opaque": 1}),
    "ext_fields_not_object": json_frame({"code": 1, "extFields": [1], "flag": 0, "opaque": 1}),
    "binary_header_truncated": frame(4 + 3, (1 << 24) | 3, b"\0\0\0"),
}


@pytest.mark.parametrize("garbage", list(GARBAGE.values()), ids=list(GARBAGE))
async def test_garbage_closes_only_that_connection(server: RemotingServer, client: RemotingClient,
                                                   garbage: bytes, caplog: pytest.LogCaptureFixture) -> None:
    first = await client.invoke(addr_of(server), create_request(ECHO, {"v": "before"}), 5)
    assert first.ext_fields["v"] == "before"
    assert await send_and_expect_hangup(server.port, garbage) == b""
    resp = await client.invoke(addr_of(server), create_request(ECHO, {"v": "after"}), 5)
    assert resp.ext_fields["v"] == "after"
    rec: Recorder = server.listener  # type: ignore[assignment]
    assert await wait_for_condition(lambda: len(rec.exceptions()) == 1)
    (exc,) = rec.exceptions()
    assert type(exc).__name__ == "FrameError" and str(exc)
    assert any("closing" in r.getMessage() for r in caplog.records)  # the reason is logged
    assert len(server.connections) == 1  # only the good client is left


async def test_oversized_frame_for_a_small_limit(client: RemotingClient) -> None:
    srv = _make_server(Recorder(), max_frame_size=4096)
    await srv.start()
    try:
        ok = await client.invoke(addr_of(srv), create_request(ECHO, body=b"s" * 100), 5)
        assert ok.code == 0
        # The client's own over-limit request costs it the connection, and its pending request fails.
        with pytest.raises(RemotingSendRequestError):
            await client.invoke(addr_of(srv), create_request(ECHO, body=b"L" * 8192), 5)
        again = await client.invoke(addr_of(srv), create_request(ECHO, {"v": "small"}), 5)
        assert again.ext_fields["v"] == "small"
    finally:
        await srv.close()


async def test_many_garbage_peers_at_once(server: RemotingServer, client: RemotingClient) -> None:
    results = await asyncio.gather(*(send_and_expect_hangup(server.port, GARBAGE["http"]) for _ in range(20)),
                                   client.invoke(addr_of(server), create_request(ECHO, {"v": "x"}), 5))
    assert results[:-1] == [b""] * 20
    assert results[-1].ext_fields["v"] == "x"
    rec: Recorder = server.listener  # type: ignore[assignment]
    assert await wait_for_condition(lambda: len(rec.exceptions()) == 20)


async def test_partial_frame_then_eof_is_not_an_error(server: RemotingServer, client: RemotingClient) -> None:
    data = encode_frame(create_request(ECHO, body=b"p" * 1000))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(data[: len(data) // 2])
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    rec: Recorder = server.listener  # type: ignore[assignment]
    assert await wait_for_condition(lambda: any(e[0] == "close" for e in rec.events))
    assert rec.exceptions() == []
    assert (await client.invoke(addr_of(server), create_request(ECHO), 5)).code == 0


async def test_stray_response_is_ignored(server: RemotingServer) -> None:
    """A response frame whose opaque matches nothing is dropped; the connection keeps serving."""
    stray = response_for(create_request(ECHO), 0)
    stray.opaque = 987654
    req = create_request(ECHO, {"v": "real"})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(encode_frame(stray) + encode_frame(req))
        await writer.drain()
        dec = FrameDecoder()
        got: list[RemotingCommand] = []
        for _ in range(50):
            if got:
                break
            got.extend(dec.feed(await asyncio.wait_for(reader.read(65536), 5)))
        assert [c.opaque for c in got] == [req.opaque]
    finally:
        writer.close()
        await writer.wait_closed()


async def test_processor_returning_non_command(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(addr_of(server), create_request(WEIRD), 5)
    assert resp.code == 1 and "dict" in resp.remark


async def test_unencodable_response_becomes_system_error(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(addr_of(server), create_request(UNENCODABLE), 5)
    assert resp.code == 1 and resp.remark
    assert (await client.invoke(addr_of(server), create_request(ECHO, {"v": "ok"}), 5)).ext_fields["v"] == "ok"


async def test_raising_listener_does_not_break_the_server(client: RemotingClient) -> None:
    srv = _make_server(Raising())
    await srv.start()
    try:
        assert await send_and_expect_hangup(srv.port, GARBAGE["http"]) == b""
        resp = await client.invoke(addr_of(srv), create_request(ECHO, {"v": "y"}), 5)
        assert resp.ext_fields["v"] == "y"
    finally:
        await srv.close()


async def test_server_sending_garbage_fails_client_requests_fast() -> None:
    """The client side frames too: a server answering garbage costs the client that connection
    (pending requests fail at once, not at their timeout) and the next request reconnects."""
    conns: list[asyncio.Transport] = []
    mode = {"garbage": True}

    class Liar(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            conns.append(transport)  # type: ignore[arg-type]
            self.t = transport
            self.dec = FrameDecoder()

        def data_received(self, data: bytes) -> None:
            for cmd in self.dec.feed(data):
                if mode["garbage"]:
                    self.t.write(b"\x7f\xff\xff\xff garbage")  # type: ignore[attr-defined]
                else:
                    self.t.write(encode_frame(response_for(cmd, 0)))  # type: ignore[attr-defined]

    loop = asyncio.get_running_loop()
    srv = await loop.create_server(Liar, "127.0.0.1", 0)
    addr = f"127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    rec = Recorder()
    c = RemotingClient(listener=rec)
    try:
        start = loop.time()
        with pytest.raises(RemotingSendRequestError):
            await c.invoke(addr, create_request(ECHO), 30)
        assert loop.time() - start < 10
        assert any(type(e).__name__ == "FrameError" for e in rec.exceptions())
        mode["garbage"] = False
        assert (await c.invoke(addr, create_request(ECHO), 5)).code == 0
    finally:
        await c.close()
        for t in conns:
            t.close()
        srv.close()
        await srv.wait_closed()


@pytest.mark.parametrize("addr", ["no-port-here", "host:", ":1234", "127.0.0.1:notaport"])
async def test_malformed_address(addr: str, client: RemotingClient) -> None:
    with pytest.raises(RemotingConnectError, match="connect to"):
        await client.invoke(addr, create_request(ECHO), 1)


async def test_unresolvable_host(client: RemotingClient) -> None:
    with pytest.raises(RemotingConnectError, match="connect to"):
        await client.invoke("no-such-host.invalid:9876", create_request(ECHO), 3)


async def test_client_closed_refuses_requests() -> None:
    c = RemotingClient()
    await c.close()
    with pytest.raises(RemotingConnectError, match="closed"):
        await c.invoke("127.0.0.1:1", create_request(ECHO), 1)
