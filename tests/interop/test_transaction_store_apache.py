"""Transactions across the two brokers' stores (opt-in, as the other Java tests are): a store that
fastmq's broker wrote with transactions in flight is opened by Apache RocketMQ 4.9.8's broker, whose
check service then asks the producer group about the unresolved halves; the committed ones reach
consumers once, the rolled-back and resolved ones never; and the other way round, fastmq's
broker opening a store the Apache broker wrote.

Needs the 4.9.8 build (``source /work/java498/READY``: ``FASTMQ_ROCKETMQ_CLASSPATH`` and
``FASTMQ_ROCKETMQ_JAVA_OPENS``) and ``java`` on PATH; the Apache broker gets a 1 GB heap and is
always stopped.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from fastmq.protocol import topic as tv
from fastmq.protocol.message import MessageExt
from fastmq.testing import EmbeddedCluster, broker_process, free_port, namesrv_process
from fastmq.testing.txprobe import COMMIT, ROLLBACK, TxProbe

CLASSPATH = os.environ.get("FASTMQ_ROCKETMQ_CLASSPATH", "")
OPENS = os.environ.get("FASTMQ_ROCKETMQ_JAVA_OPENS", "")
FILE_SIZE = 8 * 1024 * 1024  # both brokers' commit-log file size (Apache checks the files' length)

pytestmark = [pytest.mark.java_rocketmq, pytest.mark.slow,
              pytest.mark.skipif(not (CLASSPATH and shutil.which("java")),
                                 reason="FASTMQ_ROCKETMQ_CLASSPATH (source /work/java498/READY) or java not found")]

TOPIC, GROUP = "TxCrossStore", "PG_CROSS_STORE"


def _free_broker_port() -> int:
    """A port whose VIP neighbour (port - 2) and HA port (port + 1) look free too."""
    for _ in range(50):
        port = free_port()
        if port > 1024 and all(_free(p) for p in (port - 2, port + 1)):
            return port
    raise RuntimeError("no free broker port with free neighbours")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


class ApacheBroker:
    """Apache RocketMQ 4.9.8's BrokerStartup on ``store`` (1 GB heap), registered with ``namesrv``."""

    def __init__(self, run: Path, store: Path, namesrv: str, **conf: object) -> None:
        self.port = _free_broker_port()
        self.out = run / "apache-broker.out"
        path = run / "apache-broker.conf"
        path.write_text("".join(f"{k}={v}\n" for k, v in {
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-x", "brokerId": 0,
            "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH", "autoCreateTopicEnable": "true",
            "brokerIP1": "127.0.0.1", "namesrvAddr": namesrv, "listenPort": self.port,
            "storePathRootDir": store, "storePathCommitLog": store / "commitlog",
            "mappedFileSizeCommitLog": FILE_SIZE, "transactionCheckInterval": 2000,
            "transactionTimeOut": 1000, **conf}.items()))
        env = {**os.environ, "ROCKETMQ_HOME": os.environ.get("FASTMQ_ROCKETMQ_HOME", "")}
        self._log = self.out.open("wb")
        self.proc = subprocess.Popen(
            ["java", "-server", "-Xms1g", "-Xmx1g", "-Xmn512m", "-XX:MaxDirectMemorySize=1g", "-XX:+UseG1GC",
             *OPENS.split(), f"-Duser.home={run}", "-cp", CLASSPATH, "org.apache.rocketmq.broker.BrokerStartup",
             "-c", str(path)], stdout=self._log, stderr=subprocess.STDOUT, env=env)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "boot success" in self.out.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"the Apache broker did not boot:\n{self.out.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._log.close()


def _on_check(msg: MessageExt) -> int:
    return COMMIT if msg.body.startswith(b"commit") else ROLLBACK


