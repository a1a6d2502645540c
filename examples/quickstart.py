"""Quickstart: a Producer sends ten messages, a PushConsumer receives them.

RocketMQ's quickstart example (Producer + Consumer) as one program. Run it against any cluster:

    NAMESRV_ADDR=127.0.0.1:9876 python examples/quickstart.py

Exits 0 once every message sent came back, 1 if any is missing after 30 s.
"""
import os
import sys
import threading
import uuid

from fastmq import ConsumeStatus, Message, Producer, PushConsumer

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleQuickstart"  # the broker creates it on the first send (autoCreateTopicEnable)
COUNT = 10
# Each run marks its bodies: a group resumes from its committed offset, and a run that failed
# half-way may leave messages behind that a later run would otherwise count as its own.
RUN = uuid.uuid4().hex[:8]

with Producer("ExampleQuickstartProducer", namesrv_addr=NAMESRV) as producer:
    for i in range(COUNT):
        msg = Message(TOPIC, f"{RUN} hello {i}".encode(), properties={"TAGS": "TagA", "KEYS": f"key-{i}"})
        result = producer.send(msg)  # waits for the broker's answer
        print(f"sent {i}: {result.status} queue={result.message_queue.queue_id} offset={result.queue_offset}")

received: set[bytes] = set()
lock = threading.Lock()
all_here = threading.Event()


def listener(msgs):
    # runs on the consumer's thread pool, several batches at once: hence the lock
    with lock:
        for m in msgs:
            if m.body.startswith(RUN.encode()):
                received.add(m.body)
                print(f"received {m.body.decode()!r} from queue {m.queue_id} offset {m.queue_offset}")
        if len(received) == COUNT:
            all_here.set()
    # CONSUME_SUCCESS commits the messages; RECONSUME_LATER would send them back for a retry
    return ConsumeStatus.CONSUME_SUCCESS


# A new group starts where CONSUME_FROM_FIRST_OFFSET says: the messages above were sent before
# it existed. Later runs resume from the offset the group committed.
consumer = PushConsumer("ExampleQuickstartConsumer", namesrv_addr=NAMESRV,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe(TOPIC, "*")
consumer.register_message_listener(listener)
consumer.start()
try:
    all_here.wait(30)
finally:
    consumer.shutdown()  # commits the consumed offsets to the broker

if len(received) != COUNT:
    sys.exit(f"quickstart: received {len(received)} of {COUNT} messages within 30 s")
print(f"quickstart: all {COUNT} messages received")
