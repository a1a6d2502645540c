"""The Redis peer as a plain redis-py user writes it (issue 33), no Spark: one producer thread
doing ``XADD`` on a fixed schedule, one consumer thread doing ``XREADGROUP BLOCK`` + ``XACK``,
both on the blocking client with hiredis parsing (when installed; the ``spark`` extra installs
it). End-to-end latency is measured as the ``redis-streams`` driver of ``fastmq-bench`` measures
it: from each message's intended send time (epoch ns, a field of the entry) to the consumer
thread's return from XREADGROUP, for the messages intended inside the measured window (after the
warm-up). The driver's figures for the same shape (``e2e-latency-1k``) are checked against this
script's by tests/spark/test_redis_reference.py, with ``--processes 2``: the workload deals its
producer and consumer to two tasks, so the script's producer then runs in a process of its own
(one process or two moves the wake-up of the consumer: compare like with like).

    python -m benchmarks.redis_reference --rate 1000 --duration 10 [--processes 2] [--redis HOST:PORT]
        [--json out.json]

Without ``--redis`` it starts its own redis-server on a free loopback port (AOF, appendfsync
everysec: the durability beside fastmq's ASYNC_FLUSH) and stops it after. It prints one JSON
object (also written to ``--json``): e2e p50/p99/p99.9/max in µs, the received rate, the counts,
the machine's load average at the start and end, and the peer (client, version, parser,
durability).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from spark_bench.run.drivers import redis_peer, xreadgroup_count

#: XREADGROUP COUNT: what fastmq's PushConsumer pulls per request by default (``pull_batch_size``),
#: the batch the same-shape fastmq consumer reads
DEFAULT_COUNT = xreadgroup_count({"consumer_kind": "push"})
BLOCK_MS = 200
DRAIN_S = 5.0   # the consumer waits this long after the producer's last send, at most


#: The schedule's precision, the same as the driver's (spark_bench.run.task.wait_until): a
#: thread's time.sleep wakes 50-100 µs late (the kernel's timer slack), and e2e latency counts
#: from the intended time, so the last SPIN_NS before a send are spun. Both sides then measure
#: Redis and its client, not how late each woke.
SPIN_NS = 100_000


def _sleep_until(due_ns: int) -> None:
    left = due_ns - time.time_ns()
    if left > SPIN_NS:
        time.sleep((left - SPIN_NS) / 1e9)
    while time.time_ns() < due_ns:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def local_redis(fsync: str = "everysec") -> Iterator[str]:
    """A redis-server on a free loopback port with AOF on (``appendfsync fsync``), its files in a
    temporary directory; ``host:port``; stopped on the way out."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (e.g. apt-get install redis-server)")
    import redis
    with tempfile.TemporaryDirectory(prefix="redis-reference-") as d:
        port = _free_port()
        proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
                                 "--appendonly", "yes", "--appendfsync", fsync, "--daemonize", "no"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    redis.Redis(port=port, socket_timeout=1).ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit(f"redis-server on port {port} did not start") from None
                    time.sleep(0.05)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _produce(addr: str, stream: str, payload: bytes, start_ns: int, window0: int, end_ns: int, step_ns: float,
             late: list[int], errors: list[str]) -> int:
    """XADD on schedule until ``end_ns``: how many were sent. How late each send in the window
    started goes to ``late``, a failure to ``errors``."""
    import redis
    host, _, port = addr.rpartition(":")
    r = redis.Redis(host=host, port=int(port))
    i = 0
    try:
        while True:
            intended = start_ns + int(i * step_ns)
            if intended >= end_ns:
                break
            _sleep_until(intended)
            if window0 <= intended:
                late.append(time.time_ns() - intended)
            r.xadd(stream, {"b": payload, "t": intended})
            i += 1
    except Exception as exc:  # said in the result, not lost
        errors.append(f"producer: {type(exc).__name__}: {exc}")
    finally:
        r.close()
    return i


def _producer_process(addr: str, stream: str, payload: bytes, conn: Any) -> None:
    """The producer of ``processes=2``: says it is ready, takes the schedule, answers its counts."""
    import redis
    host, _, port = addr.rpartition(":")
    redis.Redis(host=host, port=int(port)).ping()   # connected and imported before the clock starts
    conn.send("ready")
    start_ns, window0, end_ns, step_ns = conn.recv()
    late: list[int] = []
    errors: list[str] = []
    n = _produce(addr, stream, payload, start_ns, window0, end_ns, step_ns, late, errors)
    conn.send((n, late, errors))


