"""Two consumers of one group on a backlog, the second joining late: every message delivered,
and duplicates only where RocketMQ's at-least-once contract allows them.

The bug these guard against: two consumers made in one process with the default instance name
shared one client id (``ip@pid``); the broker listed the two connections under that one id, so
both computed the same member's share of the queues (AllocateMessageQueueAveragely: the index of
the id in the list), consumed the same four of eight queues twice and left the other four
unconsumed. 4.9 names each producer and clustering consumer ``pid#nanoTime``. A broadcasting
consumer keeps ``DEFAULT``: its offsets file, found by that id, must outlive the process.
"""
from __future__ import annotations

import asyncio
import collections
from pathlib import Path
from typing import Any

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.instance import ClientConfig, ClientInstance
from fastmq.client.push_consumer import ConsumeStatus, PullConsumer, PushConsumer
from fastmq.errors import ClientStateError
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request, ext_int
from fastmq.remoting import RemotingClient
from fastmq.testing import running_cluster
from tests.support import wait_until
from tests.support import create_topic

pytestmark = pytest.mark.slow

TOPIC = "HandoverTopic"
QUEUES = 8
N = 20_000



async def _committed(admin: RemotingClient, broker: str, group: str) -> dict[int, int]:
    """The group's committed offset of each queue on the broker (-1: none yet)."""
    out = {}
    for q in range(QUEUES):
        r = await admin.invoke(broker, create_request(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": TOPIC, "queueId": q}), 5)
        out[q] = (ext_int(r, "offset", -1) or 0) if r.code == ResponseCode.SUCCESS else -1
    return out


class _Member:
    """One consumer of the group and what it delivered: (queue id, queue offset) in order."""

    def __init__(self, kind: str, group: str, namesrv: str) -> None:
        self.got: list[tuple[int, int]] = []
        self.foreign: list[tuple[set[int], int]] = []  # (held queues, queue of a message handed out)
        common: dict[str, Any] = {"namesrv_addr": namesrv, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}
        self.consumer: PullConsumer | PushConsumer
        if kind == "pull":
            self.consumer = PullConsumer(group, pull_batch_size=64, **common)
        else:
            self.consumer = PushConsumer(group, consume_message_batch_max_size=32, **common)

            async def listener(msgs: list[Any]) -> str:
                self.got.extend((m.queue_id, m.queue_offset) for m in msgs)
                return ConsumeStatus.CONSUME_SUCCESS
            self.consumer.register_message_listener(listener)
        self.consumer.subscribe(TOPIC)
        self._poller: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        if isinstance(self.consumer, PullConsumer):
            self._poller = asyncio.ensure_future(self._poll(self.consumer))

    async def _poll(self, c: PullConsumer) -> None:
        while True:
            msgs = await c.poll(0.2)
            # the old owner never hands out a queue it gave up (its buffered batches are dropped)
            held = {mq.queue_id for mq in c.process_queues if mq.topic == TOPIC}
            self.foreign.extend((held, m.queue_id) for m in msgs if m.queue_id not in held)
            self.got.extend((m.queue_id, m.queue_offset) for m in msgs)

    def queues(self) -> set[int]:
        return {mq.queue_id for mq in self.consumer.process_queues if mq.topic == TOPIC}

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        await self.consumer.shutdown()


@pytest.mark.parametrize("kind", ["pull", "push"])
async def test_a_second_member_joining_a_backlog_takes_half_without_duplicating_it(tmp_path: Path,
                                                                                   kind: str) -> None:
    group = f"GID_HANDOVER_{kind.upper()}"
    with running_cluster(tmp_path) as (ns, broker):
        admin = RemotingClient()
        members: list[_Member] = []
        try:
            await create_topic(admin, broker.addr, TOPIC, queues=QUEUES, routed_by=ns.addr)
            async with Producer("PG_HANDOVER", namesrv_addr=ns.addr) as p:
                for i in range(0, N, 32):
                    await p.send_batch([Message(TOPIC, b"%d" % j) for j in range(i, min(N, i + 32))])
            a = _Member(kind, group, ns.addr)
            members.append(a)
            await a.start()
            assert await wait_until(lambda: len(a.got) >= N // 10, 30), len(a.got)
            committed_before_b = await _committed(admin, broker.addr, group)
            b = _Member(kind, group, ns.addr)
            members.append(b)
            await b.start()

            def drained() -> bool:
                return len(set(a.got) | set(b.got)) >= N

            def split() -> bool:
                qa, qb = a.queues(), b.queues()
                return not qa & qb and qa | qb == set(range(QUEUES)) and len(qa) == len(qb) == QUEUES // 2
            assert await wait_until(drained, 45), len(set(a.got) | set(b.got))
            assert await wait_until(split, 30), (a.queues(), b.queues())
            moved = b.queues()
            # default instance names, yet two ids: each member its own share of the queues
            assert a.consumer.instance.client_id != b.consumer.instance.client_id
        finally:
            for m in members:
                await m.stop()
            await admin.close()

    # nothing lost: every queue's offsets from 0 on, N in all
    every = collections.Counter(a.got) + collections.Counter(b.got)
    ends = {q: 1 + max(o for qq, o in every if qq == q) for q in range(QUEUES)}
    assert set(every) == {(q, o) for q in range(QUEUES) for o in range(ends[q])} and len(every) == N, ends
    assert not a.foreign and not b.foreign, (a.foreign[:3], b.foreign[:3])
    # Duplicates only in the hand-over window 4.9 allows: on a queue that moved from A to B, from
    # the committed offset B started at up to where A stopped, each delivered once by each.
    dups = {k: n for k, n in every.items() if n > 1}
    count_a, count_b = collections.Counter(a.got), collections.Counter(b.got)
    b_start = {q: min((o for qq, o in b.got if qq == q), default=ends[q]) for q in moved}
    for (q, o), n in dups.items():
        assert n == 2 and count_a[(q, o)] == 1 and count_b[(q, o)] == 1, ((q, o), n)
        assert q in moved and o >= b_start[q], ((q, o), b_start)
    # B started where the group had committed, never below what A had committed when B joined
    assert all(b_start[q] >= committed_before_b[q] for q in moved), (b_start, committed_before_b)
    print(f"{kind}: {len(every)} messages, {sum(dups.values()) - len(dups)} duplicates, A {len(a.got)} B {len(b.got)}")


async def test_two_consumers_of_a_group_under_one_client_id_are_refused(tmp_path: Path) -> None:
    """As MQClientInstance.registerConsumer: a second consumer of a group under a client id in use
    is refused with 4.9's text, whether it shares the instance or only the id; the first goes on."""
    with running_cluster(tmp_path) as (ns, _):
        config = ClientConfig(namesrv_addr=ns.addr, instance_name="same")
        first = PullConsumer("GID_SAME_ID", client_config=config)
        first.subscribe(TOPIC)
        await first.start()
        try:
            for second in (PullConsumer("GID_SAME_ID", client_config=config),
                           PushConsumer("GID_SAME_ID", instance=first.instance)):
                second.subscribe(TOPIC)
                if isinstance(second, PushConsumer):
                    second.register_message_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
                with pytest.raises(ClientStateError, match=r"The consumer group\[GID_SAME_ID\] has been created "
                                                           r"before, specify another name please"):
                    await second.start()
                await second.shutdown()  # (never started: nothing to undo)
            assert first.instance.consumers["GID_SAME_ID"] is first
            other = PullConsumer("GID_OTHER", client_config=config)  # another group: fine
            other.subscribe(TOPIC)
            await other.start()
            await other.shutdown()
        finally:
            await first.shutdown()
        again = PullConsumer("GID_SAME_ID", client_config=config)  # the id is free after a shutdown
        again.subscribe(TOPIC)
        await again.start()
        await again.shutdown()


def test_default_instance_names_are_unique_except_for_broadcasting() -> None:
    """4.9's changeInstanceNameToPID: "DEFAULT" becomes pid#nanoTime for each producer and
    clustering consumer; a broadcasting consumer keeps DEFAULT, the directory of its offsets."""
    config = ClientConfig(namesrv_addr="127.0.0.1:9")
    ids = {config.make_client_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(i.startswith(f"{config.client_ip}@") and "#" in i for i in ids)
    assert config.make_client_id(keep_default_name=True) == f"{config.client_ip}@DEFAULT"
    named = ClientConfig(namesrv_addr="127.0.0.1:9", instance_name="x")
    assert named.make_client_id() == named.make_client_id(True) == f"{named.client_ip}@x"
    assert ClientInstance(config).client_id != ClientInstance(config).client_id
    c1, c2 = PullConsumer("GID_IDS", client_config=config), PushConsumer("GID_IDS", client_config=config)
    assert c1.instance.client_id != c2.instance.client_id
    bcast = PushConsumer("GID_IDS", client_config=config, message_model="BROADCASTING")
    assert bcast.instance.client_id == f"{config.client_ip}@DEFAULT"
    assert Producer("PG_IDS", client_config=config).instance.client_id not in (c1.instance.client_id,
                                                                               c2.instance.client_id)


_BROADCAST_MEMBER = """
import asyncio, sys
from fastmq.client.push_consumer import ConsumeStatus, PushConsumer

async def main(namesrv, want):
    got = []
    c = PushConsumer("GID_BCAST_RESTART", namesrv_addr=namesrv, message_model="BROADCASTING",
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe("BcastRestartTopic")
    c.register_message_listener(lambda msgs: got.extend(m.body for m in msgs) or ConsumeStatus.CONSUME_SUCCESS)
    await c.start()
    for _ in range(300):  # bounded: 30 s
        if len(got) >= want:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # anything more would arrive now (a re-delivery)
    await c.shutdown()
    print(" ".join(sorted(b.decode() for b in got)))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


async def test_a_restarted_broadcasting_consumer_resumes_from_its_local_offsets(tmp_path: Path) -> None:
    """A broadcasting consumer keeps the DEFAULT instance name (4.9), so a new process finds the
    offsets file the last one wrote and goes on from there: with the pid in the id, each process
    had a file of its own and began again from CONSUME_FROM_FIRST_OFFSET."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "rocketmq.client.localOffsetStoreDir": str(tmp_path / "offsets")}

    def member(namesrv: str, want: int) -> list[str]:
        out = subprocess.run([sys.executable, "-c", _BROADCAST_MEMBER, namesrv, str(want)], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout.split()

    with running_cluster(tmp_path) as (ns, _):
        async with Producer("PG_BCAST_RESTART", namesrv_addr=ns.addr) as p:
            for i in range(5):
                await p.send(Message("BcastRestartTopic", f"a{i}".encode()))
            assert await asyncio.to_thread(member, ns.addr, 5) == [f"a{i}" for i in range(5)]
            for i in range(5):
                await p.send(Message("BcastRestartTopic", f"b{i}".encode()))
            assert await asyncio.to_thread(member, ns.addr, 5) == [f"b{i}" for i in range(5)]
