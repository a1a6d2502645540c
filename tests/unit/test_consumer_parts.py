"""Consumer internals that need no broker: process queues, message unwrapping, the local offset
store, how a push consumer hands batches to its listener."""
from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.client.instance import ClientConfig, ClientInstance
from fastmq.client.offset_store import LocalFileOffsetStore
from fastmq.client.process_queue import ProcessQueue
from fastmq.client.pull_service import _unwrap, _unwrap_all, inflated
from fastmq.client.push_consumer import ConsumeStatus, PushConsumer
from fastmq.remoting.loop import Resume
from fastmq.protocol.message import MessageExt, MessageSysFlag
from fastmq.protocol.message_queue import MessageQueue
from tests.support import examples

MQ = MessageQueue("T", "b", 0)


def _m(off: int, body: bytes = b"x") -> MessageExt:
    return MessageExt("T", body, queue_offset=off)


async def _deliver_offsets(c: PushConsumer, listener: object, n: int) -> ProcessQueue:
    """Register ``listener`` and hand it offsets 0..n-1 of MQ, as one pull answer would."""
    c.register_message_listener(listener)  # type: ignore[arg-type]
    pq = ProcessQueue(MQ)
    msgs = [_m(i) for i in range(n)]
    pq.put(msgs)
    await c._deliver(pq, msgs)
    return pq


def test_commit_offset_is_the_smallest_in_flight() -> None:
    pq = ProcessQueue(MQ)
    pq.put([_m(i) for i in range(10, 15)])
    assert pq.remove([_m(11), _m(12)]) == 10        # 10 still being consumed: commit stays at 10
    assert pq.remove([_m(10)]) == 13
    assert pq.remove([_m(13), _m(14)]) == 15        # all done: the next offset
    pq.put([_m(14)])                                # a duplicate of a consumed offset is not re-added twice
    assert pq.size_bytes == 1


def test_commit_offset_after_an_offset_moved_back() -> None:
    pq = ProcessQueue(MQ)
    pq.put([_m(i) for i in range(10, 15)])
    assert pq.remove([_m(10), _m(11)]) == 12
    pq.put([_m(5), _m(6)])                          # the broker moved the offset back: 5 arrives after 12
    assert not pq.ordered
    assert pq.remove([_m(12)]) == 5                 # the smallest in flight, not the oldest inserted
    assert pq.remove([_m(5), _m(6)]) == 13
    assert pq.remove([_m(13), _m(14)]) == 15
    assert pq.ordered                               # empty again: insertion order is offset order again


# a process queue's life: answers (a start offset, a length) put, and batches of what is held removed
_OPS = st.lists(st.one_of(st.tuples(st.just("put"), st.integers(0, 60), st.integers(1, 8)),
                          st.tuples(st.just("remove"), st.lists(st.integers(0, 70), max_size=8))), max_size=40)


@settings(max_examples=examples(300), deadline=None)
@given(_OPS)
def test_process_queue_matches_a_sorted_model(ops) -> None:
    """What RocketMQ's TreeMap answers: the smallest offset held, else one past the largest seen."""
    pq = ProcessQueue(MQ)
    held: dict[int, int] = {}
    max_seen = -1
    for op in ops:
        if op[0] == "put":
            _, start, n = op
            pq.put([_m(o, b"y" * (o % 3)) for o in range(start, start + n)])
            for o in range(start, start + n):
                held.setdefault(o, o % 3)
            max_seen = max(max_seen, start + n - 1)
        else:
            got = pq.remove([_m(o, b"y" * (o % 3)) for o in op[1]])
            for o in op[1]:
                held.pop(o, None)
            assert got == (min(held) if held else (max_seen + 1 if max_seen >= 0 else -1))
        assert sorted(pq.msgs) == sorted(held)
        assert pq.size_bytes == sum(held.values())
        assert pq.max_seen == max_seen


def test_unwrap_all_touches_only_what_needs_it() -> None:
    plain = MessageExt("T", b"x", properties={"RETRY_TOPIC": "Other"})
    packed = MessageExt("T", zlib.compress(b"hi"), sys_flag=MessageSysFlag.COMPRESSED)
    assert _unwrap_all([plain], "G", retry=False) is False
    # a compressed body stays as it came (the queue's budget counts it so); it is only reported
    assert _unwrap_all([plain, packed], "G", retry=False) is True
    assert (plain.topic, packed.body) == ("T", zlib.compress(b"hi"))
    retried = MessageExt("%RETRY%G", b"x", properties={"RETRY_TOPIC": "T"})
    assert _unwrap_all([retried], "G", retry=True) is False
    assert retried.topic == "T"


