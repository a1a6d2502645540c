"""Flow control under bursts larger than a socket holds, against real broker processes.

Each test names the failure it guards against. Counts: 200,000 small messages per burst, the
issue's target; each test stays well under a minute on an idle machine. The tests share the
module's cluster, each with topics and groups of its own (consumers count from the first offset).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

import fastmq
from fastmq.aio import Message, Producer
from fastmq.client.push_consumer import ConsumeStatus, PushConsumer
from fastmq.errors import RemotingTooMuchRequestError
from fastmq.testing import EmbeddedCluster
from tests.support import wait_until

pytestmark = pytest.mark.fastmq_cluster(broker_conf={"mappedFileSizeCommitLog": 64 * 1024 * 1024})

N = 200_000
SLOW_EVERY = 100  # every 100th message of the burst goes to the slow consumer's topic


def _topic_of(i: int) -> str:
    return "FlowSlow" if i % SLOW_EVERY == 0 else "FlowBurst"


async def _start_slow_consumer(ns: str, got: set[bytes]) -> PushConsumer:
    """A consumer that takes 5 ms a message, one at a time: the broker answers its long polls
    (woken by the burst's arrivals) while the burst is in flight."""
    async def slow(msgs):
        await asyncio.sleep(0.005)
        got.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS
    c = PushConsumer("GID_FLOW_SLOW", namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     consume_thread_min=1, consume_thread_max=1)
    c.subscribe("FlowSlow")
    c.register_message_listener(slow)
    await c.start()
    return c


async def _consume_all(ns: str, group: str, topic: str, want: int, seconds: float) -> set[bytes]:
    got: set[bytes] = set()

    async def listener(msgs):
        got.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS
    c = PushConsumer(group, namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     consume_message_batch_max_size=32)
    c.subscribe(topic)
    c.register_message_listener(listener)
    await c.start()
    try:
        await wait_until(lambda: len(got) >= want, seconds, every=0.2)
    finally:
        await c.shutdown()
    return got


def _unregister_failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "unregister client" in r.getMessage()]


