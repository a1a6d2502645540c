"""Message trace: a Producer and a PushConsumer with ``enable_trace=True`` record when each
message was sent and consumed, and ``fastmq.query_trace`` reads a message's trace back.

As RocketMQ's ``new DefaultMQProducer(group, true)`` and ``new DefaultMQPushConsumer(group,
true)``: the records go to ``RMQ_SYS_TRACE_TOPIC`` (made by a broker started with
``traceTopicEnable=true``, else on the first trace sent, through ``autoCreateTopicEnable``), in
the format ``mqadmin queryMsgTraceById`` and the RocketMQ dashboard read. Run it against any cluster:

    NAMESRV_ADDR=127.0.0.1:9876 python examples/trace.py

Exits 0 once the message's Pub, SubBefore and SubAfter records are read back, 1 otherwise.
"""
import os
import sys
import threading
import time
import uuid

from fastmq import ConsumeStatus, Message, NoRouteError, Producer, PushConsumer, query_trace

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleTraceTopic"
RUN = uuid.uuid4().hex[:8]
consumed = threading.Event()


def listener(msgs):
    if any(m.keys == [f"order-{RUN}"] for m in msgs):
        consumed.set()
    return ConsumeStatus.CONSUME_SUCCESS


producer = Producer("ExampleTraceProducer", namesrv_addr=NAMESRV, enable_trace=True)
consumer = PushConsumer("ExampleTraceConsumer", namesrv_addr=NAMESRV, enable_trace=True,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe(TOPIC)
consumer.register_message_listener(listener)
producer.start()
consumer.start()
try:
    sent = producer.send(Message(TOPIC, b"traced hello", properties={"TAGS": "tagA", "KEYS": f"order-{RUN}"}))
    print("sent", sent.msg_id)
    if not consumed.wait(30):
        print("the message was not consumed")
        sys.exit(1)
    # traces are sent in batches (every 0.5 s at most): read until the three records are in
    kinds, trace = [], []
    for _ in range(40):
        try:
            trace = query_trace(sent.msg_id, namesrv_addr=NAMESRV)
        except NoRouteError:  # no trace sent yet made the trace topic (traceTopicEnable=false)
            trace = []
        kinds = sorted(r.trace_type for r in trace)
        if {"Pub", "SubBefore", "SubAfter"} <= set(kinds):
            break
        time.sleep(0.5)
    for r in trace:
        c = r.context
        print(f"{c.trace_type.value:10} at {c.time_stamp} group={c.group_name} cost={c.cost_time}ms "
              f"success={c.success} from {r.client_host}")
finally:
    consumer.shutdown()
    producer.shutdown()
sys.exit(0 if {"Pub", "SubBefore", "SubAfter"} <= set(kinds) else 1)
