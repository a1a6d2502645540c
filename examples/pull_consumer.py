"""Pull consumer: the application asks for messages (poll) and says when they are done (commit).

RocketMQ's lite pull consumer examples (LitePullConsumerSubscribe, LitePullConsumerAssign). The
client still pulls in the background; ``poll`` hands over what has arrived. With ``subscribe``
the group's members share the queues (rebalanced as members come and go); with ``assign`` this
consumer reads exactly the queues it names, with no rebalance.

    NAMESRV_ADDR=127.0.0.1:9876 python examples/pull_consumer.py

Exits 0 if both ways read every message, 1 otherwise (about 10 s bound each).
"""
import os
import sys
import time
import uuid

from fastmq import Message, Producer, PullConsumer

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExamplePullConsumer"
RUN = uuid.uuid4().hex[:8]
COUNT = 8

with Producer("ExamplePullProducer", namesrv_addr=NAMESRV) as producer:
    for i in range(COUNT):
        producer.send(Message(TOPIC, f"{RUN} item {i}".encode()))
print(f"sent {COUNT} messages")


def drain(consumer, label):
    """Poll until this run's messages are all in, for at most 10 s."""
    got = set()
    deadline = time.monotonic() + 10
    while len(got) < COUNT and time.monotonic() < deadline:
        msgs = consumer.poll(1.0)  # [] when nothing came within 1 s
        got.update(m.body for m in msgs if m.body.startswith(RUN.encode()))
        # auto_commit=False: the offsets move only here, once the batch is really handled
        consumer.commit()
    print(f"{label}: polled {len(got)} of {COUNT}")
    return len(got) == COUNT


# 1. subscribe: rebalance picks the queues; the group's committed offsets say where to start
sub = PullConsumer("ExamplePullSubscribe", namesrv_addr=NAMESRV, auto_commit=False,
                   consume_from_where="CONSUME_FROM_FIRST_OFFSET")
sub.subscribe(TOPIC, "*")
sub.start()
try:
    subscribed_ok = drain(sub, "subscribe")
finally:
    sub.shutdown()  # persists the committed offsets

# 2. assign: this consumer names its queues itself; here all of them, read from the start
assigned = PullConsumer("ExamplePullAssign", namesrv_addr=NAMESRV, auto_commit=False,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
queues = assigned.fetch_message_queues(TOPIC)
print(f"assigning {len(queues)} queues: {[q.queue_id for q in queues]}")
assigned.assign(queues)
assigned.start()
try:
    assigned_ok = drain(assigned, "assign")
finally:
    assigned.shutdown()

if not (subscribed_ok and assigned_ok):
    sys.exit("pull_consumer: not every message was polled within 10 s")
print("pull_consumer: both ways polled every message")
