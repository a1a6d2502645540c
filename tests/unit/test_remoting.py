"""RemotingServer / RemotingClient on loopback: dispatch, opaque matching, push, timeouts, permits,
NameServer failover, idle close, listener events, batched writes and read pausing under backpressure.

Every server listens on 127.0.0.1 port 0; every loop is bounded in rounds and time.
"""
from __future__ import annotations

import asyncio
import random
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fastmq._ext.codec import FrameDecoder, RemotingCommand, encode_frame, encode_frames
from fastmq.errors import (RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError,
                           RemotingTooMuchRequestError)
from fastmq.protocol.command import create_request, create_response, response_for
from fastmq.remoting import Connection, ConnectionListener, RemotingClient, RemotingServer, RequestProcessor
from fastmq.remoting.loop import new_event_loop, run
from fastmq.testing import free_port
from tests.support import addr_of

ECHO, BOOM, BUSY, SLOW, POOLED, BARE, SILENT = 101, 102, 103, 104, 105, 106, 107


class Echo(RequestProcessor):
    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_for(request, 0, ext_fields={"v": (request.ext_fields or {}).get("v", ""),
                                                    "thread": threading.current_thread().name},
                            body=request.body)


class Boom(RequestProcessor):
    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        raise ValueError("disk on fire")


class Busy(RequestProcessor):
    def reject_request(self) -> bool:
        return True

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        raise AssertionError("a rejected request must not be processed")


class Slow(RequestProcessor):
    """Async processor: sleeps ``sleep`` seconds, so answers come back out of order."""

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(float((request.ext_fields or {}).get("sleep", "0")))
        return response_for(request, 0, ext_fields={"v": (request.ext_fields or {}).get("v", "")})


class Bare(RequestProcessor):
    """Builds its answer with create_response: the server must bind it to the request."""

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return create_response(0, remark="bare")


class Silent(RequestProcessor):
    def process_request(self, conn: Connection, request: RemotingCommand) -> None:
        return None


class Recorder(ConnectionListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_connect(self, conn: Connection) -> None:
        self.events.append(("connect", conn.remote_addr))

    def on_close(self, conn: Connection) -> None:
        self.events.append(("close", conn.remote_addr))

    def on_idle(self, conn: Connection) -> None:
        self.events.append(("idle", conn.remote_addr))

    def on_exception(self, conn: Connection, exc: BaseException) -> None:
        self.events.append(("exception", type(exc).__name__))

    def kinds(self) -> list[str]:
        return [e[0] for e in self.events]


async def wait_for_condition(cond, rounds: int = 200, delay: float = 0.02) -> bool:
    for _ in range(rounds):
        if cond():
            return True
        await asyncio.sleep(delay)
    return cond()


@pytest.fixture
async def pool():
    ex = ThreadPoolExecutor(2, thread_name_prefix="remoting-test")
    try:
        yield ex
    finally:
        ex.shutdown(wait=True)


@pytest.fixture
async def server(pool):
    rec = Recorder()
    srv = RemotingServer("127.0.0.1", 0, listener=rec)
    srv.register_processor(ECHO, Echo())
    srv.register_processor(BOOM, Boom())
    srv.register_processor(BUSY, Busy())
    srv.register_processor(SLOW, Slow())
    srv.register_processor(POOLED, Echo(), executor=pool)
    srv.register_processor(BARE, Bare())
    srv.register_processor(SILENT, Silent())
    await srv.start()
    srv.rec = rec  # type: ignore[attr-defined]
    try:
        yield srv
    finally:
        await srv.close()


async def read_commands(reader: asyncio.StreamReader, n: int, timeout: float = 5) -> list[RemotingCommand]:
    """Read exactly ``n`` commands from a raw stream."""
    dec = FrameDecoder()
    out: list[RemotingCommand] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(out) < n:
        chunk = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - loop.time()))
        if not chunk:
            break
        out.extend(dec.feed(chunk))
    return out


async def close_writer(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await writer.wait_closed()
    except (ConnectionError, OSError):
        pass


# ----------------------------------------------------------------- request / response


async def test_round_trip(server: RemotingServer, client: RemotingClient) -> None:
    req = create_request(ECHO, {"v": "hello"}, body=b"payload")
    resp = await client.invoke(addr_of(server), req, 5)
    assert resp.is_response and resp.code == 0
    assert resp.opaque == req.opaque
    assert resp.ext_fields["v"] == "hello" and resp.body == b"payload"
    assert resp.ext_fields["thread"] == "MainThread"  # inline processors run on the loop


async def test_both_ends_send_small_frames_at_once(server: RemotingServer, client: RemotingClient) -> None:
    """TCP_NODELAY on the client's and the server's socket: a lone request or answer is not
    held back by Nagle's algorithm waiting for the peer's delayed ACK (tens of ms on Linux)."""
    import socket

    await client.invoke(addr_of(server), create_request(ECHO, {"v": "n"}), 5)
    ends = [*client._conns.values(), *server.connections]
    assert len(ends) == 2
    for conn in ends:
        sock = conn.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), conn


