"""The fastmq client against real ``fastmq-namesrv`` + ``fastmq-broker`` processes."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.push_consumer import ConsumeStatus, PullConsumer, PushConsumer
from fastmq.testing import EmbeddedCluster
from tests.support import wait_until
from tests.process.helpers import orderly_listener

pytestmark = pytest.mark.fastmq_cluster(  # retries come back through the delay levels: keep them short here
    broker_conf={"mappedFileSizeCommitLog": 16777216, "messageDelayLevel": " ".join(["200ms"] * 18)})


_until = wait_until


async def test_produce_and_push_consume_with_one_retry(fastmq_cluster: EmbeddedCluster) -> None:
    got: list[tuple[str, bytes, str | None, str | None]] = []
    failed: set[str] = set()

    def listener(msgs):
        for m in msgs:
            key = m.properties["UNIQ_KEY"]
            if m.body == b"m4" and key not in failed:
                failed.add(key)
                return ConsumeStatus.RECONSUME_LATER          # once: it must come back via %RETRY%
            got.append((m.topic, m.body, m.tags, m.properties.get("KEYS")))
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("GID_E2E", namesrv_addr=fastmq_cluster.namesrv_addr,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe("E2ETopic", "tagA || tagB")
    consumer.register_message_listener(listener)
    async with Producer("PG_E2E", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        for i in range(12):
            r = await p.send(Message("E2ETopic", f"m{i}".encode(),
                                     properties={"TAGS": "tagC" if i % 3 == 0 else "tagA", "KEYS": f"k{i}",
                                                 "userProp": f"v{i}"}))
            assert r.status == "SEND_OK" and len(r.msg_id) == 32
        await consumer.start()
        try:
            assert await _until(lambda: len(got) >= 8, 20), got
        finally:
            await consumer.shutdown()
    bodies = sorted(b for _, b, _, _ in got)
    assert bodies == sorted(f"m{i}".encode() for i in range(12) if i % 3)   # tagC filtered out
    assert all(t == "E2ETopic" and tag == "tagA" for t, _, tag, _ in got)       # retried one shows its real topic
    assert failed and len([b for b in bodies if b == b"m4"]) == 1


async def test_pull_consumer_and_offsets_survive_a_new_consumer(fastmq_cluster: EmbeddedCluster) -> None:
    async with Producer("PG_PULL", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        for i in range(20):
            await p.send(Message("PullTopic", f"p{i}".encode(), properties={"TAGS": "t"}))
    c = PullConsumer("GID_PULL", namesrv_addr=fastmq_cluster.namesrv_addr,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe("PullTopic")
    await c.start()
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(seen) < 10 and time.monotonic() < deadline:
            seen += [m.body for m in await c.poll(1.0)]
    finally:
        await c.shutdown()                                   # commits what was polled, persists offsets
    first = set(seen)
    c2 = PullConsumer("GID_PULL", namesrv_addr=fastmq_cluster.namesrv_addr,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c2.subscribe("PullTopic")
    await c2.start()
    rest: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(first | set(rest)) < 20 and time.monotonic() < deadline:
            rest += [m.body for m in await c2.poll(1.0)]
    finally:
        await c2.shutdown()
    assert first | set(rest) == {f"p{i}".encode() for i in range(20)}


async def test_a_batch_over_4_mib_goes_in_split_parts(fastmq_cluster: EmbeddedCluster) -> None:
    """12 MB of messages: one batch is refused (over maxMessageSize), split_batch's parts are
    each taken, and every message is stored once."""
    import os

    from fastmq.aio import split_batch
    from fastmq.errors import MessageValidationError

    msgs = [Message("SplitTopic", os.urandom(300 * 1024), properties={"KEYS": f"k{i}"}) for i in range(40)]
    async with Producer("PG_SPLIT", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        with pytest.raises(MessageValidationError, match="body size over max value"):
            await p.send_batch(msgs)
        parts = list(split_batch(msgs))
        assert [len(part) for part in parts] == [13, 13, 13, 1]  # 13 x 300 KiB fit in 4 MiB
        results = [await p.send_batch(part) for part in parts]
    assert all(r.status == "SEND_OK" for r in results)
    assert sum(len(r.msg_id.split(",")) for r in results) == 40


async def test_pull_consumer_assign_takes_exactly_the_given_queues(fastmq_cluster: EmbeddedCluster) -> None:
    """Lite pull ``assign``: no rebalance, only the queues given (two members of one group may
    hold the same queue), a new assignment replaces the old, offsets commit for the group, and
    subscribe and assign do not mix."""
    from fastmq.errors import ClientStateError, NoRouteError

    async with Producer("PG_ASSIGN", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        sent = {}
        for i in range(16):
            r = await p.send(Message("AssignTopic", f"a{i}".encode()))
            sent[f"a{i}".encode()] = r.message_queue.queue_id
    c = PullConsumer("GID_ASSIGN", namesrv_addr=fastmq_cluster.namesrv_addr,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    mqs = await c.fetch_message_queues("AssignTopic")
    assert [mq.queue_id for mq in mqs] == [0, 1, 2, 3]
    with pytest.raises(NoRouteError, match="Can not find Message Queue for this topic"):
        await c.fetch_message_queues("NoSuchAssignTopic")
    await c.assign(mqs[:2])
    with pytest.raises(ClientStateError, match="mutually exclusive"):
        c.subscribe("AssignTopic")
    await c.start()
    got: list[bytes] = []
    try:
        want = {b for b, q in sent.items() if q in (0, 1)}
        deadline = time.monotonic() + 20
        while set(got) != want and time.monotonic() < deadline:
            got += [m.body for m in await c.poll(0.5)]
        assert set(got) == want and len(got) == len(want)
        assert set(c.process_queues) == set(mqs[:2])
        await c.assign(mqs[2:])                        # replaces the assignment while running
        rest: list[bytes] = []
        want = {b for b, q in sent.items() if q in (2, 3)}
        deadline = time.monotonic() + 20
        while set(rest) != want and time.monotonic() < deadline:
            rest += [m.body for m in await c.poll(0.5)]
        assert set(rest) == want and set(c.process_queues) == set(mqs[2:])
        c.commit()
        await c.offset_store.persist_all()
    finally:
        await c.shutdown()
    subscriber = PullConsumer("GID_ASSIGN_SUB", namesrv_addr=fastmq_cluster.namesrv_addr)
    subscriber.subscribe("AssignTopic")
    with pytest.raises(ClientStateError, match="mutually exclusive"):
        await subscriber.assign(mqs)
    # the committed offsets belong to the group: an assignment of the same queues starts after them
    again = PullConsumer("GID_ASSIGN", namesrv_addr=fastmq_cluster.namesrv_addr,
                         consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    await again.assign(mqs[2:])
    await again.start()
    try:
        assert await again.poll(1.0) == []
    finally:
        await again.shutdown()


def test_blocking_facade_end_to_end(fastmq_cluster: EmbeddedCluster) -> None:
    """fastmq.Producer / fastmq.PushConsumer / fastmq.PullConsumer from plain (non-async) code."""
    import threading

    import fastmq

    with fastmq.Producer("PG_BLOCK", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        for i in range(4):
            assert p.send(fastmq.Message("BlockTopic", f"b{i}".encode(), properties={"TAGS": "t"})).status == "SEND_OK"
        answered = threading.Event()
        results: list[object] = []
        p.send_batch_async([fastmq.Message("BlockTopic", f"b{i}".encode(), properties={"TAGS": "t"}) for i in (4, 5)],
                           lambda r, e: (results.append(r if e is None else e), answered.set()))
        assert answered.wait(20) and results[0].status == "SEND_OK", results
        with pytest.raises(fastmq.MessageValidationError, match="the batch is empty"):
            p.send_batch_async([], lambda r, e: None)
    got: list[bytes] = []
    done = threading.Event()

    def listener(msgs):
        got.extend(m.body for m in msgs)
        if len(set(got)) >= 6:
            done.set()
        return fastmq.ConsumeStatus.CONSUME_SUCCESS

    c = fastmq.PushConsumer("GID_BLOCK", namesrv_addr=fastmq_cluster.namesrv_addr,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe("BlockTopic", "t")
    c.register_message_listener(listener)
    with c:
        assert done.wait(20), got
    assert set(got) == {f"b{i}".encode() for i in range(6)}
    pc = fastmq.PullConsumer("GID_BLOCK_PULL", namesrv_addr=fastmq_cluster.namesrv_addr,
                             consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    pc.subscribe("BlockTopic")
    polled: list[bytes] = []
    with pc:
        deadline = time.monotonic() + 20
        while len(set(polled)) < 6 and time.monotonic() < deadline:
            polled += [m.body for m in pc.poll(1.0)]
    assert set(polled) == set(got)


async def test_orderly_send_and_orderly_consume(fastmq_cluster: EmbeddedCluster) -> None:
    from fastmq.aio import hash_selector

    log: dict[int, list[int]] = {}
    refused: set[tuple[int, int]] = set()
    listener = orderly_listener(log, refused)

    async with Producer("PG_ORDER", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        for step in range(10):
            for order in range(5):
                r = await p.send_orderly(Message("OrderTopic", f"{order}:{step}".encode()), hash_selector, order)
                assert r.status == "SEND_OK"
    c = PushConsumer("GID_ORDER", namesrv_addr=fastmq_cluster.namesrv_addr,
                     orderly=True, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe("OrderTopic")
    c.register_message_listener(listener)
    await c.start()
    try:
        assert await _until(lambda: sum(len(v) for v in log.values()) >= 50, 30), log
    finally:
        await c.shutdown()
    assert refused == {(2, 3)}
    assert log == {order: list(range(10)) for order in range(5)}   # each order's steps, in order, once


async def test_broadcasting_every_member_gets_everything(fastmq_cluster: EmbeddedCluster, tmp_path) -> None:
    from fastmq.client.instance import ClientConfig

    received: list[list[bytes]] = [[], []]
    consumers = []
    for i in range(2):
        c = PushConsumer("GID_BCAST", message_model="BROADCASTING", consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                         client_config=ClientConfig(namesrv_addr=fastmq_cluster.namesrv_addr,
                                                    instance_name=f"bcast{i}"))
        c.offset_store.path = tmp_path / f"offsets-{i}.json"         # local offsets: one file per member
        c.subscribe("BcastTopic")
        c.register_message_listener(lambda msgs, box=received[i]: box.extend(m.body for m in msgs)
                                    or ConsumeStatus.CONSUME_SUCCESS)
        consumers.append(c)
    async with Producer("PG_BCAST", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        for i in range(10):
            await p.send(Message("BcastTopic", f"x{i}".encode()))
        for c in consumers:
            await c.start()
        try:
            want = {f"x{i}".encode() for i in range(10)}
            assert await _until(lambda: all(set(r) >= want for r in received), 20), received
        finally:
            for c in consumers:
                await c.shutdown()
    assert all((tmp_path / f"offsets-{i}.json").exists() for i in range(2))  # offsets kept locally


async def test_a_dropped_queue_leaves_no_pull_waiting(fastmq_cluster: EmbeddedCluster) -> None:
    """Pulls on an empty topic are held by the broker (long polling); dropping a queue cancels its
    pull, and the connection's table of requests awaiting an answer lets go of it."""
    async with Producer("PG_HELD", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        await p.send(Message("HeldTopic", b"x"))
    # from the last offset: nothing to pull
    consumer = PushConsumer("GID_HELD", namesrv_addr=fastmq_cluster.namesrv_addr)
    consumer.subscribe("HeldTopic")
    consumer.register_message_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    await consumer.start()
    try:
        # the topic was just created by the send: its route may take a moment to reach the consumer
        assert await _until(lambda: any(mq.topic == "HeldTopic" for mq in consumer.process_queues), 10)
        mqs = [mq for mq in consumer.process_queues if mq.topic == "HeldTopic"]
        pq = consumer.process_queues[mqs[0]]
        assert await _until(lambda: pq.pulling_from is not None, 10)
        conn = consumer.instance.remoting.open_connection(pq.pulling_from)
        assert conn is not None
        assert await _until(lambda: len(conn.pending) >= len(mqs), 10)
        await asyncio.sleep(0.2)  # every queue's pull is held now
        before = len(conn.pending)
        consumer.process_queues.pop(mqs[0])
        await consumer._drop(pq)
        assert len(conn.pending) == before - 1
    finally:
        await consumer.shutdown()


async def test_next_pull_leaves_before_the_listener_runs(fastmq_cluster: EmbeddedCluster, tmp_path: Path) -> None:
    """RocketMQ's order: an answer's messages go into the process queue, the queue's next pull is
    written, and only then does the listener get them: the broker has that pull while it runs."""
    async with Producer("PG_ORDER", namesrv_addr=fastmq_cluster.namesrv_addr, default_topic_queue_nums=1) as p:
        for i in range(3):
            await p.send(Message("OneQueueTopic", f"o{i}".encode()))
    pending_then: list[int] = []
    # broadcasting: no %RETRY% queue of the group is pulled, so a pull in flight while the
    # listener runs is the next one of the topic's only queue
    c = PushConsumer("GID_ORDER", namesrv_addr=fastmq_cluster.namesrv_addr,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     message_model="BROADCASTING")
    c.offset_store.path = tmp_path / "offsets.json"

    async def listener(msgs):
        pending_then.append(sum(len(conn.pending) for conn in c.instance.remoting._conns.values()))
        return ConsumeStatus.CONSUME_SUCCESS
    c.subscribe("OneQueueTopic")
    c.register_message_listener(listener)
    await c.start()
    try:
        assert await _until(lambda: len(pending_then) >= 3, 20), pending_then
    finally:
        await c.shutdown()
    assert all(n >= 1 for n in pending_then), pending_then


async def test_plain_listener_threads_all_start_with_the_consumer(fastmq_cluster: EmbeddedCluster) -> None:
    """A plain listener's consume threads are all running once ``start`` returns, and messages
    add none (a thread started under traffic held the loop up while it started); an ``async
    def`` listener's consumer starts none."""
    import threading

    def pool(group: str) -> list[str]:
        return sorted(t.name for t in threading.enumerate() if t.name.startswith(f"Consume_{group}_") and t.is_alive())
    ran_on: set[str] = set()
    got: list[bytes] = []

    def listener(msgs):
        ran_on.add(threading.current_thread().name)
        got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    async def async_listener(msgs):
        return ConsumeStatus.CONSUME_SUCCESS
    plain = PushConsumer("GID_PRESTART", namesrv_addr=fastmq_cluster.namesrv_addr,
                         consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                         consume_thread_min=3, consume_thread_max=3)
    plain.subscribe("PrestartTopic")
    plain.register_message_listener(listener)
    coro = PushConsumer("GID_PRESTART_ASYNC", namesrv_addr=fastmq_cluster.namesrv_addr,
                        consume_thread_min=3, consume_thread_max=3)
    coro.subscribe("PrestartTopic")
    coro.register_message_listener(async_listener)
    await plain.start()
    try:
        await coro.start()
        try:
            threads = [f"Consume_GID_PRESTART_{i}" for i in (1, 2, 3)]
            assert pool("GID_PRESTART") == threads     # before any message
            assert pool("GID_PRESTART_ASYNC") == []
            async with Producer("PG_PRESTART", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
                for i in range(40):
                    await p.send(Message("PrestartTopic", f"p{i}".encode()))
            assert await _until(lambda: len(set(got)) >= 40, 20), len(got)
            assert pool("GID_PRESTART") == threads and ran_on <= set(threads)
        finally:
            await coro.shutdown()
    finally:
        await plain.shutdown()
    assert await _until(lambda: not pool("GID_PRESTART"), 10), pool("GID_PRESTART")


async def test_reset_offset_by_time_reaches_a_consumer(fastmq_cluster: EmbeddedCluster) -> None:
    """mqadmin resetOffsetByTime's request: the broker pushes the offsets, the consumer drops its
    queues, commits them and reads the topic again from there."""
    from fastmq.protocol.codes import RequestCode
    from fastmq.protocol.command import create_request
    from fastmq.remoting import RemotingClient

    got: list[bytes] = []
    c = PushConsumer("GID_RESET_E2E", namesrv_addr=fastmq_cluster.namesrv_addr,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe("ResetTopic")
    c.register_message_listener(lambda msgs: got.extend(m.body for m in msgs) or ConsumeStatus.CONSUME_SUCCESS)
    async with Producer("PG_RESET_E2E", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
        for i in range(6):
            await p.send(Message("ResetTopic", f"r{i}".encode()))
        broker = p.instance.master_addr("broker-a")
    await c.start()
    admin = RemotingClient()
    try:
        assert await _until(lambda: len(got) == 6, 20), got
        await c.offset_store.persist_all()  # what the 5 s persist would do: the broker knows the group's offsets
        r = await admin.invoke(broker, create_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
            "topic": "ResetTopic", "group": "GID_RESET_E2E", "timestamp": 0, "isForce": "true"}), 5)
        assert r.code == 0, r.remark
        assert await _until(lambda: len(got) == 12, 20), got
        assert sorted(got[6:]) == sorted(got[:6])  # the whole topic again, once
    finally:
        await admin.close()
        await c.shutdown()
