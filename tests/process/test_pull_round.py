"""A caught-up consumer's pull round against a real ``fastmq-broker``: the pull that finds its
queue's end (half of a push consumer's pulls) is held without the store's full read, and what it
is answered, held, woken or timed out, is 4.9's answer in every field.

The queue has messages, so these pulls take the processor's short way (``caught_up``); the tests
of ``test_long_polling_process`` hold pulls on empty queues, which the full read decides.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Iterator

import pytest

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import RemotingCommand, create_request
from fastmq.protocol.message import decode_records
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, running_cluster
from tests.support import create_topic, pull_request, send_request

SOON_S = 5.0  # "without waiting for the suspend timeout", on a busy machine


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("pull-round")
    with running_cluster(root, autoCreateTopicEnable="false") as (_ns, b):
        yield b


async def _topic_with(client: RemotingClient, addr: str, topic: str, n: int) -> None:
    await create_topic(client, addr, topic, queues=1)
    for i in range(n):
        r = await client.invoke(addr, send_request(topic, b"m%d" % i), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark


def _pull(topic: str, offset: int, *, suspend_ms: int = 0, commit: int | None = None,
          group: str = "CG_ROUND") -> RemotingCommand:
    req = pull_request(topic, 0, offset, group=group, suspend_ms=suspend_ms)
    if commit is not None:  # the push consumer's commitOffset flag rides on the pull
        req.ext_fields["sysFlag"] = str(int(req.ext_fields["sysFlag"]) | 0x1)
        req.ext_fields["commitOffset"] = str(commit)
    return req


def _offsets(resp: RemotingCommand) -> tuple[str, str, str, str]:
    f = resp.ext_fields
    return f["suggestWhichBrokerId"], f["nextBeginOffset"], f["minOffset"], f["maxOffset"]


async def _committed(client: RemotingClient, addr: str, topic: str, group: str = "CG_ROUND") -> str:
    q = await client.invoke(addr, create_request(RequestCode.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": 0}), 5)
    assert q.code == ResponseCode.SUCCESS, q.remark
    return q.ext_fields["offset"]


async def test_a_caught_up_pull_is_held_commits_its_offset_and_gets_the_next_message(
        broker: ServerProcess, client: RemotingClient) -> None:
    topic = "RoundHeld"
    await _topic_with(client, broker.addr, topic, 3)
    held = asyncio.ensure_future(client.invoke(broker.addr, _pull(topic, 3, suspend_ms=15_000, commit=2), 30))
    await asyncio.sleep(0.3)
    assert not held.done()
    assert await _committed(client, broker.addr, topic) == "2"  # committed when held, not when answered
    t0 = time.monotonic()
    r = await client.invoke(broker.addr, send_request(topic, b"next"), 5)
    assert r.code == ResponseCode.SUCCESS
    p = await asyncio.wait_for(held, SOON_S)
    assert time.monotonic() - t0 < SOON_S
    assert p.code == ResponseCode.SUCCESS and p.remark == "FOUND", p.remark
    assert _offsets(p) == ("0", "4", "0", "4")
    assert [m.body for m in decode_records(p.body)] == [b"next"]


async def test_a_caught_up_pull_without_suspend_is_not_found_with_4_9s_fields(
        broker: ServerProcess, client: RemotingClient) -> None:
    topic = "RoundNoSuspend"
    await _topic_with(client, broker.addr, topic, 3)
    p = await client.invoke(broker.addr, _pull(topic, 3, commit=1), 5)
    assert (p.code, p.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    assert _offsets(p) == ("0", "3", "0", "3")
    assert await _committed(client, broker.addr, topic) == "1"


async def test_a_caught_up_held_pull_times_out_with_4_9s_answer(broker: ServerProcess,
                                                               client: RemotingClient) -> None:
    topic = "RoundTimeout"
    await _topic_with(client, broker.addr, topic, 2)
    t0 = time.monotonic()
    p = await client.invoke(broker.addr, _pull(topic, 2, suspend_ms=300), 10)
    assert time.monotonic() - t0 >= 0.25
    assert (p.code, p.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    assert _offsets(p) == ("0", "2", "0", "2")


async def test_a_pull_past_the_end_with_suspend_is_moved_not_held(broker: ServerProcess,
                                                                 client: RemotingClient) -> None:
    """Only the exact end is the caught-up case: an offset past it is OFFSET_OVERFLOW_BADLY,
    answered at once with the queue's max to start again from."""
    topic = "RoundPastEnd"
    await _topic_with(client, broker.addr, topic, 2)
    t0 = time.monotonic()
    p = await client.invoke(broker.addr, _pull(topic, 9, suspend_ms=15_000), 10)
    assert time.monotonic() - t0 < SOON_S
    assert (p.code, p.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY")
    assert _offsets(p) == ("0", "2", "0", "2")


async def test_a_held_pull_woken_after_its_topic_lost_read_permission_is_refused(
        broker: ServerProcess, client: RemotingClient) -> None:
    """The woken pull runs every check again (4.9's executeRequestWhenWakeup): a topic made
    write-only while the pull waited answers it NO_PERMISSION, not the message."""
    topic = "RoundPermLost"
    await _topic_with(client, broker.addr, topic, 1)
    held = asyncio.ensure_future(client.invoke(broker.addr, _pull(topic, 1, suspend_ms=15_000), 30))
    await asyncio.sleep(0.3)
    assert not held.done()
    await create_topic(client, broker.addr, topic, queues=1, perm=2)  # PERM_WRITE only
    r = await client.invoke(broker.addr, send_request(topic, b"unseen"), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    p = await asyncio.wait_for(held, SOON_S)
    assert (p.code, p.remark) == (ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
    again = await client.invoke(broker.addr, send_request(topic, b"served on"), 5)
    assert again.code == ResponseCode.SUCCESS  # the broker serves on


@pytest.mark.parametrize("part, writes, held", [("all", 3, 64), ("sends", 0, 64), ("held", 0, 64 + 48)])
def test_the_consume_round_benchmark_runs_each_part(part: str, writes: int, held: int) -> None:
    """``benchmarks/pull_round_instructions.py``'s in-process round (what valgrind counts), run
    without valgrind: the whole round answers one write per read of sends and leaves one pull
    held per queue; the sends alone answer nobody; the held pulls alone are all held."""
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "pull_round_instructions.py"), "--run", "3",
                          "--part", part], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"messages": 48, "consumer_writes": writes,
                                                                "held": held}