async def test_binary_serialize_type_is_mirrored(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(addr_of(server), create_request(ECHO, {"v": "b"}, serialize_type=1), 5)
    assert resp.serialize_type == 1 and resp.ext_fields["v"] == "b"


async def test_many_concurrent_requests_matched_by_opaque(server: RemotingServer, client: RemotingClient) -> None:
    rnd = random.Random(7)
    reqs = [create_request(SLOW, {"v": str(i), "sleep": f"{rnd.random() * 0.05:.3f}"}) for i in range(300)]
    resps = await asyncio.gather(*(client.invoke(addr_of(server), r, 10) for r in reqs))
    assert [r.ext_fields["v"] for r in resps] == [str(i) for i in range(300)]
    assert all(resp.opaque == req.opaque for req, resp in zip(reqs, resps))
    assert list(client._conns) == [addr_of(server)]  # one reused connection per address
    assert client._conns[addr_of(server)].pending == {}


async def test_unknown_code_not_supported(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(addr_of(server), create_request(999), 5)
    assert resp.code == 3
    assert resp.remark == " request type 999 not supported"


async def test_default_processor_takes_unknown_codes(pool) -> None:
    srv = RemotingServer("127.0.0.1", 0)
    srv.register_default_processor(Echo())
    await srv.start()
    c = RemotingClient()
    try:
        resp = await c.invoke(addr_of(srv), create_request(4321, {"v": "dflt"}), 5)
        assert resp.code == 0 and resp.ext_fields["v"] == "dflt"
    finally:
        await c.close()
        await srv.close()


async def test_processor_exception_is_system_error(server: RemotingServer, client: RemotingClient,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    resp = await client.invoke(addr_of(server), create_request(BOOM), 5)
    assert resp.code == 1 and "disk on fire" in resp.remark
    assert any("disk on fire" in (r.exc_text or "") or "failed" in r.getMessage() for r in caplog.records)
    # The connection survived the exception.
    again = await client.invoke(addr_of(server), create_request(ECHO, {"v": "alive"}), 5)
    assert again.ext_fields["v"] == "alive"
    assert "exception" not in server.rec.kinds()


async def test_reject_is_system_busy(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(addr_of(server), create_request(BUSY), 5)
    assert resp.code == 2
    assert resp.remark == "[REJECTREQUEST]system busy, start flow control for a while"


async def test_create_response_gets_bound_to_request(server: RemotingServer, client: RemotingClient) -> None:
    req = create_request(BARE, serialize_type=1)
    resp = await client.invoke(addr_of(server), req, 5)
    assert resp.opaque == req.opaque and resp.is_response and resp.remark == "bare"
    assert resp.serialize_type == 1


async def test_async_processor(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(addr_of(server), create_request(SLOW, {"v": "later", "sleep": "0.05"}), 5)
    assert resp.code == 0 and resp.ext_fields["v"] == "later"


async def test_executor_processor_runs_off_the_loop(server: RemotingServer, client: RemotingClient) -> None:
    resps = await asyncio.gather(*(client.invoke(addr_of(server), create_request(POOLED, {"v": str(i)}), 5)
                                   for i in range(20)))
    assert [r.ext_fields["v"] for r in resps] == [str(i) for i in range(20)]
    assert all(r.ext_fields["thread"].startswith("remoting-test") for r in resps)


async def test_oneway_gets_no_response(server: RemotingServer) -> None:
    """On the raw wire: oneway requests (even failing or unknown ones) produce no frame at all."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        oneways = [create_request(code) for code in (ECHO, BOOM, 999, BUSY)]
        for r in oneways:
            r.flag |= 2
        last = create_request(ECHO, {"v": "last"})
        writer.write(encode_frames([*oneways, last]))
        await writer.drain()
        (resp,) = await read_commands(reader, 1)
        assert resp.opaque == last.opaque
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.read(1), 0.2)
    finally:
        await close_writer(writer)


async def test_client_oneway(server: RemotingServer, client: RemotingClient) -> None:
    await client.invoke_oneway(addr_of(server), create_request(ECHO), 5)
    resp = await client.invoke(addr_of(server), create_request(ECHO, {"v": "after"}), 5)
    assert resp.ext_fields["v"] == "after"


async def test_processor_returning_none_sends_nothing(server: RemotingServer, client: RemotingClient) -> None:
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(addr_of(server), create_request(SILENT), 0.2)


async def test_inline_responses_of_one_read_leave_in_one_write(server: RemotingServer) -> None:
    writes: list[int] = []

    class CountingTransport:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def write(self, data: bytes) -> None:
            writes.append(len(data))
            self._inner.write(data)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        assert await wait_for_condition(lambda: len(server.connections) == 1)
        (conn,) = server.connections
        conn.transport = CountingTransport(conn.transport)  # type: ignore[assignment]
        reqs = [create_request(ECHO, {"v": str(i)}) for i in range(50)]
        writer.write(encode_frames(reqs))  # ~5 KB in one send: one read on loopback
        await writer.drain()
        resps = await read_commands(reader, 50)
        assert [r.opaque for r in resps] == [r.opaque for r in reqs]
        assert 1 <= len(writes) <= 3, writes  # one write per read, not one per response
    finally:
        await close_writer(writer)


async def test_frames_split_across_reads(server: RemotingServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        reqs = [create_request(ECHO, {"v": str(i)}, body=b"x" * i) for i in range(5)]
        data = encode_frames(reqs)
        for i in range(0, len(data), 7):  # byte dribble: frames straddle reads
            writer.write(data[i:i + 7])
            await writer.drain()
            await asyncio.sleep(0)
        resps = await read_commands(reader, 5)
        assert [r.ext_fields["v"] for r in resps] == [str(i) for i in range(5)]
    finally:
        await close_writer(writer)


# ----------------------------------------------------------------------- server push


class Notified(RequestProcessor):
    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self.seen.append((request.code, (request.ext_fields or {}).get("consumerGroup", "")))
        return response_for(request, 0, remark="noted")


async def test_server_pushes_request_to_client(server: RemotingServer) -> None:
    proc = Notified()
    c = RemotingClient(processor=proc)
    try:
        await c.invoke(addr_of(server), create_request(ECHO), 5)
        (srv_conn,) = server.connections
        resp = await srv_conn.invoke(create_request(40, {"consumerGroup": "G1"}), 5)  # NOTIFY_CONSUMER_IDS_CHANGED
        assert resp.code == 0 and resp.remark == "noted"
        assert srv_conn.pending == {}
        srv_conn.send_oneway(create_request(40, {"consumerGroup": "G2"}))
        assert await wait_for_condition(lambda: len(proc.seen) == 2)
        assert proc.seen == [(40, "G1"), (40, "G2")]
    finally:
        await c.close()


async def test_push_without_client_processor_is_not_supported(server: RemotingServer,
                                                              client: RemotingClient) -> None:
    await client.invoke(addr_of(server), create_request(ECHO), 5)
    (srv_conn,) = server.connections
    resp = await srv_conn.invoke(create_request(40), 5)
    assert resp.code == 3 and resp.remark == " request type 40 not supported"
    # A oneway push gets no answer at all: nothing arrives, nothing is pending.
    srv_conn.send_oneway(create_request(40))
    ok = await client.invoke(addr_of(server), create_request(ECHO, {"v": "fine"}), 5)
    assert ok.ext_fields["v"] == "fine" and srv_conn.pending == {}


async def test_executor_processor_may_send_from_its_thread(pool) -> None:
    """Connection.send is safe off the loop: an executor processor pushes before it answers."""
    class PushThenAnswer(RequestProcessor):
        def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
            push = create_request(40, {"consumerGroup": threading.current_thread().name})
            push.flag |= 2
            conn.send(push)
            return response_for(request, 0)

    srv = RemotingServer("127.0.0.1", 0)
    srv.register_processor(ECHO, PushThenAnswer(), executor=pool)
    await srv.start()
    proc = Notified()
    c = RemotingClient(processor=proc)
    try:
        assert (await c.invoke(addr_of(srv), create_request(ECHO), 5)).code == 0
        assert await wait_for_condition(lambda: len(proc.seen) == 1)
        assert proc.seen[0][1].startswith("remoting-test")
    finally:
        await c.close()
        await srv.close()


# ---------------------------------------------------------------- timeouts and errors


async def test_timeout_raises_and_leaves_nothing_pending(server: RemotingServer, client: RemotingClient) -> None:
    a = addr_of(server)
    with pytest.raises(RemotingTimeoutError) as info:
        await client.invoke(a, create_request(SLOW, {"sleep": "1"}), 0.2)
    assert str(info.value) == f"wait response on the channel <{a}> timeout, 200(ms)"
    assert client._conns[a].pending == {}
    # The late answer is dropped quietly; the connection keeps working.
    await asyncio.sleep(0.9)
    resp = await client.invoke(a, create_request(ECHO, {"v": "next"}), 5)
    assert resp.ext_fields["v"] == "next"


async def test_late_answer_to_a_cancelled_request_is_quiet_a_timed_out_one_warns(
        server: RemotingServer, client: RemotingClient, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 31 (7): a request its caller cancelled (a rebalance stopped at shutdown) is expected
    to be answered late; only a timed-out request's late answer is worth a warning."""
    a = addr_of(server)
    caplog.set_level("WARNING", logger="fastmq")
    task = asyncio.ensure_future(client.invoke(a, create_request(SLOW, {"sleep": "0.2"}), 5))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.4)
    assert (await client.invoke(a, create_request(ECHO, {"v": "x"}), 5)).ext_fields["v"] == "x"
    assert not [r for r in caplog.records if "unknown opaque" in r.getMessage()]
    assert client._conns[a]._abandoned == {}                     # forgotten once answered
    # a request started without waiting and given up on purpose (a suspended pull of a dropped queue)
    conn = client._conns[a]
    loop = asyncio.get_running_loop()
    pull = create_request(SLOW, {"sleep": "0.2"})
    conn.start_request(pull, loop.create_future(), loop.time() + 5, 5000)
    await asyncio.sleep(0.05)
    conn.abandon(pull.opaque)
    await asyncio.sleep(0.4)
    assert not [r for r in caplog.records if "unknown opaque" in r.getMessage()]
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(a, create_request(SLOW, {"sleep": "0.3"}), 0.05)
    await asyncio.sleep(0.5)
    await client.invoke(a, create_request(ECHO), 5)
    assert [r for r in caplog.records if "unknown opaque" in r.getMessage()]


async def test_scan_expires_requests_past_deadline(server: RemotingServer, client: RemotingClient) -> None:
    """A request whose waiter never times out by itself is still failed by the once-a-second scan."""
    a = addr_of(server)
    await client.invoke(a, create_request(ECHO), 5)
    conn = client._conns[a]
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[RemotingCommand] = loop.create_future()
    slow = create_request(SLOW, {"sleep": "5"})  # answered after 5 s: only the scan ends it sooner
    conn.start_request(slow, fut, loop.time() + 0.1, 100)
    with pytest.raises(RemotingTimeoutError, match=r"100\(ms\)"):
        await asyncio.wait_for(fut, 3)
    assert slow.opaque not in conn.pending


async def test_connection_loss_fails_pending(server: RemotingServer, client: RemotingClient) -> None:
    a = addr_of(server)
    fut = asyncio.ensure_future(client.invoke(a, create_request(SLOW, {"sleep": "5"}), 10))
    assert await wait_for_condition(lambda: a in client._conns and client._conns[a].pending != {})
    for conn in list(server.connections):
        conn.abort()
    with pytest.raises(RemotingSendRequestError):
        await asyncio.wait_for(fut, 5)
    # The next request reconnects by itself.
    resp = await client.invoke(a, create_request(ECHO, {"v": "back"}), 5)
    assert resp.ext_fields["v"] == "back"


async def test_connect_failure() -> None:
    dead = f"127.0.0.1:{free_port()}"
    c = RemotingClient(connect_timeout=1)
    try:
        with pytest.raises(RemotingConnectError, match=f"connect to {dead} failed"):
            await c.invoke(dead, create_request(ECHO), 2)
        with pytest.raises(RemotingConnectError):
            await c.invoke_oneway(dead, create_request(ECHO), 2)
        assert c._conns == {}
    finally:
        await c.close()


async def test_namesrv_failover_remembers_the_working_one(server: RemotingServer) -> None:
    dead = f"127.0.0.1:{free_port()}"
    good = addr_of(server)
    c = RemotingClient(namesrv_addrs=[dead, good], connect_timeout=1)
    try:
        resp = await c.invoke_namesrv(create_request(ECHO, {"v": "ns"}), 5)
        assert resp.ext_fields["v"] == "ns"
        assert c._namesrv_chosen == good
        tried: list[str] = []
        real = c._connection

        async def spy(addr: str, timeout: float) -> Connection:
            tried.append(addr)
            return await real(addr, timeout)

        c._connection = spy  # type: ignore[method-assign]
        await c.invoke_namesrv(create_request(ECHO), 5)
        assert tried == [good]  # the remembered one first, the dead one not retried
        c.set_namesrv_addrs([dead])
        with pytest.raises(RemotingConnectError):
            await c.invoke_namesrv(create_request(ECHO), 2)
        c.set_namesrv_addrs([])
        with pytest.raises(RemotingConnectError, match="No name server address"):
            await c.invoke_namesrv(create_request(ECHO), 1)
    finally:
        await c.close()


# ---------------------------------------------------------------------------- permits


async def test_async_permits_bound_in_flight_requests(server: RemotingServer) -> None:
    c = RemotingClient(max_async=1)
    try:
        got: list[RemotingCommand] = []
        first = asyncio.ensure_future(c.invoke_async(addr_of(server), create_request(SLOW, {"sleep": "0.4"}), 5,
                                                     callback=got.append))
        await asyncio.sleep(0.1)
        with pytest.raises(RemotingTooMuchRequestError,
                           match=r"invokeAsyncImpl tryAcquire semaphore timeout, 100ms"):
            await c.invoke_async(addr_of(server), create_request(ECHO), 0.1)
        resp = await first
        assert got == [resp]
        # The permit came back: the next one goes through.
        assert (await c.invoke_async(addr_of(server), create_request(ECHO), 5)).code == 0
    finally:
        await c.close()


async def test_oneway_permit_held_while_peer_does_not_read() -> None:
    """max_oneway=1 and a peer that never reads: the permit stays out until the bytes leave."""
    transports: list[asyncio.Transport] = []

    class Deaf(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            transports.append(transport)  # type: ignore[arg-type]

        def data_received(self, data: bytes) -> None:
            # Pausing here, not in connection_made: uvloop starts reading after connection_made.
            transports[-1].pause_reading()

    loop = asyncio.get_running_loop()
    deaf = await loop.create_server(Deaf, "127.0.0.1", 0)
    addr = f"127.0.0.1:{deaf.sockets[0].getsockname()[1]}"
    c = RemotingClient(max_oneway=1)
    try:
        body = b"o" * (1024 * 1024)
        raised = False
        for _ in range(64):  # at most 64 MB before the kernel buffers and the 4 MB mark are full
            try:
                await c.invoke_oneway(addr, create_request(ECHO, body=body), 0.1)
            except RemotingTooMuchRequestError:
                raised = True
                break
        assert raised
        assert c._conns[addr].write_paused
    finally:
        await c.close()
        for t in transports:
            t.close()
        deaf.close()
        await deaf.wait_closed()


# -------------------------------------------------------------- connection lifecycle


async def test_listener_events(server: RemotingServer) -> None:
    rec: Recorder = server.rec
    c = RemotingClient()
    try:
        await c.invoke(addr_of(server), create_request(ECHO), 5)
        assert rec.kinds() == ["connect"]
        (srv_conn,) = server.connections
        assert srv_conn.local_addr == addr_of(server)
        assert rec.events[0][1] == srv_conn.remote_addr
    finally:
        await c.close()
    assert await wait_for_condition(lambda: "close" in rec.kinds())
    assert rec.kinds() == ["connect", "close"]
    assert server.connections == set()


async def test_idle_connection_closed_after_on_idle() -> None:
    rec = Recorder()
    srv = RemotingServer("127.0.0.1", 0, listener=rec, idle_timeout=0.3)
    srv.register_processor(ECHO, Echo())
    await srv.start()
    c = RemotingClient(idle_timeout=0)
    try:
        await c.invoke(addr_of(srv), create_request(ECHO), 5)
        assert await wait_for_condition(lambda: "close" in rec.kinds(), rounds=100, delay=0.05)
        assert rec.kinds() == ["connect", "idle", "close"]
        assert await wait_for_condition(lambda: c._conns == {})  # the client saw it go
    finally:
        await c.close()
        await srv.close()


async def test_active_connection_is_not_idle() -> None:
    rec = Recorder()
    srv = RemotingServer("127.0.0.1", 0, listener=rec, idle_timeout=0.4)
    srv.register_processor(ECHO, Echo())
    await srv.start()
    c = RemotingClient()
    try:
        for _ in range(10):  # 1 s of traffic every 0.1 s
            await c.invoke(addr_of(srv), create_request(ECHO), 5)
            await asyncio.sleep(0.1)
        assert "idle" not in rec.kinds()
    finally:
        await c.close()
        await srv.close()


async def test_peer_that_never_reads_is_bounded(server: RemotingServer, client: RemotingClient) -> None:
    """A raw client floods requests and never reads: the server stops reading it, its write
    buffer stays bounded, and another client is still answered."""
    frame = encode_frame(create_request(ECHO, {"v": "x"}, body=b"z" * 16384))
    chunk = frame * 16
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    sock = writer.get_extra_info("socket")
    local = "127.0.0.1:%d" % sock.getsockname()[1]
    loop = asyncio.get_running_loop()
    try:
        reader._transport.pause_reading()  # type: ignore[attr-defined]  # really never read
        sent = 0
        deadline = loop.time() + 15
        while loop.time() < deadline and sent < 512 * 1024 * 1024:
            writer.write(chunk)
            sent += len(chunk)
            try:
                await asyncio.wait_for(writer.drain(), 0.5)
            except asyncio.TimeoutError:
                break  # the server stopped reading us: our own buffers are full
        assert sent < 512 * 1024 * 1024, "the server kept reading a peer that never reads"
        (conn,) = [c for c in server.connections if c.remote_addr == local]
        assert conn.reading_paused and conn.write_paused
        assert conn.transport.get_write_buffer_size() < 8 * 1024 * 1024
        resp = await client.invoke(addr_of(server), create_request(ECHO, {"v": "others fine"}), 5)
        assert resp.ext_fields["v"] == "others fine"
        # Once the peer reads again the server drains and resumes reading it.
        reader._transport.resume_reading()  # type: ignore[attr-defined]
        drained = 0
        while drained < 64 * 1024 * 1024 and conn.reading_paused:
            data = await asyncio.wait_for(reader.read(1 << 20), 5)
            if not data:
                break
            drained += len(data)
        assert not conn.reading_paused
    finally:
        writer.transport.abort()
        await asyncio.sleep(0)


async def test_server_close_with_non_reading_peer_does_not_hang() -> None:
    srv = RemotingServer("127.0.0.1", 0)
    srv.register_processor(ECHO, Echo())
    await srv.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    try:
        reader._transport.pause_reading()  # type: ignore[attr-defined]
        writer.write(encode_frame(create_request(ECHO, body=b"q" * (1 << 20))) * 16)
        await asyncio.sleep(0.2)
        await asyncio.wait_for(srv.close(close_grace=0.2), 5)
        assert srv.connections == set()
    finally:
        writer.transport.abort()
        await asyncio.sleep(0)


async def test_client_close_fails_pending_and_refuses_new(server: RemotingServer) -> None:
    c = RemotingClient()
    fut = asyncio.ensure_future(c.invoke(addr_of(server), create_request(SLOW, {"sleep": "5"}), 10))
    await asyncio.sleep(0.1)
    await c.close()
    with pytest.raises(RemotingSendRequestError):
        await fut
    with pytest.raises(RemotingConnectError):
        await c.invoke(addr_of(server), create_request(ECHO), 1)


# ------------------------------------------------------------------------------- loop


def test_loop_helpers_and_uvloop_smoke() -> None:
    """``run`` uses uvloop when importable: the main paths must work on it too."""
    async def main() -> tuple[bool, list[int]]:
        loop_kind = type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        srv = RemotingServer("127.0.0.1", 0)
        srv.register_processor(ECHO, Echo())
        srv.register_processor(SLOW, Slow())
        srv.register_processor(BOOM, Boom())
        await srv.start()
        proc = Notified()
        c = RemotingClient(processor=proc)
        codes: list[int] = []
        try:
            a = addr_of(srv)
            resps = await asyncio.gather(*(c.invoke(a, create_request(SLOW, {"v": str(i), "sleep": "0.01"}), 5)
                                           for i in range(50)))
            assert [r.ext_fields["v"] for r in resps] == [str(i) for i in range(50)]
            codes.append((await c.invoke(a, create_request(999), 5)).code)
            codes.append((await c.invoke(a, create_request(BOOM), 5)).code)
            (srv_conn,) = srv.connections
            codes.append((await srv_conn.invoke(create_request(40), 5)).code)
            with pytest.raises(RemotingTimeoutError):
                await c.invoke(a, create_request(SLOW, {"sleep": "1"}), 0.1)
            assert c._conns[a].pending == {}
            return loop_kind, codes
        finally:
            await c.close()
            await srv.close()

    from fastmq.remoting.loop import USING_UVLOOP
    on_uvloop, codes = run(main())
    assert on_uvloop == USING_UVLOOP
    assert codes == [3, 1, 0]
    loop = new_event_loop()
    try:
        assert isinstance(loop, asyncio.AbstractEventLoop)
    finally:
        loop.close()


def test_frame_header_layout_sanity() -> None:
    frame = encode_frame(create_request(ECHO))
    total, mark = struct.unpack(">II", frame[:8])
    assert total == len(frame) - 4 and mark >> 24 == 0


# ----------------------------------------------------------------- batching processors

BATCH, BATCH_BOOM = 7101, 7102


class Batching(RequestProcessor):
    """Answers a run at once: even opaques as pre-encoded frames, odd ones as pairs, and the
    last of the run after a pause (an awaitable), as the broker's send path does."""

    batches = True

    def __init__(self) -> None:
        self.runs: list[int] = []

    def process_batch(self, conn: Connection, requests: list[RemotingCommand]) -> list[Any]:
        if requests[0].code == BATCH_BOOM:
            raise RuntimeError("batch exploded")
        self.runs.append(len(requests))
        *now, last = requests
        frames = encode_frames([response_for(r, 0, "frame") for r in now if r.opaque % 2 == 0])
        pairs = [(r, response_for(r, 0, "pair")) for r in now if r.opaque % 2]

        async def later() -> list[Any]:
            await asyncio.sleep(0.01)
            return [(last, response_for(last, 0, "later"))]
        return [frames, *pairs, later()]


async def test_a_run_of_requests_goes_to_process_batch_once() -> None:
    proc = Batching()
    srv = RemotingServer("127.0.0.1", 0)
    srv.register_processor(BATCH, proc)
    srv.register_processor(BATCH_BOOM, proc)
    srv.register_processor(ECHO, Echo())
    await srv.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    try:
        reqs = [create_request(BATCH, {"v": str(i)}) for i in range(20)]
        reqs += [create_request(ECHO, {"v": "x"})] + [create_request(BATCH_BOOM, {}) for _ in range(3)]
        writer.write(encode_frames(reqs))
        await writer.drain()
        got = {r.opaque: r for r in await read_commands(reader, len(reqs))}
        assert set(got) == {r.opaque for r in reqs}
        # one call per run (one read on loopback, almost always: a split read makes more runs)
        assert sum(proc.runs) == 20 and len(proc.runs) <= 3, proc.runs
        last_of_run = {sum(proc.runs[:k + 1]) - 1 for k in range(len(proc.runs))}
        for i, r in enumerate(reqs[:20]):
            want = "later" if i in last_of_run else ("frame" if r.opaque % 2 == 0 else "pair")
            assert got[r.opaque].remark == want
        assert got[reqs[20].opaque].code == 0                      # another processor between runs
        for r in reqs[21:]:                                        # a failing run: each gets the error
            assert got[r.opaque].code == 1 and "batch exploded" in got[r.opaque].remark
    finally:
        await close_writer(writer)
        await srv.close()


# -------------------------------------------------------------- gathering processors

GATHER, GATHER_BOOM, GATHER_WAIT = 7103, 7104, 7105


class Gathering(RequestProcessor):
    """Answers what several connections sent in one loop turn together, as the broker's send
    path does: each answer's remark says how many connections its call served."""

    batches = True
    gathers = True

    def __init__(self, log: list[str] | None = None) -> None:
        self.calls: list[list[int]] = []
        self.log = log if log is not None else []
        self.busy = False

    def reject_request(self) -> bool:
        return self.busy

    def process_batch(self, conn: Connection, requests: list[RemotingCommand]) -> list[Any]:
        self.log.append(f"batch {len(requests)}")
        return [(r, response_for(r, 0, "batch")) for r in requests]

    def process_gathered(self, parts: list[tuple[Connection, list[RemotingCommand]]]) -> Any:
        if any(r.code == GATHER_BOOM for _, reqs in parts for r in reqs):
            raise RuntimeError("gather exploded")
        self.calls.append([len(reqs) for _, reqs in parts])
        self.log.append(f"gathered {len(parts)}")
        remark = f"of {len(parts)}"
        ready = [(conn, [encode_frames([response_for(r, 0, remark) for r in reqs if r.code == GATHER])])
                 for conn, reqs in parts]
        waiting = [(conn, [r for r in reqs if r.code == GATHER_WAIT]) for conn, reqs in parts]
        if not any(w for _, w in waiting):
            return ready, None

        async def later() -> list[tuple[Connection, list[Any]]]:
            await asyncio.sleep(0.01)
            return [(conn, [(r, response_for(r, 0, "later")) for r in reqs]) for conn, reqs in waiting]
        return ready, later()


class Logged(RequestProcessor):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self.log.append("echo")
        return response_for(request, 0)


async def test_reads_of_several_connections_in_one_turn_are_processed_together() -> None:
    """Guards the broker's one-send-in-flight shape (RocketMQ's benchmark Producer): each of 12
    connections sends one request; the reads of one loop turn reach process_gathered in one call
    and each connection gets its own answer."""
    proc = Gathering()
    srv = RemotingServer("127.0.0.1", 0)
    for code in (GATHER, GATHER_BOOM, GATHER_WAIT):
        srv.register_processor(code, proc)
    await srv.start()
    conns = [await asyncio.open_connection("127.0.0.1", srv.port) for _ in range(12)]
    try:
        for rnd in range(3):
            reqs = [create_request(GATHER_WAIT if rnd == 1 and i % 3 == 0 else GATHER, {"v": str(i)})
                    for i in range(len(conns))]
            for (_, w), req in zip(conns, reqs):  # no await in between: one turn of the server's loop
                w.write(encode_frame(req))
            for (r, _), req in zip(conns, reqs):
                (resp,) = await read_commands(r, 1)
                assert resp.opaque == req.opaque and resp.code == 0
                assert resp.remark == "later" if req.code == GATHER_WAIT else resp.remark.startswith("of ")
        # every request reached process_gathered once; the turns gathered several connections
        # (not asserted exactly: the loop may take the reads in more than one turn)
        assert sum(sum(c) for c in proc.calls) == 36
        assert max(len(c) for c in proc.calls) > 1, proc.calls
        assert all(not c.inflight for c in srv.connections)
        # a gathered call that raises: each request gets SYSTEM_ERROR with the text, the server goes on
        for i, (_, w) in enumerate(conns[:4]):
            w.write(encode_frame(create_request(GATHER_BOOM if i == 0 else GATHER)))
        for r, _ in conns[:4]:
            (resp,) = await read_commands(r, 1)
            assert resp.code in (0, 1)
            if resp.code:
                assert "gather exploded" in resp.remark
        proc.busy = True
        conns[0][1].write(encode_frame(create_request(GATHER)))
        (resp,) = await read_commands(conns[0][0], 1)
        assert resp.code == 2 and "system busy" in resp.remark
    finally:
        for _, w in conns:
            await close_writer(w)
        await srv.close()


class _FakeTransport:
    def is_closing(self) -> bool:
        return False


class _FakeConn:
    """What the dispatcher uses of a connection, recording what it writes."""

    def __init__(self) -> None:
        self.closed, self.transport, self.remote_addr = False, _FakeTransport(), "fake"
        self.frames: list[bytes] = []
        self.inflight = 0

    def wrote(self, data: bytes) -> None:
        self.frames.append(data)

    def send_many(self, cmds: list[RemotingCommand]) -> None:
        self.frames.append(encode_frames(cmds))

    def begin_request(self) -> None:
        self.inflight += 1

    def end_request(self) -> None:
        self.inflight -= 1


async def test_a_read_for_another_processor_runs_what_was_gathered_first() -> None:
    """Requests are still processed in the order they were read: gathered ones are not
    overtaken by a later read of another kind in the same turn."""
    from fastmq.remoting.processor import Dispatcher

    log: list[str] = []
    d = Dispatcher()
    d.register(GATHER, Gathering(log))
    d.register(ECHO, Logged(log))
    a, b = _FakeConn(), _FakeConn()
    d.dispatch(a, [create_request(GATHER)])  # type: ignore[arg-type]
    d.dispatch(b, [create_request(GATHER)])  # type: ignore[arg-type]
    assert log == [] and not a.frames        # held for the loop's next turn
    d.dispatch(b, [create_request(ECHO)])    # type: ignore[arg-type]
    assert log == ["gathered 2", "echo"]
    await asyncio.sleep(0)                   # the scheduled run finds nothing left
    assert log == ["gathered 2", "echo"]
    assert len(FrameDecoder().feed(b"".join(a.frames))) == 1
    assert len(FrameDecoder().feed(b"".join(b.frames))) == 2
    # a read mixing both kinds is not gathered: it goes the usual way, after what waits
    d.dispatch(a, [create_request(GATHER)])  # type: ignore[arg-type]
    d.dispatch(b, [create_request(GATHER), create_request(ECHO)])  # type: ignore[arg-type]
    assert log == ["gathered 2", "echo", "gathered 1", "batch 1", "echo"]
    assert len(FrameDecoder().feed(b"".join(b.frames))) == 4
    await d.cancel_all()


# -------------------------------------------------------------- client flow control


async def test_requests_past_the_window_wait_unwritten_and_their_clock_starts_when_written(
        server: RemotingServer, client: RemotingClient) -> None:
    """Guards against a burst timing out in a queue: with a window of 4, 16 of 20 slow requests
    wait unwritten, and each gets its whole 0.5 s once written although the burst takes longer."""
    a = addr_of(server)
    await client.invoke(a, create_request(ECHO), 5)
    conn = client._conns[a]
    conn.window = conn.max_window = 4
    loop = asyncio.get_running_loop()
    futs = []
    for _ in range(20):
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        conn.start_request(create_request(SLOW, {"sleep": "0.2"}), fut, loop.time() + 0.5, 500)
        futs.append(fut)
    assert conn.held == 16 and len(conn.pending) == 4  # the first 4 go out with this turn's write
    t0 = loop.time()
    resps = await asyncio.wait_for(asyncio.gather(*futs), 20)
    assert all(r.code == 0 for r in resps)
    assert loop.time() - t0 >= 0.8  # 5 rounds of 0.2 s: longer than any one request's 0.5 s
    assert conn.held == 0 and conn.pending == {}


async def test_a_held_request_fails_at_its_callers_own_deadline(server: RemotingServer, client: RemotingClient) -> None:
    """A caller's own timer (a sync send) covers the time its request waited unwritten: expire()
    fails it there, and it is never written."""
    a = addr_of(server)
    await client.invoke(a, create_request(ECHO), 5)
    conn = client._conns[a]
    conn.window = conn.max_window = 1
    loop = asyncio.get_running_loop()
    first: asyncio.Future[RemotingCommand] = loop.create_future()
    conn.start_request(create_request(SLOW, {"sleep": "0.5"}), first, loop.time() + 5, 5000)
    conn.flush()
    held: asyncio.Future[RemotingCommand] = loop.create_future()
    req = create_request(ECHO)
    conn.start_request(req, held, loop.time() + 5, 100)
    assert conn.held == 1
    conn.expire(req.opaque)
    with pytest.raises(RemotingTimeoutError, match=r"100\(ms\)"):
        await held
    assert conn.held == 0
    assert (await asyncio.wait_for(first, 5)).code == 0


async def test_expire_at_fails_each_request_at_its_own_deadline_and_forgets_answered_ones(
        server: RemotingServer, client: RemotingClient) -> None:
    """One timer per connection for every expire_at: a request still waiting at its deadline
    fails then (RemotingTimeoutError with its timeout_ms), not before, in deadline order; one
    answered in time is left alone; a later request with an earlier deadline is not kept
    waiting behind the armed one. Nothing is left behind once all are over."""
    a = addr_of(server)
    await client.invoke(a, create_request(ECHO), 5)
    conn = client._conns[a]
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    futs: dict[str, asyncio.Future[RemotingCommand]] = {}
    for name, code, fields, expire_in, ms in (("fast", ECHO, {}, 0.4, 400), ("late", SLOW, {"sleep": "3"}, 0.6, 600),
                                              ("early", SLOW, {"sleep": "3"}, 0.3, 300)):
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        req = create_request(code, fields)
        # the entry's own deadline is far off: only expire_at can fail it within the test
        conn.start_request(req, fut, t0 + 30, ms)
        conn.expire_at(req.opaque, t0 + expire_in)
        futs[name] = fut
    conn.flush()
    failed_at: dict[str, float] = {}
    for name in ("early", "late"):
        futs[name].add_done_callback(lambda f, n=name: failed_at.setdefault(n, loop.time()))
    assert (await asyncio.wait_for(futs["fast"], 5)).code == 0
    with pytest.raises(RemotingTimeoutError, match=r"300\(ms\)"):
        await asyncio.wait_for(futs["early"], 5)
    with pytest.raises(RemotingTimeoutError, match=r"600\(ms\)"):
        await asyncio.wait_for(futs["late"], 5)
    assert failed_at["early"] >= t0 + 0.3 and failed_at["late"] >= t0 + 0.6
    assert failed_at["early"] < failed_at["late"] < t0 + 3  # by expire_at, not by the answers (3 s)
    assert conn.pending == {} and conn._deadlines == [] and conn._deadline_timer is None


class _Resender:
    """A pending entry whose failure starts another request at once, with a later deadline (as
    a retry started from inside the expiry would)."""

    def __init__(self, conn: Connection, loop: asyncio.AbstractEventLoop, then_in: float) -> None:
        self.conn, self.loop, self.then_in = conn, loop, then_in
        self.deadline, self.timeout_ms = loop.time() + 30, 100.0
        self.failed: list[float] = []
        self.next_fut: asyncio.Future[RemotingCommand] = loop.create_future()

    def answered(self) -> bool:
        return bool(self.failed)

    def on_response(self, cmd: RemotingCommand) -> None:
        raise AssertionError("answered: it was to time out")

    def on_failure(self, exc: BaseException) -> None:
        self.failed.append(self.loop.time())
        req = create_request(SLOW, {"sleep": "3"})
        self.conn.start_request(req, self.next_fut, self.loop.time() + 30, 5000)
        self.conn.expire_at(req.opaque, self.loop.time() + self.then_in)


async def test_expire_at_a_send_started_by_an_expiry_does_not_delay_the_next_deadline(
        server: RemotingServer, client: RemotingClient) -> None:
    """An expiry whose failure starts a request with a later deadline (armed from inside the
    timer's round) leaves the timer armed for the earliest deadline still waiting."""
    a = addr_of(server)
    await client.invoke(a, create_request(ECHO), 5)
    conn = client._conns[a]
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    first = _Resender(conn, loop, then_in=2.5)
    req = create_request(SLOW, {"sleep": "3"})
    conn.start_frame(req.opaque, encode_frame(req), first)
    conn.expire_at(req.opaque, t0 + 0.2)
    second: asyncio.Future[RemotingCommand] = loop.create_future()
    req2 = create_request(SLOW, {"sleep": "3"})
    conn.start_request(req2, second, t0 + 30, 500)
    conn.expire_at(req2.opaque, t0 + 0.5)
    with pytest.raises(RemotingTimeoutError, match=r"500\(ms\)"):
        await asyncio.wait_for(second, 5)
    assert first.failed and first.failed[0] >= t0 + 0.2
    assert loop.time() < t0 + 2.5  # at its own deadline, not at the one armed from inside the round
    with pytest.raises(RemotingTimeoutError):
        await asyncio.wait_for(first.next_fut, 10)  # the request the expiry started: at its deadline


async def test_expire_at_keeps_no_more_than_twice_the_requests_waiting(
        server: RemotingServer, client: RemotingClient) -> None:
    """The deadlines of requests answered long before them are dropped in bulk: a caller
    sending one at a time with a long timeout does not grow the connection's table."""
    a = addr_of(server)
    await client.invoke(a, create_request(ECHO), 5)
    conn = client._conns[a]
    loop = asyncio.get_running_loop()
    for _ in range(300):
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        req = create_request(ECHO)
        conn.start_request(req, fut, loop.time() + 60, 60000)
        conn.expire_at(req.opaque, loop.time() + 60)
        assert (await asyncio.wait_for(fut, 5)).code == 0
        assert len(conn._deadlines) <= 65
    assert conn._deadline_timer is not None  # still armed for the earliest kept (all answered)
    conn.abort()
    await conn.wait_closed(5)
    assert conn._deadlines == [] and conn._deadline_timer is None


async def test_held_requests_fail_when_the_connection_is_lost(server: RemotingServer, client: RemotingClient) -> None:
    a = addr_of(server)
    await client.invoke(a, create_request(ECHO), 5)
    conn = client._conns[a]
    conn.window = conn.max_window = 1
    loop = asyncio.get_running_loop()
    futs = []
    for _ in range(3):
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        conn.start_request(create_request(SLOW, {"sleep": "5"}), fut, loop.time() + 10, 10000)
        futs.append(fut)
    conn.flush()
    assert conn.held == 2
    conn.abort()
    for fut in futs:
        with pytest.raises(RemotingSendRequestError):
            await asyncio.wait_for(fut, 5)


async def test_client_keeps_reading_while_its_own_writes_are_backed_up() -> None:
    """Guards against the both-sides-stop-reading wedge: a client connection whose write buffer
    is over its mark (the server is not reading it) still reads what the server sends."""
    got = asyncio.get_running_loop().create_future()
    transports: list[asyncio.Transport] = []

    class Talker(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            transports.append(transport)  # type: ignore[arg-type]

        def data_received(self, data: bytes) -> None:
            t = transports[-1]
            t.pause_reading()  # from now on it never reads us, but it talks
            t.write(encode_frame(create_request(ECHO, {"v": "pushed"})))

    class Catch(RequestProcessor):
        def process_request(self, conn: Connection, request: RemotingCommand) -> None:
            if not got.done():
                got.set_result(request.ext_fields)
            return None

    loop = asyncio.get_running_loop()
    srv = await loop.create_server(Talker, "127.0.0.1", 0)
    addr = f"127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    c = RemotingClient(processor=Catch())
    try:
        conn = await c._connection(addr, 5)
        body = b"w" * (1 << 20)
        for _ in range(64):  # until our own buffer is over its mark
            conn.send_oneway(create_request(ECHO, body=body))
            if conn.write_paused:
                break
            await asyncio.sleep(0.01)
        assert conn.write_paused and not conn.reading_paused
        assert await asyncio.wait_for(got, 5) == {"v": "pushed"}
    finally:
        await c.close()
        for t in transports:
            t.abort()
        srv.close()
        await srv.wait_closed()
