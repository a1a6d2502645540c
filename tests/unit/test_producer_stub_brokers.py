"""The asyncio Producer against an in-process NameServer and recording stub brokers (the
``cluster`` fixture of tests/unit/conftest.py)."""
from __future__ import annotations

import asyncio
import zlib

import pytest

from fastmq.client.producer import Producer, SendResult, SendStatus, hash_selector
from fastmq.errors import (BrokerError, ClientStateError, MessageValidationError, NoNameServerError, NoRouteError,
                           RemotingTooMuchRequestError, SendFailedError)
from fastmq.protocol.codes import RETRY_RESPONSE_CODES, RequestCode, ResponseCode
from fastmq.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from fastmq.protocol.message import Message, decode_batch_body, decode_properties


def _header(req) -> SendMessageRequestHeader:
    return SendMessageRequestHeader.from_fields(req.ext_fields, SEND_V2_NAMES)


async def test_sync_send_round_robin_and_result(cluster) -> None:
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr) as p:
        results = [await p.send(Message("T", f"m{i}".encode(), properties={"TAGS": "tagA", "KEYS": "k1 k2"}))
                   for i in range(8)]
    assert all(r.status == SendStatus.SEND_OK for r in results)
    assert len(b0.sends()) == 4 and len(b1.sends()) == 4          # 4 queues over 2 brokers, round robin
    r = results[0]
    assert len(r.msg_id) == 32 and r.msg_id != r.offset_msg_id and r.offset_msg_id.startswith("7F000001")
    sent = b0.sends()[0]
    assert sent.code == RequestCode.SEND_MESSAGE_V2
    h = _header(sent)
    props = decode_properties(h.properties)
    assert (h.producerGroup, h.topic, h.defaultTopic) == ("PG", "T", "TBW102")
    assert props["TAGS"] == "tagA" and props["KEYS"] == "k1 k2" and len(props["UNIQ_KEY"]) == 32


async def test_retry_moves_to_another_broker(cluster) -> None:
    addr, (b0, b1), _ = cluster
    b0.fail_next = [14]                                                # SERVICE_NOT_AVAILABLE: retried
    async with Producer("PG", namesrv_addr=addr) as p:
        results = [await p.send(Message("T", f"m{i}".encode())) for i in range(4)]
    assert all(r.status == SendStatus.SEND_OK for r in results) and b0.fail_next == []
    uniq = lambda req: decode_properties(_header(req).properties)["UNIQ_KEY"]  # noqa: E731
    failed = uniq(b0.sends()[0])                                       # the first request b0 saw was refused
    assert failed in {uniq(r) for r in b1.sends()}                     # and its retry went to the other broker


async def test_not_retried_code_raises_broker_error(cluster) -> None:
    addr, (b0, b1), _ = cluster
    b0.fail_next = [13]
    b1.fail_next = [13]
    async with Producer("PG", namesrv_addr=addr) as p:
        with pytest.raises(BrokerError) as ei:
            await p.send(Message("T", b"x"))
    assert ei.value.code == 13


@pytest.mark.parametrize("code", sorted(RETRY_RESPONSE_CODES) + [ResponseCode.SYSTEM_BUSY])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_retry_decision_is_the_declared_set(cluster, code: int, mode: str) -> None:
    # protocol.codes.RETRY_RESPONSE_CODES decides, through BrokerError.retriable, for both send modes
    addr, (b0, b1), _ = cluster
    b0.fail_next = [code]
    b1.fail_next = [code]
    async with Producer("PG", namesrv_addr=addr) as p:
        if mode == "sync":
            outcome = p.send(Message("T", b"x"))
        else:
            done = asyncio.get_running_loop().create_future()
            await p.send_async(Message("T", b"x"), lambda r, e: done.set_result((r, e)))
            outcome = _async_outcome(done)
        if code in RETRY_RESPONSE_CODES:
            r = await outcome
            assert r.status == SendStatus.SEND_OK
            assert len(b0.sends()) + len(b1.sends()) == 3  # refused twice, then taken
        else:
            with pytest.raises(BrokerError) as ei:
                await outcome
            assert ei.value.code == code and not ei.value.retriable
            assert len(b0.sends()) + len(b1.sends()) == 1  # SYSTEM_BUSY goes to the caller at once, as in 4.9


async def _async_outcome(done: "asyncio.Future[tuple[SendResult | None, BaseException | None]]") -> SendResult:
    result, exc = await asyncio.wait_for(done, 30)
    if exc is not None:
        raise exc
    assert result is not None
    return result


