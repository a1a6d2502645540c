"""A stand-in ``java`` for tests/spark/test_rocketmq_tools.py (copied there with this interpreter's #! line).

``java -version`` answers as OpenJDK 17 does; otherwise the JVM options are skipped and the class
decides: RocketMQ's NameServer and broker classes become ``fastmq-namesrv`` / ``fastmq-broker``
with the same ``-c`` file (so the driver talks to real servers), and the benchmark Producer and
Consumer print canned periodic lines in the tools' format, every 0.3 s instead of every 10 s.

FAKE_JAVA_TPS: the Producer's TPS per line (comma-separated); FAKE_JAVA_PRODUCER=die: the
Producer prints one line and exits with 3. A Consumer of a drain shape's topic (BenchmarkDrain...)
consumes it for real with fastmq's push consumer and prints its rate.
"""
import os
import sys
import time
from pathlib import Path

args = sys.argv[1:]
if args == ["-version"]:
    sys.stderr.write('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment (build 17.0.15+6)\n')
    sys.exit(0)
i = 0
while i < len(args) and args[i].startswith("-"):
    i += 2 if args[i] in ("-cp", "--add-opens", "--add-exports") else 1
cls, rest = args[i], args[i + 1:]
bindir = Path(sys.executable).parent
# a Java server's logs follow -Duser.home (its run directory, the cwd); fastmq's follow HOME
os.environ["HOME"] = os.getcwd()
if cls.endswith("NamesrvStartup"):
    os.execv(str(bindir / "fastmq-namesrv"), ["fastmq-namesrv", *rest])
if cls.endswith("BrokerStartup"):
    os.execv(str(bindir / "fastmq-broker"), ["fastmq-broker", *rest])
if cls.endswith("benchmark.Producer"):
    print("topic: BenchmarkTest threadCount: 16 messageSize: 128 keyEnable: false propertySize: 0 tagCount: 0 "
          "traceEnable: false aclEnable: false messageQuantity: 0\ndelayEnable: false delayLevel: 1\nasyncEnable: false",
          flush=True)
    for n, tps in enumerate(int(x) for x in os.environ.get("FAKE_JAVA_TPS", "100,200,300,400").split(",")):
        time.sleep(0.3)
        print(f"Current Time: 2026-11-26 08:16:{n:02d},280 Send TPS: {tps} Max RT(ms): 40 Average RT(ms):   1.500 "
              "Send Failed: 0 Response Failed: 0", flush=True)
        if os.environ.get("FAKE_JAVA_PRODUCER") == "die":
            sys.exit(3)
    time.sleep(60)   # until stopped, as the real one runs until stopped
    sys.exit(0)
if cls.endswith("benchmark.Consumer") and rest[rest.index("-t") + 1].startswith("BenchmarkDrain"):
    # a drain shape's Consumer consumes for real (fastmq's push consumer, 10 ms a message on 20
    # threads: a backlog of thousands lasts several 0.3 s lines) and prints its real rate
    import threading

    from fastmq.blocking import PushConsumer
    topic = rest[rest.index("-t") + 1]
    print(f"topic: {topic}, threadCount 20, group: benchmark_consumer, suffix: false\nConsumer Started.", flush=True)
    lock, got = threading.Lock(), [0]

    def listener(msgs):
        time.sleep(0.01 * len(msgs))
        with lock:
            got[0] += len(msgs)
        return "CONSUME_SUCCESS"
    c = PushConsumer("benchmark_consumer", namesrv_addr=rest[rest.index("-n") + 1])
    c.subscribe(topic)
    c.register_message_listener(listener)
    c.start()
    last = 0
    for n in range(400):
        time.sleep(0.3)
        now = got[0]
        print(f"Current Time: {1795680534266 + n} TPS: {int((now - last) / 0.3)} FAIL: 0 AVG(B2C) RT(ms):   1.000 "
              "AVG(S2C) RT(ms):   1.000 MAX(B2C) RT(ms): 3 MAX(S2C) RT(ms): 3", flush=True)
        last = now
    sys.exit(0)
if cls.endswith("benchmark.Consumer"):
    print("topic: BenchmarkTest, threadCount 20, group: benchmark_consumer, suffix: false\nConsumer Started.", flush=True)
    for n in range(200):
        time.sleep(0.3)
        tps = 0 if n < 2 else 777
        print(f"Current Time: {1795680534266 + n} TPS: {tps} FAIL: 0 AVG(B2C) RT(ms):   1.000 AVG(S2C) RT(ms):   "
              f"1.000 MAX(B2C) RT(ms): 3 MAX(S2C) RT(ms): 3", flush=True)
    sys.exit(0)
sys.exit(f"fake java: unknown class {cls}")
