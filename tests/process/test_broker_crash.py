"""Issue 3, acceptance 2: a SYNC_FLUSH broker killed with SIGKILL mid-stream loses nothing it acknowledged."""
from __future__ import annotations

import asyncio
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


def _broker(tmp: Path, ns_addr: str, port: int | None = None) -> ServerProcess:
    return broker_process(tmp, ns_addr, port=port, brokerName="broker-crash", flushDiskType="SYNC_FLUSH",
                          mappedFileSizeCommitLog=1048576)


async def test_kill9_loses_no_acknowledged_message(tmp_path: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    broker = _broker(tmp_path, ns.addr).start()
    broker_port = broker.port
    acked: dict[bytes, tuple[int, int]] = {}
    try:
        producer = Producer("PG_CRASH", namesrv_addr=ns.addr, send_msg_timeout=2000, retry_times_when_send_failed=0)
        await producer.start()
        try:
            async def send_forever(sender: int) -> None:
                i = 0
                while True:  # bounded by the cancel below
                    body = f"crash-{sender}-{i:06d}".encode() + b"x" * 200
                    i += 1
                    try:
                        r = await producer.send(Message("CrashTopic", body))
                    except FastMQError:
                        await asyncio.sleep(0.01)
                        continue
                    acked[body] = (r.message_queue.queue_id, r.queue_offset)
            senders = [asyncio.ensure_future(send_forever(n)) for n in range(8)]
            deadline = time.monotonic() + 30
            while len(acked) < 1500 and time.monotonic() < deadline:  # several 1 MiB files' worth
                await asyncio.sleep(0.05)
            broker.kill()                                            # SIGKILL, mid-stream
            await asyncio.sleep(0.3)
            for s in senders:
                s.cancel()
            await asyncio.gather(*senders, return_exceptions=True)
        finally:
            await producer.shutdown()
        assert len(acked) >= 500

        check = subprocess.run([str(Path(sys.executable).with_name("fastmq-broker")), "-c",
                                str(tmp_path / "broker.conf"), "--check-store", str(tmp_path / "store")],
                               capture_output=True, text=True, timeout=120, env={"HOME": str(tmp_path)})
        # The check runs recovery first: a torn tail is cut, and what is left must be consistent.
        assert check.returncode == 0, check.stdout + check.stderr

        broker = _broker(tmp_path, ns.addr, broker_port).start()
        got = await consume_positions(ns.addr, "GID_CRASH", "CrashTopic", acked, 60)
        missing = set(acked) - set(got)
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:3]}"
        assert all(got[b] == acked[b] for b in acked)               # same queue and queue offset as acked
        by_queue: dict[int, list[tuple[int, bytes]]] = {}
        for body, (q, off) in got.items():
            by_queue.setdefault(q, []).append((off, body))
        for q, items in by_queue.items():                            # queue order: offsets without gaps
            offs = sorted(o for o, _ in items)
            assert offs == list(range(offs[0], offs[0] + len(offs))), f"queue {q} has gaps"
    finally:
        broker.stop()
        ns.stop()
