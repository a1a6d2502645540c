"""Asyncio quickstart: the quickstart with fastmq.aio, an awaited producer and an async listener.

The classes of ``fastmq.aio`` are the client's asyncio core (the blocking ones in ``fastmq`` run
it on a background loop). An ``async def`` listener runs on the program's own event loop, so it
can await other I/O and needs no lock; keep it from blocking, or every queue waits.

    NAMESRV_ADDR=127.0.0.1:9876 python examples/asyncio_quickstart.py

Exits 0 once every message sent came back, 1 if any is missing after 30 s.
"""
import asyncio
import os
import sys
import uuid

from fastmq.aio import ConsumeStatus, Message, Producer, PushConsumer

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleAsyncio"
RUN = uuid.uuid4().hex[:8]
COUNT = 10


async def main() -> int:
    async with Producer("ExampleAsyncioProducer", namesrv_addr=NAMESRV) as producer:
        # one awaited send, then the rest started together: send_async returns once the request
        # is queued, with a future of its SendResult
        first = await producer.send(Message(TOPIC, f"{RUN} hello 0".encode()))
        print(f"sent 0: {first.status} queue={first.message_queue.queue_id}")
        futures = [await producer.send_async(Message(TOPIC, f"{RUN} hello {i}".encode())) for i in range(1, COUNT)]
        for i, result in enumerate(await asyncio.gather(*futures), start=1):
            print(f"sent {i}: {result.status} queue={result.message_queue.queue_id}")

    received: set[bytes] = set()
    all_here = asyncio.Event()

    async def listener(msgs):
        for m in msgs:
            if m.body.startswith(RUN.encode()):
                received.add(m.body)
                print(f"received {m.body.decode()!r}")
        if len(received) == COUNT:
            all_here.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("ExampleAsyncioConsumer", namesrv_addr=NAMESRV,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    async with consumer:  # start() now, shutdown() on the way out
        try:
            await asyncio.wait_for(all_here.wait(), 30)
        except TimeoutError:
            print(f"asyncio_quickstart: received {len(received)} of {COUNT} messages within 30 s", file=sys.stderr)
            return 1
    print(f"asyncio_quickstart: all {COUNT} messages received")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
