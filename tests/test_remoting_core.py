"""Remoting server and client on loopback: dispatch, errors, timeouts, failover, idle, backpressure."""
from __future__ import annotations

import asyncio
import socket
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from fastmq._ext.codec import FrameDecoder, encode_frame
from fastmq.errors import (RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError,
                           RemotingTooMuchRequestError)
from fastmq.protocol.command import create_request, response_for
from fastmq.remoting import Connection, ConnectionListener, RemotingClient, RemotingServer, RequestProcessor
from tests.support import free_port


class Echo(RequestProcessor):
    def process_request(self, conn, request):
        return response_for(request, 0, ext_fields={"echo": (request.ext_fields or {}).get("v", "")},
                            body=request.body)


class Boom(RequestProcessor):
    def process_request(self, conn, request):
        raise ValueError("bad things")


class Busy(RequestProcessor):
    def reject_request(self) -> bool:
        return True

    def process_request(self, conn, request):  # pragma: no cover - never called
        raise AssertionError


class Slow(RequestProcessor):
    async def process_request(self, conn, request):
        await asyncio.sleep(float(request.ext_fields["sleep"]))
        return response_for(request, 0)


class Recorder(ConnectionListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_connect(self, conn):
        self.events.append(("connect", conn.remote_addr))

    def on_close(self, conn):
        self.events.append(("close", conn.remote_addr))

    def on_idle(self, conn):
        self.events.append(("idle", conn.remote_addr))

    def on_exception(self, conn, exc):
        self.events.append(("exception", type(exc).__name__))


@pytest.fixture
async def server():
    listener = Recorder()
    srv = RemotingServer("127.0.0.1", 0, listener=listener, idle_timeout=120)
    srv.register_processor(1, Echo())
    srv.register_processor(2, Boom())
    srv.register_processor(3, Busy())
    srv.register_processor(4, Slow())
    pool = ThreadPoolExecutor(2)
    srv.register_processor(5, Echo(), executor=pool)
    await srv.start()
    srv.recorder = listener
    try:
        yield srv
    finally:
        await srv.close()
        pool.shutdown(wait=True)


@pytest.fixture
async def client():
    c = RemotingClient(connect_timeout=2)
    try:
        yield c
    finally:
        await c.close()


def _addr(srv: RemotingServer) -> str:
    return f"127.0.0.1:{srv.port}"


async def test_round_trip_and_opaque_matching(server, client) -> None:
    reqs = [create_request(1 if i % 2 else 5, {"v": str(i)}, body=bytes([i % 256]) * i) for i in range(200)]
    resps = await asyncio.gather(*(client.invoke(_addr(server), r, 5) for r in reqs))
    for req, resp in zip(reqs, resps):
        assert resp.opaque == req.opaque and resp.is_response
        assert resp.ext_fields["echo"] == req.ext_fields["v"] and (resp.body or b"") == req.body
    assert len(client._conns) == 1  # one connection per address, reused


async def test_binary_request_gets_binary_response(server, client) -> None:
    resp = await client.invoke(_addr(server), create_request(1, {"v": "x"}, serialize_type=1), 5)
    assert resp.serialize_type == 1 and resp.ext_fields == {"echo": "x"}


async def test_error_codes(server, client) -> None:
    a = _addr(server)
    unknown = await client.invoke(a, create_request(999), 5)
    assert unknown.code == 3 and "999" in unknown.remark
    boom = await client.invoke(a, create_request(2), 5)
    assert boom.code == 1 and "bad things" in boom.remark
    busy = await client.invoke(a, create_request(3), 5)
    assert busy.code == 2 and "system busy" in busy.remark
    ok = await client.invoke(a, create_request(1, {"v": "still fine"}), 5)  # same connection survived
    assert ok.code == 0


async def test_oneway_gets_no_response(server, client) -> None:
    await client.invoke_oneway(_addr(server), create_request(1, {"v": "a"}), 5)
    await client.invoke_oneway(_addr(server), create_request(2), 5)  # even a failing one
    resp = await client.invoke(_addr(server), create_request(1, {"v": "b"}), 5)
    assert resp.ext_fields["echo"] == "b"
    conn = client._conns[_addr(server)]
    assert conn.pending == {}


async def test_timeout_never_leaks(server, client) -> None:
    with pytest.raises(RemotingTimeoutError, match=r"wait response on the channel .* timeout, 200\(ms\)"):
        await client.invoke(_addr(server), create_request(4, {"sleep": "1"}), 0.2)
    assert client._conns[_addr(server)].pending == {}


async def test_async_callback_and_permits(server) -> None:
    c = RemotingClient(max_async=1, max_oneway=1)
    try:
        got = []
        slow = asyncio.ensure_future(c.invoke_async(_addr(server), create_request(4, {"sleep": "0.5"}), 5,
                                                    callback=got.append))
        await asyncio.sleep(0.1)
        with pytest.raises(RemotingTooMuchRequestError):
            await c.invoke_async(_addr(server), create_request(1), 0.1)
        resp = await slow
        assert got == [resp]
    finally:
        await c.close()


async def test_connect_error_and_namesrv_failover(server) -> None:
    dead = f"127.0.0.1:{free_port()}"
    c = RemotingClient(namesrv_addrs=[dead, _addr(server)], connect_timeout=1)
    try:
        with pytest.raises(RemotingConnectError, match="connect to"):
            await c.invoke(dead, create_request(1), 2)
        resp = await c.invoke_namesrv(create_request(1, {"v": "ns"}), 5)
        assert resp.ext_fields["echo"] == "ns"
        assert c._namesrv_chosen == _addr(server)
        c.set_namesrv_addrs([])
        with pytest.raises(RemotingConnectError, match="No name server address"):
            await c.invoke_namesrv(create_request(1), 1)
    finally:
        await c.close()


async def test_server_pushes_request_to_client(server) -> None:
    class Notified(RequestProcessor):
        def __init__(self) -> None:
            self.seen: list[int] = []

        def process_request(self, conn, request):
            self.seen.append(request.code)
            return response_for(request, 0, remark="got it")

    proc = Notified()
    c = RemotingClient(processor=proc)
    try:
        await c.invoke(_addr(server), create_request(1), 5)
        (srv_conn,) = server.connections
        resp = await srv_conn.invoke(create_request(40, {"consumerGroup": "G"}), 5)
        assert resp.remark == "got it" and proc.seen == [40]
        srv_conn.send_oneway(create_request(40, {"consumerGroup": "G"}))
        for _ in range(100):
            if len(proc.seen) == 2:
                break
            await asyncio.sleep(0.01)
        assert proc.seen == [40, 40]
    finally:
        await c.close()


async def test_connection_close_fails_pending(server, client) -> None:
    fut = asyncio.ensure_future(client.invoke(_addr(server), create_request(4, {"sleep": "5"}), 10))
    await asyncio.sleep(0.2)
    for conn in list(server.connections):
        conn.abort()
    with pytest.raises(RemotingSendRequestError):
        await fut


async def test_idle_connection_closed() -> None:
    rec = Recorder()
    srv = RemotingServer("127.0.0.1", 0, listener=rec, idle_timeout=0.3)
    srv.register_processor(1, Echo())
    await srv.start()
    c = RemotingClient(idle_timeout=0)
    try:
        await c.invoke(f"127.0.0.1:{srv.port}", create_request(1), 5)
        for _ in range(100):
            if ("idle", rec.events[0][1]) in rec.events and any(e[0] == "close" for e in rec.events):
                break
            await asyncio.sleep(0.05)
        kinds = [e[0] for e in rec.events]
        assert kinds[:1] == ["connect"] and "idle" in kinds and "close" in kinds
    finally:
        await c.close()
        await srv.close()


def _raw_frame(total: int, mark: int, payload: bytes = b"") -> bytes:
    return struct.pack(">II", total, mark) + payload


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",                       # not remoting at all: huge length word
    _raw_frame(64 * 1024 * 1024, 0),                             # over the 16 MiB default
    _raw_frame(10, 0x00000100, b"{}" + b"\0" * 4),              # header length past the frame
    _raw_frame(8, 0x05000004, b"{}{}"),                          # unknown serialize type
    _raw_frame(6, 2, b"{]"),                                     # invalid JSON
    _raw_frame(6, 2, b"\xff\xfe"),                               # invalid UTF-8
])
async def test_garbage_closes_only_that_connection(server, client, garbage: bytes) -> None:
    await client.invoke(_addr(server), create_request(1), 5)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(garbage)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)  # EOF: the server hung up on us
    assert data == b""
    writer.close()
    resp = await client.invoke(_addr(server), create_request(1, {"v": "ok"}), 5)
    assert resp.ext_fields["echo"] == "ok"
    assert ("exception", "FrameError") in server.recorder.events


