"""Metrics: a broker and a NameServer serving Prometheus text, scraped after some traffic.

Starts its own NameServer and broker (temporary store, free loopback ports) with
``metricsExporterType=PROM``, sends twenty messages, consumes them, then scrapes both
``/metrics`` endpoints with urllib and prints the lines an operator looks at first. In a real
deployment the same two keys go into broker.conf / namesrv.properties and Prometheus scrapes
``http://<host>:5557/metrics`` (see docs/metrics.md).

    python examples/metrics.py

Exits 0 once the scrape shows the twenty messages in and out, 1 otherwise (within about 30 s).
"""
import sys
import tempfile
import threading
import time
import urllib.request

from fastmq import ConsumeStatus, Message, Producer, PushConsumer
from fastmq.testing import EmbeddedCluster, free_port

TOPIC, GROUP, COUNT = "ExampleMetrics", "ExampleMetricsConsumer", 20
SHOWN = ("rocketmq_messages_in_total", "rocketmq_messages_out_total", "rocketmq_consumer_lag_messages",
         "rocketmq_rpc_latency_count", "rocketmq_storage_flush_behind_bytes", "fastmq_namesrv_brokers")


def scrape(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode().splitlines()


def value(lines: list[str], name: str, needle: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name + "{") and needle in line)


broker_port, namesrv_port = free_port(), free_port()
with tempfile.TemporaryDirectory() as tmp, EmbeddedCluster(
        tmp, broker_conf={"metricsExporterType": "PROM", "metricsPromExporterPort": broker_port},
        namesrv_conf={"metricsExporterType": "PROM", "metricsPromExporterPort": namesrv_port}) as cluster:
    with Producer("ExampleMetricsProducer", namesrv_addr=cluster.namesrv_addr) as producer:
        for i in range(COUNT):
            producer.send(Message(TOPIC, f"hello {i}".encode()))
    got = threading.Semaphore(0)

    def listener(msgs):
        for _ in msgs:
            got.release()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, namesrv_addr=cluster.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = scrape(broker_port)
            if value(lines, "rocketmq_messages_out_total", f'topic="{TOPIC}"') >= COUNT:
                break
            time.sleep(0.5)
    finally:
        consumer.shutdown()
    lines = scrape(broker_port) + scrape(namesrv_port)
    for line in lines:
        if line.startswith(SHOWN) and (TOPIC in line or "topic=" not in line):
            print(line)
    sent = value(lines, "rocketmq_messages_in_total", f'topic="{TOPIC}"')
    pulled = value(lines, "rocketmq_messages_out_total", f'topic="{TOPIC}"')
    print(f"{TOPIC}: {sent:.0f} in, {pulled:.0f} out")
    sys.exit(0 if sent == COUNT and pulled >= COUNT else 1)
