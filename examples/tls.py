"""TLS: a NameServer and a broker that take TLS only, and a producer and consumer that verify them.

Makes its own self-signed certificate (with the ``openssl`` command) in a temporary directory,
starts ``fastmq-namesrv`` and ``fastmq-broker`` on free loopback ports with
``tls.server.mode=enforcing`` and that certificate (the broker registers with the NameServer over
TLS: ``tls.enable=true``), then sends and receives ten messages with ``ClientConfig(tls=context)``,
where the context trusts that certificate and nothing else. A plaintext client is refused. In a
real deployment the same keys go into broker.conf / namesrv.properties (see docs/tls.md).

    python examples/tls.py

Exits 0 once every message sent came back, 1 otherwise (within about 30 s).
"""
import ssl
import sys
import tempfile
import threading
from pathlib import Path

from fastmq import ClientConfig, ConsumeStatus, Message, Producer, PushConsumer
from fastmq.errors import FastMQError
from fastmq.remoting.tls import make_self_signed
from fastmq.testing import broker_process, namesrv_process

TOPIC, COUNT = "ExampleTls", 10

with tempfile.TemporaryDirectory() as tmp:
    work = Path(tmp)
    cert, key = make_self_signed(tmp, "example")  # CN=example, subjectAltName IP:127.0.0.1
    tls_keys = {"tls.server.mode": "enforcing", "tls.server.certPath": cert, "tls.server.keyPath": key,
                "tls.test.mode.enable": "false", "tls.enable": "true"}
    with namesrv_process(work, **tls_keys) as ns, broker_process(work, ns.addr, **tls_keys):
        # trust exactly our certificate, and check that it names the address we connect to
        context = ssl.create_default_context(cafile=cert)
        config = ClientConfig(namesrv_addr=ns.addr, tls=context)

        try:
            with Producer("ExampleTlsPlaintext", namesrv_addr=ns.addr, send_msg_timeout=2000) as plain:
                plain.send(Message(TOPIC, b"never"))
            sys.exit("tls: a plaintext client was served by an enforcing cluster")
        except FastMQError as exc:
            print(f"plaintext client refused: {type(exc).__name__}")

        with Producer("ExampleTlsProducer", client_config=config) as producer:
            for i in range(COUNT):
                result = producer.send(Message(TOPIC, f"secret {i}".encode()))
                print(f"sent {i} over TLS: {result.status} offset={result.queue_offset}")

        received: set[bytes] = set()
        lock, all_here = threading.Lock(), threading.Event()

        def listener(msgs):
            with lock:
                received.update(m.body for m in msgs)
                if len(received) >= COUNT:
                    all_here.set()
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("ExampleTlsConsumer", client_config=config,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(listener)
        consumer.start()
        try:
            all_here.wait(30)
        finally:
            consumer.shutdown()
        print(f"received {len(received)} of {COUNT} over TLS")

if len(received) != COUNT:
    sys.exit(f"tls: received {len(received)} of {COUNT} messages within 30 s")
