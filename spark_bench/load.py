"""One load generator: what a Spark task runs against a NameServer or a broker.

Each task opens its own connections and keeps ``depth`` requests in flight on each (a sliding
window, refilled as answers arrive), for ``requests`` requests in all, timing every one. It returns a small
msgpack-able dict: counts, errors by kind, wall time and the latency histogram's bytes.
"""
from __future__ import annotations

import asyncio
import itertools
import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from fastmq._ext.codec import FrameDecoder, encode_frames
from fastmq.errors import FastMQError
from fastmq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from fastmq.protocol.command import VERSION, RemotingCommand
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.remoting.loop import run

from .histogram import LatencyHistogram

__all__ = ["LoadSpec", "run_partition", "KINDS"]

LANGUAGE = int(LanguageCode.PYTHON)

KINDS = ("route", "send")


@dataclass
class LoadSpec:
    kind: str = "route"              # route: GET_ROUTEINFO_BY_TOPIC to a NameServer; send: SEND_MESSAGE_V2 to a broker
    target: str = "127.0.0.1:9876"
    topic: str = "BenchTopic"
    requests: int = 10_000           # per task
    depth: int = 64                  # in flight per connection
    connections: int = 1             # per task
    body_size: int = 128
    queues: int = 4
    timeout_s: float = 10.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _request_factory(spec: LoadSpec, task: int) -> Callable[[int, int], RemotingCommand]:
    """``make(i, opaque)``: request ``i`` of this task. Header dicts are built once and shared
    (the codec only reads them), so a request costs a command object, not a header."""
    if spec.kind == "route":
        fields = {"topic": spec.topic}
        return lambda i, opaque: RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, language=LANGUAGE,
                                                 version=VERSION, opaque=opaque, ext_fields=fields)
    if spec.kind == "send":
        body = os.urandom(spec.body_size)
        # (a host name may hold dots, which a broker refuses in a group name)
        host = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in socket.gethostname())
        group = f"spark_bench_{host[:100]}_{task}"
        born = int(time.time() * 1000)
        per_queue = [SendMessageRequestHeader(group, spec.topic, "TBW102", spec.queues, q, 0, born, 0,
                                              "WAIT\x01true\x02", 0, False, 16, False).to_v2_fields()
                     for q in range(spec.queues)]
        return lambda i, opaque: RemotingCommand(RequestCode.SEND_MESSAGE_V2, language=LANGUAGE, version=VERSION,
                                                 opaque=opaque, ext_fields=per_queue[i % spec.queues], body=body)
    raise ValueError(f"unknown load kind {spec.kind!r} (one of {', '.join(KINDS)})")


class _Window:
    """One connection's share of the load: ``depth`` requests in flight, refilled as answers arrive.

    Requests are encoded and written a run at a time and the answers decoded a socket read at a
    time (the compiled codec), so one task can load a broker far past what one awaitable per
    request allows. A request's latency runs from the write that carried it to the read that
    brought its answer.
    """

    def __init__(self, spec: LoadSpec, make: Callable[[int, int], RemotingCommand], indices: range,
                 lat: np.ndarray, errors: dict[str, int]) -> None:
        self.spec, self.make, self.indices, self.lat, self.errors = spec, make, indices, lat, errors
        self.ok = 0

    def _error(self, kind: str, n: int = 1) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + n

    async def run(self) -> None:
        spec = self.spec
        host, _, port = spec.target.rpartition(":")
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), spec.timeout_s)
        except (OSError, asyncio.TimeoutError) as exc:
            self._error(type(exc).__name__, len(self.indices))
            return
        sent_at: dict[int, tuple[int, int]] = {}   # opaque -> (request index, send time)
        todo = iter(self.indices)
        decoder = FrameDecoder()

        def send(n: int) -> None:
            batch = []
            now = time.perf_counter_ns()
            for i in itertools.islice(todo, n):
                opaque = i & 0x7FFFFFFF
                sent_at[opaque] = (i, now)
                batch.append(self.make(i, opaque))
            if batch:
                writer.write(encode_frames(batch))

        try:
            send(spec.depth)
            while sent_at:
                chunk = await asyncio.wait_for(reader.read(1 << 20), spec.timeout_s)
                if not chunk:
                    raise ConnectionResetError("the server closed the connection")
                now = time.perf_counter_ns()
                answered = 0
                for resp in decoder.feed(chunk):
                    entry = sent_at.pop(resp.opaque, None)
                    if entry is None:
                        continue
                    answered += 1
                    self.lat[entry[0]] = now - entry[1]
                    if resp.code == ResponseCode.SUCCESS:
                        self.ok += 1
                    else:
                        self._error(f"code {resp.code}")
                send(answered)
        except (OSError, asyncio.TimeoutError, FastMQError) as exc:
            self._error(type(exc).__name__, len(sent_at) + sum(1 for _ in todo))
        finally:
            writer.close()


async def _drive(spec: LoadSpec, task: int) -> dict[str, Any]:
    make = _request_factory(spec, task)
    lat = np.zeros(spec.requests, dtype=np.int64)
    errors: dict[str, int] = {}
    conns = max(1, spec.connections)
    # request indices are unique per task; the connection number is folded in by striding
    windows = [_Window(spec, make, range(c, spec.requests, conns), lat, errors) for c in range(conns)]
    start = time.perf_counter()
    await asyncio.gather(*(w.run() for w in windows))
    elapsed = time.perf_counter() - start
    hist = LatencyHistogram()
    hist.record_many(lat[lat > 0])
    return {"task": task, "host": socket.gethostname(), "ok": sum(w.ok for w in windows), "errors": errors,
            "elapsed_s": elapsed, "hist": hist.to_bytes()}


def run_partition(task: int, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one task's load (called inside a Spark executor, or directly)."""
    return run(_drive(LoadSpec(**spec), task))
