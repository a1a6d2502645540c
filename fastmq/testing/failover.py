"""A failover drill (issue 17's scenario) on real processes on loopback: what a producer and a
consumer group see when a NameServer and a broker die. Run it against your own client settings
with :func:`run_failover`; fastmq's tests (tests/process/test_failover.py) and its benchmark probe
(benchmarks/probes/failover.py) both do.

Two NameServers, two brokers (a, b) registered with both, a topic with 4 queues on each, a
producer sending steadily (one message every few ms, a bounded count) and a consumer group of two
push consumers. NameServer 1 is killed -9, then broker a; in the busy variant broker b is paused
(SIGSTOP) for ~700 ms right after a dies, then resumed. Then a is restarted and everything
acknowledged must be consumed.

What is measured (:class:`Outcome`): sends ok / failed after the client's own retries; tries
on a after its death (every one of them fails: a's failures as the producer logs them), the most
on one send, and tries on a broker already marked unreachable; acknowledged sends on a after its
death; the longest gap between two acknowledgements while sending (the stall), the p99 send
latency from a's death on; what was acknowledged but not consumed, and duplicates.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fastmq
from fastmq.aio import ConsumeStatus, Message, Producer, PullConsumer, PushConsumer
from fastmq.client.instance import ClientConfig
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, broker_process, namesrv_process

__all__ = ["GROUP", "TOPIC", "Outcome", "failover_broker", "prepare_topic", "run_failover"]

TOPIC = "FailoverTopic"
GROUP = "GID_FAILOVER"


@dataclass
class Outcome:
    """What one run of :func:`run_failover` measured (the module's docstring says what each is)."""

    api: str
    busy: bool
    sends_ok: int = 0
    sends_failed: int = 0
    failures: list[str] = field(default_factory=list)
    callbacks_extra: int = 0              # callbacks beyond one per send (async API)
    acked_on_a_after_death: int = 0
    tries_on_a_after_death: int = 0
    max_tries_on_a_per_send: int = 0
    tries_on_unreachable: int = 0
    longest_stall_ms: float = 0.0
    p99_send_ms_during_failover: float = 0.0
    max_send_ms_during_failover: float = 0.0
    not_consumed: int = 0
    duplicates: int = 0
    longest_consume_gap_b_ms: float = 0.0
    acked: int = 0
    consumer: str = "push"
    fault: bool = True
    #: from a's death until the producer's route for the topic no longer lists a (-1: never seen)
    a_left_route_ms: float = -1.0

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (the first five failures only)."""
        d = asdict(self)
        d["failures"] = d["failures"][:5]
        return d


class _TryLog(logging.Handler):
    """The producer's "send <uniq> to <queue> failed" records on one broker, with their time."""

    def __init__(self, broker: str) -> None:
        super().__init__(logging.WARNING)
        self.broker = broker
        self.records: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("send %s to %s failed") and len(record.args) == 3:  # type: ignore[arg-type]
            uniq, mq, _exc = record.args  # type: ignore[misc]
            if getattr(mq, "broker_name", None) == self.broker:
                with self._lock:
                    self.records.append((time.monotonic(), str(uniq)))


def failover_broker(tmp: Path, name: str, ns: str, port: int | None = None) -> ServerProcess:
    """A broker ``name`` under ``tmp/name`` registering with ``ns`` (not started); ``port`` to restart it there."""
    d = tmp / name
    d.mkdir(exist_ok=True)
    return broker_process(d, ns, port=port, brokerName=name)


async def prepare_topic(admin: RemotingClient, brokers: list[ServerProcess], namesrvs: list[ServerProcess]) -> None:
    """Create TOPIC (4 queues) on each broker and wait (bounded, 40 s) until every NameServer
    routes it to broker-a and broker-b."""
    for br in brokers:
        resp = await admin.invoke(br.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
            "perm": 6, "topicFilterType": "SINGLE_TAG"}), 5)
        assert resp.code == 0, resp.remark
    for ns in namesrvs:  # until every NameServer routes the topic to both brokers
        deadline = time.monotonic() + 40
        while True:
            r = await admin.invoke(ns.addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5)
            if r.code == 0 and r.body and b"broker-a" in r.body and b"broker-b" in r.body:
                break
            assert time.monotonic() < deadline, f"{ns.addr} never routed {TOPIC} to both brokers"
            await asyncio.sleep(0.2)


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * 0.99))]


