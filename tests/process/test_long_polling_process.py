"""Held pulls against a real ``fastmq-broker``: woken by the sends that store their messages (one
wake per loop turn for everything stored in it, not one per message), still filtered by tag, and
nothing lost or delivered twice.

The broker runs as a process; sends that must arrive "in one read" are written as one buffer on a
raw socket (loopback delivers a few KiB written at once in one read in practice; the assertions
hold either way: only how many answers the pull needs would change).
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Iterator

import pytest

from fastmq._ext.codec import FrameDecoder, encode_frame
from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.command import RemotingCommand
from fastmq.protocol.message import decode_records
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, running_cluster
from tests.support import create_topic, pull_request, send_request

SUSPEND_MS = 15_000
SOON_S = 5.0  # an answer "without waiting for the suspend timeout": a third of it, on a busy machine


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("long-poll-proc")
    with running_cluster(root, autoCreateTopicEnable="false") as (_ns, b):
        yield b


async def _send_in_one_write(addr: str, requests: list[RemotingCommand], timeout: float = 10.0) -> list[RemotingCommand]:
    """Write every request as one buffer on a fresh connection; their answers, in request order."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"".join(encode_frame(r) for r in requests))
        await writer.drain()
        dec = FrameDecoder()
        got: dict[int, RemotingCommand] = {}
        deadline = time.monotonic() + timeout
        while len(got) < len(requests):
            left = deadline - time.monotonic()
            assert left > 0, f"only {len(got)} of {len(requests)} sends answered"
            data = await asyncio.wait_for(reader.read(65536), left)
            assert data, "the broker closed the connection"
            for cmd in dec.feed(data):
                got[cmd.opaque] = cmd
        return [got[r.opaque] for r in requests]
    finally:
        writer.close()


def _hold(client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int,
          expr: str = "*") -> "asyncio.Future[RemotingCommand]":
    return asyncio.ensure_future(client.invoke(addr, pull_request(topic, queue_id, offset, expr=expr,
                                                                  suspend_ms=SUSPEND_MS), 30))


async def _drain(client: RemotingClient, addr: str, topic: str, queue_id: int, first: RemotingCommand,
                 expr: str = "*", limit: int = 50) -> list[bytes]:
    """The bodies of ``first`` (a pull's SUCCESS answer) and of every pull after it until the
    queue has no more (bounded: ``limit`` pulls)."""
    bodies = [m.body for m in decode_records(first.body or b"")]
    offset = int(first.ext_fields["nextBeginOffset"])
    for _ in range(limit):
        p = await client.invoke(addr, pull_request(topic, queue_id, offset, expr=expr), 5)
        if p.code != ResponseCode.SUCCESS:
            assert p.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY), p.remark
            if p.code == ResponseCode.PULL_NOT_FOUND:
                return bodies
        else:
            bodies += [m.body for m in decode_records(p.body or b"")]
        offset = int(p.ext_fields["nextBeginOffset"])
    raise AssertionError(f"the queue still had messages after {limit} pulls")


async def _still_held(fut: "asyncio.Future[RemotingCommand]", seconds: float) -> bool:
    await asyncio.sleep(seconds)
    return not fut.done()


async def test_held_pull_answered_by_many_sends_of_one_read(broker: ServerProcess, client: RemotingClient) -> None:
    topic = "LpOneRead"
    await create_topic(client, broker.addr, topic, queues=1)
    held = _hold(client, broker.addr, topic, 0, 0)
    assert await _still_held(held, 0.3)
    sent = [b"m%02d" % i for i in range(24)]
    t0 = time.monotonic()
    answers = await _send_in_one_write(broker.addr, [send_request(topic, b, {"TAGS": "t"}) for b in sent])
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * len(sent), [a.remark for a in answers]
    p = await asyncio.wait_for(held, SOON_S)
    assert time.monotonic() - t0 < SOON_S
    assert p.code == ResponseCode.SUCCESS, p.remark
    assert await _drain(client, broker.addr, topic, 0, p) == sent  # each once, in order


