"""Admin: what `mqadmin` does, from Python — a topic created, its queues' offsets, a group's lag.

Uses the NameServer in ``NAMESRV_ADDR`` (default ``127.0.0.1:9876``): creates the topic
``ExampleAdminTopic`` on every master of the first cluster, sends five messages, commits an
offset for a group through a consumer, then prints what ``fastmq-admin topicStatus`` and
``fastmq-admin consumerProgress`` print, and the message found by its key. The same from a shell:

    fastmq-admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t ExampleAdminTopic
    fastmq-admin topicStatus -n 127.0.0.1:9876 -t ExampleAdminTopic
    fastmq-admin consumerProgress -n 127.0.0.1:9876 -g ExampleAdminGroup --json

Exits 0 once the status shows the five messages and the group caught up, 1 otherwise (about 30 s).
"""
import os
import sys
import threading
import time

from fastmq import ConsumeStatus, Message, Producer, PushConsumer
from fastmq.blocking import Admin

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC, GROUP, COUNT = "ExampleAdminTopic", "ExampleAdminGroup", 5

with Admin(NAMESRV) as admin:
    cluster = sorted(admin.cluster_info().cluster_addr_table)[0]
    print("created on", admin.update_topic(TOPIC, cluster=cluster, read_queue_nums=4, write_queue_nums=4))
    deadline = time.monotonic() + 30
    while TOPIC not in admin.topic_list() and time.monotonic() < deadline:
        time.sleep(0.2)  # the broker registers the new topic with the NameServer

    with Producer("ExampleAdminProducer", namesrv_addr=NAMESRV) as producer:
        for i in range(COUNT):
            producer.send(Message(TOPIC, b"order %d" % i, properties={"KEYS": f"order-{i}"}))

    done = threading.Event()
    seen = []

    def listener(msgs):
        seen.extend(msgs)
        if len(seen) >= COUNT:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, namesrv_addr=NAMESRV, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        done.wait(30)
    finally:
        consumer.shutdown()  # commits the group's offsets to the broker

    for q in admin.topic_status(TOPIC):
        print(f"{q.queue.broker_name} queue {q.queue.queue_id}: offsets {q.min_offset}..{q.max_offset}")
    lag = None
    while time.monotonic() < deadline:
        progress = admin.consumer_progress(GROUP, TOPIC)
        lag = sum(p.diff for p in progress)
        if progress and lag == 0:
            break
        time.sleep(0.2)
    print(f"group {GROUP}: lag {lag}")
    found = admin.query_message_by_key(TOPIC, "order-3")
    print("by key order-3:", [bytes(m.body) for m in found])
    stored = sum(q.max_offset - q.min_offset for q in admin.topic_status(TOPIC))
    sys.exit(0 if stored >= COUNT and lag == 0 and len(seen) >= COUNT else 1)
