"""Batch: several messages of one topic in one request, and split_batch for a list too big for one.

RocketMQ's batch examples (SimpleBatchProducer, SplitBatchProducer). A batch is one round trip
and one append on the broker, but its messages are stored, and consumed, one by one. A batch
must stay within the producer's ``max_message_size`` (4 MiB by default) and cannot carry delay
levels; ``split_batch`` cuts a long list into batches that fit.

    NAMESRV_ADDR=127.0.0.1:9876 python examples/batch.py

Exits 0 once every batched message was consumed as a message of its own, 1 otherwise (30 s bound).
"""
import os
import sys
import threading
import uuid

from fastmq import ConsumeStatus, Message, Producer, PushConsumer, split_batch

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleBatch"
RUN = uuid.uuid4().hex[:8]  # this run's bodies, told apart from earlier runs' leftovers

small = [Message(TOPIC, f"{RUN} small {i}".encode(), properties={"KEYS": f"small-{i}"}) for i in range(3)]
# 600 x 4 KiB is about 2.4 MiB: too much for one batch at a 1 MiB limit, so split_batch makes
# three. The default limit is 4 MiB (max_message_size, the broker's maxMessageSize too); a lower
# one keeps each request's latency, and the memory a request in flight holds, smaller.
large = [Message(TOPIC, f"{RUN} large {i} ".encode().ljust(4096, b".")) for i in range(600)]

with Producer("ExampleBatchProducer", namesrv_addr=NAMESRV) as producer:
    result = producer.send_batch(small)  # all to one queue, in this order
    print(f"small batch: {result.status} queue={result.message_queue.queue_id} "
          f"first offset={result.queue_offset} ids={result.msg_id}")
    for n, chunk in enumerate(split_batch(large, limit=1024 * 1024)):
        result = producer.send_batch(chunk)
        print(f"large batch {n}: {len(chunk)} messages, {result.status} queue={result.message_queue.queue_id}")

expected = {m.body for m in small + large}
received: set[bytes] = set()
lock = threading.Lock()
done = threading.Event()


def listener(msgs):
    with lock:
        received.update(m.body for m in msgs if m.body.startswith(RUN.encode()))
        if received >= expected:
            done.set()
    return ConsumeStatus.CONSUME_SUCCESS


consumer = PushConsumer("ExampleBatchConsumer", namesrv_addr=NAMESRV,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                        consume_message_batch_max_size=32)  # hand the listener up to 32 at a time
consumer.subscribe(TOPIC)
consumer.register_message_listener(listener)
consumer.start()
try:
    done.wait(30)
finally:
    consumer.shutdown()

if not received >= expected:
    sys.exit(f"batch: consumed {len(received & expected)} of {len(expected)} batched messages within 30 s")
print(f"batch: all {len(expected)} messages consumed one by one")
