"""Adversity: a SYNC_FLUSH broker killed with SIGKILL again and again under load loses nothing it
acknowledged, and its store checks clean after every crash (issue 15, item 6).

The default suite runs a few kills; ``FASTMQ_ADVERSITY_LONG=1`` (or ``scripts/adversity.sh``)
runs the long version. Guards against acknowledged messages lost or moved by repeated crash
recovery (each restart recovers the previous crash's torn state before taking new sends).
"""
from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer
from fastmq.errors import FastMQError
from fastmq.testing import ServerProcess, broker_process, namesrv_process
from tests.support import consume_positions

pytestmark = pytest.mark.slow

LONG = os.environ.get("FASTMQ_ADVERSITY_LONG") == "1"
KILLS = int(os.environ.get("FASTMQ_ADVERSITY_KILLS", "25" if LONG else "3"))


def _broker(tmp: Path, ns_addr: str, port: int | None = None) -> ServerProcess:
    return broker_process(tmp, ns_addr, port=port, brokerName="broker-adversity", flushDiskType="SYNC_FLUSH",
                          mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=20 * 2000)


def _check(tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).with_name("fastmq-broker")), "-c", str(tmp / "broker.conf"),
                           "--check-store", str(tmp / "store")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": str(tmp)})


async def test_kill9_loop_loses_no_acknowledged_message(tmp_path: Path) -> None:
    rng = random.Random(1515)
    ns = namesrv_process(tmp_path).start()
    acked: dict[bytes, tuple[int, int]] = {}
    port: int | None = None
    broker: ServerProcess | None = None
    try:
        for kill in range(KILLS):
            broker = _broker(tmp_path, ns.addr, port).start(timeout=60)
            port = broker.port
            producer = Producer(f"PG_ADV{kill}", namesrv_addr=ns.addr, send_msg_timeout=2000,
                                retry_times_when_send_failed=0)
            await producer.start()
            before = len(acked)
            try:
                async def send_forever(sender: int) -> None:
                    i = 0
                    while True:  # ended by the cancel below
                        body = f"adv-{kill}-{sender}-{i:06d}".encode() + b"y" * rng.randrange(10, 3000)
                        i += 1
                        try:
                            r = await producer.send(Message("AdvTopic", body))
                        except FastMQError:
                            await asyncio.sleep(0.01)
                            continue
                        acked[body] = (r.message_queue.queue_id, r.queue_offset)
                senders = [asyncio.ensure_future(send_forever(n)) for n in range(6)]
                deadline = time.monotonic() + 20
                target = before + rng.randrange(200, 800)
                while len(acked) < target and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                broker.kill()  # SIGKILL mid-stream
                await asyncio.sleep(0.2)
                for s in senders:
                    s.cancel()
                await asyncio.gather(*senders, return_exceptions=True)
            finally:
                await producer.shutdown()
            assert len(acked) > before, f"round {kill}: nothing acknowledged"
            check = _check(tmp_path)
            assert check.returncode == 0, f"round {kill}: " + check.stdout[-3000:] + check.stderr[-3000:]

        broker = _broker(tmp_path, ns.addr, port).start(timeout=60)
        got = await consume_positions(ns.addr, "GID_ADV", "AdvTopic", acked, 120)
        missing = set(acked) - set(got)
        print(f"\nADVERSITY kills={KILLS} acked={len(acked)} consumed={len(got)} lost={len(missing)}")
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:3]}"
        moved = [b for b in acked if got[b] != acked[b]]
        assert not moved, f"{len(moved)} messages not at their acknowledged queue offset"
    finally:
        if broker is not None:
            broker.stop()
        ns.stop()
