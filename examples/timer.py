"""Timer messages: a message the broker holds until a time the producer chooses (RocketMQ 5's
TIMER_DELIVER_MS / TIMER_DELAY_MS, any delay up to 3 days, 1 s precision by default).

``Message(..., delay_time_ms=...)`` holds it for a while after it reaches the broker;
``Message(..., deliver_time_ms=...)`` until an epoch-millisecond time. The broker keeps it in
rmq_sys_wheel_timer and puts it on its topic once due, never before.

    NAMESRV_ADDR=127.0.0.1:9876 python examples/timer.py

Exits 0 if the plain message arrived at once and the two timer messages no earlier than their
times (and within a few seconds after), 1 otherwise (30 s bound).
"""
import os
import sys
import threading
import time
import uuid

from fastmq import ConsumeStatus, Message, Producer, PushConsumer

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleTimer"
RUN = uuid.uuid4().hex[:8]

due_ms: dict[bytes, int] = {}
with Producer("ExampleTimerProducer", namesrv_addr=NAMESRV) as producer:
    now = int(time.time() * 1000)
    for name, msg in (("plain", Message(TOPIC, f"{RUN} plain".encode())),
                      ("in-3s", Message(TOPIC, f"{RUN} in-3s".encode(), delay_time_ms=3000)),
                      ("at-5s", Message(TOPIC, f"{RUN} at-5s".encode(), deliver_time_ms=now + 5000))):
        due_ms[msg.body] = now if name == "plain" else now + (3000 if name == "in-3s" else 5000)
        result = producer.send(msg)
        print(f"sent {name}: {result.status}")

arrived: dict[str, int] = {}
lock = threading.Lock()
done = threading.Event()


def listener(msgs):
    now_ms = int(time.time() * 1000)
    with lock:
        for m in msgs:
            if m.body in due_ms:
                name = m.body.decode().split()[1]
                arrived[name] = now_ms - due_ms[m.body]
                slot = m.properties.get("TIMER_OUT_MS", "-")
                print(f"received {name} {arrived[name] / 1000:+.1f} s from its time (TIMER_OUT_MS={slot})")
        if len(arrived) == 3:
            done.set()
    return ConsumeStatus.CONSUME_SUCCESS


consumer = PushConsumer("ExampleTimerConsumer", namesrv_addr=NAMESRV, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe(TOPIC)
consumer.register_message_listener(listener)
consumer.start()
try:
    done.wait(30)
finally:
    consumer.shutdown()

if len(arrived) != 3:
    sys.exit(f"timer: received only {sorted(arrived)} within 30 s (is the broker a fastmq or RocketMQ 5 one?)")
late = {k: v for k, v in arrived.items() if k != "plain" and not 0 <= v <= 5000}
if late:
    sys.exit(f"timer: expected each timer message at or shortly after its time, got {arrived} ms")
print("timer: both timer messages arrived at their time, none early")