async def test_peer_that_never_reads_is_bounded(server, client) -> None:
    """A client that floods requests and never reads: the server stops reading it."""
    big = encode_frame(create_request(1, {"v": "x"}, body=b"z" * 16384))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.setblocking(False)
    sent = 0
    pending = memoryview(big * 16)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    stalled_rounds = 0
    while loop.time() < deadline and sent < 400 * 1024 * 1024:
        try:
            n = sock.send(pending)  # may be partial: keep the rest, the stream must stay framed
            sent += n
            pending = pending[n:] if n < len(pending) else memoryview(big * 16)
            stalled_rounds = 0
        except BlockingIOError:
            stalled_rounds += 1
            if stalled_rounds > 20:
                break  # the server stopped reading us: our send buffer is full
            await asyncio.sleep(0.05)
    try:
        (conn,) = [c for c in server.connections if c.remote_addr == "127.0.0.1:%d" % sock.getsockname()[1]]
        assert conn.reading_paused
        assert conn.transport.get_write_buffer_size() < 64 * 1024 * 1024
        assert sent < 400 * 1024 * 1024
        resp = await client.invoke(_addr(server), create_request(1, {"v": "others fine"}), 5)
        assert resp.ext_fields["echo"] == "others fine"
    finally:
        sock.close()


def test_frame_decoder_is_the_codec_one() -> None:
    # The remoting layer must use the selected twin, not a private copy.
    from fastmq.remoting import connection
    assert connection.FrameDecoder is FrameDecoder
