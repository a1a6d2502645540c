"""Where do the milliseconds of the blocking e2e shape go (issue 33, benchmarks/test_e2e_vs_redis.py)?

The benchmark's own producer and consumer (:func:`benchmarks.e2e_shapes.produce_blocking`, a
``BlockingConsumer``: a blocking ``Producer`` sending on the schedule, ``send_async`` above
ONE_IN_FLIGHT_MAX_RATE, and a ``PushConsumer`` with its defaults), against a NameServer and one
ASYNC_FLUSH broker started here, every message stamped on its way by wrappers this probe puts
around fastmq's functions (nothing of the benchmark changes):

- ``call``: ``Producer.send_async`` (or ``send``) entered; ``ret``: it returned;
- ``write``: the frame handed to the socket's transport (``Connection.wrote``; ``buffered`` says
  how often the transport still held unsent bytes then);
- ``store``: the broker's store timestamp (the MessageExt's, whole milliseconds);
- ``pulled``: the pull answer holding it decoded on the consumer's loop;
- ``submit``: handed to the consume threads (``ConsumePool.submit``);
- ``listen``: the listener called (the benchmark's receive time).

Each hop's p50 / p99 (µs, over the window's messages) is printed, and the per-message stamps'
medians may be written as JSON (``--out``). ``--shape one``: the producer is a thread of this
process (as the benchmark's one_process); ``two``: a process of its own (two_processes).
``--nap`` has the producer sleep to each slot instead of spinning its last 0.1 ms, and
``--async-listener`` gives the consumer an ``async def`` listener: what each changes shows how
much of a hop is waiting for the interpreter lock or for the consume thread. Run it
with ``PYTHONPATH=<tree>`` to probe that tree::

    PYTHONPATH=$PWD python benchmarks/probes/e2e_hops.py --shape two --rate 10000 --seconds 3

Timings on a shared machine are noisy: run the trees in turns, and say the load.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # (after PYTHONPATH: the tree probed is the one it names)

from benchmarks import e2e_shapes  # noqa: E402

HOPS = ("call", "ret", "write", "store", "pulled", "submit", "listen")
_stamps: dict[int, dict[str, int]] = {}
_counts = {"writes": 0, "buffered_writes": 0, "frames": 0}


def _stamp(intended: int, hop: str, now: int) -> None:
    d = _stamps.get(intended)
    if d is None:
        _stamps[intended] = d = {}
    d.setdefault(hop, now)


def _intended(body: bytes) -> int | None:
    head = body[:20]
    return int(head) if len(body) == e2e_shapes.SIZE and head.isdigit() else None


def _frames(data: bytes) -> Iterator[bytes]:
    """The bodies of the remoting frames in ``data`` (total length, header length, header, body)."""
    mv = memoryview(data)
    i = 0
    while i + 8 <= len(mv):
        total = int.from_bytes(mv[i:i + 4], "big")
        hlen = int.from_bytes(mv[i + 4:i + 8], "big") & 0xFFFFFF
        yield bytes(mv[i + 8 + hlen:i + 4 + total])
        i += 4 + total


def install_producer_stamps() -> None:
    import fastmq
    from fastmq.remoting.connection import Connection

    send_async, send, wrote = fastmq.Producer.send_async, fastmq.Producer.send, Connection.wrote

    def stamped_send_async(self: Any, msg: Any, callback: Any, *a: Any, **k: Any) -> Any:
        t = _intended(msg.body)
        if t is not None:
            _stamp(t, "call", time.time_ns())
        try:
            return send_async(self, msg, callback, *a, **k)
        finally:
            if t is not None:
                _stamp(t, "ret", time.time_ns())

    def stamped_send(self: Any, msg: Any, *a: Any, **k: Any) -> Any:
        t = _intended(msg.body)
        if t is not None:
            _stamp(t, "call", time.time_ns())
        try:
            return send(self, msg, *a, **k)
        finally:
            if t is not None:
                _stamp(t, "ret", time.time_ns())

    def stamped_wrote(self: Any, data: bytes) -> None:
        now = time.time_ns()
        tr = self.transport
        _counts["writes"] += 1
        if tr is not None and tr.get_write_buffer_size():
            _counts["buffered_writes"] += 1
        for body in _frames(data):
            t = _intended(body)
            if t is not None:
                _counts["frames"] += 1
                _stamp(t, "write", now)
        wrote(self, data)

    fastmq.Producer.send_async = stamped_send_async  # type: ignore[method-assign]
    fastmq.Producer.send = stamped_send  # type: ignore[method-assign]
    Connection.wrote = stamped_wrote  # type: ignore[method-assign]


def install_consumer_stamps() -> None:
    from fastmq.client import consume_pool, pull_service

    decode = pull_service.decode_pull_body
    submit = consume_pool.ConsumePool.submit

    def stamped_decode(body: bytes) -> Any:
        msgs = decode(body)
        now = time.time_ns()
        for m in msgs:
            t = _intended(m.body)
            if t is not None:
                _stamp(t, "pulled", now)
                _stamp(t, "store", m.store_timestamp * 1_000_000)
        return msgs

    def stamped_submit(self: Any, fn: Any, args: tuple[Any, ...], done: Any, *rest: Any) -> None:
        now = time.time_ns()
        batches = args[0] if args and isinstance(args[0], list) else []
        for b in batches:
            for m in b if isinstance(b, list) else []:
                t = _intended(m.body)
                if t is not None:
                    _stamp(t, "submit", now)
        submit(self, fn, args, done, *rest)  # (rest: whatever else the pool takes, passed on as it came)

    pull_service.decode_pull_body = stamped_decode  # type: ignore[attr-defined]
    consume_pool.ConsumePool.submit = stamped_submit  # type: ignore[method-assign]


def _nap(due_ns: int) -> None:
    """``--nap``: the schedule's wait without its spin (a thread asleep holds no interpreter lock)."""
    left = due_ns - time.time_ns()
    if left > 0:
        time.sleep(left / 1e9)


