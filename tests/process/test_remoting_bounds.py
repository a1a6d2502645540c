"""Resource bounds of the remoting servers (issue 15 item 6), against real processes.

Each test names the failure it guards against; after each hostile peer the server must still
answer another client.
"""
from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import select
import socket
import struct
import termios
import time
import zlib
from pathlib import Path

import pytest

from fastmq._ext.codec import FrameDecoder, encode_frame
from fastmq.aio import Message, Producer
from fastmq.broker.long_polling import HeldPull, PullRequestHoldService
from fastmq.client.pull_service import MAX_INFLATED_BODY, _unwrap, inflate_body
from fastmq.errors import NoRouteError
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.message import MessageExt
from fastmq.testing import broker_process, namesrv_process

MiB = 1024 * 1024


def _answers(addr: str, code: int = RequestCode.GET_ROUTEINFO_BY_TOPIC, timeout: float = 10.0) -> int:
    """The response code a fresh connection gets for one request (the server is up and serving)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(encode_frame(create_request(code, {"topic": "TBW102"})))
        dec = FrameDecoder()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = s.recv(65536)
            assert data, "connection closed without an answer"
            cmds = dec.feed(data)
            if cmds:
                return cmds[0].code
    raise AssertionError("no answer")


def _closed_by_peer(s: socket.socket, seconds: float, max_bytes: int = 512 * MiB) -> tuple[bool, int]:
    """Read ``s`` until the peer closes it (True) or ``seconds`` / ``max_bytes`` pass (False)."""
    s.settimeout(0.5)
    got = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and got < max_bytes:
        try:
            data = s.recv(1 << 20)
        except socket.timeout:
            continue
        except OSError:  # reset: an abort
            return True, got
        if not data:
            return True, got
        got += len(data)
    return False, got


@pytest.fixture(scope="module")
def ns(tmp_path_factory: pytest.TempPathFactory):
    """One NameServer for the module: the brokers each test starts (with the bound under test in
    their config) register with it; the NameServer's own bounds are tested on it too."""
    n = namesrv_process(tmp_path_factory.mktemp("bounds-ns")).start()
    try:
        yield n
    finally:
        n.stop()


def _wait_logged(server, text: str, seconds: float) -> None:
    """Wait (bounded) until ``server`` has logged ``text``; the test's own assertions follow."""
    deadline = time.monotonic() + seconds
    while text not in server.output() and time.monotonic() < deadline:
        time.sleep(0.1)


def _broker(tmp_path: Path, ns_addr: str, **conf: object):
    return broker_process(tmp_path, ns_addr, mappedFileSizeCommitLog=16 * MiB, **conf).start()


async def _preload(ns_addr: str, topic: str, n: int, size: int) -> None:
    async with Producer("PG_BOUNDS", namesrv_addr=ns_addr, compress_msg_body_over_howmuch=size + 1,
                        max_message_size=size + 1) as p:
        for attempt in range(40):  # a broker just started may not have registered yet: bounded wait
            try:
                await p.send(Message(topic, b"A" * size))
                break
            except NoRouteError:
                if attempt == 39:
                    raise
                await asyncio.sleep(0.25)
        for i in range(1, n):
            await p.send(Message(topic, bytes([65 + i % 26]) * size))


def _pull(topic: str, queue_id: int, offset: int, *, suspend: bool, body: bytes | None = None,
          suspend_ms: int = 600_000) -> bytes:
    return encode_frame(create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "GID_BOUNDS", "topic": topic, "queueId": queue_id, "queueOffset": offset,
        "maxMsgNums": 1, "sysFlag": (2 if suspend else 0) | 4, "commitOffset": 0,
        "suspendTimeoutMillis": suspend_ms, "subscription": "*", "subVersion": 0}, body=body))


# ------------------------------------------------------------------ frames and connections