async def test_one_read_wakes_the_held_pulls_of_every_queue_it_touched(broker: ServerProcess,
                                                                       client: RemotingClient) -> None:
    topic = "LpManyQueues"
    await create_topic(client, broker.addr, topic, queues=4)
    held = [_hold(client, broker.addr, topic, q, 0) for q in range(4)]
    assert await _still_held(held[-1], 0.3) and not any(h.done() for h in held)
    sent = {q: [b"q%d-%d" % (q, i) for i in range(5)] for q in range(4)}
    reqs = [send_request(topic, b, queue_id=q) for i in range(5) for q in range(4) for b in [sent[q][i]]]
    answers = await _send_in_one_write(broker.addr, reqs)
    assert all(a.code == ResponseCode.SUCCESS for a in answers), [a.remark for a in answers]
    pulls = await asyncio.wait_for(asyncio.gather(*held), SOON_S)
    for q, p in enumerate(pulls):
        assert p.code == ResponseCode.SUCCESS, p.remark
        assert await _drain(client, broker.addr, topic, q, p) == sent[q]


async def test_a_pull_for_another_tag_stays_held(broker: ServerProcess, client: RemotingClient) -> None:
    topic = "LpTags"
    await create_topic(client, broker.addr, topic, queues=1)
    held = _hold(client, broker.addr, topic, 0, 0, expr="tagA")
    assert await _still_held(held, 0.3)
    r = await client.invoke(broker.addr, send_request(topic, b"for B", {"TAGS": "tagB"}), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert await _still_held(held, 1.0), "a tagB message answered a pull for tagA"
    r = await client.invoke(broker.addr, send_request(topic, b"for A", {"TAGS": "tagA"}), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    p = await asyncio.wait_for(held, SOON_S)
    assert p.code == ResponseCode.SUCCESS, p.remark
    assert [m.body for m in decode_records(p.body)] == [b"for A"]
    assert p.ext_fields["nextBeginOffset"] == "2"


async def test_mixed_tags_in_one_read_reach_only_their_pulls(broker: ServerProcess, client: RemotingClient) -> None:
    topic = "LpMixedTags"
    await create_topic(client, broker.addr, topic, queues=1)
    held_a = _hold(client, broker.addr, topic, 0, 0, expr="tagA")
    held_c = _hold(client, broker.addr, topic, 0, 0, expr="tagC")
    assert await _still_held(held_a, 0.3)
    tags = ["tagB", "tagA", "tagB", "tagA"]
    answers = await _send_in_one_write(broker.addr, [send_request(topic, b"%s-%d" % (t.encode(), i), {"TAGS": t})
                                                     for i, t in enumerate(tags)])
    assert all(a.code == ResponseCode.SUCCESS for a in answers)
    p = await asyncio.wait_for(held_a, SOON_S)
    assert p.code == ResponseCode.SUCCESS, p.remark
    assert await _drain(client, broker.addr, topic, 0, p, expr="tagA") == [b"tagA-1", b"tagA-3"]
    # tagC matched nothing: held, or at most told to pull again past what it cannot use, never given a message
    if not await _still_held(held_c, 0.5):
        c = held_c.result()
        assert c.code in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_NOT_FOUND), c.code
    else:
        held_c.cancel()


async def test_a_held_pull_still_times_out_and_the_broker_serves_on(broker: ServerProcess,
                                                                    client: RemotingClient) -> None:
    topic = "LpTimeout"
    await create_topic(client, broker.addr, topic, queues=1)
    t0 = time.monotonic()
    p = await client.invoke(broker.addr, pull_request(topic, 0, 0, suspend_ms=300), 10)
    assert p.code == ResponseCode.PULL_NOT_FOUND and time.monotonic() - t0 >= 0.25
    r = await client.invoke(broker.addr, send_request(topic, b"after"), 5)
    assert r.code == ResponseCode.SUCCESS


async def test_pulls_held_on_one_connection_are_answered_in_one_write(broker: ServerProcess,
                                                                      client: RemotingClient) -> None:
    """A push consumer keeps one pull held per queue over one connection: the answers of every
    queue one read of sends touched leave in one write (the consumer reads them all at once)."""
    topic, queues = "LpOneWrite", 12
    await create_topic(client, broker.addr, topic, queues=queues)
    host, port = broker.addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        pulls = [pull_request(topic, q, 0, suspend_ms=SUSPEND_MS) for q in range(queues)]
        writer.write(b"".join(encode_frame(p) for p in pulls))
        await writer.drain()
        await asyncio.sleep(0.3)  # held: nothing in the queues yet
        sent = {q: b"one-write-%d" % q for q in range(queues)}
        answers = await _send_in_one_write(broker.addr, [send_request(topic, sent[q], queue_id=q) for q in sent])
        assert all(a.code == ResponseCode.SUCCESS for a in answers), [a.remark for a in answers]
        data = await asyncio.wait_for(reader.read(1 << 20), SOON_S)
        got = FrameDecoder().feed(data)
        # every answer in the first read: they were written together (a few KiB, one segment on loopback)
        assert sorted(c.opaque for c in got) == sorted(p.opaque for p in pulls)
        by_opaque = {p.opaque: q for q, p in enumerate(pulls)}
        for c in got:
            assert c.code == ResponseCode.SUCCESS, c.remark
            assert [m.body for m in decode_records(c.body)] == [sent[by_opaque[c.opaque]]]
            assert c.ext_fields["nextBeginOffset"] == "1"
    finally:
        writer.close()
    r = await client.invoke(broker.addr, send_request(topic, b"after", queue_id=0), 5)
    assert r.code == ResponseCode.SUCCESS  # the broker serves on


async def test_each_pull_of_one_read_is_answered_on_its_own(broker: ServerProcess, client: RemotingClient) -> None:
    """The pulls of one socket read are handled in one batch: a refused one (a bad name, a bad
    number, a queue out of range) is answered on its own with RocketMQ's code and text, a pull
    with nothing to read and no suspend flag at once, held ones at their own (different)
    deadlines or when their message comes; none of them holds up or fails another."""
    topic = "LpOneReadOfPulls"
    await create_topic(client, broker.addr, topic, queues=3)
    bad_number = pull_request(topic, 0, 0)
    bad_number.ext_fields["queueOffset"] = "12x"
    pulls = {
        "held": pull_request(topic, 0, 0, suspend_ms=SUSPEND_MS),
        "bad name": pull_request("bad/topic", 0, 0),
        "bad number": bad_number,
        "no suspend": pull_request(topic, 1, 0),
        "queue out of range": pull_request(topic, 7, 0),
        "times out later": pull_request(topic, 2, 0, suspend_ms=900),
        "times out first": pull_request(topic, 1, 0, suspend_ms=300),
    }
    host, port = broker.addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        t0 = time.monotonic()
        writer.write(b"".join(encode_frame(p) for p in pulls.values()))
        await writer.drain()
        name_of = {p.opaque: name for name, p in pulls.items()}
        dec = FrameDecoder()
        got: dict[str, tuple[RemotingCommand, float]] = {}
        deadline = t0 + 10
        while len(got) < len(pulls) - 1:  # all but the one held for SUSPEND_MS
            left = deadline - time.monotonic()
            assert left > 0, f"answered only {sorted(got)}"
            data = await asyncio.wait_for(reader.read(65536), left)
            assert data, "the broker closed the connection"
            for cmd in dec.feed(data):
                got[name_of[cmd.opaque]] = (cmd, time.monotonic() - t0)
        assert "held" not in got
        code = {name: c.code for name, (c, _) in got.items()}
        assert code["bad name"] == code["bad number"] == code["queue out of range"] == ResponseCode.SYSTEM_ERROR
        assert "queueOffset" in (got["bad number"][0].remark or "")
        assert "queueId[7] is illegal" in (got["queue out of range"][0].remark or "")
        assert code["no suspend"] == code["times out first"] == code["times out later"] == ResponseCode.PULL_NOT_FOUND
        assert got["times out first"][1] >= 0.25 and got["times out later"][1] >= 0.85
        assert got["times out first"][1] < got["times out later"][1]
        r = await client.invoke(broker.addr, send_request(topic, b"for the held pull", queue_id=0), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        while True:  # the held pull, answered by the send
            left = deadline - time.monotonic()
            assert left > 0, "the held pull was not answered by its message"
            data = await asyncio.wait_for(reader.read(65536), left)
            assert data, "the broker closed the connection"
            cmds = dec.feed(data)
            if cmds:
                break
        assert [c.opaque for c in cmds] == [pulls["held"].opaque]
        assert cmds[0].code == ResponseCode.SUCCESS, cmds[0].remark
        assert [m.body for m in decode_records(cmds[0].body)] == [b"for the held pull"]
    finally:
        writer.close()
