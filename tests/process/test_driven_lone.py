"""The blocking Producer's direct wait for a lone send's answer (fastmq._driven.DrivenLoop._await_lone),
and when its ``send_async`` frames leave (DrivenLoop.post: a caller that keeps posting runs the
loop's turns itself, and a turn writes what it ran).

The producer's broker here is the far end of a socket pair the test holds (a route of 4 queues on
one broker, injected by benchmarks/instructions.py's _routed_producer): the test decides when
each request is answered, whether at all, and when the connection drops. LONE_SLICE_S is lengthened to 30 s
where a test must show the direct wait gives way to something other than its slice running out
(another thread's hand-over, a dropped connection, the send's own timeout).
"""
from __future__ import annotations

import select
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import fastmq
from benchmarks.instructions import _routed_producer
from fastmq import _driven
from fastmq._ext import codec
from fastmq.errors import FastMQError, SendFailedError, SendTimeoutError
from fastmq.testing import free_port, running_cluster

TOPIC = "LoneTopic"


class FarEnd:
    """The broker's end of the producer's connection: reads request frames, answers on demand."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.settimeout(10)
        self._dec = codec.FrameDecoder()
        self._got: list[Any] = []
        self._offset = 0

    def request(self) -> Any:
        """The next request frame (waits up to 10 s for it)."""
        while not self._got:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("the producer closed the connection")
            self._got += self._dec.feed(data)
        return self._got.pop(0)

    def answer(self, req: Any) -> None:
        self._offset += 1
        ext = {"msgId": "7F00000100002A9F%016X" % self._offset, "queueId": (req.ext_fields or {}).get("e", "0"),
               "queueOffset": str(self._offset)}
        self.sock.sendall(codec.encode_frame(
            codec.RemotingCommand(0, language=0, version=409, opaque=req.opaque, flag=1, ext_fields=ext)))


@pytest.fixture
def lone() -> Iterator[tuple[fastmq.Producer, FarEnd]]:
    """A blocking Producer whose one broker is a :class:`FarEnd`, sending to a dead port if it
    ever has to reconnect (so a retry after a dropped connection fails at once)."""
    addr = f"127.0.0.1:{free_port()}"
    p = fastmq.Producer("PG_LONE", namesrv_addr=f"127.0.0.1:{free_port()}", send_msg_timeout=3000)
    p.start()
    far: socket.socket | None = None
    try:
        _, far = p._driven.run(_routed_producer(p._core, addr, TOPIC), 10)
        yield p, FarEnd(far)
    finally:
        p.shutdown()
        if far is not None:
            far.close()


def _answering(far: FarEnd, n: int) -> threading.Thread:
    def run() -> None:
        for _ in range(n):
            far.answer(far.request())
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_lone_sends_are_answered_through_the_direct_wait(lone: tuple[fastmq.Producer, FarEnd]) -> None:
    p, far = lone
    t = _answering(far, 60)
    results = [p.send(fastmq.Message(TOPIC, b"x" * 128)) for _ in range(60)]
    t.join(10)
    assert [r.status for r in results] == [fastmq.SendStatus.SEND_OK] * 60
    assert len({r.msg_id for r in results}) == 60
    # (each answer is read by the direct wait unless it came later than LONE_SLICE_S: a loaded
    # machine may take the general drive for some; none at all would mean the path is dead)
    assert p._driven.lone_reads > 0


def test_another_threads_send_is_served_while_a_lone_send_waits(lone: tuple[fastmq.Producer, FarEnd],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A's answer is held back; B's send, handed over to A's drive, still goes out (the wake-up
    pipe ends A's direct wait) and is answered first; then A's."""
    monkeypatch.setattr(_driven, "LONE_SLICE_S", 30.0)
    p, far = lone
    _answering(far, 1).join(0)
    p.send(fastmq.Message(TOPIC, b"warm"))
    out: dict[str, Any] = {}

    def send(name: str) -> None:
        try:
            out[name] = p.send(fastmq.Message(TOPIC, name.encode()))
        except BaseException as exc:  # reported to the test's thread
            out[name] = exc
    a = threading.Thread(target=send, args=("A",))
    a.start()
    req_a = far.request()
    deadline = time.monotonic() + 10
    while p._driven._driver == 0 and time.monotonic() < deadline:  # A drives (in its direct wait)
        time.sleep(0.001)
    b = threading.Thread(target=send, args=("B",))
    b.start()
    req_b = far.request()  # B's frame went out while A's answer is still held
    assert req_b.opaque != req_a.opaque
    far.answer(req_b)
    b.join(10)
    assert "A" not in out
    assert out["B"].status == fastmq.SendStatus.SEND_OK, out["B"]
    far.answer(req_a)
    a.join(10)
    assert out["A"].status == fastmq.SendStatus.SEND_OK, out["A"]