@pytest.mark.parametrize("server", ["broker", "namesrv"])
def test_oversized_length_prefix_is_refused_before_buffering(tmp_path: Path, ns, server: str) -> None:
    """Guards against a server buffering a frame it will refuse anyway: a length prefix above 16 MiB
    closes the connection as soon as its 4 bytes arrive, with one log line, and the server stays up."""
    target = _broker(tmp_path, ns.addr) if server == "broker" else ns
    try:
        with socket.create_connection(("127.0.0.1", target.port), timeout=5) as s:
            s.sendall(struct.pack(">I", 16 * MiB + 1))  # nothing more: the prefix alone must do it
            closed, _ = _closed_by_peer(s, 5)
        assert closed
        _answers(target.addr)  # any answer: it is up and serving
        time.sleep(0.2)
        out = target.output()
        assert out.count(f"exceeds the maximum of {16 * MiB}") == 1, out[-2000:]
    finally:
        if server == "broker":
            assert target.stop() == 0


def _wait_read_by_peer(s: socket.socket, timeout: float) -> None:
    """Wait (bounded) until the peer has read all we sent: the socket's send queue (Linux
    TIOCOUTQ) is empty, or the connection is gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            unsent = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
            if unsent == 0:
                return
            if select.select([s], [], [], 0)[0] and s.recv(1, socket.MSG_PEEK) == b"":
                return  # the peer closed: its unread bytes stay queued here
        except OSError:
            return
        time.sleep(0.01)


def test_partial_frames_are_capped_across_connections(tmp_path: Path, ns) -> None:
    """Guards against N peers each sending most of a 16 MiB frame and stalling (40 of them held
    +640 MB): past serverMaxPartialFrameBytes the connection whose read would pass it is closed."""
    b = _broker(tmp_path, ns.addr, serverMaxPartialFrameBytes=40 * MiB)
    socks: list[socket.socket] = []
    try:
        chunk = b"P" * MiB
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", b.port), timeout=5)
            socks.append(s)
            try:
                s.sendall(struct.pack(">I", 16 * MiB - 4))
                for _ in range(15):
                    s.sendall(chunk)
            except OSError:
                pass  # closed under us: the cap
            # sendall returns once the kernel holds the bytes, not once the broker read them:
            # without this the broker may read connection 3 before the tail of connection 1 and
            # close connection 1 instead, so the order under test would be the scheduler's
            _wait_read_by_peer(s, 10.0)
        closed = [_closed_by_peer(s, 1)[0] for s in socks]
        assert closed[:2] == [False, False], closed   # 30 MiB buffered: within the cap
        assert all(closed[2:]), closed                # a third 15 MiB would pass 40 MiB
        _answers(b.addr)  # any answer: it is up and serving
        for s in socks[:2]:
            s.close()
        time.sleep(0.5)
        # the closed connections gave their share back: a new partial frame fits again
        s = socket.create_connection(("127.0.0.1", b.port), timeout=5)
        socks.append(s)
        s.sendall(struct.pack(">I", 16 * MiB - 4) + chunk * 15)
        assert not _closed_by_peer(s, 1)[0]
        assert "partial frames of all connections would hold more than" in b.output()
    finally:
        for s in socks:
            s.close()
        assert b.stop() == 0


def test_connections_over_the_cap_are_closed_at_accept(tmp_path: Path, ns) -> None:
    """Guards against a connection storm exhausting the broker: past serverMaxConnections new
    connections are closed as they are accepted (one log line each), the open ones keep working,
    and a slot freed is usable again."""
    b = _broker(tmp_path, ns.addr, serverMaxConnections=4)
    socks: list[socket.socket] = []
    try:
        for _ in range(4):
            socks.append(socket.create_connection(("127.0.0.1", b.port), timeout=5))
        time.sleep(0.3)
        extra = socket.create_connection(("127.0.0.1", b.port), timeout=5)
        assert _closed_by_peer(extra, 5)[0]
        extra.close()
        # an open one still works
        socks[0].sendall(encode_frame(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})))
        socks[0].settimeout(5)
        assert len(socks[0].recv(4)) == 4
        socks.pop().close()
        time.sleep(0.3)
        _answers(b.addr)  # any answer: it is up and serving
        assert "refusing connection from" in b.output()
    finally:
        for s in socks:
            s.close()
        assert b.stop() == 0


def test_peer_that_does_not_read_is_closed_past_the_unsent_limit(tmp_path: Path, ns) -> None:
    """Guards against a client that asks for large answers and never reads them: once more than
    serverMaxUnsentBytes wait for it the broker aborts the connection instead of holding them."""
    b = _broker(tmp_path, ns.addr, serverMaxUnsentBytes=16 * MiB)
    try:
        asyncio.run(_preload(ns.addr, "BoundsBig", 4, MiB))
        with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            # 256 pulls of 1 MiB messages in one write: 256 MiB of answers if it kept them
            s.sendall(b"".join(_pull("BoundsBig", q % 4, 0, suspend=False) for q in range(256)))
            # not reading until the broker has given up on us (bounded)
            _wait_logged(b, "does not read, and", 15)
            closed, got = _closed_by_peer(s, 10)
        assert closed and got < 128 * MiB, got
        _answers(b.addr)  # any answer: it is up and serving
        assert b.output().count("does not read, and") == 1
    finally:
        assert b.stop() == 0


def test_idle_peer_that_does_not_read_is_closed(tmp_path: Path, ns) -> None:
    """Guards against non-reading clients outliving the idle timeout (~45 MB each): the broker
    stops reading them, writing to them is not activity, and serverChannelMaxIdleTimeSeconds
    closes them with what they left unread."""
    b = _broker(tmp_path, ns.addr, serverChannelMaxIdleTimeSeconds=2)
    try:
        asyncio.run(_preload(ns.addr, "BoundsIdle", 4, MiB))
        with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            # 12 MiB of answers: more than the socket buffers, less than the unsent limit
            s.sendall(b"".join(_pull("BoundsIdle", q % 4, 0, suspend=False) for q in range(12)))
            # not reading until the broker closes us (idle timeout 2 s, scanned every 0.5 s; bounded)
            _wait_logged(b, "closing idle connection", 15)
            closed, got = _closed_by_peer(s, 10)
        assert closed and got < 12 * MiB, got
        assert "closing idle connection" in b.output()
        _answers(b.addr)  # any answer: it is up and serving
    finally:
        assert b.stop() == 0


# ------------------------------------------------------------------ long polls


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_held_pulls_are_released_when_their_client_goes(tmp_path: Path, ns) -> None:
    """Guards against long polls keeping their requests after the client disconnects (+484 MB
    seen): 3 rounds of 4 clients parking 16 pulls with 2 MiB bodies each for 10 minutes, closed
    after each round, leave the broker's memory where it was, and it still answers."""
    b = _broker(tmp_path, ns.addr)
    try:
        asyncio.run(_preload(ns.addr, "BoundsPoll", 1, 16))
        assert b.proc is not None
        base = _rss_mib(b.proc.pid)
        body = b"L" * (2 * MiB)
        for _ in range(3):
            socks = []
            for _ in range(4):
                s = socket.create_connection(("127.0.0.1", b.port), timeout=5)
                s.sendall(b"".join(_pull("BoundsPoll", q % 4, 1_000, suspend=True, body=body) for q in range(16)))
                socks.append(s)
            time.sleep(1.0)
            for s in socks:
                s.close()
            time.sleep(0.5)
        time.sleep(1.0)
        grown = _rss_mib(b.proc.pid) - base
        # 3 x 4 x 16 x 2 MiB = 384 MiB if they were kept
        assert grown < 96, f"broker grew {grown:.0f} MiB"
        _answers(b.addr)  # any answer: it is up and serving
    finally:
        assert b.stop() == 0


