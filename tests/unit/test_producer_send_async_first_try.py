"""send_async's fast first try (no task, no timer, one socket write per loop turn) and the request
fields the producer writes out by hand: both must behave exactly as the general path does."""
from __future__ import annotations

import asyncio

import pytest

from fastmq.client.producer import Producer, SendStatus
from fastmq.errors import (BrokerError, ClientStateError, MessageValidationError, RemotingTimeoutError,
                           RemotingTooMuchRequestError, SendFailedError, SendTimeoutError)
from fastmq.protocol.message import MessageFormatError
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import Message, encode_properties
from fastmq.protocol.message_queue import MessageQueue
from fastmq.protocol.topic import AUTO_CREATE_TOPIC_KEY_TOPIC


@pytest.mark.parametrize("topic,batch,props", [("T", False, {"TAGS": "a", "KEYS": "k1 k2"}),
                                               ("%RETRY%G", False, {}), ("T", True, {"WAIT": "true"})])
def test_request_fields_match_the_header_class(topic: str, batch: bool, props: dict[str, str]) -> None:
    p = Producer("PG", namesrv_addr="127.0.0.1:1", default_topic_queue_nums=6)
    msg = Message(topic, b"x" * 10, 3, dict(props))
    req = p._request(msg, MessageQueue(topic, "b", 2), batch)
    born = int(req.ext_fields["g"])
    expected = create_request(
        RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2,
        SendMessageRequestHeader("PG", topic, AUTO_CREATE_TOPIC_KEY_TOPIC, 6, 2, 0, born, 3,
                                 encode_properties(props).decode(), 0, False,
                                 16 if topic.startswith("%RETRY%") else None, batch).to_v2_fields(),
        b"x" * 10)
    assert list(req.ext_fields.items()) == list(expected.ext_fields.items())
    assert (req.code, req.language, req.version, req.flag, req.serialize_type, req.body) == \
           (expected.code, expected.language, expected.version, expected.flag, expected.serialize_type,
            expected.body)


async def test_many_async_sends_in_flight(cluster) -> None:  # noqa: F811
    addr, (b0, b1), _ = cluster
    got: list[tuple[object, object]] = []
    async with Producer("PG", namesrv_addr=addr) as p:
        await p.send(Message("T", b"warm"))          # route cached, both brokers connected (round robin)
        await p.send(Message("T", b"warm"))
        futs = [await p.send_async(Message("T", f"m{i}".encode()), callback=lambda r, e: got.append((r, e)))
                for i in range(200)]
        results = await asyncio.gather(*futs)
    assert all(r.status == SendStatus.SEND_OK for r in results)
    assert len({r.msg_id for r in results}) == 200
    assert sorted(id(r) for r, _ in got) == sorted(id(r) for r in results) and all(e is None for _, e in got)
    bodies = [r.body for r in b0.sends() + b1.sends()]
    assert bodies.count(b"warm") == 2
    assert sorted(b for b in bodies if b != b"warm") == sorted(f"m{i}".encode() for i in range(200))


async def test_async_retry_after_a_retried_code(cluster) -> None:  # noqa: F811
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        b0.fail_next = [14]
        b1.fail_next = [14]
        got: list[tuple[object, object]] = []
        fut = await p.send_async(Message("T", b"again"), callback=lambda r, e: got.append((r, e)))
        r = await fut
    assert r.status == SendStatus.SEND_OK
    assert got == [(r, None)]
    # first try (fast path) fails on one broker, the retry goes to the other and fails, the third succeeds
    assert sum(1 for s in b0.sends() + b1.sends() if s.body == b"again") == 3


async def test_async_not_retried_code_and_every_try_failing(cluster) -> None:  # noqa: F811
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr, retry_times_when_send_async_failed=1) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        b0.fail_next = [13]
        b1.fail_next = [13]
        got: list[tuple[object, object]] = []
        fut = await p.send_async(Message("T", b"x"), callback=lambda r, e: got.append((r, e)))
        with pytest.raises(BrokerError) as ei:
            await fut
        assert ei.value.code == 13 and got == [(None, ei.value)]
        b0.fail_next = [14] * 2
        b1.fail_next = [14] * 2
        fut = await p.send_async(Message("T", b"y"))
        with pytest.raises(SendFailedError, match=r"Send \[2\] times, still failed, cost \[\d+\]ms, Topic: T, "
                                                  r"BrokersSent: \['broker-\d', 'broker-\d'\]"):
            await fut


