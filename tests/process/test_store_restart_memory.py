"""Restart memory (issue 15, item 7's second half): recovery maps and scans the commit log
without keeping it resident, so a broker restarted on hundreds of MiB of data (GBs in
production, scaled down here with a smaller mappedFileSizeCommitLog) uses memory like a fresh
one. Guards against recovery leaving every scanned 1 GiB file in RSS (~1.1 GB seen)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fastmq.protocol.message import MessageExt
from fastmq.store.config import MessageStoreConfig
from fastmq.store.message_store import MessageStore
from fastmq.testing import broker_process, namesrv_process

pytestmark = pytest.mark.slow

MiB = 1 << 20
CL_FILE = 64 * MiB
FILES = 5


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def fill_store(root: Path) -> int:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=CL_FILE,
                             preloadMappedFile=False)
    s = MessageStore(cfg, "127.0.0.1:10911")
    s.load()
    s.start()
    body = os.urandom(MiB - 4096)
    n = 0
    try:
        while s.commit_log.max_offset < (FILES - 1) * CL_FILE + CL_FILE * 3 // 4:
            for q in range(4):
                m = MessageExt(topic="MemTopic", body=body, queue_id=q, properties={"KEYS": f"k{n}"},
                               born_timestamp=int(time.time() * 1000), born_host=("10.0.0.7", 5555))
                assert (await s.put_messages([m])).ok
                n += 1
    finally:
        s.shutdown()
    return n


def settled_rss(proc_pid: int) -> int:
    time.sleep(1.5)  # the first timers ran; the figure is taken twice and the larger kept
    a = rss_kib(proc_pid)
    time.sleep(0.5)
    return max(a, rss_kib(proc_pid))


@pytest.mark.parametrize("crash", [False, True], ids=["clean", "crash"])
async def test_restart_rss_like_a_fresh_broker(tmp_path: Path, crash: bool) -> None:
    ns = namesrv_process(tmp_path).start()
    try:
        fresh_dir = tmp_path / "fresh"
        fresh_dir.mkdir()
        fresh = broker_process(fresh_dir, ns.addr, brokerName="broker-fresh",
                               mappedFileSizeCommitLog=CL_FILE).start()
        try:
            assert fresh.proc is not None
            fresh_rss = settled_rss(fresh.proc.pid)
        finally:
            assert fresh.stop() == 0

        data_dir = tmp_path / "data"
        data_dir.mkdir()
        n = await fill_store(data_dir / "store")
        if crash:  # a crash with a lost checkpoint: recovery scans every file
            (data_dir / "store" / "abort").touch()
            (data_dir / "store" / "checkpoint").unlink()
        restarted = broker_process(data_dir, ns.addr, brokerName="broker-data",
                                   mappedFileSizeCommitLog=CL_FILE).start(timeout=120)
        try:
            assert restarted.proc is not None
            rss = settled_rss(restarted.proc.pid)
        finally:
            assert restarted.stop() == 0, restarted.output()[-2000:]
        data = FILES * CL_FILE // 1024
        print(f"\nRESTART-RSS crash={crash} messages={n} data={data // 1024} MiB fresh={fresh_rss // 1024} MiB "
              f"restarted={rss // 1024} MiB")
        assert rss < fresh_rss + CL_FILE // 4 // 1024, (fresh_rss, rss)  # before: +150 MiB (3 files resident)
    finally:
        ns.stop()