def run(addr: str, rate: float = 1000.0, duration_s: float = 10.0, warmup_s: float = 2.0, size: int = 128,
        count: int = DEFAULT_COUNT, processes: int = 1) -> dict[str, Any]:
    """One run against the Redis at ``addr``: its own stream and group, deleted after.
    ``processes=2``: the producer in a process of its own (the consumer stays in this one), as
    the e2e-latency-1k workload deals them to two tasks."""
    if processes not in (1, 2):
        raise ValueError(f"processes: 1 or 2, not {processes}")
    import redis
    host, _, port = addr.rpartition(":")
    admin = redis.Redis(host=host, port=int(port))
    stream, group = f"redis-reference-{uuid.uuid4().hex[:8]}", "g"
    admin.xgroup_create(stream, group, id="0", mkstream=True)
    payload = os.urandom(size // 2).hex().encode()[:size]
    load0 = os.getloadavg()
    child, parent = None, None
    if processes == 2:
        ctx = multiprocessing.get_context("spawn")
        parent, there = ctx.Pipe()
        child = ctx.Process(target=_producer_process, args=(addr, stream, payload, there), daemon=True)
        child.start()
        if not parent.poll(60) or parent.recv() != "ready":
            child.kill()
            admin.delete(stream)
            admin.close()
            raise RuntimeError("the producer process did not start")
    start_ns = time.time_ns() + 200_000_000   # both sides are running by then
    window0 = start_ns + int(warmup_s * 1e9)
    end_ns = window0 + int(duration_s * 1e9)
    step_ns = 1e9 / rate
    sent = [0]
    producer_done = threading.Event()
    lat: list[int] = []
    late: list[int] = []   # how late the producer's thread woke for each send (its sleep's overshoot)
    received = [0]
    errors: list[str] = []

    def produce() -> None:
        try:
            sent[0] = _produce(addr, stream, payload, start_ns, window0, end_ns, step_ns, late, errors)
        finally:
            producer_done.set()

    def produce_elsewhere() -> None:
        # the producer in a process of its own (spawned: the caller may hold threads, as Spark's
        # gateway); this thread waits for its counts, so the consumer's end is decided as above
        try:
            parent.send((start_ns, window0, end_ns, step_ns))
            if not parent.poll(duration_s + warmup_s + 60):
                raise TimeoutError("the producer process did not answer")
            n, more_late, more_errors = parent.recv()
            sent[0] = n
            late.extend(more_late)
            errors.extend(more_errors)
        except Exception as exc:
            errors.append(f"producer process: {type(exc).__name__}: {exc}")
        finally:
            producer_done.set()

    def consume() -> None:
        r = redis.Redis(host=host, port=int(port))
        deadline = end_ns / 1e9 + DRAIN_S + 60   # bounded whatever happens
        try:
            while time.time() < deadline:
                got = r.xreadgroup(group, "c1", {stream: ">"}, count=count, block=BLOCK_MS)
                now = time.time_ns()
                entries = got[0][1] if got else []
                for _id, fields in entries:
                    t = int(fields[b"t"])
                    received[0] += 1
                    if window0 <= t < end_ns:
                        lat.append(now - t)
                if entries:
                    r.xack(stream, group, *[e[0] for e in entries])
                elif producer_done.is_set() and received[0] >= sent[0]:
                    break
                if producer_done.is_set() and time.time_ns() > end_ns + DRAIN_S * 1e9:
                    break
        except Exception as exc:
            errors.append(f"consumer: {type(exc).__name__}: {exc}")
        finally:
            r.close()

    threads = [threading.Thread(target=consume, name="consumer"),
               threading.Thread(target=produce if processes == 1 else produce_elsewhere, name="producer")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(duration_s + warmup_s + DRAIN_S + 90)
    if child is not None:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(5)
    peer = redis_peer(admin)
    admin.delete(stream)
    admin.close()
    a = np.array(lat, dtype=np.int64) / 1e3
    pct = (lambda q: round(float(np.percentile(a, q)), 1)) if len(a) else (lambda q: None)
    where = "one process" if processes == 1 else "two processes"
    return {"tool": "benchmarks/redis_reference.py", "shape": "1 producer thread XADD, 1 consumer thread "
            f"XREADGROUP BLOCK + XACK, {where}", "processes": processes, "rate": rate, "duration_s": duration_s,
            "warmup_s": warmup_s, "message_size": size, "xreadgroup_count": count, "sent": sent[0],
            "received": received[0],
            "measured": len(lat), "received_msgs_per_s": round(len(lat) / duration_s, 1),
            "e2e_us": {"p50": pct(50), "p99": pct(99), "p99.9": pct(99.9), "max": pct(100)},
            "send_late_us_p50": round(float(np.percentile(np.array(late) / 1e3, 50)), 1) if late else None,
            "errors": errors, "peer": peer, "load_avg_start": [round(x, 2) for x in load0],
            "load_avg_end": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--redis", help="host:port; default: start a local redis-server (AOF everysec)")
    p.add_argument("--rate", type=float, default=1000.0, help="msgs/s (default 1000)")
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds (default 10)")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds before the window (default 2)")
    p.add_argument("--size", type=int, default=128, help="message bytes (default 128)")
    p.add_argument("--count", type=int, default=DEFAULT_COUNT, help=f"XREADGROUP COUNT (default {DEFAULT_COUNT})")
    p.add_argument("--processes", type=int, choices=(1, 2), default=1,
                   help="1: both threads in one process (default); 2: the producer in a process of its own")
    p.add_argument("--json", type=Path, help="also write the result here")
    a = p.parse_args(argv)
    with contextlib.ExitStack() as stack:
        addr = a.redis or stack.enter_context(local_redis())
        out = run(addr, a.rate, a.duration, a.warmup, a.size, a.count, a.processes)
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text + "\n")
    return 0 if out["measured"] and not out["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