async def test_burst_of_200k_send_async_at_default_settings(fastmq_cluster,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Guards against the wedged connection of issue 17: 100,000 ``send_async`` started at once
    with the default ``max_in_flight`` made client and broker both stop reading while their own
    write buffers were full, so every send timed out, the next consumer crawled and unregister
    timed out at shutdown."""
    caplog.set_level(logging.WARNING, logger="fastmq")
    slow_got: set[bytes] = set()
    slow = await _start_slow_consumer(fastmq_cluster.namesrv_addr, slow_got)
    try:
        p = Producer("PG_FLOW_AIO", namesrv_addr=fastmq_cluster.namesrv_addr)
        await p.start()
        try:
            await p.send(Message("FlowBurst", b"warm"))
            await p.send(Message("FlowSlow", b"warm"))
            failed: list[BaseException] = []
            ok = 0
            done = asyncio.get_running_loop().create_future()

            def on_sent(result, error) -> None:
                nonlocal ok
                if error is not None:
                    failed.append(error)
                else:
                    ok += 1
                if ok + len(failed) == N and not done.done():
                    done.set_result(None)
            for i in range(N):
                await p.send_async(Message(_topic_of(i), b"%d" % i), on_sent)
            await asyncio.wait_for(done, 120)
            assert not failed, f"{len(failed)} sends failed, first: {failed[:3]}"
        finally:
            t0 = time.monotonic()
            await p.shutdown()
            shutdown_s = time.monotonic() - t0
        assert _unregister_failures(caplog) == []
        assert shutdown_s < 10, shutdown_s
        burst = {b"%d" % i for i in range(N) if i % SLOW_EVERY}
        got = await _consume_all(fastmq_cluster.namesrv_addr, "GID_FLOW_AIO", "FlowBurst", len(burst) + 1, 90)
        assert burst <= got, f"{len(burst - got)} of {len(burst)} not consumed"
        slow_want = {b"%d" % i for i in range(0, N, SLOW_EVERY)}
        assert await wait_until(lambda: slow_want <= slow_got, 60, every=0.2), len(slow_want - slow_got)
    finally:
        await slow.shutdown()
    assert _unregister_failures(caplog) == []


def test_burst_of_200k_send_async_blocking_api(fastmq_cluster, caplog: pytest.LogCaptureFixture) -> None:
    """Guards against the same wedge through the blocking facade (``fastmq.Producer``), whose
    ``send_async`` hands each send to the background loop from the caller's thread."""
    caplog.set_level(logging.WARNING, logger="fastmq")
    lock = threading.Lock()
    failed: list[BaseException] = []
    counts = [0]
    all_done = threading.Event()

    def on_sent(result, error) -> None:
        with lock:
            counts[0] += 1
            if error is not None:
                failed.append(error)
            if counts[0] == N:
                all_done.set()
    p = fastmq.Producer("PG_FLOW_BLOCKING", namesrv_addr=fastmq_cluster.namesrv_addr)
    p.start()
    try:
        p.send(fastmq.Message("FlowBurstBlocking", b"warm"))
        for i in range(N):
            p.send_async(fastmq.Message("FlowBurstBlocking", b"%d" % i), on_sent)
        assert all_done.wait(120), counts[0]
        assert not failed, f"{len(failed)} sends failed, first: {failed[:3]}"
    finally:
        t0 = time.monotonic()
        p.shutdown()
        shutdown_s = time.monotonic() - t0
    assert _unregister_failures(caplog) == []
    assert shutdown_s < 10, shutdown_s
    got: set[bytes] = set()

    def listener(msgs):
        with lock:
            got.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS
    c = fastmq.PushConsumer("GID_FLOW_BLOCKING", namesrv_addr=fastmq_cluster.namesrv_addr,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            consume_message_batch_max_size=32)
    c.subscribe("FlowBurstBlocking")
    c.register_message_listener(listener)
    c.start()
    try:
        deadline = time.monotonic() + 90
        while len(got) < N + 1 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        c.shutdown()
    want = {b"%d" % i for i in range(N)}
    assert want <= got, f"{len(want - got)} of {N} not consumed"
    assert _unregister_failures(caplog) == []


async def test_send_async_without_waiting_fails_fast_when_the_window_is_full(fastmq_cluster) -> None:
    """Guards against a caller who asked not to wait being blocked anyway: with every in-flight
    permit out, ``send_async(wait=False)`` raises RemotingTooMuchRequestError at once, and the
    sends already started all complete."""
    async with Producer("PG_FLOW_NOWAIT", namesrv_addr=fastmq_cluster.namesrv_addr, max_in_flight=64) as p:
        await p.send(Message("FlowNoWait", b"warm"))
        futs = [await p.send_async(Message("FlowNoWait", b"w%d" % i)) for i in range(64)]
        t0 = time.monotonic()
        with pytest.raises(RemotingTooMuchRequestError, match="invokeAsyncImpl invoke too fast"):
            await p.send_async(Message("FlowNoWait", b"over"), wait=False)
        assert time.monotonic() - t0 < 1.0
        results = await asyncio.gather(*futs)
        assert all(r.status == "SEND_OK" for r in results)


def test_blocking_send_async_without_waiting_fails_fast(fastmq_cluster: EmbeddedCluster) -> None:
    """The blocking facade's ``wait=False``: refused at once with a typed error when its window is
    full, nothing lost of what was started."""
    done = threading.Semaphore(0)
    results: list[object] = []

    def on_sent(result, error) -> None:
        results.append(error or result)
        done.release()
    with fastmq.Producer("PG_FLOW_NOWAIT_B", namesrv_addr=fastmq_cluster.namesrv_addr, max_in_flight=1) as p:
        p.send(fastmq.Message("FlowNoWaitBlocking", b"warm"))
        refused = 0
        for i in range(200):
            try:
                p.send_async(fastmq.Message("FlowNoWaitBlocking", b"b%d" % i), on_sent, wait=False)
            except RemotingTooMuchRequestError as exc:
                assert "invoke too fast" in str(exc)
                refused += 1
        started = 200 - refused
        for _ in range(started):
            assert done.acquire(timeout=30)
        assert refused > 0 and started > 0
        assert all(getattr(r, "status", None) == "SEND_OK" for r in results), results[:3]