async def test_permits_try_acquire_respects_the_bound_and_the_queue() -> None:
    from fastmq.client.producer import _Permits
    sem = _Permits(2)
    assert sem.try_acquire() and sem.try_acquire()
    assert not sem.try_acquire()
    waiter = asyncio.ensure_future(sem.acquire())
    await asyncio.sleep(0)
    sem.release()                       # goes to the queued waiter, not to a later try_acquire
    assert not sem.try_acquire()
    await waiter
    sem.release()
    assert sem.try_acquire()


async def test_send_async_waits_for_a_permit(cluster) -> None:  # noqa: F811
    addr, _, _ = cluster
    async with Producer("PG", namesrv_addr=addr, max_in_flight=3) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        futs = [await p.send_async(Message("T", f"m{i}".encode())) for i in range(20)]
        results = await asyncio.gather(*futs)
    assert all(r.status == SendStatus.SEND_OK for r in results)


def test_uniq_ids_in_bulk_look_like_single_ones() -> None:
    from fastmq.client.message_id import create_uniq_id, create_uniq_ids
    one = create_uniq_id()
    many = create_uniq_ids(5)
    after = create_uniq_id()
    assert create_uniq_ids(0) == []
    assert all(len(u) == len(one) and u[:20] == one[:20] for u in many + [after])  # ip, pid, random part
    counts = [int(u[-4:], 16) for u in [one, *many, after]]
    assert counts == [(counts[0] + i) & 0xFFFF for i in range(7)]  # one counter, no gaps


@pytest.mark.parametrize("batch", [False, True])
async def test_awaited_send_fails_at_its_timeout_not_a_second_late(cluster, batch: bool) -> None:  # noqa: F811
    """send() and send_batch() take the fast path too, with a timer of their own: a broker that
    never answers costs the caller its timeout, then what the Java producer raises when its
    timeout runs out with tries left: RemotingTooMuchRequestException("sendDefaultImpl call timeout")."""
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        b0.silent_next = b1.silent_next = 5
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(SendTimeoutError, match=r"^sendDefaultImpl call timeout$") as info:
            if batch:
                await p.send_batch([Message("T", b"a"), Message("T", b"b")], timeout_ms=300)
            else:
                await p.send(Message("T", b"lost"), timeout_ms=300)
        took = loop.time() - t0
        assert 0.29 <= took < 0.8, took
        assert isinstance(info.value, (SendFailedError, RemotingTooMuchRequestError))  # either way it is caught
        assert isinstance(info.value.__cause__, RemotingTimeoutError)
        b0.silent_next = b1.silent_next = 0
        r = await (p.send_batch([Message("T", b"c")]) if batch else p.send(Message("T", b"after")))
        assert r.status == SendStatus.SEND_OK
        for conn in p.instance.remoting._conns.values():
            assert not conn.pending  # nothing left behind by the expired tries


async def test_awaited_batch_result_names_every_message(cluster) -> None:  # noqa: F811
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        msgs = [Message("T", f"m{i}".encode()) for i in range(3)]
        r = await p.send_batch(msgs)
        b0.fail_next = b1.fail_next = [14]  # SERVICE_NOT_AVAILABLE: retried, the result still names them all
        msgs2 = [Message("T", f"n{i}".encode()) for i in range(2)]
        r2 = await p.send_batch(msgs2)
    assert r.msg_id.split(",") == [m.properties["UNIQ_KEY"] for m in msgs]
    assert r2.status == SendStatus.SEND_OK and r2.msg_id.split(",") == [m.properties["UNIQ_KEY"] for m in msgs2]


async def test_fast_path_hands_bad_input_to_the_typed_errors(cluster) -> None:  # noqa: F811
    """What the compiled first try does not take goes the general way and fails there, typed: a
    separator inside a property, a body that is not bytes-like; a bytearray body is still sent."""
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        for send in (p.send, lambda m: p.send_async(m)):
            with pytest.raises(MessageFormatError, match="reserved separator"):
                r = await send(Message("T", b"x", properties={"K": "a\x01b"}))
                await r  # send_async: the future carries the error
            with pytest.raises(MessageValidationError, match="must be bytes"):
                r = await send(Message("T", "text"))  # type: ignore[arg-type]
                await r
        r = await p.send(Message("T", bytearray(b"ba")))
        assert r.status == SendStatus.SEND_OK
        for odd_timeout in (1500.0, 10 ** 10):  # a float, a timeout past int32: the fast path takes both
            r = await (await p.send_async(Message("T", b"t"), timeout_ms=odd_timeout))  # type: ignore[arg-type]
            assert r.status == SendStatus.SEND_OK
        with pytest.raises(MessageFormatError, match="reserved separator"):
            await p.send_batch([Message("T", b"x", properties={"K": "\x02"})])
    got: list[tuple[object, object]] = []
    late = await p.send_async(Message("T", b"late"), callback=lambda r, e: got.append((r, e)))
    with pytest.raises(ClientStateError):  # as the Java client: through the future and the callback
        await late
    assert got and got[0][0] is None and isinstance(got[0][1], ClientStateError)
    assert sum(1 for s in b0.sends() + b1.sends() if s.body == b"x") == 0