async def run_failover(tmp: Path, *, api: str = "blocking", busy: bool = False, consumer: str = "push",
                       fault: bool = True, interval_s: float = 0.003, before_s: float = 1.0, after_s: float = 3.0,
                       pause_s: float = 0.7) -> Outcome:
    """Run the scenario under ``tmp``; ``api``: "blocking" (fastmq.Producer.send from a thread)
    or "aio" (fastmq.aio.Producer.send_async with callbacks, on this loop); ``consumer``: the
    group's two members are "push" consumers or "lite" pull consumers (polling, offsets
    committed automatically at the next poll); ``fault``: the producer's
    ``send_latency_fault_enable`` (the issue's setting; off is the default)."""
    out = Outcome(api, busy, consumer=consumer, fault=fault)
    ns1, ns2 = namesrv_process(_dir(tmp, "ns1")), namesrv_process(_dir(tmp, "ns2"))
    procs: list[ServerProcess] = [ns1.start(), ns2.start()]
    ns_list = f"{ns1.addr};{ns2.addr}"
    a = failover_broker(tmp, "broker-a", ns_list)
    b = failover_broker(tmp, "broker-b", ns_list)
    procs += [a.start(), b.start()]
    tries = _TryLog("broker-a")
    client_log = logging.getLogger("fastmq.client")
    client_log.addHandler(tries)
    level = client_log.level
    client_log.setLevel(min(level or logging.WARNING, logging.WARNING))  # the tries are counted from its warnings
    consumed: Counter[bytes] = Counter()
    consumed_b_at: list[float] = []
    acked: dict[bytes, str] = {}
    lock = threading.Lock()
    consumers: list[Any] = []
    pollers: list[asyncio.Task[None]] = []
    try:
        admin = RemotingClient()
        try:
            await prepare_topic(admin, [a, b], [ns1, ns2])
        finally:
            await admin.close()

        b_port = b.port

        def listener(msgs: list[Any]) -> str:
            now = time.monotonic()
            with lock:
                for m in msgs:
                    consumed[bytes(m.body)] += 1
                    if m.store_host[1] == b_port:
                        consumed_b_at.append(now)
            return ConsumeStatus.CONSUME_SUCCESS

        async def poll_loop(c: PullConsumer) -> None:
            while True:
                msgs = await c.poll(0.5)
                if msgs:
                    listener(msgs)

        for i in range(2):  # a consumer group of two
            config = ClientConfig(namesrv_addr=ns_list, instance_name=f"failover-c{i}")
            if consumer == "push":
                c: Any = PushConsumer(GROUP, consume_from_where="CONSUME_FROM_FIRST_OFFSET", client_config=config)
                c.register_message_listener(listener)
            else:
                c = PullConsumer(GROUP, consume_from_where="CONSUME_FROM_FIRST_OFFSET", client_config=config)
            c.subscribe(TOPIC)
            await c.start()
            consumers.append(c)
            if consumer != "push":
                pollers.append(asyncio.ensure_future(poll_loop(c)))

        latencies: list[tuple[float, float]] = []   # (start, ms) of every acknowledged send
        acked_at: list[float] = []
        stop = threading.Event()
        death: list[float] = []                     # monotonic time broker a was dead (reaped)
        producer_core: list[Producer] = []

        def record(body: bytes, t0: float, result: Any, error: BaseException | None) -> None:
            t1 = time.monotonic()
            with lock:
                if error is not None:
                    out.sends_failed += 1
                    out.failures.append(repr(error))
                    return
                out.sends_ok += 1
                name = result.message_queue.broker_name
                acked[body] = name
                acked_at.append(t1)
                latencies.append((t0, (t1 - t0) * 1000))
                if death and name == "broker-a" and t0 > death[0]:
                    out.acked_on_a_after_death += 1

        async def killer() -> None:
            await asyncio.sleep(before_s)
            await asyncio.to_thread(ns1.kill)
            await asyncio.sleep(before_s)
            # stamped once the kill has returned (the process reaped): a send begun between
            # the signal and the reaping may still be answered by a, legitimately
            await asyncio.to_thread(a.kill)
            death.append(time.monotonic())
            watch = asyncio.ensure_future(watch_route())
            if busy:
                os.kill(b.proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
                try:
                    await asyncio.sleep(pause_s)
                finally:
                    os.kill(b.proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
            await asyncio.sleep(after_s)
            stop.set()
            watch.cancel()

        async def watch_route() -> None:
            while not producer_core:
                await asyncio.sleep(0.01)
            publish = producer_core[0]._publish
            for _ in range(int((after_s + pause_s) / 0.01)):
                info = publish.get(TOPIC)
                if info is not None and not any(mq.broker_name == "broker-a" for mq in info.queues):
                    out.a_left_route_ms = (time.monotonic() - death[0]) * 1000
                    return
                await asyncio.sleep(0.01)

        if api == "blocking":
            p = fastmq.Producer("PG_FAILOVER", namesrv_addr=ns_list, send_latency_fault_enable=fault)
            p.start()
            producer_core.append(p._core)

            def sender() -> None:
                i = 0
                while not stop.is_set() and i < 100_000:
                    body = f"m-{i}".encode()
                    i += 1
                    t0 = time.monotonic()
                    try:
                        r = p.send(Message(TOPIC, body))
                    except Exception as exc:  # counted: the test asserts there is none
                        record(body, t0, None, exc)
                    else:
                        record(body, t0, r, None)
                    time.sleep(interval_s)
            try:
                await asyncio.gather(asyncio.to_thread(sender), killer())
            finally:
                await asyncio.to_thread(p.shutdown)
        else:
            ap = Producer("PG_FAILOVER", namesrv_addr=ns_list, send_latency_fault_enable=fault)
            await ap.start()
            producer_core.append(ap)
            calls: Counter[bytes] = Counter()
            futures = []

            async def sender_aio() -> None:
                i = 0
                while not stop.is_set() and i < 100_000:
                    body = f"m-{i}".encode()
                    i += 1
                    t0 = time.monotonic()

                    def cb(result: Any, error: BaseException | None, body: bytes = body, t0: float = t0) -> None:
                        calls[body] += 1
                        if calls[body] == 1:
                            record(body, t0, result, error)
                    futures.append(await ap.send_async(Message(TOPIC, body), cb))
                    await asyncio.sleep(interval_s)
            try:
                await asyncio.gather(sender_aio(), killer())
                await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 10)
            finally:
                await ap.shutdown()
            out.callbacks_extra = sum(n - 1 for n in calls.values() if n > 1)
            missing = sum(1 for f in futures if not f.done())
            out.sends_failed += missing

        out.tries_on_unreachable = producer_core[0]._reach.tries_on_unreachable
        after = [u for t, u in tries.records if t > death[0]]
        out.tries_on_a_after_death = len(after)
        out.max_tries_on_a_per_send = max(Counter(after).values(), default=0)
        stamps = sorted(acked_at)
        out.longest_stall_ms = max((y - x for x, y in zip(stamps, stamps[1:])), default=0.0) * 1000
        during = [ms for t0, ms in latencies if t0 >= death[0]]
        out.p99_send_ms_during_failover = _p99(during)
        out.max_send_ms_during_failover = max(during, default=0.0)
        out.acked = len(acked)

        # broker a back where it was: what it acknowledged before dying must be consumed too
        a = failover_broker(tmp, "broker-a", ns_list, a.port)
        procs.append(a.start())
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            with lock:
                if all(consumed[k] for k in acked):
                    break
            await asyncio.sleep(0.2)
        with lock:
            out.not_consumed = sum(1 for k in acked if not consumed[k])
            out.duplicates = sum(n - 1 for n in consumed.values() if n > 1)
            gaps = sorted(t for t in consumed_b_at if death[0] <= t)
        out.longest_consume_gap_b_ms = max((y - x for x, y in zip(gaps, gaps[1:])), default=0.0) * 1000
        return out
    finally:
        client_log.removeHandler(tries)
        client_log.setLevel(level)
        for t in pollers:
            t.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
        for c in consumers:
            try:
                await asyncio.wait_for(c.shutdown(), 30)
            except Exception:  # a consumer that cannot shut down must not keep servers running
                pass
        for proc in reversed(procs):
            if proc.proc is not None and proc.proc.poll() is None:
                try:
                    os.kill(proc.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            proc.stop()


def _dir(tmp: Path, name: str) -> Path:
    d = tmp / name
    d.mkdir(exist_ok=True)
    return d