def _async_listener(rec: Any) -> Any:
    """``--async-listener``: the benchmark's listener as an ``async def``."""
    plain = _plain_listener(rec)

    async def listener(msgs: list[Any]) -> str:
        return plain(msgs)
    return listener


_plain_listener = e2e_shapes._fastmq_listener


def produce(args: argparse.Namespace) -> None:
    """The producer process of ``--shape two``: the benchmark's producer, stamped; its result
    and stamps as JSON in ``--stamps``."""
    install_producer_stamps()
    res = e2e_shapes.produce_blocking("fastmq", args.target, args.topic, args.rate, args.warmup, args.seconds)
    Path(args.stamps).write_text(json.dumps({"result": res, "stamps": _stamps, "counts": _counts}))


@contextlib.contextmanager
def cluster(tmp: Path) -> Iterator[str]:
    from fastmq.testing import broker_process, namesrv_process
    ns = namesrv_process(tmp).start()
    try:
        b = broker_process(tmp, ns.addr, brokerName="bench", flushDiskType="ASYNC_FLUSH",
                           mappedFileSizeCommitLog=268435456).start()
        try:
            yield ns.addr
        finally:
            b.stop()
    finally:
        ns.stop()


def one_run(ns: str, shape: str, rate: float, warmup: float, seconds: float, n: int, tmp: Path) -> dict[str, Any]:
    topic = f"E2E_HOPS_{os.getpid()}_{n}"
    _stamps.clear()
    for k in _counts:
        _counts[k] = 0
    c = e2e_shapes.BlockingConsumer("fastmq", ns, topic, f"GID_{topic}")
    c.start()
    try:
        if shape == "two":
            out = tmp / f"stamps-{n}.json"
            env = {**os.environ}
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--produce", "--target", ns, "--topic", topic,
                            *(["--nap"] if e2e_shapes._sleep_until is _nap else []),
                            "--rate", str(rate), "--warmup", str(warmup), "--seconds", str(seconds),
                            "--stamps", str(out)], env=env, check=True, timeout=warmup + seconds + 120)
            got = json.loads(out.read_text())
            res = got["result"]
            for k, v in got["stamps"].items():
                for hop, t in v.items():
                    _stamp(int(k), hop, t)
            counts = got["counts"]
        else:
            box: list[dict[str, Any]] = []
            th = threading.Thread(target=lambda: box.append(e2e_shapes.produce_blocking(
                "fastmq", ns, topic, rate, warmup, seconds)), name="producer")
            th.start()
            th.join(warmup + seconds + 120)
            res = box[0]
            counts = dict(_counts)
        w = (res["window"][0], res["window"][1])
        c.wait(w, res["expected"] - res["errors"])
    finally:
        c.stop()
    for t, now in c.rec.pairs:
        _stamp(t, "listen", now)
    rows = {t: d for t, d in _stamps.items() if w[0] <= t < w[1]}
    return {"rows": rows, "expected": res["expected"], "errors": res["errors"], "counts": counts}


