"""Orderly: each order's steps go to one queue and are consumed in the order they were sent.

RocketMQ's ordermessage example. Order within a topic holds per queue only, so the producer picks
the queue from the order id (``hash_selector``: the same id always maps to the same queue, as
the Java client's SelectMessageQueueByHash maps it), and the consumer is orderly: it locks each
queue on the broker and hands its messages to the listener one batch at a time, in offset order.

    NAMESRV_ADDR=127.0.0.1:9876 python examples/orderly.py

Exits 0 if every order's steps arrived complete and in order, 1 otherwise (30 s bound).
"""
import os
import sys
import threading
import uuid

from fastmq import ConsumeStatus, Message, Producer, PushConsumer, hash_selector

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleOrderly"
RUN = uuid.uuid4().hex[:8]
STEPS = ["created", "paid", "shipped", "done"]
ORDERS = [1001, 1002, 1003, 1004, 1005]

with Producer("ExampleOrderlyProducer", namesrv_addr=NAMESRV) as producer:
    # steps interleave across orders, as they would in a shop; each order keeps its own sequence
    for step in STEPS:
        for order_id in ORDERS:
            msg = Message(TOPIC, f"{RUN} {order_id} {step}".encode(), properties={"KEYS": str(order_id)})
            # the selector gets (queues, msg, arg) and returns one queue: the arg is the order id
            result = producer.send_orderly(msg, hash_selector, order_id)
            print(f"order {order_id} {step:8} -> queue {result.message_queue.queue_id}")

seen: dict[int, list[str]] = {}
lock = threading.Lock()
done = threading.Event()


def listener(msgs):
    # An orderly consumer never runs two batches of one queue at once. RECONSUME_LATER here would
    # suspend the queue for a moment and hand the same messages back, keeping the order.
    with lock:
        for m in msgs:
            run, order_id, step = m.body.decode().split()
            if run == RUN:
                seen.setdefault(int(order_id), []).append(step)
                print(f"consumed order {order_id} {step:8} (queue {m.queue_id})")
        if sum(map(len, seen.values())) >= len(ORDERS) * len(STEPS):
            done.set()
    return ConsumeStatus.CONSUME_SUCCESS


# orderly=True is the Java client's MessageListenerOrderly
consumer = PushConsumer("ExampleOrderlyConsumer", namesrv_addr=NAMESRV, orderly=True,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe(TOPIC)
consumer.register_message_listener(listener)
consumer.start()
try:
    done.wait(30)
finally:
    consumer.shutdown()

wrong = {o: steps for o, steps in seen.items() if steps != STEPS}
if set(seen) != set(ORDERS) or wrong:
    sys.exit(f"orderly: expected each order's steps {STEPS}; got {seen}")
print(f"orderly: {len(ORDERS)} orders, each consumed as {' -> '.join(STEPS)}")
