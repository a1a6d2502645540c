"""Consumer internals that need no broker: process queues, message unwrapping, the local offset store."""
from __future__ import annotations

import zlib

from fastmq.client.instance import ClientConfig, ClientInstance
from fastmq.client.offset_store import LocalFileOffsetStore
from fastmq.client.push_consumer import ProcessQueue, _unwrap
from fastmq.protocol.message import MessageExt, MessageSysFlag
from fastmq.protocol.message_queue import MessageQueue

MQ = MessageQueue("T", "b", 0)


def _m(off: int, body: bytes = b"x") -> MessageExt:
    return MessageExt("T", body, queue_offset=off)


def test_commit_offset_is_the_smallest_in_flight() -> None:
    pq = ProcessQueue(MQ)
    pq.put([_m(i) for i in range(10, 15)])
    assert pq.remove([_m(11), _m(12)]) == 10        # 10 still being consumed: commit stays at 10
    assert pq.remove([_m(10)]) == 13
    assert pq.remove([_m(13), _m(14)]) == 15        # all done: the next offset
    pq.put([_m(14)])                                # a duplicate of a consumed offset is not re-added twice
    assert pq.size_bytes == 1


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
