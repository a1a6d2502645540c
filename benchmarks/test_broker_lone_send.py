"""The broker's cost for ONE send in flight, and for many connections with one send each.

Raw SEND_MESSAGE_V2 frames (128 B body, the JSON header the Java/C++ clients send and the
ROCKETMQ binary header RocketMQ's benchmark tools send) are written on blocking sockets to a real
``fastmq-broker`` (ASYNC_FLUSH), each answer read before the next send. What is reported, per
round (``extra_info``, medians over the rounds):

- ``p50_us``: the median round trip seen by the client (broker + loopback + wake-ups);
- ``broker_cpu_us_per_send``: the broker process's user + system CPU (``/proc/<pid>/stat``, all
  its threads) over the round, divided by the sends.

``test_many_senders`` runs 16 connections from 16 client threads, one send in flight on each
(the shape of RocketMQ's benchmark Producer): the broker gathers their sends across connections,
and this reports its CPU per send there, so a change for the lone send can be checked against
the gathered path.

Run: ``PYTHONPATH=$PWD python -m pytest benchmarks/test_broker_lone_send.py --benchmark-only -s``
"""
from __future__ import annotations

import statistics
import threading
import time

import pytest

from fastmq._ext.codec import RemotingCommand, encode_frame
from benchmarks.test_broker_benchmarks import _one_in_flight  # (answers read one by one, codes checked)

SENDS = 3000           # round trips a round, one connection
ROUNDS = 5
THREADS = 16
SENDS_PER_THREAD = 600
SMOKE_DIVISOR = 15     # a smoke run (timing disabled, scripts/test.sh) sends a fifteenth: the path, not the figure
_EXT = {"a": "PG_LONE", "b": "LoneTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
        "h": "0", "i": "KEYS\x01OrderID188\x02UNIQ_KEY\x017F0000010B5C18B4AAC2512F4B6F0000\x02WAIT\x01true\x02"
        "TAGS\x01TagA\x02", "j": "0", "k": "false", "m": "false", "n": "bench"}




def _frames(n: int, serialize_type: int, queue: int = 0) -> list[bytes]:
    ext = dict(_EXT, e=str(queue))
    return [encode_frame(RemotingCommand(310, language=0, version=409, opaque=i + 1, ext_fields=ext,
                                         body=b"x" * 128, serialize_type=serialize_type)) for i in range(n)]


@pytest.mark.parametrize("header", ["json", "binary"])
def test_lone_send(benchmark, async_broker, header: str) -> None:
    """One connection, one SEND_MESSAGE_V2 in flight: p50 round trip and broker CPU per send."""
    st = 1 if header == "binary" else 0
    sends = SENDS // SMOKE_DIVISOR if benchmark.disabled else SENDS
    frames = _frames(sends, st)
    _one_in_flight(async_broker.port, frames[:sends // 10])  # topic creation, the fast path's caches
    p50s: list[float] = []
    cpus: list[float] = []

    def one_round() -> None:
        c0 = async_broker.cpu_seconds()
        lat = _one_in_flight(async_broker.port, frames)
        cpus.append((async_broker.cpu_seconds() - c0) / len(frames) * 1e6)
        p50s.append(statistics.median(lat))

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    p50, cpu = statistics.median(p50s), statistics.median(cpus)
    benchmark.extra_info.update(header=header, sends_per_round=sends, p50_us=round(p50, 1),
                                broker_cpu_us_per_send=round(cpu, 1), p50_us_rounds=[round(x, 1) for x in p50s],
                                broker_cpu_us_rounds=[round(x, 1) for x in cpus])
    print(f"\nlone SEND_MESSAGE_V2 ({header} header): p50 {p50:.0f} us, broker CPU {cpu:.0f} us/send")


def test_many_senders(benchmark, async_broker) -> None:
    """16 connections, one send in flight each (binary header, RocketMQ's benchmark Producer's shape)."""
    per_sender = SENDS_PER_THREAD // SMOKE_DIVISOR if benchmark.disabled else SENDS_PER_THREAD
    per_thread = [_frames(per_sender, 1, queue=k % 4) for k in range(THREADS)]
    _one_in_flight(async_broker.port, per_thread[0][:per_sender // 6])
    cpus: list[float] = []
    rates: list[float] = []

    def one_round() -> None:
        errors: list[BaseException] = []

        def worker(frames: list[bytes]) -> None:
            try:
                _one_in_flight(async_broker.port, frames)
            except BaseException as exc:  # reported below, not lost in the thread
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(f,)) for f in per_thread]
        c0, t0 = async_broker.cpu_seconds(), time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        elapsed = time.perf_counter() - t0
        assert not errors, errors[0]
        n = THREADS * per_sender
        cpus.append((async_broker.cpu_seconds() - c0) / n * 1e6)
        rates.append(n / elapsed)

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    cpu, rate = statistics.median(cpus), statistics.median(rates)
    benchmark.extra_info.update(threads=THREADS, sends_per_round=THREADS * per_sender,
                                broker_cpu_us_per_send=round(cpu, 1), sends_per_s=round(rate),
                                broker_cpu_us_rounds=[round(x, 1) for x in cpus])
    print(f"\n{THREADS} senders, one in flight each: {rate:,.0f} sends/s, broker CPU {cpu:.1f} us/send")
