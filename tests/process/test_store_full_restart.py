"""A broker restarts on a full file system, tmpfs or ext4, and a restart takes no space.

Consume-queue files are sparse: a 6 MB file holding a few entries has a block or two. Recovery
used to read each file's unwritten tail (the scan for the last entry, then the zeroing after
it) through the mapping; on tmpfs a read of a hole allocates a page, so every restart made each
queue file whole (+6 MB of RAM per queue), and on a full tmpfs the read faulted: the broker died
of SIGBUS at start. Now recovery reads only the extents that hold data (SEEK_DATA/SEEK_HOLE).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.push_consumer import PullConsumer
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, broker_process, namesrv_process
from tests.support import create_topic

pytestmark = pytest.mark.slow

MiB = 1 << 20
FS_SIZE = 64 * MiB
QUEUES = 8
PER_QUEUE = 16
TOPIC = "FullRestartTopic"


def _mount(kind: str, tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if kind == "tmpfs":
        cmds = [["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE}", "tmpfs", str(mnt)]]
    else:
        if shutil.which("mkfs.ext4") is None:
            pytest.skip("no mkfs.ext4 here")
        img = tmp_path / "ext4.img"
        with open(img, "wb") as f:
            f.truncate(FS_SIZE)
        cmds = [["mkfs.ext4", "-q", "-F", "-m", "0", str(img)], ["mount", "-o", "loop", str(img), str(mnt)]]
    for cmd in cmds:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make a {FS_SIZE // MiB} MiB {kind} (needs root / CAP_SYS_ADMIN, loop devices): "
                        f"{(r.stderr or r.stdout).strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture(params=["tmpfs", "ext4"])
def small_fs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    yield from _mount(request.param, tmp_path)


def _used(mnt: Path) -> int:
    st = os.statvfs(mnt)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _fill(mnt: Path) -> Path:
    """A ballast file taking every free block it can get."""
    ballast = mnt / "ballast"
    with open(ballast, "ab") as f:
        for chunk in (4 * MiB, 256 * 1024, 4096):  # bounded: a few hundred calls at most
            for _ in range(FS_SIZE // chunk):
                try:
                    os.posix_fallocate(f.fileno(), os.fstat(f.fileno()).st_size, chunk)
                except OSError:
                    break
    return ballast



async def _consume_all(namesrv: str, group: str, want: int) -> int:
    c = PullConsumer(group, namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC)
    await c.start()
    got: set[bytes] = set()
    try:
        deadline = time.monotonic() + 30
        while len(got) < want and time.monotonic() < deadline:
            got |= {m.body for m in await c.poll(0.5)}
    finally:
        await c.shutdown()
    return len(got)


@pytest.mark.parametrize("stop", ["graceful", "kill"])
async def test_restart_on_a_full_file_system_starts_and_takes_no_space(tmp_path: Path, small_fs: Path,
                                                                       stop: str) -> None:
    ns = namesrv_process(tmp_path).start()
    conf = {"brokerName": "broker-fullrs", "storePathRootDir": small_fs / "store",
            "mappedFileSizeCommitLog": 4 * MiB, "maxHashSlotNum": 1000, "maxIndexNum": 4000,
            "flushDiskType": "SYNC_FLUSH"}
    broker: ServerProcess | None = broker_process(tmp_path, ns.addr, **conf).start()
    ballast: Path | None = None
    try:
        assert broker is not None
        admin = RemotingClient()
        try:
            await create_topic(admin, broker.addr, TOPIC, queues=QUEUES, routed_by=ns.addr)
        finally:
            await admin.close()
        async with Producer("PG_FULLRS", namesrv_addr=ns.addr) as p:
            for i in range(QUEUES * PER_QUEUE):  # round robin: PER_QUEUE to each queue
                assert (await p.send(Message(TOPIC, b"m-%04d" % i))).status == "SEND_OK"
        port = broker.port
        if stop == "kill":
            broker.kill()
        else:
            assert broker.stop() == 0
        broker = None

        # a restart on a full file system: starts, every message readable
        ballast = _fill(small_fs)
        broker = broker_process(tmp_path, ns.addr, port=port, **conf)
        try:
            broker.start()
        except Exception:
            rc = broker.proc.poll() if broker.proc is not None else None
            raise AssertionError(f"the broker did not start on a full file system (exit {rc}"
                                 f"{', SIGBUS' if rc == -signal.SIGBUS else ''}): {broker.output()[-2000:]}")
        assert await _consume_all(ns.addr, f"GID_FULLRS_{stop}", QUEUES * PER_QUEUE) == QUEUES * PER_QUEUE
        assert broker.proc is not None and broker.proc.poll() is None
        assert broker.stop() == 0
        broker = None
        ballast.unlink()
        ballast = None

        # a restart with room takes no space (it made each 6 MB queue file whole on tmpfs)
        before = _used(small_fs)
        broker = broker_process(tmp_path, ns.addr, port=port, **conf).start()
        grown = _used(small_fs) - before
        assert broker.stop() == 0
        broker = None
        print(f"restart with room: used {grown / MiB:+.2f} MiB")
        assert grown < 2 * MiB, f"a restart took {grown / MiB:.1f} MiB"
    finally:
        if broker is not None:
            broker.stop()
        if ballast is not None:
            ballast.unlink(missing_ok=True)
        ns.stop()
