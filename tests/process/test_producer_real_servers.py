"""The asyncio Producer's tests that need a real server process beside the in-process stand-ins
(the rest are tests/unit/test_producer_stub_brokers.py and test_producer_send_async_first_try.py)."""
from __future__ import annotations

import asyncio

import pytest

from fastmq.client.producer import Producer
from fastmq.errors import BrokerError, ClientStateError, RemotingTooMuchRequestError
from fastmq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.message import Message
from fastmq.remoting import RemotingClient
from tests.stub_broker import start_stub_broker


def test_blocking_facade(tmp_path) -> None:
    """fastmq.Producer from plain threads, against a real fastmq-namesrv process and a stub broker."""
    import threading
    import time

    import fastmq
    from fastmq import _blocking
    from fastmq.testing import ServerProcess, free_port

    port = free_port()
    props = tmp_path / "ns.properties"
    props.write_text(f"listenPort={port}\nkvConfigPath={tmp_path / 'kv.json'}\nlogPath={tmp_path / 'ns.log'}\n")
    ns = ServerProcess(["fastmq-namesrv", "-c", str(props)], port, tmp_path, env={"HOME": str(tmp_path)}).start()
    holder: dict = {}

    async def setup():
        server, stub = await start_stub_broker()
        reg = RemotingClient()
        body = RegisterBrokerBody({"T": TopicConfig("T", 4, 4)}, DataVersion())
        await reg.invoke(ns.addr, create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": "b", "brokerAddr": f"127.0.0.1:{server.port}", "clusterName": "C", "brokerId": 0},
            body.encode()), 5)
        holder.update(server=server, stub=stub, reg=reg)

    async def teardown():
        await holder["reg"].close()
        await holder["server"].close()
    try:
        _blocking.call(setup(), 10)
        with fastmq.Producer("PG", namesrv_addr=ns.addr) as p:
            results: list = []
            threads = [threading.Thread(target=lambda: results.append(p.send(fastmq.Message("T", b"x"))))
                       for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
            assert len(results) == 4 and all(r.status == fastmq.SendStatus.SEND_OK for r in results)
            with pytest.raises(fastmq.MessageValidationError):
                p.send(fastmq.Message("T", b""))

            # send_async from two threads: handed to the loop without waiting, every callback runs once
            outcomes: list = []
            all_done = threading.Event()

            def on_sent(r, e) -> None:
                outcomes.append(e if e is not None else r.status)
                if len(outcomes) == 400:
                    all_done.set()
            senders = [threading.Thread(target=lambda: [p.send_async(fastmq.Message("T", b"a"), on_sent)
                                                        for _ in range(200)]) for _ in range(2)]
            for t in senders:
                t.start()
            for t in senders:
                t.join(20)
            assert all_done.wait(20) and outcomes == [fastmq.SendStatus.SEND_OK] * 400
            with pytest.raises(fastmq.MessageValidationError):   # raised to the caller, not to the callback
                p.send_async(fastmq.Message("bad topic!", b"a"), on_sent)
            holder["stub"].fail_next = [ResponseCode.MESSAGE_ILLEGAL]  # not a code a send retries
            with pytest.raises(BrokerError) as refused:
                p.send(fastmq.Message("T", b"x"))
            assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
        with pytest.raises(ClientStateError):
            p.send(fastmq.Message("T", b"x"))
        with pytest.raises(ClientStateError):
            p.send_async(fastmq.Message("T", b"x"), on_sent)

        # one send in flight at most: the next send_async waits for it, and gives up at its timeout
        with fastmq.Producer("PG_WINDOW", namesrv_addr=ns.addr, max_in_flight=1, send_msg_timeout=400,
                             retry_times_when_send_async_failed=0) as p:
            p.send(fastmq.Message("T", b"warm"))
            first: list = []
            holder["stub"].silent_next = 1
            p.send_async(fastmq.Message("T", b"unanswered"), lambda r, e: first.append(e))
            t0 = time.monotonic()   # a sync send behind it waits on the loop for the only permit
            assert p.send(fastmq.Message("T", b"behind")).status == fastmq.SendStatus.SEND_OK
            assert time.monotonic() - t0 >= 0.3 and first and isinstance(first[0], fastmq.FastMQError), first
            holder["stub"].silent_next = 1
            p.send_async(fastmq.Message("T", b"unanswered"), lambda r, e: first.append(e))
            t0 = time.monotonic()
            with pytest.raises(RemotingTooMuchRequestError):
                p.send_async(fastmq.Message("T", b"next"), on_sent)
            assert time.monotonic() - t0 >= 0.3
            deadline = time.monotonic() + 5
            while len(first) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(first) == 2 and isinstance(first[1], fastmq.FastMQError), first  # timed out too
            assert p.send(fastmq.Message("T", b"x")).status == fastmq.SendStatus.SEND_OK  # and the window is free
        # 4 sends, 400 async ones, the refused one, then warm, unanswered, behind, unanswered, last
        assert len(holder["stub"].sends()) == 4 + 400 + 1 + 5
    finally:
        _blocking.call(teardown(), 10)
        ns.stop()


def test_a_producer_abandoned_with_sends_in_flight_is_collected(tmp_path) -> None:
    """A loop closed with the producer never shut down and sends never answered (a broker that
    stopped answering): nothing the sends in flight refer to may be kept alive for good."""
    import gc
    import os
    import signal
    import warnings
    import weakref

    from fastmq.remoting.loop import new_event_loop
    from fastmq.testing import broker_process, namesrv_process

    ns = namesrv_process(tmp_path).start()
    b = broker_process(tmp_path, ns.addr, brokerName="abandon").start()
    try:
        loop = new_event_loop()

        async def abandon() -> tuple[weakref.ref, weakref.ref]:
            p = Producer("PG_ABANDON", namesrv_addr=ns.addr)
            await p.start()
            await p.send(Message("Abandon", b"warm"))
            os.kill(b.proc.pid, signal.SIGSTOP)
            futs = [await p.send_async(Message("Abandon", b"x"), lambda r, e: None) for _ in range(50)]
            await asyncio.sleep(0.05)
            assert not any(f.done() for f in futs)
            return weakref.ref(p), weakref.ref(futs[0].mq)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # the transports left open are the point
            producer, queue = loop.run_until_complete(abandon())
            loop.close()
            del loop
            gc.collect()
        assert producer() is None and queue() is None
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
        b.stop()
        ns.stop()
