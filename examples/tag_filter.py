"""Tag filter: a consumer subscribes to some of a topic's tags ("TagA || TagC").

RocketMQ's filter example (TagFilterConsumer). A message carries one tag (the TAGS property);
the broker compares the tag's hash code when it serves a pull, and the client checks the tag
itself, so messages of other tags never reach the listener (and still count as consumed).

    NAMESRV_ADDR=127.0.0.1:9876 python examples/tag_filter.py

Exits 0 if the listener got every TagA and TagC message and no TagB one, 1 otherwise (30 s bound).
"""
import os
import sys
import threading
import time
import uuid

from fastmq import ConsumeStatus, Message, Producer, PushConsumer

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleTagFilter"
RUN = uuid.uuid4().hex[:8]
TAGS = ["TagA", "TagB", "TagC"]
PER_TAG = 3

with Producer("ExampleTagFilterProducer", namesrv_addr=NAMESRV) as producer:
    for i in range(PER_TAG):
        for tag in TAGS:
            producer.send(Message(TOPIC, f"{RUN} {tag} {i}".encode(), properties={"TAGS": tag}))
print(f"sent {PER_TAG} messages of each of {TAGS}")

wanted = {f"{RUN} {tag} {i}".encode() for tag in ("TagA", "TagC") for i in range(PER_TAG)}
received: list[tuple[str, bytes]] = []
lock = threading.Lock()
done = threading.Event()


def listener(msgs):
    with lock:
        for m in msgs:
            if m.body.startswith(RUN.encode()):
                received.append((m.tags, m.body))
        if wanted <= {body for _, body in received}:
            done.set()
    return ConsumeStatus.CONSUME_SUCCESS


consumer = PushConsumer("ExampleTagFilterConsumer", namesrv_addr=NAMESRV,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe(TOPIC, "TagA || TagC")  # "*" would take every tag
consumer.register_message_listener(listener)
consumer.start()
try:
    if done.wait(30):
        time.sleep(0.5)  # queues are consumed in parallel: give a stray TagB a moment to show up
finally:
    consumer.shutdown()

tags = sorted(tag for tag, _ in received)
print(f"received tags: {tags}")
if "TagB" in tags or not wanted <= {body for _, body in received}:
    sys.exit(f"tag_filter: expected {PER_TAG} TagA and {PER_TAG} TagC messages and no TagB; got {tags}")
print("tag_filter: only TagA and TagC reached the listener")
