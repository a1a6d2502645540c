"""Request-reply: a Producer sends a request and waits for its reply, which a PushConsumer sends.

RocketMQ's RequestProducer, AsyncRequestProducer and ResponseConsumer (example.rpc) as one
program. The responder consumes the requests and answers each with a reply message made by
``create_reply_message``; the broker pushes each reply straight back to the requester's
connection. Run it against any cluster:

    NAMESRV_ADDR=127.0.0.1:9876 python examples/request_reply.py

Exits 0 once the blocking request and the three asynchronous ones got their replies, 1 otherwise.
"""
import os
import sys
import threading
import uuid

from fastmq import (ConsumeStatus, Message, Producer, PushConsumer, RequestSendError, RequestTimeoutError,
                    create_reply_message)

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleRequestTopic"  # the broker creates it on the first send (autoCreateTopicEnable)
RUN = uuid.uuid4().hex[:8]  # each run answers and counts only its own requests

# --- the responder: a consumer of the requests and a producer of the replies
replier = Producer("ExampleReplyProducer", namesrv_addr=NAMESRV)
replier.start()


def respond(msgs):
    for m in msgs:
        if not m.body.startswith(RUN.encode()):
            continue  # a request of an earlier run: its requester is gone
        reply = create_reply_message(m, b"reply to " + m.body)  # to <cluster>_REPLY_TOPIC
        replier.send(reply)
    return ConsumeStatus.CONSUME_SUCCESS


# Start the responder first: a new group starts at the topic's end (CONSUME_FROM_LAST_OFFSET),
# as the Java ResponseConsumer does, so it answers only requests sent from now on.
responder = PushConsumer("ExampleResponseConsumer", namesrv_addr=NAMESRV,
                         consume_from_where="CONSUME_FROM_LAST_OFFSET")
responder.subscribe(TOPIC, "*")
responder.register_message_listener(respond)

failures = []
with Producer("ExampleRequestProducer", namesrv_addr=NAMESRV) as requester:
    # the topic must exist before the responder can be placed on its queues: the first request
    # creates it; until the responder has its queues, a request may time out (retried below)
    responder.start()
    reply = None
    for attempt in range(10):
        try:
            reply = requester.request(Message(TOPIC, f"{RUN} sync {attempt}".encode()), timeout_ms=3000)
            break
        except RequestTimeoutError as exc:
            print(f"no reply yet ({'sent' if exc.sent else 'not sent'}): {exc}")
    if reply is None:
        failures.append("the blocking request got no reply")
    else:
        print(f"request: reply {reply.body.decode()!r} (correlation id {reply.properties['CORRELATION_ID']})")

    # three asynchronous requests: the callback tells a reply from a send failure and a timeout
    done = threading.Semaphore(0)
    replies = []

    def on_reply(reply, error):
        if reply is not None:
            replies.append(reply.body)
            print(f"request_async: reply {reply.body.decode()!r}")
        elif isinstance(error, RequestTimeoutError):
            failures.append(f"timed out (request {'sent' if error.sent else 'not sent'}): {error}")
        elif isinstance(error, RequestSendError):
            failures.append(f"the request could not be sent: {error}")
        done.release()

    for i in range(3):
        requester.request_async(Message(TOPIC, f"{RUN} async {i}".encode()), on_reply, timeout_ms=5000)
    for _ in range(3):
        if not done.acquire(timeout=30):
            failures.append("a request_async callback did not come")
            break

responder.shutdown()
replier.shutdown()
if failures or len(replies) != 3:
    sys.exit(f"request_reply: {failures or 'missing replies'}")
print("request_reply: every request got its reply")
