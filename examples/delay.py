"""Delay levels: a message held back by the broker for a set time before consumers see it.

RocketMQ's schedule example. A message with the DELAY property (the Java client's
``setDelayTimeLevel``) is parked in SCHEDULE_TOPIC_XXXX and put into its topic once the level's
time is up. Levels come from the broker's ``messageDelayLevel``; by default
"1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", so level 2 is 5 s.

    NAMESRV_ADDR=127.0.0.1:9876 python examples/delay.py

Exits 0 if the plain message arrived at once and the delayed one about 5 s after it was sent,
1 otherwise (30 s bound).
"""
import os
import sys
import threading
import time
import uuid

from fastmq import ConsumeStatus, Message, Producer, PushConsumer

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleDelay"
RUN = uuid.uuid4().hex[:8]
LEVEL, LEVEL_SECONDS = 2, 5.0  # level 2 of the default messageDelayLevel

sent_at: dict[bytes, float] = {}
with Producer("ExampleDelayProducer", namesrv_addr=NAMESRV) as producer:
    for name, props in (("plain", {}), ("delayed", {"DELAY": str(LEVEL)})):
        body = f"{RUN} {name}".encode()
        sent_at[body] = time.monotonic()
        result = producer.send(Message(TOPIC, body, properties=props))
        print(f"sent {name} message: {result.status} (DELAY={props.get('DELAY', 'none')})")

delays: dict[str, float] = {}
lock = threading.Lock()
done = threading.Event()


def listener(msgs):
    now = time.monotonic()
    with lock:
        for m in msgs:
            if m.body in sent_at:
                name = m.body.decode().split()[1]
                delays[name] = now - sent_at[m.body]
                # the delivered copy has no DELAY property: the broker drops it (as RocketMQ does)
                # so that the message is not parked a second time
                print(f"received {name} message {delays[name]:.1f} s after it was sent")
        if len(delays) == 2:
            done.set()
    return ConsumeStatus.CONSUME_SUCCESS


consumer = PushConsumer("ExampleDelayConsumer", namesrv_addr=NAMESRV,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe(TOPIC)
consumer.register_message_listener(listener)
consumer.start()
try:
    done.wait(LEVEL_SECONDS + 25)
finally:
    consumer.shutdown()

if len(delays) != 2:
    sys.exit(f"delay: received only {sorted(delays)} of the plain and the delayed message within 30 s")
if delays["delayed"] < LEVEL_SECONDS - 0.5 or delays["plain"] >= LEVEL_SECONDS - 0.5:
    sys.exit(f"delay: expected the delayed message about {LEVEL_SECONDS:.0f} s after the plain one, got {delays} "
             "(is the broker's messageDelayLevel the default?)")
print(f"delay: level {LEVEL} held the message {delays['delayed']:.1f} s")
