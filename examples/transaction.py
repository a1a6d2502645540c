"""Transactional messages: consumers see a message only once its local transaction committed.

RocketMQ's transaction example: ten messages, the listener decides by index % 3. Here the local
transaction of #1, #4, #7 commits, that of #2, #5, #8 rolls back, and #0, #3, #6, #9 end UNKNOW:
their state is left to the broker's check, which this listener answers with COMMIT (as if the
local transaction had finished in the meantime).

    NAMESRV_ADDR=127.0.0.1:9876 python examples/transaction.py

Exits 0 if the three committed messages were consumed and none of the rolled-back ones within
30 s, 1 otherwise. The UNKNOW ones are checked by the broker once they are older than its
``transactionTimeOut`` (6 s), at its next check round: every ``transactionCheckInterval``, 60 s
by default, so usually after this example has ended; they are reported if they arrive, and only
awaited (then required) when ``TX_CHECK_WAIT_S`` gives seconds to wait for them, for a broker
with a short check interval. Left unanswered, the broker asks again each round (15 times).
"""
import os
import sys
import threading
import time
import uuid

from fastmq import ConsumeStatus, LocalTransactionState, Message, PushConsumer, TransactionProducer

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleTransaction"
RUN = uuid.uuid4().hex[:8]
CHECK_WAIT_S = float(os.environ.get("TX_CHECK_WAIT_S", "0"))
BY_REMAINDER = {0: LocalTransactionState.UNKNOW, 1: LocalTransactionState.COMMIT_MESSAGE,
                2: LocalTransactionState.ROLLBACK_MESSAGE}


def say(line):
    sys.stdout.write(line + "\n")  # one write: the consumer's and the check's threads print too


def index_of(msg):
    return int(msg.body.decode().split()[1])


class Listener:
    def __init__(self):
        self.checked = set()

    def execute_local_transaction(self, msg, arg):
        return BY_REMAINDER[arg % 3]

    def check_local_transaction(self, msg):
        if not msg.body.decode().startswith(RUN):
            return LocalTransactionState.UNKNOW  # an earlier run's: nothing known of it here
        self.checked.add(index_of(msg))
        say(f"broker checked #{index_of(msg)}: COMMIT_MESSAGE")
        return LocalTransactionState.COMMIT_MESSAGE


received: set[int] = set()
lock = threading.Lock()
arrived = threading.Condition(lock)


def on_messages(msgs):
    with arrived:
        for m in msgs:
            if m.body.decode().startswith(RUN):
                received.add(index_of(m))
                say(f"consumed #{index_of(m)}")
        arrived.notify_all()
    return ConsumeStatus.CONSUME_SUCCESS


consumer = PushConsumer("ExampleTransactionConsumer", namesrv_addr=NAMESRV,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe(TOPIC)
consumer.register_message_listener(on_messages)
listener = Listener()
producer = TransactionProducer("ExampleTransactionProducer", namesrv_addr=NAMESRV, listener=listener)
producer.start()
consumer.start()
try:
    for i in range(10):
        result = producer.send_message_in_transaction(Message(TOPIC, f"{RUN} {i}".encode()), arg=i)
        say(f"sent #{i}: {result.status}, local transaction {result.local_transaction_state.name}")
    committed = {i for i in range(10) if i % 3 == 1}
    rolled_back = {i for i in range(10) if i % 3 == 2}
    unknown = {i for i in range(10) if i % 3 == 0}
    wanted = committed | (unknown if CHECK_WAIT_S > 0 else set())
    deadline = time.monotonic() + max(30.0, CHECK_WAIT_S)
    with arrived:
        arrived.wait_for(lambda: wanted <= received, max(0.0, deadline - time.monotonic()))
    time.sleep(2)  # what must not come has had the time to
finally:
    consumer.shutdown()
    producer.shutdown()

with lock:
    got = set(received)
if not committed <= got:
    sys.exit(f"transaction: committed #{sorted(committed - got)} not consumed within the bound")
if got & rolled_back:
    sys.exit(f"transaction: rolled-back #{sorted(got & rolled_back)} were consumed")
if CHECK_WAIT_S > 0 and not unknown <= got:
    sys.exit(f"transaction: UNKNOW #{sorted(unknown - got)} not committed by a check within {CHECK_WAIT_S:.0f} s")
pending = sorted(unknown - got)
print(f"transaction: committed {sorted(committed)} consumed, rolled back {sorted(rolled_back)} never; "
      f"UNKNOW {sorted(unknown & got)} committed by the broker's check"
      + (f", {pending} left to its next rounds" if pending else ""))
