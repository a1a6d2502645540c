"""A committed transactional message (half + END_TRANSACTION commit) beside a plain send, one run.

One client connection, one request in flight, 128 B bodies, a real ``fastmq-broker``
(ASYNC_FLUSH). Each round sends N plain messages (SEND_MESSAGE, answer read before the next),
then N transactions: the half (SEND_MESSAGE with TRAN_MSG=true, answer read) and its
END_TRANSACTION commit (oneway, as the Java client sends it). The round ends when the topic's
queue holds all N committed messages. Reported per kind (``extra_info``, medians over rounds):

- ``us_per_msg``: wall time per message as the client sees it;
- ``broker_cpu_us_per_msg``: the broker process's user + system CPU per message
  (``/proc/<pid>/stat``, 10 ms ticks: hence 2000 messages a round), the figure the issue bounds:
  a committed transactional message should cost at most about twice a plain one (it is two
  requests and three records, a half, the real one and the op, against one request and one
  record).

A third kind, plain sends that carry ``DELAY=0`` (stored as plain messages, but the property
sends them down the broker's general Python send path), shows what a send costs without the
compiled fast path. Halves and their commits take the compiled path (the send stage's halves and
``_ext/end_transaction``); ``benchmarks/instructions.py``'s ``broker half_and_commit_x10`` counts
the same pair free of this machine's noise.

Run: ``PYTHONPATH=$PWD python -m pytest benchmarks/test_transaction_benchmarks.py --benchmark-only -s``
"""
from __future__ import annotations

import asyncio
import statistics
import time


from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import GetMaxOffsetRequestHeader
from fastmq.testing import ServerProcess
from fastmq.testing.txprobe import COMMIT, TxProbe

N = 2000
ROUNDS = 3




async def _max_offset(p: TxProbe, topic: str) -> int:
    h = GetMaxOffsetRequestHeader(topic=topic, queueId=0)
    r = await p.remoting.invoke(p.addr, create_request(RequestCode.GET_MAX_OFFSET, h.to_fields()), 5)
    return int((r.ext_fields or {}).get("offset", "0"))


async def _round(broker: ServerProcess, tag: int) -> tuple[float, float, float, float, float]:
    p = TxProbe(f"127.0.0.1:{broker.port}", "PG_TXBENCH")
    try:
        await p.heartbeat()
        plain_topic, tx_topic = f"BenchPlain{tag}", f"BenchTx{tag}"
        body = b"x" * 128
        for topic in (plain_topic, tx_topic):  # topic creation and caches out of the timing
            r = await p.send(topic, body, half=False)
            assert r.code == ResponseCode.SUCCESS
        c0, t0 = broker.cpu_seconds(), time.perf_counter()
        for _ in range(N):
            r = await p.send(plain_topic, body, half=False)
            assert r.code == ResponseCode.SUCCESS
        plain_wall, plain_cpu = time.perf_counter() - t0, broker.cpu_seconds() - c0
        c0 = broker.cpu_seconds()
        for _ in range(N):
            r = await p.send(plain_topic, body, half=False, extra={"DELAY": "0"})
            assert r.code == ResponseCode.SUCCESS
        general_cpu = broker.cpu_seconds() - c0
        c0, t0 = broker.cpu_seconds(), time.perf_counter()
        for _ in range(N):
            h = await p.send_half(tx_topic, body)
            await p.end(h, COMMIT, oneway=True)
        deadline = time.monotonic() + 60
        while await _max_offset(p, tx_topic) < N + 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        tx_wall, tx_cpu = time.perf_counter() - t0, broker.cpu_seconds() - c0
        assert await _max_offset(p, tx_topic) == N + 1
        return (plain_wall / N * 1e6, plain_cpu / N * 1e6, tx_wall / N * 1e6, tx_cpu / N * 1e6,
                general_cpu / N * 1e6)
    finally:
        await p.close()


def test_half_and_commit_beside_plain_send(benchmark, async_broker) -> None:
    rows: list[tuple[float, float, float, float, float]] = []

    def one_round() -> None:
        rows.append(asyncio.run(_round(async_broker, len(rows))))

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    pw, pc, tw, tc, gc = (statistics.median(r[i] for r in rows) for i in range(5))
    benchmark.extra_info.update(messages_per_round=N, plain_us_per_msg=round(pw, 1),
                                plain_broker_cpu_us_per_msg=round(pc, 1), tx_us_per_msg=round(tw, 1),
                                tx_broker_cpu_us_per_msg=round(tc, 1), cpu_ratio=round(tc / pc, 2),
                                wall_ratio=round(tw / pw, 2), general_path_broker_cpu_us_per_msg=round(gc, 1),
                                cpu_ratio_to_general_path=round(tc / gc, 2))
    print(f"\nplain send: {pw:.0f} us/msg, broker CPU {pc:.0f} us/msg; half+commit: {tw:.0f} us/msg, "
          f"broker CPU {tc:.0f} us/msg (x{tc / pc:.2f} CPU, x{tw / pw:.2f} wall); general-path plain send: "
          f"broker CPU {gc:.0f} us/msg (half+commit x{tc / gc:.2f})")