def test_inflated_copies_only_the_compressed() -> None:
    plain = MessageExt("T", b"x")
    packed = MessageExt("T", zlib.compress(b"hi" * 100), sys_flag=MessageSysFlag.COMPRESSED)
    batch = [plain]
    assert inflated(batch) is batch  # nothing to inflate: the same list
    out = inflated([plain, packed])
    assert out[0] is plain and out[1] is not packed and out[1].body == b"hi" * 100
    assert packed.body == zlib.compress(b"hi" * 100)  # the queue's message keeps what it counted
    bad = MessageExt("T", b"not zlib", sys_flag=MessageSysFlag.COMPRESSED)
    assert inflated([bad])[0].body == b"not zlib"  # delivered as it came, with a warning


def test_unwrap_restores_retry_topic_and_inflates() -> None:
    m = MessageExt("%RETRY%G", zlib.compress(b"hello"), properties={"RETRY_TOPIC": "T"},
                   sys_flag=MessageSysFlag.COMPRESSED)
    out = _unwrap(m, "G")
    assert (out.topic, out.body) == ("T", b"hello")
    other = _unwrap(MessageExt("%RETRY%Other", b"x", properties={"RETRY_TOPIC": "T"}), "G")
    assert other.topic == "%RETRY%Other"


async def test_local_offset_store_round_trip(tmp_path) -> None:
    inst = ClientInstance(ClientConfig(namesrv_addr=[]))
    path = tmp_path / "offsets.json"
    s = LocalFileOffsetStore(inst, "G", path)
    assert await s.read(MQ, from_store=True) == -1
    s.update(MQ, 42)
    s.update(MQ, 40, increase_only=True)
    await s.persist_all()
    again = LocalFileOffsetStore(inst, "G", path)
    assert await again.read(MQ, from_store=True) == 42
    await inst.shutdown()


@pytest.fixture
async def push_consumer():
    c = PushConsumer("G", namesrv_addr="127.0.0.1:1", consume_message_batch_max_size=2, consume_thread_min=3,
                     consume_thread_max=3)
    try:
        yield c
    finally:
        c._workers.shutdown()
        await c.instance.shutdown()


async def _until(cond, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


async def test_async_listener_that_never_waits_commits_at_once(push_consumer) -> None:
    c = push_consumer
    seen = []

    async def listener(msgs):
        seen.append([m.queue_offset for m in msgs])
        return ConsumeStatus.CONSUME_SUCCESS
    pq = await _deliver_offsets(c, listener, 5)
    assert seen == [[0, 1], [2, 3], [4]]
    assert c.offset_store.table[MQ] == 5 and not pq.msgs
    assert c._slots._value == 3


async def test_async_listener_that_waits_is_finished_by_a_task(push_consumer) -> None:
    c = push_consumer
    gate = asyncio.Event()

    async def listener(msgs):
        await gate.wait()
        await asyncio.sleep(0)
        return ConsumeStatus.CONSUME_SUCCESS
    await _deliver_offsets(c, listener, 4)
    assert MQ not in c.offset_store.table and c._slots._value == 1  # both batches hold their slot
    gate.set()
    await _until(lambda: c.offset_store.table.get(MQ) == 4)
    assert c._slots._value == 3


def _record_send_backs(c: PushConsumer) -> list[int]:
    """Stand in for the broker's CONSUMER_SEND_MSG_BACK: the offsets sent back, all taken."""
    sent_back: list[int] = []

    async def send_back(m):
        sent_back.append(m.queue_offset)
        return True
    c._send_back = send_back  # type: ignore[method-assign]
    return sent_back


async def test_async_listener_failures_are_sent_back(push_consumer) -> None:
    c = push_consumer
    sent_back = _record_send_backs(c)

    async def listener(msgs):
        if msgs[0].queue_offset == 0:
            raise ValueError("at once")
        await asyncio.sleep(0)
        if msgs[0].queue_offset == 2:
            raise ValueError("after a wait")
        return ConsumeStatus.RECONSUME_LATER if msgs[0].queue_offset == 4 else "whatever"
    await _deliver_offsets(c, listener, 8)
    await _until(lambda: c.offset_store.table.get(MQ) == 8)
    assert sorted(sent_back) == list(range(8))


async def test_plain_listener_runs_on_the_pool(push_consumer) -> None:
    c = push_consumer
    threads = set()

    def listener(msgs):
        threads.add(threading.get_ident())
        return ConsumeStatus.CONSUME_SUCCESS
    await _deliver_offsets(c, listener, 4)
    await _until(lambda: c.offset_store.table.get(MQ) == 4)
    assert threading.get_ident() not in threads


async def test_plain_listener_hand_offs_follow_its_speed(push_consumer) -> None:
    """A slow plain listener gets one hand-off per batch, which the threads share; a listener
    that answers within microseconds gets a whole pull answer in one hand-off. Either way every
    failure is sent back and every offset committed."""
    c = push_consumer
    sent_back = _record_send_backs(c)
    busy: list[int] = []
    most = [0]
    lock = threading.Lock()

    def slow(msgs):
        with lock:
            busy.append(1)
            most[0] = max(most[0], len(busy))
        time.sleep(0.05)
        with lock:
            busy.pop()
        return ConsumeStatus.CONSUME_SUCCESS
    await _deliver_offsets(c, slow, 6)          # three batches of two, the listener still unmeasured
    await _until(lambda: c.offset_store.table.get(MQ) == 6)
    assert most[0] >= 2                         # batches of one answer ran side by side
    assert c._listen_us > 10_000

    calls: list[list[int]] = []
    threads: set[int] = set()

    def quick(msgs):
        calls.append([m.queue_offset for m in msgs])
        threads.add(threading.get_ident())
        if msgs[0].queue_offset == 2:
            raise ValueError("refused")
        return ConsumeStatus.RECONSUME_LATER if msgs[0].queue_offset == 6 else ConsumeStatus.CONSUME_SUCCESS
    c._listen_us = 1.0                          # as measured for a listener of a few microseconds
    c.offset_store.table.pop(MQ)
    pq = await _deliver_offsets(c, quick, 10)
    await _until(lambda: c.offset_store.table.get(MQ) == 10)
    assert calls == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]] and len(threads) == 1  # one hand-off, in order
    assert sorted(sent_back) == [2, 3, 6, 7] and not pq.msgs
    assert pq.counters.consumes == 5 and pq.counters.consumed_failed == 4 and pq.counters.consumed_ok == 6


