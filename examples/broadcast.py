"""Broadcast: every consumer of a BROADCASTING group gets every message.

RocketMQ's broadcast example. In the default CLUSTERING model a group's members share the
queues, so each message goes to one of them; in BROADCASTING each member reads all queues and
keeps its own offsets in a local file (``~/.rocketmq_offsets/<client id>/<group>/offsets.json``)
instead of on the broker. Two members run here in one process; usually they are two processes.

    NAMESRV_ADDR=127.0.0.1:9876 python examples/broadcast.py

Exits 0 if both members received all messages, 1 otherwise (30 s bound).
"""
import os
import sys
import threading
import uuid

from fastmq import ConsumeStatus, Message, Producer, PushConsumer
from fastmq.client.instance import ClientConfig  # (not re-exported by fastmq yet)

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleBroadcast"
RUN = uuid.uuid4().hex[:8]
COUNT = 6

with Producer("ExampleBroadcastProducer", namesrv_addr=NAMESRV) as producer:
    for i in range(COUNT):
        producer.send(Message(TOPIC, f"{RUN} news {i}".encode(), properties={"TAGS": "TagA"}))
print(f"sent {COUNT} messages")

received = {"member-1": set(), "member-2": set()}
lock = threading.Lock()
done = threading.Event()


def listener_of(member):
    def listener(msgs):
        with lock:
            received[member].update(m.body for m in msgs if m.body.startswith(RUN.encode()))
            if all(len(got) == COUNT for got in received.values()):
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS
    return listener


consumers = []
for member in received:
    # A broadcasting member is known by its client id (ip@instance name): two in one process
    # need names of their own, or they would share one offsets file.
    config = ClientConfig(namesrv_addr=NAMESRV, instance_name=member)
    consumer = PushConsumer("ExampleBroadcastConsumer", client_config=config, message_model="BROADCASTING",
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener_of(member))
    consumers.append(consumer)
try:
    for consumer in consumers:
        consumer.start()
    done.wait(30)
finally:
    for consumer in consumers:
        consumer.shutdown()

for member, got in received.items():
    print(f"{member} received {len(got)} of {COUNT}")
if not all(len(got) == COUNT for got in received.values()):
    sys.exit("broadcast: a member missed messages within 30 s")
print("broadcast: each member received every message")