async def test_send_batch_async_completes_future_and_callback_and_retries(cluster) -> None:  # noqa: F811
    addr, (b0, b1), _ = cluster
    got: list[tuple[object, object]] = []
    async with Producer("PG", namesrv_addr=addr, max_in_flight=2) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        batches = [[Message("T", f"b{i}-{j}".encode(), properties={"TAGS": "t"}) for j in range(3)] for i in range(6)]
        futs = [await p.send_batch_async(b, lambda r, e: got.append((r, e))) for b in batches]  # waits on permits
        results = await asyncio.gather(*futs)
        b0.fail_next = b1.fail_next = [14]  # retried on the general path from the entry's first try
        retried = [Message("T", b"r0"), Message("T", b"r1", properties={"KEYS": "k"})]
        r = await (await p.send_batch_async(retried))
    assert [x.msg_id.split(",") for x in results] == [[m.properties["UNIQ_KEY"] for m in b] for b in batches]
    assert sorted(id(x) for x, _ in got) == sorted(id(x) for x in results) and all(e is None for _, e in got)
    assert r.status == SendStatus.SEND_OK and r.msg_id.split(",") == [m.properties["UNIQ_KEY"] for m in retried]
    tries = [s for s in b0.sends() + b1.sends() if s.code == 320 and b"r1" in s.body]
    assert len(tries) == 2 and tries[0].body == tries[1].body  # the same encoded batch, UNIQ_KEYs and all


async def test_send_batch_async_refuses_a_bad_batch_at_once(cluster) -> None:  # noqa: F811
    addr, _, _ = cluster
    async with Producer("PG", namesrv_addr=addr, max_in_flight=1) as p:
        await p.send(Message("T", b"warm"))
        with pytest.raises(MessageValidationError, match="the batch is empty"):
            await p.send_batch_async([])
        with pytest.raises(MessageValidationError, match="should be the same"):
            await p.send_batch_async([Message("T", b"a"), Message("U", b"b")])
        with pytest.raises(MessageValidationError, match="TimeDelayLevel is not supported"):
            await p.send_batch_async([Message("T", b"a", properties={"DELAY": "3"})])
        # no permit was taken by the refused batches: the only one is still free
        r = await asyncio.wait_for(await p.send_batch_async([Message("T", b"ok")]), 10)
        assert r.status == SendStatus.SEND_OK
    with pytest.raises(ClientStateError):
        await (await p.send_batch_async([Message("T", b"late")]))


@pytest.mark.parametrize("batch", [False, True])
async def test_a_send_in_flight_does_not_keep_the_callers_message(cluster, batch: bool) -> None:  # noqa: F811
    """The pending entry keeps what a retry needs, not the Message: a caller's messages die when
    the caller drops them, rather than ageing into the collector's oldest generation in flight."""
    import weakref
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        b0.silent_next = b1.silent_next = 1  # the answer never comes: the send stays in flight
        msg = Message("T", b"held", properties={"TAGS": "a"})
        ref = weakref.ref(msg)
        fut = await (p.send_batch_async([msg], timeout_ms=400) if batch else p.send_async(msg, timeout_ms=400))
        del msg
        assert ref() is None and not fut.done()
        with pytest.raises((SendFailedError, RemotingTimeoutError)):
            await asyncio.wait_for(fut, 10)  # the retry rebuilt the message from the entry and timed out too


