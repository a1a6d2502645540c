"""A slave whose disk fills does not die (issue 15, item 3, the slave's side), on real processes.

Guards against a slave killed by SIGBUS while it copies the master's commit log onto a full disk:
its replicated appends reserve their file's blocks first (as a master's puts do), and when there is
no room the slave logs why once, stops acknowledging and pulling (a SYNC_MASTER master then
answers SLAVE_NOT_AVAILABLE), goes on serving pulls of what it has, and catches up once space
returns.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from fastmq.protocol.codes import ResponseCode
from fastmq.remoting import RemotingClient
from fastmq.testing import free_port, namesrv_process
from tests.support import create_topic, pull_request, send_request
from tests.process.helpers import ha_port_of as _ha_port
from tests.process.helpers import master_broker as _master
from tests.process.helpers import pull_all as _pull_all
from tests.process.helpers import slave_broker as _slave
from tests.process.helpers import until as _until
from tests.process.helpers import MiB, fill_to

pytestmark = pytest.mark.slow

CL_FILE = 4 * MiB  # master and slave alike: the slave's files mirror the master's


async def test_full_disk_pauses_the_slave_and_it_catches_up(tmp_path: Path, small_disk: Path,  # noqa: F811
                                                            client: RemotingClient) -> None:
    ns = namesrv_process(tmp_path).start()
    master = _master(tmp_path, ns.addr, role="SYNC_MASTER", ha_port=free_port(), mappedFileSizeCommitLog=CL_FILE,
                     syncFlushTimeout=1000).start()
    slave = _slave(tmp_path, ns.addr, _ha_port(master), storePathRootDir=small_disk / "store",
                   mappedFileSizeCommitLog=CL_FILE, mappedFileSizeConsumeQueue=20 * 20_000,
                   maxHashSlotNum=1000, maxIndexNum=4000).start()
    sent: list[bytes] = []
    try:
        await create_topic(client, master.addr, "SlaveFullTopic", queues=2)
        codes: list[int] = []

        async def send(tag: str, size: int) -> int:
            body = tag.encode() + os.urandom(size)
            r = await client.invoke(master.addr, send_request("SlaveFullTopic", body, queue_id=len(sent) % 2), 10)
            # stored on the master whatever the slave did (SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT say so)
            assert r.code in (ResponseCode.SUCCESS, ResponseCode.SLAVE_NOT_AVAILABLE,
                              ResponseCode.FLUSH_SLAVE_TIMEOUT), (r.code, r.remark)
            sent.append(body)
            codes.append(r.code)
            return r.code

        async def replicated() -> bool:
            return await send(f"first-{len(sent)}-", 1000) == ResponseCode.SUCCESS
        assert await _until(replicated, 30), (codes, slave.output()[-3000:])
        first_file = list(sent)

        # the slave's next commit-log file (4 MiB) cannot get its blocks
        ballast = fill_to(small_disk, 1 * MiB)
        for i in range(30):  # ~6 MiB: the master's log rolls into its second file
            await send(f"full-{i}-", 200 * 1024)
        assert slave.proc is not None and slave.proc.poll() is None, slave.output()[-3000:]  # alive: no SIGBUS

        async def refused() -> bool:
            return await send("while-full-", 100) == ResponseCode.SLAVE_NOT_AVAILABLE
        assert await _until(refused, 15), codes[-10:]
        log_path = slave.workdir / "broker.log"
        assert log_path.read_text(errors="replace").count("HA replication paused") == 1

        # the slave serves what it holds
        p = await client.invoke(slave.addr, pull_request("SlaveFullTopic", 0, 0), 5)
        assert p.code == ResponseCode.SUCCESS, p.remark
        have = await _pull_all(client, slave.addr, "SlaveFullTopic", 2)
        assert set(first_file) <= set(have)

        # space returns: the slave catches up and SYNC_MASTER sends succeed again
        ballast.unlink()

        async def caught_up() -> bool:
            return sorted(await _pull_all(client, slave.addr, "SlaveFullTopic", 2)) == sorted(sent)
        assert await _until(caught_up, 30), slave.output()[-3000:]
        assert await _until(replicated, 30), codes[-10:]
        assert "HA replication resumes" in log_path.read_text(errors="replace")
        assert slave.stop() == 0, slave.output()[-3000:]
    finally:
        slave.stop()
        master.stop()
        ns.stop()