async def test_orderly_plain_listener_takes_many_batches_per_hand_off_and_stops_at_a_failure() -> None:
    """A consume thread gets up to 32 batches of the queue at once and consumes them in order
    until one fails; the failed batch comes again after the suspension, then the rest."""
    c = PushConsumer("G", namesrv_addr="127.0.0.1:1", orderly=True, consume_thread_min=3, consume_thread_max=3)
    calls: list[int] = []
    threads: set[int] = set()
    refused: set[int] = set()

    def listener(msgs):
        o = msgs[0].queue_offset
        calls.append(o)
        threads.add(threading.get_ident())
        if o == 3 and o not in refused:
            refused.add(o)
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS
    try:
        c.register_message_listener(listener)
        pq = ProcessQueue(MQ, locked=True)
        msgs = [_m(i) for i in range(40)]
        pq.put(msgs)
        await c._deliver(pq, msgs)
        await _until(lambda: c.offset_store.table.get(MQ) == 40)
        assert calls == [0, 1, 2, 3] + list(range(3, 40))  # in order; 3 again after the suspension
        assert threading.get_ident() not in threads
        assert pq.counters.consumes == 41 and pq.counters.consumed_failed == 1
    finally:
        c._workers.shutdown()
        await c.instance.shutdown()


async def test_consume_pool_runs_reports_and_stops() -> None:
    from fastmq.client.consume_pool import ConsumePool

    pool = ConsumePool(2, "T")
    assert await pool.run(lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(ZeroDivisionError):
        await pool.run(lambda: 1 / 0)
    gate = threading.Event()
    futs = [pool.run(gate.wait, 5) for _ in range(5)]
    await asyncio.sleep(0.05)
    assert len(pool._threads) == 2             # never more than max_threads
    gate.set()
    assert await asyncio.gather(*futs) == [True] * 5
    pool.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.run(lambda: None)
    for t in pool._threads:
        t.join(5)
        assert not t.is_alive()
    with pytest.raises(ValueError):
        ConsumePool(0, "none")


async def test_consume_pool_prestart_starts_every_thread_once() -> None:
    from fastmq.client.consume_pool import ConsumePool

    pool = ConsumePool(3, "P")
    try:
        assert pool.prestart() == 3 and pool.prestart() == 0
        assert [t.name for t in pool._threads] == ["P_1", "P_2", "P_3"] and all(t.is_alive() for t in pool._threads)
        assert await asyncio.gather(*(pool.run(lambda i=i: i * 2) for i in range(10))) == [i * 2 for i in range(10)]
        assert len(pool._threads) == 3
    finally:
        pool.shutdown()
    assert pool.prestart() == 0                    # shut down: nothing starts again
    for t in pool._threads:
        t.join(5)
        assert not t.is_alive()


async def test_a_full_consume_pool_leaves_its_idle_count_alone() -> None:
    """Once every thread is started, neither the loop's submit nor a thread's end touches the idle
    count: its Python-level Condition cost every batch a lock the loop could stall on while a pool
    thread holding it waited for the interpreter lock."""
    from fastmq.client.consume_pool import ConsumePool

    class Untouchable:
        def acquire(self, *a: object, **k: object) -> bool:
            raise AssertionError("idle count taken by a full pool")

        def release(self, *a: object, **k: object) -> None:
            raise AssertionError("idle count given back in a full pool")

    pool = ConsumePool(2, "F")
    try:
        pool.prestart()
        pool._idle = Untouchable()  # type: ignore[assignment]
        assert await asyncio.gather(*(pool.run(lambda i=i: i + 1) for i in range(20))) == list(range(1, 21))
        assert len(pool._threads) == 2
    finally:
        pool.shutdown()


async def test_consume_pool_outcomes_share_a_wake_up_of_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outcomes that finish while the loop is busy come back through one callback, in order, with
    their ctx; one whose ``done`` raises is reported and the rest still run."""
    from fastmq.client.consume_pool import ConsumePool

    loop = asyncio.get_running_loop()
    wakes = []
    real = loop.call_soon_threadsafe

    def counting(cb, *args, **kwargs):
        wakes.append(cb)
        return real(cb, *args, **kwargs)
    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
    reported = []
    loop.set_exception_handler(lambda lp, ctx: reported.append(ctx["exception"]))
    pool = ConsumePool(1, "O")
    try:
        got = []
        gate = threading.Event()
        pool.submit(gate.wait, (5,), lambda r, e: got.append(("first", r, e)))

        def boom(ctx, r, e):
            raise KeyError(ctx)
        for i in range(5):
            pool.submit(lambda i=i: i * 10, (), lambda ctx, r, e: got.append((ctx, r, e)), ("ctx", i))
        pool.submit(lambda: None, (), boom, "bad")
        pool.submit(lambda: 1 / 0, (), lambda r, e: got.append(("last", r, type(e))))
        gate.set()
        time.sleep(0.2)  # the loop busy: the thread finishes everything meanwhile
        await _until(lambda: len(got) == 7)
        assert got == [("first", True, None), *((("ctx", i), i * 10, None) for i in range(5)),
                       ("last", None, ZeroDivisionError)]
        assert len(wakes) == 1 and [type(e) for e in reported] == [KeyError]
        assert await pool.run(lambda: 7) == 7 and len(wakes) == 2  # a later outcome wakes the loop again
    finally:
        loop.set_exception_handler(None)
        pool.shutdown()


async def test_resume_passes_results_and_cancellation_on() -> None:
    log = []
    fut = asyncio.get_running_loop().create_future()

    async def body():
        log.append(await fut)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            log.append("cancelled")
            raise
    coro = body()
    task = asyncio.ensure_future(Resume(coro, coro.send(None)))
    await asyncio.sleep(0)
    fut.set_result("answer")
    await _until(lambda: log == ["answer"])
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["answer", "cancelled"]


_LISTENER_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("listener_var", default="unset")


async def test_async_listener_context_stays_with_its_batch(push_consumer) -> None:
    """The first step runs inline, yet in a copy of the caller's context, as a task of its own
    would: what the listener sets, before or after waiting, does not leak into the pull loop."""
    c = push_consumer
    seen: list[str] = []

    async def listener(msgs):
        seen.append(_LISTENER_VAR.get())
        _LISTENER_VAR.set(f"batch-{msgs[0].queue_offset}")
        if msgs[0].queue_offset == 2:
            await asyncio.sleep(0)
            seen.append(_LISTENER_VAR.get())
        return ConsumeStatus.CONSUME_SUCCESS
    await _deliver_offsets(c, listener, 4)
    await _until(lambda: c.offset_store.table.get(MQ) == 4)
    assert _LISTENER_VAR.get() == "unset"
    assert seen == ["unset", "unset", "batch-2"]


def test_reset_offset_table_in_both_forms() -> None:
    import pytest

    from fastmq.client.instance import reset_offset_table
    from fastmq.protocol.message_queue import MessageQueue

    java = (b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:5,'
            b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:0}}')
    assert reset_offset_table(java) == {MessageQueue("T", "broker-a", 0): 5, MessageQueue("T", "broker-a", 1): 0}
    cpp = b'{"offsetTable":[{"brokerName":"b","offset":7,"queueId":2,"topic":"T"}]}'
    assert reset_offset_table(cpp) == {MessageQueue("T", "b", 2): 7}
    assert reset_offset_table(b'{"offsetTable":{}}') == {}
    for bad in (b"junk", b'{"other":1}', b'{"offsetTable":{{"queueId":0}:1}}', b"\xff"):
        with pytest.raises(ValueError):
            reset_offset_table(bad)


def test_consumer_settings_are_checked_as_rocketmq_checks_them() -> None:
    from fastmq.errors import ConfigError

    for kwargs, text in [({"consume_thread_min": 0}, "consumeThreadMin Out of range [1, 1000]"),
                         ({"consume_thread_max": 1001}, "consumeThreadMax Out of range [1, 1000]"),
                         ({"consume_thread_min": 8, "consume_thread_max": 4},
                          "consumeThreadMin (8) is larger than consumeThreadMax (4)"),
                         ({"consume_message_batch_max_size": 1025}, "consumeMessageBatchMaxSize Out of range"),
                         ({"pull_batch_size": 0}, "pullBatchSize Out of range [1, 1024]"),
                         ({"pull_threshold_for_queue": 70000}, "pullThresholdForQueue Out of range [1, 65535]"),
                         ({"pull_threshold_size_for_queue": 2048 << 20}, "pullThresholdSizeForQueue Out of range")]:
        with pytest.raises(ConfigError, match=text.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            PushConsumer("G", namesrv_addr="127.0.0.1:1", **kwargs)
    c = PushConsumer("G", namesrv_addr="127.0.0.1:1", consume_thread_min=2, consume_thread_max=8)
    assert (c._workers.max_threads, c._slots._value) == (2, 8)
    c._workers.shutdown()


@pytest.mark.parametrize("kind, orderly, expected", [
    ("async", False, ["pull", "pull", "deliver"]),   # RocketMQ's order: the listener runs inside _deliver
    ("plain", False, ["pull", "deliver", "pull"]),   # a hand-off first: the consume thread wakes meanwhile
    ("async", True, ["pull", "deliver", "pull"]),    # orderly: _deliver only starts the queue's task
])
async def test_pull_loop_pulls_again_before_an_inline_listener_and_after_a_hand_off(
        monkeypatch: pytest.MonkeyPatch, kind: str, orderly: bool, expected: list[str]) -> None:
    import fastmq.client.pull_service as ps
    from fastmq.protocol.codes import ResponseCode
    from fastmq.protocol.command import RemotingCommand

    c = PushConsumer("G", namesrv_addr="127.0.0.1:1", orderly=orderly)
    try:
        async def alistener(msgs):
            return ConsumeStatus.CONSUME_SUCCESS
        c.register_message_listener(alistener if kind == "async" else (lambda msgs: ConsumeStatus.CONSUME_SUCCESS))
        assert c._delivers_inline is (expected == ["pull", "pull", "deliver"])
        loop = asyncio.get_running_loop()
        events: list[str] = []
        answer = RemotingCommand(int(ResponseCode.SUCCESS), opaque=1, flag=1,
                                 ext_fields={"nextBeginOffset": "1", "suggestWhichBrokerId": "0"}, body=b"ignored")
        monkeypatch.setattr(ps, "decode_pull_body", lambda body: [_m(0)])

        def start_pull(pq: ProcessQueue, template: dict) -> ps._Pull:
            events.append("pull")
            fut = loop.create_future()
            if len(events) == 1:
                fut.set_result(answer)  # the first pull is answered; the next one waits
            return ps._Pull(fut, "127.0.0.1:1", 0)

        async def deliver(pq: ProcessQueue, msgs: list) -> None:
            events.append("deliver")

        def hand_off(pq: ProcessQueue, msgs: list) -> None:
            events.append("deliver")
        assert c._hands_off is (kind == "plain" and not orderly)  # a plain listener's answers: a call, no coroutine
        monkeypatch.setattr(c, "_start_pull", start_pull)
        monkeypatch.setattr(c, "_deliver", deliver)
        monkeypatch.setattr(c, "_hand_off", hand_off)
        c._running = True
        task = asyncio.ensure_future(c._pull_loop(ProcessQueue(MQ)))
        await _until(lambda: len(events) >= 3)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert events == expected
    finally:
        c._running = False
        c._workers.shutdown()
        await c.instance.shutdown()