async def test_settings_changed_after_start_reach_the_next_send(cluster) -> None:  # noqa: F811
    """The compiled first try reads the producer's settings from C fields the producer keeps in
    step: a change applies to the next send, and a value that is no number fails when set."""
    from fastmq.errors import ConfigError
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        p.max_message_size = 8
        assert p.max_message_size == 8 and p._fast.max_message_size == 8
        with pytest.raises(MessageValidationError, match="MAX: 8"):
            await p.send(Message("T", b"123456789"))
        with pytest.raises(MessageValidationError, match="MAX: 8"):
            await (await p.send_async(Message("T", b"123456789")))
        p.max_message_size = 4 * 1024 * 1024
        p.compress_over = 16  # a body of 16 bytes or more now leaves compressed (sysflag bit 0), as
        r = await p.send(Message("T", b"c" * 16))  # 4.9.8's tryToCompressMessage (>=) on every path
        await (await p.send_async(Message("T", b"d" * 16)))
        await p.send(Message("T", b"e" * 15))
        sent = [s for s in b0.sends() + b1.sends() if s.ext_fields.get("f") == "1"]
        assert r.status == SendStatus.SEND_OK and len(sent) == 2
        assert p._request(Message("T", b"c" * 16), r.message_queue, False).ext_fields["f"] == "1"
        p.send_msg_timeout = 1500.7  # a float is taken as the integer both paths then read
        assert p.send_msg_timeout == 1500 and p._fast.send_msg_timeout == 1500
        for name, bad in [("send_msg_timeout", "soon"), ("retry_times_when_send_failed", None),
                          ("max_message_size", 1 << 70)]:
            with pytest.raises(ConfigError, match=name):
                setattr(p, name, bad)
        assert p.send_msg_timeout == 1500  # unchanged by the refused values
        p.default_topic_queue_nums = 6  # a header field the compiled writer holds ready: written anew
        await p.send(Message("T", b"six"))
        await (await p.send_async(Message("T", b"six")))
        assert [s.ext_fields["d"] for s in b0.sends() + b1.sends() if s.body == b"six"] == ["6", "6"]
        with pytest.raises(ConfigError, match="default_topic_queue_nums"):
            p.default_topic_queue_nums = "many"


async def test_a_failure_given_to_the_callback_is_not_logged_as_never_retrieved(cluster, caplog) -> None:  # noqa: F811
    """In the SendCallback style the caller keeps no future: a failure the callback received must
    not come back as asyncio's "exception was never retrieved" (fast path and general path)."""
    import gc
    import logging
    addr, (b0, b1), _ = cluster
    got: list[object] = []
    caplog.set_level(logging.ERROR, logger="asyncio")
    async with Producer("PG", namesrv_addr=addr, retry_times_when_send_async_failed=0) as p:
        await p.send(Message("T", b"warm"))
        await p.send(Message("T", b"warm"))
        b0.fail_next, b1.fail_next = [13, 13], [13, 13]  # not retried: the fast path's entry fails the send
        await p.send_async(Message("T", b"x"), lambda r, e: got.append(e))
        await p.send_batch_async([Message("T", b"y")], lambda r, e: got.append(e))
        for _ in range(100):  # bounded: until both callbacks ran
            if len(got) == 2:
                break
            await asyncio.sleep(0.02)
    await p.send_async(Message("T", b"late"), lambda r, e: got.append(e))  # the general path's task
    for _ in range(100):
        if len(got) == 3:
            break
        await asyncio.sleep(0.02)
    gc.collect()
    await asyncio.sleep(0)
    assert isinstance(got[0], BrokerError) and isinstance(got[1], BrokerError) and isinstance(got[2], ClientStateError)
    assert "never retrieved" not in caplog.text


@pytest.mark.c_ext
async def test_sends_in_flight_are_hidden_from_the_collector_until_answered(cluster) -> None:  # noqa: F811
    """The compiled fast path untracks an async send while its connection's pending table holds it
    (thousands in flight made full collections a quarter of send_async's time); it is tracked
    again when answered, and a full collection tracks every send in flight again first."""
    import gc
    addr, (b0, b1), _ = cluster
    gc.disable()  # only the collections this test asks for
    try:
        async with Producer("PG", namesrv_addr=addr) as p:
            await p.send(Message("T", b"warm"))
            await p.send(Message("T", b"warm"))
            loud = [await p.send_async(Message("T", b"loud")) for _ in range(4)]
            assert not any(gc.is_tracked(f) for f in loud)
            await asyncio.gather(*loud)
            assert all(gc.is_tracked(f) for f in loud)

            b0.silent_next, b1.silent_next = 2, 2  # the next two sends, wherever they go, never answered
            quiet = [await p.send_async(Message("T", b"quiet")) for _ in range(2)]
            await asyncio.sleep(0.05)
            assert not any(gc.is_tracked(f) for f in quiet) and not any(f.done() for f in quiet)
            gc.collect()
            assert all(gc.is_tracked(f) for f in quiet)
            for f in quiet:
                f.cancel()
    finally:
        gc.enable()
