"""Disk full is an answer, not a crash (issue 15, item 3), on a real broker over a small tmpfs.

Guards against the broker dying of SIGBUS when a store file is written through its mapping and
the disk has no block left for it: space is reserved (posix_fallocate) before a file is used,
and a put that cannot get it is refused with RocketMQ's SERVICE_NOT_AVAILABLE and its remark;
reads go on, and sends are taken again once space returns.
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.push_consumer import PullConsumer
from fastmq.errors import FastMQError
from fastmq.testing import broker_process, namesrv_process
from tests.process.helpers import MiB, fill_to

pytestmark = pytest.mark.slow

CL_FILE = 32 * MiB  # bigger than 10 % of the disk: a file can fail while the ratio is below 90 %
REMARK = ("service not available now. It may be caused by one of the following reasons: "
          "the broker's disk is full [CL:")


def broker_answer(err: BaseException) -> tuple[int | None, str]:
    """The broker's code and remark behind a client error (the producer wraps them)."""
    e: BaseException | None = err
    for _ in range(5):
        if e is None:
            break
        if getattr(e, "code", None) is not None and getattr(e, "remark", None) is not None:
            return e.code, e.remark  # type: ignore[attr-defined]
        e = e.__cause__ or e.__context__
    return None, str(err)


async def send_until_refused(producer: Producer, acked: list[bytes], limit: int) -> FastMQError | None:
    for i in range(limit):
        body = b"full-%04d-" % len(acked) + os.urandom(512 * 1024)  # (incompressible: the client compresses)
        try:
            r = await producer.send(Message("FullTopic", body))
        except FastMQError as exc:
            return exc
        assert r.status == "SEND_OK"
        acked.append(body)
    return None


async def test_full_disk_refuses_sends_and_recovers(tmp_path: Path, small_disk: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    broker = broker_process(tmp_path, ns.addr, brokerName="broker-full", storePathRootDir=small_disk / "store",
                            mappedFileSizeCommitLog=CL_FILE, mappedFileSizeConsumeQueue=20 * 20_000,
                            maxHashSlotNum=1000, maxIndexNum=4000, flushDiskType="SYNC_FLUSH").start()
    acked: list[bytes] = []
    try:
        producer = Producer("PG_FULL", namesrv_addr=ns.addr, send_msg_timeout=5000, retry_times_when_send_failed=0)
        await producer.start()
        try:
            assert await send_until_refused(producer, acked, 4) is None
            # the next commit-log file (32 MiB) cannot get its space; the disk is ~80 % used
            ballast = fill_to(small_disk, 20 * MiB)
            err = await send_until_refused(producer, acked, 200)
            assert err is not None, "sends were never refused"
            code, remark = broker_answer(err)
            assert code == 14 and remark.startswith(REMARK), (code, remark)
            assert broker.proc is not None and broker.proc.poll() is None  # alive: no SIGBUS
            # still refused, and quickly so, while the disk stays full
            assert isinstance(await send_until_refused(producer, acked, 1), FastMQError)

            # reads and consumption go on
            consumer = PullConsumer("GID_FULL", namesrv_addr=ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            consumer.subscribe("FullTopic")
            await consumer.start()
            got: set[bytes] = set()
            try:
                deadline = time.monotonic() + 30
                while not set(acked) <= got and time.monotonic() < deadline:
                    got |= {m.body for m in await consumer.poll(1.0)}
            finally:
                await consumer.shutdown()
            assert set(acked) <= got, f"{len(set(acked) - got)} acknowledged messages not consumable"

            # space returns: sends are taken again
            ballast.unlink()
            ok = False
            deadline = time.monotonic() + 15
            while not ok and time.monotonic() < deadline:
                ok = await send_until_refused(producer, acked, 1) is None
                if not ok:
                    await asyncio.sleep(0.3)
            assert ok, "sends not taken again after space returned"

            # over diskSpaceWarningLevelRatio (90 %): refused by the ratio alone
            ballast = fill_to(small_disk, 4 * MiB)
            await asyncio.sleep(1.2)  # the ratio is read at most once a second
            err = await send_until_refused(producer, acked, 3)
            assert err is not None
            code, remark = broker_answer(err)
            assert code == 14 and remark.startswith(REMARK), (code, remark)
            ballast.unlink()
            ok = False
            deadline = time.monotonic() + 15
            while not ok and time.monotonic() < deadline:
                ok = await send_until_refused(producer, acked, 1) is None
                if not ok:
                    await asyncio.sleep(0.3)
            assert ok
        finally:
            await producer.shutdown()
        out = broker.output() + (tmp_path / "broker.log").read_text(errors="replace")
        assert "disk full: refusing sends" in out and "sends are taken again" in out
    finally:
        assert broker.stop() == 0, broker.output()[-3000:]
        ns.stop()