def test_a_connection_dropped_mid_send_fails_it_with_a_typed_error(lone: tuple[fastmq.Producer, FarEnd],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker reads the request and drops the connection: the direct wait sees the socket
    end and the send fails (its retries go to a dead port) as every try failing, not at its timeout."""
    monkeypatch.setattr(_driven, "LONE_SLICE_S", 30.0)
    p, far = lone

    def drop() -> None:
        far.request()
        far.sock.shutdown(socket.SHUT_RDWR)
        far.sock.close()
    t = threading.Thread(target=drop, daemon=True)
    t.start()
    with pytest.raises(FastMQError) as info:
        p.send(fastmq.Message(TOPIC, b"dropped"), timeout_ms=20_000)
    t.join(10)
    # 4.9's sendDefaultImpl: every try failed at once (the retries' reconnects are refused)
    assert type(info.value) is SendFailedError, repr(info.value)
    assert "times, still failed" in str(info.value)


def test_an_unanswered_lone_send_times_out_at_its_own_timeout(lone: tuple[fastmq.Producer, FarEnd],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing answers: the direct wait ends at the send's deadline (a timer due), not at its
    30 s slice, and the send raises 4.9's timeout (SendTimeoutError, "sendDefaultImpl call timeout")."""
    monkeypatch.setattr(_driven, "LONE_SLICE_S", 30.0)
    p, far = lone
    t0 = time.monotonic()
    with pytest.raises(FastMQError) as info:
        p.send(fastmq.Message(TOPIC, b"unanswered"), timeout_ms=300)
    assert time.monotonic() - t0 < 10  # its 300 ms, a retry or two, not the 30 s slice
    assert type(info.value) is SendTimeoutError and str(info.value) == "sendDefaultImpl call timeout", repr(info.value)
    far.request()  # the request did go out


def test_lone_sends_to_a_real_broker_take_the_direct_wait(tmp_path: Path) -> None:
    """fastmq-namesrv and fastmq-broker processes: lone sends are stored once each, in order per
    queue, and the direct wait read (some of) their answers."""
    with running_cluster(tmp_path) as (ns, _broker):
        with fastmq.Producer("PG_LONE_REAL", namesrv_addr=ns.addr) as p:
            p.send(fastmq.Message("LoneReal", b"warm"))
            before = p._driven.lone_reads
            results = [p.send(fastmq.Message("LoneReal", b"x" * 128)) for _ in range(200)]
            assert [r.status for r in results] == [fastmq.SendStatus.SEND_OK] * 200
            places = [(r.message_queue.queue_id, r.queue_offset) for r in results]
            assert len(set(places)) == 200
            for q in {qid for qid, _ in places}:
                offsets = [off for qid, off in places if qid == q]
                assert offsets == sorted(offsets)
            assert p._driven.lone_reads > before


# ------------------------------------------------------------------ send_async posts

def _readable(far: FarEnd, timeout: float) -> bool:
    return bool(far._got) or bool(select.select([far.sock], [], [], timeout)[0])


def _restore(d: _driven.DrivenLoop) -> None:
    """The loop's own grace again, and its background thread woken to look (it may be asleep
    for the long interval a test's grace gave it)."""
    d.grace_s, d.poll_max_s = _driven.GRACE_S, _driven.POLL_MAX_S
    d._wake.set()


def _answer_all(far: FarEnd, n: int, done: list[Any]) -> None:
    """Answer ``n`` requests (in the order they come) and wait for their callbacks."""
    for _ in range(n):
        far.answer(far.request())
    deadline = time.monotonic() + 10
    while len(done) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(done) == n and all(e is None for _, e in done), done


def test_a_senders_own_turn_writes_the_frames_it_ran(lone: tuple[fastmq.Producer, FarEnd]) -> None:
    """The TURN_EVERY-th send_async runs a turn: every frame of the batch is on the socket when
    it returns (they used to wait, queued, for the next turn: another TURN_EVERY sends)."""
    p, far = lone
    d = p._driven
    d.grace_s = d.poll_max_s = 3600.0  # only the sender's own turns run the loop
    done: list[Any] = []
    n = _driven.TURN_EVERY
    for i in range(n):
        p.send_async(fastmq.Message(TOPIC, b"%d" % i), lambda r, e: done.append((r, e)))
    far.sock.settimeout(2)  # (no turn after the last post: what is not written by now never is)
    got = [far.request() for _ in range(n)]
    assert [bytes(r.body) for r in got] == [b"%d" % i for i in range(n)]
    far._got[:0] = got
    _restore(d)
    _answer_all(far, n, done)


def test_a_caller_posting_faster_than_the_grace_still_gets_a_turn_within_it(
        lone: tuple[fastmq.Producer, FarEnd]) -> None:
    """A send_async every grace_s / 10: the background thread never finds the loop idle for
    its grace, and fewer than TURN_EVERY sends come within it; the caller's own post runs a
    turn once the first send has waited grace_s, rather than at the TURN_EVERY-th."""
    p, far = lone
    d = p._driven
    d.grace_s = 0.2
    done: list[Any] = []
    n = 15  # ~0.3 s of posts: past the grace, well short of TURN_EVERY
    assert n < _driven.TURN_EVERY
    for i in range(n):
        p.send_async(fastmq.Message(TOPIC, b"%d" % i), lambda r, e: done.append((r, e)))
        time.sleep(d.grace_s / 10)
    # (looked at well within the grace after the last post: the background thread has not run)
    assert _readable(far, d.grace_s / 4)
    _restore(d)
    _answer_all(far, n, done)
