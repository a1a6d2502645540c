"""The main job of ``./scripts/demo.sh``: a local cluster from the embedded defaults, then traffic.

It starts a real ``fastmq-namesrv`` and a real ``fastmq-broker`` with
:class:`fastmq.testing.EmbeddedCluster` (their embedded default configuration; only ports,
directories and the commit-log file size are chosen, in a temporary directory), sends messages
with the fastmq Producer, consumes them with a PushConsumer (one of them once refused,
so it comes back through the retry topic).
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time

from .aio import Message, MessageExt, Producer
from .client.push_consumer import ConsumeStatus, PushConsumer
from .remoting.loop import run
from .testing import EmbeddedCluster

DEMO_TOPIC = "DemoTopic"
DEMO_MESSAGES = 10


def _say(line: str) -> None:
    """One whole line per write: listeners run on several consumer threads at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _traffic(namesrv: str) -> None:
    async with Producer("DemoProducerGroup", namesrv_addr=namesrv) as producer:
        for i in range(DEMO_MESSAGES):
            tag = "TagA" if i % 2 == 0 else "TagB"
            r = await producer.send(Message(DEMO_TOPIC, f"Hello fastmq {i}".encode(),
                                            properties={"TAGS": tag, "KEYS": f"order-{i}"}))
            print(f"sent #{i} {tag}: {r.status} msg_id={r.msg_id} queue={r.message_queue.queue_id} "
                  f"offset={r.queue_offset}")

    received: list[str] = []
    refused: set[str] = set()

    def listener(msgs: list[MessageExt]) -> str:
        for m in msgs:
            uid = m.properties.get("UNIQ_KEY", "")
            if m.body.endswith(b" 4") and uid not in refused:
                refused.add(uid)
                _say(f"consumer: RECONSUME_LATER for {m.body.decode()} (it will come back via the retry topic)")
                return ConsumeStatus.RECONSUME_LATER
            received.append(m.body.decode())
            _say(f"consumer: {m.body.decode()!r} tag={m.tags} keys={m.properties.get('KEYS')} "
                 f"reconsume_times={m.reconsume_times}")
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("DemoConsumerGroup", namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(DEMO_TOPIC, "TagA || TagB")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        deadline = time.monotonic() + 40  # the retried message waits out delay level 3 (10 s)
        while len(set(received)) < DEMO_MESSAGES and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
    finally:
        await consumer.shutdown()
    print(f"consumed {len(set(received))} of {DEMO_MESSAGES} messages")
    if len(set(received)) < DEMO_MESSAGES:
        raise SystemExit("demo: not every message came back")


def main() -> int:
    """Run the demo; returns the exit status."""
    from . import _ext

    print(f"fastmq demo (compiled extensions: {'yes' if _ext.USING_EXTENSIONS else 'no, pure Python'})")
    with tempfile.TemporaryDirectory(prefix="fastmq-demo-") as tmp:
        # the broker's own commit-log file size (1 GiB by default) would fallocate more than a demo needs
        with EmbeddedCluster(tmp, broker_conf={"mappedFileSizeCommitLog": 64 * 1024 * 1024}) as cluster:
            print(f"  fastmq-namesrv | listening on {cluster.namesrv_addr}")
            print(f"  fastmq-broker  | listening on {cluster.broker_addr}, registered")
            run(_traffic(cluster.namesrv_addr))
        print("fastmq-broker and fastmq-namesrv stopped (exit 0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
