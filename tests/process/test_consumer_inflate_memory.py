"""A consumer's memory stays within its settings when compressed bodies inflate a thousandfold.

The broker caps a pull answer by its wire bytes; a body of zeros compresses ~1000:1, so one
answer of 32 small compressed bodies inflated to 32 large ones. The consumer inflated the whole
answer before its per-queue flow control (counted after inflation) could stop the next pull:
bodies just under the 16 MiB cap, 24 per queue over 8 queues (3.1 MB on the wire), took a push
consumer to 1.9 GB. Now a process queue holds messages as they came (its budget counts the bytes
it holds) and a body is inflated when it is handed to the listener, or returned by ``poll``.

The bound checked (docs/RELIABILITY.md, "Memory, descriptors and connections"):

    push: queues x (pull_threshold_size_for_queue + one pull answer's wire bytes)
          + listener calls in progress x consume_message_batch_max_size x the inflated body size
    lite pull: queues x (pull_threshold_size_for_queue + one pull answer's wire bytes)
          + one poll: pull_threshold_size_for_queue + one inflated body

plus a constant for the process (the baseline measured before start, and some slack).
Sizes are smaller than the issue's for CI time; FASTMQ_ADVERSITY_LONG=1 runs near the cap.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from fastmq.aio import Message, Producer
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster
from tests.support import create_topic

pytestmark = pytest.mark.slow

MiB = 1 << 20
LONG = os.environ.get("FASTMQ_ADVERSITY_LONG") == "1"
QUEUES = 8 if LONG else 4
BODY = (16 * MiB - 4096) if LONG else 2 * MiB  # what each body inflates to
PER_QUEUE = 48 if LONG else 40
THRESHOLD = 1 * MiB  # pull_threshold_size_for_queue (its minimum)
THREADS = 2          # consume_thread_min / max
SLACK = 48 * MiB     # the process's own growth: connections, decoders, the allocator's arenas

_MEMBER = r"""
import asyncio, json, sys, time
from fastmq.client.push_consumer import ConsumeStatus, PullConsumer, PushConsumer

def rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0

async def main(kind, namesrv, topic, want, threshold, threads):
    base = rss("VmRSS")
    common = dict(namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                  pull_threshold_size_for_queue=threshold)
    seen = set()
    sizes = set()
    if kind == "push":
        c = PushConsumer("GID_INFLATE_PUSH", consume_thread_min=threads, consume_thread_max=threads, **common)
        def listener(msgs):
            time.sleep(0.02)  # slower than the pulls: messages pile up in the process queues
            for m in msgs:
                seen.add((m.queue_id, m.queue_offset))
                sizes.add(len(m.body))
            return ConsumeStatus.CONSUME_SUCCESS
        c.register_message_listener(listener)
    else:
        c = PullConsumer("GID_INFLATE_PULL", **common)
    c.subscribe(topic)
    await c.start()
    deadline = time.monotonic() + 120
    try:
        while len(seen) < want and time.monotonic() < deadline:
            if kind == "push":
                await asyncio.sleep(0.05)
            else:
                msgs = await c.poll(1.0)
                for m in msgs:
                    seen.add((m.queue_id, m.queue_offset))
                    sizes.add(len(m.body))
                del msgs
                await asyncio.sleep(0.02)  # slower than the pulls
    finally:
        await c.shutdown()
    print(json.dumps({"base": base, "peak": rss("VmHWM"), "seen": len(seen), "sizes": sorted(sizes)}))

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])))
"""



@pytest.mark.parametrize("kind", ["push", "pull"])
async def test_inflated_bodies_stay_within_the_consumers_budget(fastmq_cluster: EmbeddedCluster, kind: str) -> None:
    topic = f"InflateTopic_{kind}"
    admin = RemotingClient()
    try:
        await create_topic(admin, fastmq_cluster.broker_addr, topic, queues=QUEUES,
                           routed_by=fastmq_cluster.namesrv_addr)
    finally:
        await admin.close()
    n = QUEUES * PER_QUEUE
    async with Producer("PG_INFLATE", namesrv_addr=fastmq_cluster.namesrv_addr, max_message_size=16 * MiB) as p:
        for i in range(n):  # round robin over the queues; each body compresses ~1000:1
            body = b"%08d" % i + bytes(BODY - 8)
            r = await p.send(Message(topic, body))
            assert r.status == "SEND_OK"
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", _MEMBER, kind, fastmq_cluster.namesrv_addr, topic, str(n),
                         str(THRESHOLD), str(THREADS)],
        capture_output=True, text=True, timeout=240, env={**os.environ})
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["seen"] == n and res["sizes"] == [BODY], res
    answer = 256 * 1024  # the broker's maxTransferBytesOnMessageInMemory: one pull answer's wire bytes at most
    held = QUEUES * (THRESHOLD + answer)
    in_flight = THREADS * 1 * BODY if kind == "push" else THRESHOLD + BODY
    bound = res["base"] + held + 2 * in_flight + SLACK  # (2x: an inflating body and the one just handed over)
    grown = res["peak"] - res["base"]
    print(f"{kind}: peak {res['peak'] / MiB:.0f} MiB, grown {grown / MiB:.0f} MiB over the baseline "
          f"{res['base'] / MiB:.0f} MiB; bound {bound / MiB:.0f} MiB ({QUEUES} queues, bodies of {BODY / MiB:.1f} MiB "
          f"inflated)")
    assert res["peak"] <= bound, (res, bound)
