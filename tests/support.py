"""Helpers the tests share beyond the embedded cluster (that one is :mod:`fastmq.testing`)."""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import encode_properties

if TYPE_CHECKING:
    from fastmq.remoting import RemotingClient, RemotingServer


#: ``scripts/test.sh --quick`` sets FASTMQ_TEST_QUICK=1: a quick run of the unit layer.
QUICK = os.environ.get("FASTMQ_TEST_QUICK") == "1"


def examples(n: int) -> int:
    """A property test's hypothesis ``max_examples``: ``n``, or a fifth of it (at least 10) in a
    quick run, which is there to answer in under a minute; the full run tries all ``n``."""
    return max(10, n // 5) if QUICK else n


#: Frames the official C++ client sent or accepted, recorded (tests/interop/wire_vectors/cpp-client/
#: README.md says how); FASTMQ_WIRE_VECTORS points at another recording.
WIRE_VECTORS = Path(os.environ.get("FASTMQ_WIRE_VECTORS",
                                   Path(__file__).resolve().parent / "interop" / "wire_vectors" / "cpp-client"))
WIRE_VECTOR_FILES = ("producer", "push-consumer", "pull-consumer")


def wire_vector_records(direction: str | None = None) -> list[dict]:
    """The recorded frames (not the notes), each with ``_id`` = ``<file>#<seq>``; ``direction``
    keeps one way only."""
    out = []
    for name in WIRE_VECTOR_FILES:
        for line in (WIRE_VECTORS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r["kind"] != "note" and (direction is None or r["direction"] == direction):
                r["_id"] = f"{name}#{r['seq']}"
                out.append(r)
    return out


def ext_text(v: object) -> str:
    """An ext value as the codec hands it over: a str whatever JSON type it arrived as."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def addr_of(srv: "RemotingServer") -> str:
    """The ``host:port`` a client dials to reach an in-process server listening on loopback."""
    return f"127.0.0.1:{srv.port}"


async def wait_until(pred: Callable[[], bool], seconds: float, every: float = 0.05) -> bool:
    """Poll ``pred`` for up to ``seconds`` (bounded); its last value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(every)
    return pred()


async def consume_positions(namesrv: str, group: str, topic: str, wanted: Iterable[bytes],
                            seconds: float) -> dict[bytes, tuple[int, int]]:
    """Consume ``topic`` from its first offset with a lite pull consumer until every body in
    ``wanted`` arrived or ``seconds`` passed (bounded); each body's ``(queue id, queue offset)``."""
    from fastmq.client.push_consumer import PullConsumer

    want = set(wanted)
    consumer = PullConsumer(group, namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    await consumer.start()
    got: dict[bytes, tuple[int, int]] = {}
    try:
        deadline = time.monotonic() + seconds
        while not want <= got.keys() and time.monotonic() < deadline:
            for m in await consumer.poll(1.0):
                got[m.body] = (m.queue_id, m.queue_offset)
    finally:
        await consumer.shutdown()
    return got


# ------------------------------------------------ raw requests, for tests that talk to a broker directly

def send_request(topic: str, body: bytes, props: dict[str, str] | None = None, *, queue_id: int = 0,
                 code: int = RequestCode.SEND_MESSAGE_V2, batch: bool = False):
    """A producer's send request (SEND_MESSAGE_V2 unless ``code`` says otherwise), group PG_TEST."""
    h = SendMessageRequestHeader(producerGroup="PG_TEST", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4,
                                 queueId=queue_id, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
                                 properties=encode_properties(props or {}).decode(), batch=batch)
    fields = h.to_v2_fields() if code != RequestCode.SEND_MESSAGE else h.to_fields()
    return create_request(code, fields, body)


def pull_request(topic: str, queue_id: int, offset: int, *, group: str = "CG_TEST", expr: str = "*",
                 suspend_ms: int = 0, max_nums: int = 32):
    """A PULL_MESSAGE request; ``suspend_ms`` makes it a long poll."""
    sys_flag = 0x4 | (0x2 if suspend_ms else 0)
    return create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": max_nums,
        "sysFlag": sys_flag, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms, "subVersion": 0,
        "subscription": expr})


async def create_topic(client: "RemotingClient", addr: str, topic: str, *, queues: int = 4, perm: int = 6) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker at ``addr``; asserts it succeeded."""
    r = await client.invoke(addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
        "perm": perm, "topicFilterType": "SINGLE_TAG"}), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
