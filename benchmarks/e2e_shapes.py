"""End-to-end latency of one producer and one consumer, fastmq beside redis-py (issue 33), as a
user writes each with the public API: the blocking one (threads) and the asyncio one (a loop).

The producer sends 128 B messages on a fixed schedule (the precise wait of
``spark_bench.run.task`` and ``benchmarks.redis_reference``); each carries its intended send time
(epoch ns), and the consumer's latency is its receive time minus that, for the messages intended
inside the measured window (after the warm-up), so a blocking producer that falls behind shows
in the figures; an asyncio producer sleeps on its loop's timer and stamps the time it sends
(:func:`_loop_wait`). Up to :data:`ONE_IN_FLIGHT_MAX_RATE` msgs/s each producer sends one message at a time
and waits for it (``send`` / ``XADD``). Above it a waited send can cost more than a slot, and
fastmq is measured two ways (the producer's ``peer``):

- ``fastmq-waited`` does what Redis's producer does: a waited ``send`` when it is on time, and
  every message due by then in one waited ``send_batch`` when it is behind (Redis: one ``XADD``,
  or a pipeline of them; redis-py has no send that does not wait). Both peers run the same
  program; this pair is the comparison.
- ``fastmq`` uses ``send_async`` for every message, as a user after throughput does. It never
  waits, so a producer that spins to its next slot holds the interpreter lock that a consumer
  in the same process needs (docs/performance.md).

The consumers: a ``PushConsumer`` (its defaults) and ``XREADGROUP BLOCK`` (COUNT: fastmq's pull
batch) + ``XACK``.

Two shapes: both ends in one process (a producer thread, or task, beside the consumer), or the
producer in a process of its own, started as ``python -m benchmarks.e2e_shapes`` (it prints its
window and count as JSON) while this process consumes.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from benchmarks.redis_reference import _sleep_until
from spark_bench.run.drivers import xreadgroup_count

SIZE = 128
#: each producer waits for each send up to this rate; above it see the module's docstring
ONE_IN_FLIGHT_MAX_RATE = 2_000
#: the producers (``peer``): fastmq's two ways above ONE_IN_FLIGHT_MAX_RATE, and Redis's
PEERS = ("fastmq", "fastmq-waited", "redis")
READ_COUNT = xreadgroup_count({"consumer_kind": "push"})
DRAIN_S = 10.0
_ROOT = Path(__file__).resolve().parents[1]


class Window(NamedTuple):
    start_ns: int
    window0: int
    end_ns: int
    step: float

    def slots(self) -> range:
        return range(int((self.end_ns - self.start_ns) / self.step))

    def due(self, i: int) -> int:
        return self.start_ns + int(i * self.step)


def window(rate: float, warmup_s: float, duration_s: float, lead_s: float = 0.05) -> Window:
    start = time.time_ns() + int(lead_s * 1e9)
    w0 = start + int(warmup_s * 1e9)
    return Window(start, w0, w0 + int(duration_s * 1e9), 1e9 / rate)


def body(intended_ns: int) -> bytes:
    return b"%020d" % intended_ns + b"x" * (SIZE - 20)


class Received:
    """What a consumer saw: (intended, received) ns pairs, appended from any thread."""

    def __init__(self) -> None:
        self.pairs: list[tuple[int, int]] = []
        self.first = threading.Event()   # any message, the warm one included: the consumer is there

    def add(self, intended: int, now: int) -> None:
        self.pairs.append((intended, now))
        self.first.set()

    def latencies_us(self, w: tuple[int, int]) -> list[float]:
        return [(now - t) / 1e3 for t, now in self.pairs if w[0] <= t < w[1]]


def summary(lat: list[float], expected: int) -> dict[str, float]:
    a = np.array(lat) if lat else np.array([float("nan")])
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)), "got": len(lat),
            "expected": expected}


def _by_due(peer: str, rate: float) -> bool:
    """Whether ``peer`` sends what is due at once (one waited send or batch) rather than one
    message a slot."""
    return rate > ONE_IN_FLIGHT_MAX_RATE and peer != "fastmq"


def _due_batches(w: Window) -> Iterator[list[int]]:
    """The schedule's intended times, each time the caller comes back every one due by then
    (just the next when it is on time)."""
    slots = w.slots()
    i, n = 0, len(slots)
    while i < n:
        now = time.time_ns()
        j = i + 1
        while j < n and w.due(j) <= now:
            j += 1
        yield [w.due(k) for k in range(i, j)]
        i = j


# -- producers ---------------------------------------------------------------------------------

def produce_blocking(peer: str, target: str, topic: str, rate: float, warmup_s: float, duration_s: float
                     ) -> dict[str, Any]:
    """Send on the schedule with the blocking API; ``{"window": [w0, end], "expected": n, "errors": k}``."""
    errors = [0]
    if peer != "redis":
        import fastmq
        p = fastmq.Producer(f"PG_{topic}", namesrv_addr=target)
        p.start()
        started, over = [0], [0]

        def on_sent(result: object, error: BaseException | None) -> None:
            over[0] += 1
            if error is not None:
                errors[0] += 1

        def send_due(ts: list[int]) -> None:
            p.send_batch([fastmq.Message(topic, body(t)) for t in ts])
        if rate <= ONE_IN_FLIGHT_MAX_RATE or peer == "fastmq-waited":
            def send(t: int) -> None:
                p.send(fastmq.Message(topic, body(t)))
        else:
            def send(t: int) -> None:
                started[0] += 1
                p.send_async(fastmq.Message(topic, body(t)), on_sent)

        def close() -> None:
            deadline = time.monotonic() + 30   # shutdown fails the sends still in flight, as RocketMQ's does
            while over[0] < started[0] and time.monotonic() < deadline:
                time.sleep(0.01)
            p.shutdown()
    else:
        import redis
        host, _, port = target.rpartition(":")
        r = redis.Redis(host=host, port=int(port))

        def send(t: int) -> None:
            r.xadd(topic, {"b": body(t)})

        def send_due(ts: list[int]) -> None:
            pipe = r.pipeline(transaction=False)
            for t in ts:
                pipe.xadd(topic, {"b": body(t)})
            pipe.execute()

        def close() -> None:
            r.close()
    w = window(rate, warmup_s, duration_s)
    try:
        if not _by_due(peer, rate):
            for i in w.slots():
                t = w.due(i)
                _sleep_until(t)
                send(t)
        else:
            for ts in _due_batches(w):
                _sleep_until(ts[0])
                send_due(ts) if len(ts) > 1 else send(ts[0])
    finally:
        close()
    return {"window": [w.window0, w.end_ns], "expected": sum(1 for i in w.slots() if w.due(i) >= w.window0),
            "errors": errors[0]}


async def produce_asyncio(peer: str, target: str, topic: str, rate: float, warmup_s: float, duration_s: float
                          ) -> dict[str, Any]:
    """The asyncio twin of :func:`produce_blocking`, on the running loop."""
    errors = [0]
    if peer != "redis":
        import fastmq.aio as aio
        p = aio.Producer(f"PG_{topic}", namesrv_addr=target)
        await p.start()
        started, over = [0], [0]

        def on_sent(result: object, error: BaseException | None) -> None:
            over[0] += 1
            if error is not None:
                errors[0] += 1
        one = rate <= ONE_IN_FLIGHT_MAX_RATE or peer == "fastmq-waited"

        async def send_due(ts: list[int]) -> None:
            await p.send_batch([aio.Message(topic, body(t)) for t in ts])

        async def send(t: int) -> None:
            if one:
                await p.send(aio.Message(topic, body(t)))
            else:
                started[0] += 1
                await p.send_async(aio.Message(topic, body(t)), on_sent)

        async def close() -> None:
            deadline = time.monotonic() + 30   # shutdown fails the sends still in flight, as RocketMQ's does
            while over[0] < started[0] and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await p.shutdown()
    else:
        import redis.asyncio as aredis
        host, _, port = target.rpartition(":")
        r: Any = aredis.Redis(host=host, port=int(port))

        async def send(t: int) -> None:
            await r.xadd(topic, {"b": body(t)})

        async def send_due(ts: list[int]) -> None:
            pipe = r.pipeline(transaction=False)
            for t in ts:
                pipe.xadd(topic, {"b": body(t)})
            await pipe.execute()

        async def close() -> None:
            await r.aclose()
    w = window(rate, warmup_s, duration_s)
    stamped: list[int] = []   # the times the messages carry (when each was sent)
    try:
        if not _by_due(peer, rate):
            for i in w.slots():
                stamped.append(await _loop_wait(w.due(i)))
                await send(stamped[-1])
        else:
            for ts in _due_batches(w):
                now = await _loop_wait(ts[0])
                ts = [max(t, now) for t in ts]
                stamped.extend(ts)
                await (send_due(ts) if len(ts) > 1 else send(now))
    finally:
        await close()
    return {"window": [w.window0, w.end_ns], "expected": sum(1 for t in stamped if w.window0 <= t < w.end_ns),
            "errors": errors[0]}


async def _loop_wait(due_ns: int) -> int:
    """Sleep on the loop's timer until ``due_ns``; the time the send starts (epoch ns).

    Not the precise wait of the blocking producer: its short blocking naps hold the loop, and a
    consumer on the same loop then advances one loop turn a nap (a consumer that needs several
    turns a message falls behind for that alone). The timer wakes up to a millisecond late, so
    an asyncio message carries the time it is sent, not the time it was due."""
    left = due_ns - time.time_ns()
    if left > 0:
        await asyncio.sleep(left / 1e9)
    return max(due_ns, time.time_ns())


def produce_in_process(api: str, peer: str, target: str, topic: str, rate: float, warmup_s: float,
                       duration_s: float) -> dict[str, Any]:
    """Run the producer in a process of its own (this module's command line); its JSON result."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "benchmarks.e2e_shapes", "--api", api, "--peer", peer,
                          "--target", target, "--topic", topic, "--rate", str(rate), "--warmup", str(warmup_s),
                          "--duration", str(duration_s)], env=env, cwd=_ROOT, capture_output=True, text=True,
                         timeout=duration_s + warmup_s + 120)
    if out.returncode != 0:
        raise RuntimeError(f"producer process failed ({out.returncode}): {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# -- consumers ---------------------------------------------------------------------------------

def _fastmq_listener(rec: Received) -> Callable[[list[Any]], str]:
    def listener(msgs: list[Any]) -> str:
        now = time.time_ns()
        for m in msgs:
            rec.add(int(m.body[:20]), now)
        return "CONSUME_SUCCESS"
    return listener


class BlockingConsumer:
    """A consumer of ``peer`` running in this process's threads, from before the producer starts."""

    def __init__(self, peer: str, target: str, topic: str, group: str) -> None:
        self.peer, self.target, self.topic, self.group = peer, target, topic, group
        self.rec = Received()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Any = None

    def start(self) -> None:
        if self.peer != "redis":
            import fastmq
            # the topic exists (and the consumer is there) once this warm message is read
            with fastmq.Producer(f"PG_WARM_{self.topic}", namesrv_addr=self.target) as p:
                p.send(fastmq.Message(self.topic, body(0)))
            c = fastmq.PushConsumer(self.group, namesrv_addr=self.target,
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            c.subscribe(self.topic)
            c.register_message_listener(_fastmq_listener(self.rec))
            c.start()
            self._consumer = c
        else:
            import redis
            host, _, port = self.target.rpartition(":")
            r = redis.Redis(host=host, port=int(port))
            r.xgroup_create(self.topic, self.group, id="0", mkstream=True)
            r.xadd(self.topic, {"b": body(0)})
            self._thread = threading.Thread(target=self._redis_loop, args=(r,), name="redis-consumer", daemon=True)
            self._thread.start()
        if not self.rec.first.wait(60):
            self.stop()
            raise RuntimeError(f"{self.peer}: the consumer did not get the warm message in 60 s")

    def _redis_loop(self, r: Any) -> None:
        try:
            while not self._stop.is_set():
                got = r.xreadgroup(self.group, "c1", {self.topic: ">"}, count=READ_COUNT, block=200)
                now = time.time_ns()
                entries = got[0][1] if got else []
                for _id, fields in entries:
                    self.rec.add(int(fields[b"b"][:20]), now)
                if entries:
                    r.xack(self.topic, self.group, *[e[0] for e in entries])
        finally:
            r.close()

    def wait(self, w: tuple[int, int], expected: int) -> None:
        """Until every message of the window is in (or DRAIN_S)."""
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline and len(self.rec.latencies_us(w)) < expected:
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        if self._consumer is not None:
            self._consumer.shutdown()
        if self._thread is not None:
            self._thread.join(5)


class AsyncioConsumer:
    """The asyncio twin of :class:`BlockingConsumer`, on the running loop."""

    def __init__(self, peer: str, target: str, topic: str, group: str) -> None:
        self.peer, self.target, self.topic, self.group = peer, target, topic, group
        self.rec = Received()
        self._task: asyncio.Task[None] | None = None
        self._consumer: Any = None
        self._redis: Any = None
        self._stopping = False

    async def start(self) -> None:
        if self.peer != "redis":
            import fastmq.aio as aio
            async with aio.Producer(f"PG_WARM_{self.topic}", namesrv_addr=self.target) as p:
                await p.send(aio.Message(self.topic, body(0)))
            rec = self.rec

            async def listener(msgs: list[Any]) -> str:
                now = time.time_ns()
                for m in msgs:
                    rec.add(int(m.body[:20]), now)
                return "CONSUME_SUCCESS"
            c = aio.PushConsumer(self.group, namesrv_addr=self.target, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            c.subscribe(self.topic)
            c.register_message_listener(listener)
            await c.start()
            self._consumer = c
        else:
            import redis.asyncio as aredis
            host, _, port = self.target.rpartition(":")
            self._redis = r = aredis.Redis(host=host, port=int(port))
            await r.xgroup_create(self.topic, self.group, id="0", mkstream=True)
            await r.xadd(self.topic, {"b": body(0)})
            self._task = asyncio.get_running_loop().create_task(self._redis_loop(r))
        deadline = time.monotonic() + 60
        while not self.rec.first.is_set():
            if time.monotonic() > deadline:
                await self.stop()
                raise RuntimeError(f"{self.peer}: the consumer did not get the warm message in 60 s")
            await asyncio.sleep(0.01)

    async def _redis_loop(self, r: Any) -> None:
        while not self._stopping:
            got = await r.xreadgroup(self.group, "c1", {self.topic: ">"}, count=READ_COUNT, block=200)
            now = time.time_ns()
            entries = got[0][1] if got else []
            for _id, fields in entries:
                self.rec.add(int(fields[b"b"][:20]), now)
            if entries:
                await r.xack(self.topic, self.group, *[e[0] for e in entries])

    async def wait(self, w: tuple[int, int], expected: int) -> None:
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline and len(self.rec.latencies_us(w)) < expected:
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.shutdown()
        if self._task is not None:
            # the loop ends after its read (BLOCK 200 ms): cancelling redis.asyncio's blocked
            # XREADGROUP could hang its connection
            self._stopping = True
            await asyncio.wait_for(self._task, 10)
        if self._redis is not None:
            await self._redis.aclose()


# -- one run of a shape ------------------------------------------------------------------------

def run_blocking(peer: str, target: str, topic: str, rate: float, warmup_s: float, duration_s: float,
                 separate: bool) -> tuple[list[float], int, int]:
    """One blocking run: the window's latencies (µs), how many messages the window held and how
    many sends failed (a producer that cannot keep up times out)."""
    c = BlockingConsumer(peer, target, topic, f"GID_{topic}")
    c.start()
    try:
        if separate:
            res = produce_in_process("blocking", peer, target, topic, rate, warmup_s, duration_s)
        else:
            out: list[dict[str, Any]] = []
            t = threading.Thread(target=lambda: out.append(
                produce_blocking(peer, target, topic, rate, warmup_s, duration_s)), name="producer")
            t.start()
            t.join(warmup_s + duration_s + 120)
            res = out[0]
        w = (res["window"][0], res["window"][1])
        c.wait(w, res["expected"] - res["errors"])
        return c.rec.latencies_us(w), int(res["expected"]), int(res["errors"])
    finally:
        c.stop()


async def run_asyncio(peer: str, target: str, topic: str, rate: float, warmup_s: float, duration_s: float,
                      separate: bool) -> tuple[list[float], int, int]:
    """One asyncio run: both ends on this loop, or the producer in a process of its own."""
    c = AsyncioConsumer(peer, target, topic, f"GID_{topic}")
    await c.start()
    try:
        if separate:
            res = await asyncio.to_thread(produce_in_process, "asyncio", peer, target, topic, rate, warmup_s,
                                          duration_s)
        else:
            res = await produce_asyncio(peer, target, topic, rate, warmup_s, duration_s)
        w = (res["window"][0], res["window"][1])
        await c.wait(w, res["expected"] - res["errors"])
        return c.rec.latencies_us(w), int(res["expected"]), int(res["errors"])
    finally:
        await c.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the producer of an e2e shape, in a process of its own")
    ap.add_argument("--api", choices=["blocking", "asyncio"], required=True)
    ap.add_argument("--peer", choices=PEERS, required=True)
    ap.add_argument("--target", required=True, help="fastmq NameServer or Redis host:port")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--duration", type=float, default=3.0)
    a = ap.parse_args(argv)
    if a.api == "blocking":
        res = produce_blocking(a.peer, a.target, a.topic, a.rate, a.warmup, a.duration)
    else:
        res = asyncio.run(produce_asyncio(a.peer, a.target, a.topic, a.rate, a.warmup, a.duration))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
