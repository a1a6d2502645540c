"""One load generator: what a Spark task runs against a NameServer or a broker.

Each task opens its own connections and keeps ``depth`` requests in flight on each (pipelined,
as a real producer does), for ``requests`` requests in all, timing every one. It returns a small
msgpack-able dict: counts, errors by kind, wall time and the latency histogram's bytes.
"""
from __future__ import annotations

import asyncio
import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fastmq.errors import FastMQError
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import RemotingCommand, create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.remoting import RemotingClient
from fastmq.remoting.loop import run

from .histogram import LatencyHistogram

__all__ = ["LoadSpec", "run_partition", "KINDS"]

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


def _request_factory(spec: LoadSpec, task: int):
    if spec.kind == "route":
        return lambda i: create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": spec.topic})
    if spec.kind == "send":
        body = os.urandom(spec.body_size)
        group = f"spark_bench_{socket.gethostname()}_{task}"

        def make(i: int) -> RemotingCommand:
            h = SendMessageRequestHeader(group, spec.topic, "TBW102", spec.queues, i % spec.queues, 0,
                                         int(time.time() * 1000), 0, "WAIT\x01true\x02", 0, False, 16, False)
            return create_request(RequestCode.SEND_MESSAGE_V2, h.to_v2_fields(), body)
        return make
    raise ValueError(f"unknown load kind {spec.kind!r} (one of {', '.join(KINDS)})")


async def _drive(spec: LoadSpec, task: int) -> dict[str, Any]:
    make = _request_factory(spec, task)
    client = RemotingClient(connect_timeout=spec.timeout_s)
    lat = np.zeros(spec.requests, dtype=np.int64)
    errors: dict[str, int] = {}
    done = 0
    counter = iter(range(spec.requests))

    async def worker() -> None:
        nonlocal done
        for i in counter:
            t0 = time.perf_counter_ns()
            try:
                resp = await client.invoke(spec.target, make(i), spec.timeout_s)
            except FastMQError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                continue
            lat[i] = time.perf_counter_ns() - t0
            if resp.code == ResponseCode.SUCCESS:
                done += 1
            else:
                errors[f"code {resp.code}"] = errors.get(f"code {resp.code}", 0) + 1
    start = time.perf_counter()
    try:
        # depth x connections concurrent workers share one iterator: each request is sent once
        await asyncio.gather(*(worker() for _ in range(spec.depth * max(1, spec.connections))))
    finally:
        await client.close()
    elapsed = time.perf_counter() - start
    hist = LatencyHistogram()
    hist.record_many(lat[lat > 0])
    return {"task": task, "host": socket.gethostname(), "ok": done, "errors": errors, "elapsed_s": elapsed,
            "hist": hist.to_bytes()}


def run_partition(task: int, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one task's load (called inside a Spark executor, or directly)."""
    return run(_drive(LoadSpec(**spec), task))