def hops(rows: dict[int, dict[str, int]]) -> dict[str, tuple[float, float, int]]:
    """p50 / p99 (µs) and count of each hop: from the intended time to each stamp, and stamp to stamp."""
    pairs = [("intended", "call"), ("call", "ret"), ("call", "write"), ("write", "store"), ("store", "pulled"),
             ("write", "pulled"), ("pulled", "submit"), ("submit", "listen"), ("intended", "write"),
             ("intended", "pulled"), ("intended", "listen")]
    out = {}
    for a, b in pairs:
        xs = [(d[b] - (t if a == "intended" else d[a])) / 1e3 for t, d in rows.items()
              if b in d and (a == "intended" or a in d)]
        if xs:
            arr = np.array(xs)
            out[f"{a}->{b}"] = (float(np.percentile(arr, 50)), float(np.percentile(arr, 99)), len(xs))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=["one", "two"], default="two")
    ap.add_argument("--rate", type=float, default=10_000)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", help="write the hop figures of every round as JSON here")
    ap.add_argument("--nap", action="store_true",
                    help="the producer sleeps to each slot (time.sleep) instead of spinning its last 0.1 ms")
    ap.add_argument("--async-listener", action="store_true",
                    help="the consumer's listener is an async def (it runs on the consumer's loop)")
    ap.add_argument("--produce", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--stamps", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.nap:
        e2e_shapes._sleep_until = _nap  # type: ignore[attr-defined]
    if a.async_listener:
        e2e_shapes._fastmq_listener = _async_listener
    if a.produce:
        produce(a)
        return 0
    import fastmq
    install_consumer_stamps()
    results = []
    with tempfile.TemporaryDirectory(prefix="e2e-hops-") as d, cluster(Path(d)) as ns:
        if a.shape == "one":
            install_producer_stamps()
        for r in range(a.rounds):
            run = one_run(ns, a.shape, a.rate, a.warmup, a.seconds, r, Path(d))
            h = hops(run["rows"])
            load = os.getloadavg()[0]
            print(f"round {r} shape {a.shape} rate {a.rate:.0f} fastmq {Path(fastmq.__file__).parent.parent} "
                  f"load {load:.1f}: {len(run['rows'])}/{run['expected']} messages, {run['errors']} errors, "
                  f"{run['counts']}")
            for k, (p50, p99, n) in h.items():
                print(f"  {k:>18}: p50 {p50:9.0f} us  p99 {p99:9.0f} us  ({n})")
            results.append({"round": r, "load": load, "hops": h, "counts": run["counts"],
                            "expected": run["expected"], "errors": run["errors"]})
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