async def test_hold_service_release_drops_only_that_owners_pulls() -> None:
    """The hold service forgets an owner's pulls unanswered, cancels their timers, and leaves the
    other owners' pulls to be answered as before."""
    answered: list[HeldPull] = []

    def wake(h: HeldPull, timed_out: bool) -> bool:
        answered.append(h)
        return True
    svc = PullRequestHoldService(wake)
    loop = asyncio.get_running_loop()
    mine = [HeldPull("T", q, 5, loop.time() + 60, context=object(), owner="a") for q in range(3)]
    theirs = HeldPull("T", 0, 5, loop.time() + 60, context=object(), owner="b")
    for h in [*mine, theirs]:
        svc.hold(h)
    assert svc.release("a") == 3 and svc.release("a") == 0
    assert len(svc) == 1 and all(h.timer is None and h.line is None for h in mine)  # no deadline kept for them
    assert all(h.context is None for h in mine)
    svc.notify("T", 0, 10)
    assert answered == [theirs] and len(svc) == 0
    assert svc.release("b") == 0


# ------------------------------------------------------------------ decompression


def _compact_register_body(topics: int, pad: int = 0) -> bytes:
    """A compressed REGISTER_BROKER body (RegisterBrokerBody.encode's layout) naming ``topics``
    topics; ``pad`` bytes of random hex in its data version make it large but cheap to register."""
    dv = b'{"counter":1,"timestamp":1%s}' % (b',"pad":"%s"' % os.urandom(pad // 2).hex().encode() if pad else b"")
    parts = [struct.pack(">i", len(dv)), dv, struct.pack(">i", topics)]
    for i in range(topics):
        t = b"T%09d 8 8 6 SINGLE_TAG" % i
        parts += [struct.pack(">i", len(t)), t]
    parts += [struct.pack(">i", 2), b"[]"]
    return zlib.compress(b"".join(parts), 9)


def test_namesrv_refuses_a_register_body_that_inflates_past_its_cap(tmp_path: Path, ns) -> None:
    """Guards against a ~2.5 MB compressed REGISTER_BROKER naming a million topics stalling the
    NameServer (10 s seen): past registerBodyMaxInflatedBytes it is refused with SYSTEM_ERROR and
    the NameServer keeps answering; a large legal one (inflated off the loop) still registers."""
    def ask(s: socket.socket, req) -> tuple[int, str | None]:
        s.sendall(encode_frame(req))
        dec = FrameDecoder()
        while True:
            data = s.recv(1 << 20)
            assert data, "closed without an answer"
            cmds = dec.feed(data)
            if cmds:
                return cmds[0].code, cmds[0].remark

    def register(s: socket.socket, body: bytes, name: str) -> tuple[int, str | None]:
        return ask(s, create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": name, "brokerAddr": f"127.0.0.1:{len(name)}", "clusterName": "C",
            "haServerAddr": "127.0.0.1:2", "brokerId": 0, "compressed": "true", "bodyCrc32": 0}, body=body))
    with socket.create_connection(("127.0.0.1", ns.port), timeout=60) as s:
        code, remark = register(s, _compact_register_body(400_000), "evil")  # ~13 MB inflated
        assert code == ResponseCode.SYSTEM_ERROR and remark is not None and "inflates past" in remark, remark
        assert ask(s, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T000000099"}))[0] == \
            ResponseCode.TOPIC_NOT_EXIST
    assert "inflates past" in ns.output()
    big = _compact_register_body(100, pad=600_000)
    assert len(big) >= 256 * 1024  # takes the worker-thread path
    # (the broker's connection stays open: closing it unregisters the broker)
    with socket.create_connection(("127.0.0.1", ns.port), timeout=60) as s:
        assert register(s, big, "legal")[0] == ResponseCode.SUCCESS
        assert ask(s, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T000000099"}))[0] == \
            ResponseCode.SUCCESS


def test_client_caps_what_a_message_body_inflates_to(caplog: pytest.LogCaptureFixture) -> None:
    """Guards against a few KiB of compressed zeros inflating to gigabytes in a consumer: past
    MAX_INFLATED_BODY the message is delivered as it came, with one warning."""
    assert inflate_body(zlib.compress(b"ok" * 1000)) == b"ok" * 1000
    bomb = zlib.compress(bytes(MAX_INFLATED_BODY + 1), 9)
    with pytest.raises(ValueError, match="inflates past"):
        inflate_body(bomb)
    with pytest.raises(zlib.error):
        inflate_body(zlib.compress(b"truncated" * 100)[:-4])
    m = MessageExt(topic="T", body=bomb, sys_flag=1)
    caplog.set_level(logging.WARNING, logger="fastmq")
    assert _unwrap(m, "G").body == bomb
    assert [r.getMessage() for r in caplog.records] == [
        f"message {m.msg_id} inflates past {MAX_INFLATED_BODY} bytes; delivered as is (compressed)"]