async def test_every_try_failing(cluster) -> None:
    addr, (b0, b1), _ = cluster
    b0.fail_next = [14] * 3
    b1.fail_next = [14] * 3
    async with Producer("PG", namesrv_addr=addr) as p:
        with pytest.raises(SendFailedError, match=r"Send \[3\] times, still failed, cost \[\d+\]ms, Topic: T, "
                                                  r"BrokersSent: \['broker-\d', 'broker-\d', 'broker-\d'\]") as ei:
            await p.send(Message("T", b"x"))
    assert ei.value.code == 14  # the last broker answer's code, as the Java producer sets it


async def test_oneway_async_batch_orderly_compression(cluster) -> None:
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr) as p:
        await p.send_oneway(Message("T", b"one"))
        got = []
        fut = await p.send_async(Message("T", b"two"), callback=lambda r, e: got.append((r, e)))
        r = await fut
        assert got == [(r, None)]
        batch = await p.send_batch([Message("T", f"b{i}".encode(), properties={"TAGS": "t"}) for i in range(3)])
        assert len(batch.msg_id.split(",")) == 3
        o1 = await p.send_orderly(Message("T", b"o1"), hash_selector, 42)
        o2 = await p.send_orderly(Message("T", b"o2"), hash_selector, 42)
        assert o1.message_queue == o2.message_queue
        big = b"z" * 10_000
        await p.send(Message("T", big))
    reqs = b0.sends() + b1.sends()
    batches = [r for r in reqs if r.code == RequestCode.SEND_BATCH_MESSAGE]
    assert len(batches) == 1 and [m.body for m in decode_batch_body(batches[0].body)] == [b"b0", b"b1", b"b2"]
    compressed = [r for r in reqs if int(_header(r).sysFlag) & 1]
    assert len(compressed) == 1 and zlib.decompress(compressed[0].body) == big


async def test_auto_create_through_tbw102(cluster) -> None:
    addr, (b0, b1), _ = cluster
    async with Producer("PG", namesrv_addr=addr) as p:
        r = await p.send(Message("Fresh", b"x"))
    assert r.message_queue.broker_name == "broker-0"                 # only broker-0 has TBW102
    assert _header(b0.sends()[-1]).defaultTopicQueueNums == 4


async def test_bad_input(cluster, tmp_path) -> None:
    addr, _, _ = cluster
    p = Producer("PG", namesrv_addr=addr)
    with pytest.raises(ClientStateError):
        await p.send(Message("T", b"x"))
    await p.start()
    try:
        for msg, text in [(Message("bad topic", b"x"), "illegal characters"), (Message("T", b""), "length is zero"),
                          (Message("T", b"x" * (4 * 1024 * 1024 + 1)), "over max value"),
                          (Message("SCHEDULE_TOPIC_XXXX", b"x"), "forbidden")]:
            with pytest.raises(MessageValidationError, match=text):
                await p.send(msg)
        with pytest.raises(NoRouteError, match="No route info of this topic: Nope") as no_route:
            await _no_default(p, "Nope")  # a cluster without TBW102: nothing to auto-create from
        assert no_route.value.code == 10005  # the Java client's NOT_FOUND_TOPIC_EXCEPTION
    finally:
        await p.shutdown()
    with pytest.raises(ClientStateError):
        await p.send(Message("T", b"x"))
    lonely = Producer("PG", namesrv_addr=[])
    await lonely.start()
    try:
        with pytest.raises(NoNameServerError, match="No name server address, please set it.\nSee http") as none:
            await lonely.send(Message("T", b"x"))
        assert none.value.code == 10004  # NO_NAME_SERVER_EXCEPTION
    finally:
        await lonely.shutdown()


async def _no_default(p: Producer, topic: str):
    real = p.instance.fetch_route

    async def without_default(t, timeout=None):
        return None if t == "TBW102" else await real(t, timeout)
    p.instance.fetch_route = without_default  # type: ignore[method-assign]
    try:
        return await p._publish_info(topic)
    finally:
        p.instance.fetch_route = real  # type: ignore[method-assign]


async def test_latency_fault_tolerance_avoids_failed_broker(cluster) -> None:
    addr, (b0, b1), _ = cluster
    b0.fail_next = [14]
    async with Producer("PG", namesrv_addr=addr, send_latency_fault_enable=True) as p:
        for _ in range(10):                                            # until broker-0 has failed once
            r = await p.send(Message("T", b"x"))
            assert r.status == SendStatus.SEND_OK
            if not b0.fail_next:
                break
        assert b0.fail_next == []
        before = len(b0.sends())
        for _ in range(6):
            r = await p.send(Message("T", b"z"))
            assert r.message_queue.broker_name == "broker-1"
        assert len(b0.sends()) == before                               # kept away for its penalty