async def test_apache_broker_checks_the_halves_fastmq_stored(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path, broker_conf={"brokerName": "broker-x", "mappedFileSizeCommitLog": FILE_SIZE,
                                                     "transactionCheckInterval": 600000})
    cluster.start()
    apache = None
    try:
        fastmq_broker = cluster.brokers[0]
        p = TxProbe(fastmq_broker.addr, GROUP)
        try:
            await p.heartbeat()
            assert (await p.send(TOPIC, b"plain", half=False)).code == 0
            done = await p.send_half(TOPIC, b"done")
            gone = await p.send_half(TOPIC, b"gone")
            await p.end(done, COMMIT)
            await p.end(gone, ROLLBACK)
            for body in (b"commit-1", b"rollback-1", b"commit-2", b"rollback-2"):  # left in flight
                await p.send_half(TOPIC, body, queue_id=int(body[-1:]) % 4)
        finally:
            await p.close()
        assert fastmq_broker.stop() == 0
        store = fastmq_broker.workdir / "store"
        apache = ApacheBroker(tmp_path, store, cluster.namesrv_addr)
        apache.wait_ready()
        q = TxProbe(apache.addr, GROUP, on_check=_on_check)
        try:
            await q.heartbeat()
            deadline = time.monotonic() + 90
            got: list[bytes] = []
            while time.monotonic() < deadline:
                got = sorted(m.body for m in await q.pull_all(TOPIC, "CG_CROSS"))
                if len(got) >= 4 and len({m.msg.properties.get("UNIQ_KEY") for m in q.checks}) >= 4:
                    break
                await asyncio.sleep(1)
            await asyncio.sleep(5)  # more check rounds: nothing new, nothing twice
            got = sorted(m.body for m in await q.pull_all(TOPIC, "CG_CROSS"))
            assert got == [b"commit-1", b"commit-2", b"done", b"plain"], (got, apache.out.read_text()[-2000:])
            checked = sorted({m.msg.body for m in q.checks})
            assert checked == [b"commit-1", b"commit-2", b"rollback-1", b"rollback-2"]  # not the resolved ones
            ops = await q.pull_all(tv.TRANS_OP_HALF_TOPIC, "CG_CROSS_OPS", range(1))
            assert len(ops) == 6  # done, gone (fastmq's) and the four the Apache broker resolved
        finally:
            await q.close()
    finally:
        if apache is not None:
            apache.stop()
        cluster.stop()


async def test_fastmq_broker_checks_the_halves_apache_stored(tmp_path: Path) -> None:
    (tmp_path / "ns").mkdir()
    ns = namesrv_process(tmp_path / "ns").start()
    apache = None
    fastmq_broker = None
    store = tmp_path / "apache-store"
    try:
        apache = ApacheBroker(tmp_path, store, ns.addr, transactionCheckInterval=600000)
        apache.wait_ready()
        p = TxProbe(apache.addr, GROUP)
        try:
            await p.heartbeat()
            assert (await p.send(TOPIC, b"plain", half=False)).code == 0
            done = await p.send_half(TOPIC, b"done")
            gone = await p.send_half(TOPIC, b"gone")
            await p.end(done, COMMIT, oneway=True)  # (the Apache broker answers END_TRANSACTION with nothing)
            await p.end(gone, ROLLBACK, oneway=True)
            for body in (b"commit-1", b"rollback-1", b"commit-2", b"rollback-2"):  # left in flight
                await p.send_half(TOPIC, body, queue_id=int(body[-1:]) % 4)
            await asyncio.sleep(1)  # the oneway ends stored before the broker stops
        finally:
            await p.close()
        apache.stop()
        assert apache.proc.returncode in (0, 143), apache.out.read_text()[-2000:]
        (tmp_path / "fastmq").mkdir()
        fastmq_broker = broker_process(tmp_path / "fastmq", ns.addr, brokerName="broker-x", storePathRootDir=store,
                                       mappedFileSizeCommitLog=FILE_SIZE, transactionCheckInterval=1000,
                                       transactionTimeOut=1000).start()
        q = TxProbe(fastmq_broker.addr, GROUP, on_check=_on_check)
        try:
            await q.heartbeat()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                got = sorted(m.body for m in await q.pull_all(TOPIC, "CG_CROSS"))
                if len(got) >= 4 and len({m.msg.body for m in q.checks}) >= 4:
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(3)  # more check rounds: nothing new, nothing twice
            got = sorted(m.body for m in await q.pull_all(TOPIC, "CG_CROSS"))
            assert got == [b"commit-1", b"commit-2", b"done", b"plain"], got
            assert sorted({m.msg.body for m in q.checks}) == [b"commit-1", b"commit-2", b"rollback-1", b"rollback-2"]
            ops = await q.pull_all(tv.TRANS_OP_HALF_TOPIC, "CG_CROSS_OPS", range(1))
            assert len(ops) == 6  # done, gone (the Apache broker's) and the four fastmq's resolved
        finally:
            await q.close()
    finally:
        if fastmq_broker is not None:
            assert fastmq_broker.stop() == 0
        if apache is not None:
            apache.stop()
        ns.stop()
