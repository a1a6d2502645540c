"""A plain listener's batches finished by many consume threads at once: the process queue and the
committed offset must come out exactly right however the threads' outcomes reach the loop, and
what a listener refuses (an exception, RECONSUME_LATER, no status) must be sent back
(CONSUMER_SEND_MSG_BACK) before its offset is committed, as RocketMQ 4.9's processConsumeResult
does. (Kept from the e2etail branch's A/B of moving that settling onto the threads, which was
not landed: benchmarks/results/profiles/README.md.)"""
from __future__ import annotations

import asyncio
import random
import threading
import time

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.process_queue import ProcessQueue
from fastmq.client.push_consumer import ConsumeStatus, PushConsumer
from fastmq.protocol.message import MessageExt
from fastmq.protocol.message_queue import MessageQueue
from tests.support import wait_until

pytestmark = pytest.mark.fastmq_cluster(  # a refused message comes back through the delay levels: keep them short
    broker_conf={"mappedFileSizeCommitLog": 16777216, "messageDelayLevel": " ".join(["200ms"] * 18)})

MQ = MessageQueue("T", "b", 0)
N = 2048


def _watch_offsets(c: PushConsumer) -> list[int]:
    """Every offset the store holds for MQ after an update, in the order they were stored."""
    seen: list[int] = []
    update = c.offset_store.update

    def recording(mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        update(mq, offset, increase_only)
        seen.append(c.offset_store.table[mq])
    c.offset_store.update = recording  # type: ignore[method-assign]
    return seen


@pytest.fixture
async def consumer():
    c = PushConsumer("G", namesrv_addr="127.0.0.1:1", consume_message_batch_max_size=1, consume_thread_min=16,
                     consume_thread_max=16)
    try:
        yield c
    finally:
        c._workers.shutdown()
        await c.instance.shutdown()


async def test_many_threads_finishing_at_once_leave_the_queue_and_offset_exact(consumer) -> None:
    """16 threads, 2,048 messages in pull answers of 32 put while the threads commit, listeners
    of uneven length (so batches finish out of order), every 97th refused: at the end nothing is
    held, no byte is counted, the offset is one past the last and never went back, every batch
    was counted once and exactly the refused ones were sent back."""
    c = consumer
    sent_back: list[int] = []

    async def send_back(m: MessageExt) -> bool:
        sent_back.append(m.queue_offset)
        return True
    c._send_back = send_back  # type: ignore[method-assign]
    offsets = _watch_offsets(c)
    rng = random.Random(7)
    pauses = [rng.choice((0, 0, 0.0002, 0.001)) for _ in range(N)]
    threads: set[int] = set()

    def listener(msgs: list[MessageExt]) -> str:
        threads.add(threading.get_ident())
        o = msgs[0].queue_offset
        time.sleep(pauses[o])
        if o % 97 == 5:
            return ConsumeStatus.RECONSUME_LATER if o % 2 else "not a status"
        return ConsumeStatus.CONSUME_SUCCESS
    c.register_message_listener(listener)
    c._workers.prestart()
    pq = ProcessQueue(MQ)
    for start in range(0, N, 32):
        msgs = [MessageExt("T", b"x" * (1 + o % 5), queue_offset=o) for o in range(start, start + 32)]
        pq.put(msgs)
        await c._deliver(pq, msgs)
        await asyncio.sleep(0)
    assert await wait_until(lambda: c.offset_store.table.get(MQ) == N, 30), (len(pq.msgs), offsets[-3:])
    assert not pq.msgs and pq.size_bytes == 0 and pq.ordered
    assert offsets == sorted(offsets)
    assert sorted(sent_back) == [o for o in range(N) if o % 97 == 5]
    assert pq.counters.consumes == N and pq.counters.consumed_failed == len(sent_back)
    assert pq.counters.consumed_ok == N - len(sent_back)
    assert len(threads) > 1 and threading.get_ident() not in threads


async def test_a_dropped_queue_is_not_committed_by_a_late_thread(consumer) -> None:
    """A batch whose queue was dropped while its listener ran (a rebalance gave the queue away)
    moves no offset: the queue's new owner starts from what was persisted."""
    c = consumer
    gate = threading.Event()

    def listener(msgs: list[MessageExt]) -> str:
        gate.wait(10)
        return ConsumeStatus.CONSUME_SUCCESS
    c.register_message_listener(listener)
    pq = ProcessQueue(MQ)
    msgs = [MessageExt("T", b"x", queue_offset=o) for o in range(4)]
    pq.put(msgs)
    await c._deliver(pq, msgs)
    await c._drop(pq)                          # (no broker to persist to: logged, then forgotten)
    gate.set()
    assert await wait_until(lambda: pq.counters.consumes == 4, 10)  # each batch counted after the fold
    await asyncio.sleep(0.05)
    assert MQ not in c.offset_store.table and len(pq.msgs) == 4


async def test_threads_commit_every_queue_and_refusals_come_back_through_the_broker(fastmq_cluster) -> None:
    """A real broker, 4 queues, 16 consume threads: a listener that raises for some messages and
    answers RECONSUME_LATER for others the first time they come. Each refused message is sent back
    and comes again from %RETRY% (its reconsume count 1, its own topic restored); each is consumed
    once in the end; and the offsets the consumer commits to the broker are each queue's end."""
    n = 400
    group = "GID_ON_THREAD"
    ok: dict[bytes, int] = {}
    refused: set[bytes] = set()
    wrong: list[str] = []  # (an assert in the listener would only make it a refusal)
    lock = threading.Lock()

    def listener(msgs: list[MessageExt]) -> str:
        assert len(msgs) == 1
        m = msgs[0]
        i = int(m.body[1:])
        time.sleep(0.0005 if i % 3 else 0)
        with lock:
            if i % 40 in (3, 23) and m.body not in refused:
                refused.add(m.body)
                if i % 40 == 3:
                    raise ValueError("refused by raising")
                return ConsumeStatus.RECONSUME_LATER
            if m.body in ok or m.topic != "OnThreadTopic":
                wrong.append(f"{m.body!r} {m.topic}")
            ok[m.body] = m.reconsume_times
        return ConsumeStatus.CONSUME_SUCCESS

    async with Producer("PG_ON_THREAD", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        queues: dict[int, int] = {}
        for i in range(n):
            r = await p.send(Message("OnThreadTopic", f"m{i}".encode()))
            assert r.status == "SEND_OK"
            q = r.message_queue.queue_id
            queues[q] = max(queues.get(q, 0), r.queue_offset + 1)
        consumer = PushConsumer(group, namesrv_addr=fastmq_cluster.namesrv_addr,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                consume_thread_min=16, consume_thread_max=16)
        consumer.subscribe("OnThreadTopic")
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            assert await wait_until(lambda: len(ok) == n, 60), (len(ok), len(refused))

            def drained() -> bool:
                held = {mq.queue_id: pq for mq, pq in consumer.process_queues.items() if mq.topic == "OnThreadTopic"}
                return len(held) == len(queues) and all(
                    not pq.msgs and consumer.offset_store.table.get(pq.mq) == queues[q] for q, pq in held.items())
            assert await wait_until(drained, 20)
        finally:
            await consumer.shutdown()  # persists the offsets to the broker
        assert not wrong
        assert len(refused) == 20 and all(ok[b] == 1 for b in refused)
        assert all(t == 0 for b, t in ok.items() if b not in refused)
        api = p.instance.api
        addr = p.instance.any_broker_addr(r.message_queue.broker_name)
        assert addr is not None
        broker = r.message_queue.broker_name
        committed = {q: await api.query_consumer_offset(addr, group, MessageQueue("OnThreadTopic", broker, q))
                     for q in queues}
    assert committed == queues
