"""Helpers the tests share beyond the embedded cluster (that one is :mod:`fastmq.testing`)."""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from fastmq.remoting import RemotingServer


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
