"""File descriptors do not grow with consume-queue files (issue 15, item 5).

Guards against each consume-queue file holding two descriptors for ever (ours and the one
CPython's mmap duplicates): at the usual limit of 1024 a broker with a few hundred queues
stopped writing, and one with more could not restart. Here 10,000 queues and restarts of a
real broker under ``RLIMIT_NOFILE`` 1024.
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
from fastmq.protocol.message import MessageExt
from fastmq.store.config import MessageStoreConfig
from fastmq.store.message_store import MessageStore
from fastmq.testing import ServerProcess, broker_process, namesrv_process

pytestmark = pytest.mark.slow

TOPICS, QUEUES = 100, 100  # 10,000 queues
CQ_FILE = 20 * 1000


async def make_queues(root: Path) -> None:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=4 << 20,
                             mappedFileSizeConsumeQueue=CQ_FILE, preloadMappedFile=False, messageIndexEnable=False)
    s = MessageStore(cfg, "127.0.0.1:10911")
    s.load()
    s.start()
    try:
        for t in range(TOPICS):
            msgs = [MessageExt(topic=f"FdTopic{t}", body=b"x", queue_id=q, properties={},
                               born_timestamp=int(time.time() * 1000), born_host=("10.0.0.7", 1))
                    for q in range(QUEUES)]
            assert (await s.put_messages(msgs)).ok
        assert len(s.queues.queues) == TOPICS * QUEUES
    finally:
        s.shutdown()


def limited(proc: ServerProcess) -> ServerProcess:
    proc.argv = ["prlimit", "--nofile=1024:1024", *proc.argv]  # prlimit execs the broker: same pid
    return proc


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def test_ten_thousand_queues_under_1024_descriptors(tmp_path: Path) -> None:
    await make_queues(tmp_path / "store")
    ns = namesrv_process(tmp_path).start()
    try:
        for round_ in range(2):  # start on the 10,000 queues, write, then restart on them again
            broker = limited(broker_process(tmp_path, ns.addr, brokerName="broker-fd", mappedFileSizeConsumeQueue=CQ_FILE,
                                            mappedFileSizeCommitLog=4 << 20)).start(timeout=120)
            try:
                assert broker.proc is not None
                limits = Path(f"/proc/{broker.proc.pid}/limits").read_text()
                assert any(ln.startswith("Max open files") and "1024" in ln for ln in limits.splitlines())
                producer = Producer("PG_FD", namesrv_addr=ns.addr, send_msg_timeout=5000)
                await producer.start()
                sent = set()
                try:
                    for i in range(40):  # new queues (files) while running: 5 topics x 8 queues
                        body = f"fd-{round_}-{i}".encode()
                        deadline = time.monotonic() + 30
                        while True:  # (the route may lag the port by a registration: bounded retry)
                            try:
                                r = await producer.send(Message(f"FdNew{round_}x{i % 5}", body))
                                break
                            except FastMQError:
                                if time.monotonic() > deadline:
                                    raise
                                await asyncio.sleep(0.5)
                        assert r.status == "SEND_OK"
                        sent.add(body)
                finally:
                    await producer.shutdown()
                fds = open_fds(broker.proc.pid)
                print(f"\nFD-LIMIT round={round_} queues>={TOPICS * QUEUES} open_fds={fds}")
                assert fds < 300, fds
                consumer = PullConsumer(f"GID_FD{round_}", namesrv_addr=ns.addr,
                                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
                for t in range(5):
                    consumer.subscribe(f"FdNew{round_}x{t}")
                await consumer.start()
                got: set[bytes] = set()
                try:
                    deadline = time.monotonic() + 30
                    while not sent <= got and time.monotonic() < deadline:
                        got |= {m.body for m in await consumer.poll(1.0)}
                finally:
                    await consumer.shutdown()
                assert sent <= got
            finally:
                assert broker.stop() == 0, broker.output()[-3000:]
    finally:
        ns.stop()
