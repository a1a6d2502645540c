"""SQL92 filter: a consumer takes only the messages whose properties match an expression.

RocketMQ's filter example (SqlFilterProducer / SqlFilterConsumer): ten messages with tags TagA,
TagB, TagC in turn and a user property ``a`` = 0..9; the consumer subscribes with
``MessageSelector.by_sql("(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a between 0 and 3)")``
and the broker evaluates it against each message's properties, so only #0, #1 and #3 reach the
listener (#2 is TagC).

The broker must serve SQL92 filters: start it with ``enablePropertyFilter=true`` in its ``-c``
file (or set it with ``mqadmin updateBrokerConfig -k enablePropertyFilter -v true``). Otherwise
the consumer's start fails with ``FilterRefusedError`` (code 1), as the Java client's does.

    NAMESRV_ADDR=127.0.0.1:9876 python examples/sql_filter.py

Exits 0 if exactly those three messages were consumed within 30 s, 1 otherwise.
"""
import os
import sys
import threading
import time
import uuid

from fastmq import ConsumeStatus, FilterRefusedError, Message, MessageSelector, Producer, PushConsumer

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleSqlFilter"
RUN = uuid.uuid4().hex[:8]
TAGS = ["TagA", "TagB", "TagC"]
SQL = "(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a between 0 and 3) and run = '" + RUN + "'"

with Producer("ExampleSqlFilterProducer", namesrv_addr=NAMESRV) as producer:
    for i in range(10):
        producer.send(Message(TOPIC, f"{RUN} {i}".encode(),
                              properties={"TAGS": TAGS[i % 3], "a": str(i), "run": RUN}))
print("sent 10 messages, a = 0..9, tags TagA, TagB, TagC in turn")

wanted = {f"{RUN} {i}".encode() for i in (0, 1, 3)}
received: list[bytes] = []
lock = threading.Lock()
done = threading.Event()


def listener(msgs):
    with lock:
        received.extend(m.body for m in msgs)
        if wanted <= set(received):
            done.set()
    return ConsumeStatus.CONSUME_SUCCESS


consumer = PushConsumer("ExampleSqlFilterConsumer", namesrv_addr=NAMESRV,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe(TOPIC, MessageSelector.by_sql(SQL))
consumer.register_message_listener(listener)
try:
    consumer.start()
except FilterRefusedError as exc:
    consumer.shutdown()
    sys.exit(f"sql_filter: the broker refused the filter (start it with enablePropertyFilter=true): {exc}")
try:
    if done.wait(30):
        time.sleep(0.5)  # queues are consumed in parallel: give a stray message a moment to show up
finally:
    consumer.shutdown()

got = sorted(int(b.split()[1]) for b in received)
print(f"received: {got}")
if set(received) != wanted:
    sys.exit(f"sql_filter: expected messages 0, 1 and 3 only; got {got}")
print("sql_filter: only the messages the expression takes reached the listener")
