"""Checkpoint and recovery: clean stop, torn and garbage tails, lost queues, kill -9."""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fastmq.protocol.message import encode_record, tags_code
from fastmq.store import StoreCorruptError
from fastmq.store.checkpoint import StoreCheckpoint, check_store, is_abnormal_shutdown
from fastmq.store.commit_log import AppendRequest
from tests.process.recovery_store import Store
from tests.process.recovery_store import recovery_config as cfg


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (0, 0, 0)
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 10_000, 9_000, 8_000
    cp.close()
    assert (tmp_path / "checkpoint").stat().st_size == 4096
    cp2 = StoreCheckpoint(tmp_path / "checkpoint")
    assert (cp2.physic_msg_timestamp, cp2.logics_msg_timestamp, cp2.index_msg_timestamp) == (10_000, 9_000, 8_000)
    assert cp2.min_timestamp == 6_000 and cp2.min_timestamp_index == 6_000
    cp2.close()
    (tmp_path / "bad").write_bytes(b"x" * 10)
    with pytest.raises(StoreCorruptError):
        StoreCheckpoint(tmp_path / "bad")


def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    c = cfg(tmp_path)
    s = Store(c)
    assert is_abnormal_shutdown(c)
    for i in range(100):  # several commit-log and consume-queue files
        s.put("T", i % 3, f"m{i}".encode() * 10)
    s.shutdown()
    assert not is_abnormal_shutdown(c)
    s2 = Store(c)
    assert not s2.result.abnormal
    assert s2.bodies("T", 1) == [f"m{i}".encode() * 10 for i in range(1, 100, 3)]
    assert s2.put("T", 1, b"next")[0] == 33  # queue offsets continue
    assert check_store(s2.cl, s2.cq) == []
    s2.shutdown()


def _last_record_span(s: Store) -> tuple[int, int]:
    cq = s.cq.get("T", 0)
    assert cq is not None
    o, size, _ = cq.get_entry(cq.max_offset - 1)
    return o, size


@pytest.mark.parametrize("damage", ["torn", "garbage", "crc"])
def test_crash_with_damaged_tail(tmp_path: Path, damage: str) -> None:
    c = cfg(tmp_path)
    s = Store(c)
    for i in range(30):
        s.put("T", 0, f"body-{i}".encode() * 5)
    o, size = _last_record_span(s)
    mf = s.cl.mfq.find_mapped_file_by_offset(o)
    assert mf is not None
    pos = o - mf.file_from_offset
    if damage == "torn":  # the record's second half never made it
        mf.buffer[pos + size // 2:pos + size] = bytes(size - size // 2)
    elif damage == "garbage":  # the last record is overwritten by junk, and junk follows it
        end = min(pos + size + 40, mf.file_size)
        mf.buffer[pos:end] = os.urandom(end - pos)
    else:  # one flipped body bit: only the CRC notices
        mf.buffer[pos + size - 30] ^= 0x01
    s.crash()

    s2 = Store(c)
    assert s2.result.abnormal
    assert s2.result.commit_log_end == o
    assert s2.bodies("T", 0) == [f"body-{i}".encode() * 5 for i in range(29)]
    assert check_store(s2.cl, s2.cq) == []
    # appending after the cut reuses queue offset 29; the stale bytes after it are zeroed,
    # so a record of exactly the cut length cannot resurrect anything
    assert s2.put("T", 0, b"again") == (29, o)
    s2.crash()
    s3 = Store(c)
    assert s3.bodies("T", 0)[-1] == b"again" and len(s3.bodies("T", 0)) == 30
    s3.shutdown()


def test_lost_consume_queues_are_rebuilt(tmp_path: Path) -> None:
    c = cfg(tmp_path)
    s = Store(c)
    for i in range(60):
        s.put("T", i % 2, f"x{i}".encode(), tags="标签" if i % 2 else "TagA")
    s.crash()
    import shutil
    shutil.rmtree(c.consume_queue_dir)
    s2 = Store(c)
    assert s2.result.abnormal and s2.result.redispatched == 60
    assert s2.bodies("T", 0) == [f"x{i}".encode() for i in range(0, 60, 2)]
    cq1 = s2.cq.get("T", 1)
    assert cq1 is not None and cq1.get_entry(0)[2] == tags_code("标签")
    assert s2.put("T", 0, b"y")[0] == 30
    s2.shutdown()


def test_consume_queue_ahead_of_commit_log_is_cut(tmp_path: Path) -> None:
    c = cfg(tmp_path)
    s = Store(c)
    for i in range(10):
        s.put("T", 0, b"z" * 50)
    o, _ = _last_record_span(s)
    s.crash()
    # the commit log loses its last record (e.g. not flushed) while the queue kept its entry
    with open(Path(c.commit_log_dir) / f"{0:020d}", "r+b") as f:
        f.seek(o)
        f.write(bytes(200))
    s2 = Store(c)
    cq = s2.cq.get("T", 0)
    assert cq is not None and cq.max_offset == 9
    assert s2.cl.topic_queue_table[("T", 0)] == 9
    s2.shutdown()


def test_blank_marker_and_mid_file_damage(tmp_path: Path) -> None:
    c = cfg(tmp_path)
    s = Store(c)
    for i in range(80):  # ~4 files
        s.put("T", 0, b"q" * 150)
    assert len(s.cl.mfq) >= 3
    s.crash()
    # damage the header of the first record of the last file: everything from there is cut
    last = sorted((Path(c.commit_log_dir)).iterdir())[-1]
    with open(last, "r+b") as f:
        f.seek(4)
        f.write(struct.pack(">I", 0xDEADBEEF))
    s2 = Store(c)
    assert s2.result.commit_log_end == int(last.name)
    n = len(s2.bodies("T", 0))
    assert 0 < n < 80
    assert s2.put("T", 0, b"w")[0] == n
    s2.shutdown()


_CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from tests.process.recovery_store import Store, recovery_config
    s = Store(recovery_config(Path(sys.argv[1]), flushDiskType="SYNC_FLUSH"))
    s.cl.start()
    fut = None
    for i in range(200000):  # bounded; the parent kills us long before
        body = (b"%08d" % i) * (1 + i % 7)
        qoff, phys = s.put("K", 0, body)
        if s.cl.flush_waiter(s.cl.max_offset).result(5):
            sys.stdout.write(f"{qoff}\\n")
            sys.stdout.flush()
""")


def test_kill_9_mid_append_loop(tmp_path: Path) -> None:
    root = tmp_path / "store"
    repo = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(root), repo],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=repo)
    acked = -1
    err = b""
    try:
        assert proc.stdout is not None and proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
            if acked >= 300:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        err = proc.stderr.read() if proc.stderr else b""
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert acked >= 300, err.decode(errors="replace")
    c = cfg(root)
    s = Store(c)
    assert s.result.abnormal
    bodies = s.bodies("K", 0)
    assert len(bodies) >= acked + 1  # every acknowledged message survived, in queue order
    for i, b in enumerate(bodies):
        assert b == (b"%08d" % i) * (1 + i % 7)
    assert check_store(s.cl, s.cq) == []
    s.shutdown()


def test_check_store_finds_problems(tmp_path: Path) -> None:
    c = cfg(tmp_path)
    s = Store(c)
    for i in range(5):
        s.put("T", 0, b"v" * 20)
    s.put("U", 1, b"u")
    assert check_store(s.cl, s.cq) == []
    cq = s.cq.get("T", 0)
    assert cq is not None
    o, size, _ = cq.get_entry(4)
    cq.put(5, o, size, 0)  # entry 5 points at the record of entry 4
    u = s.cq.get("U", 1)
    assert u is not None
    u.put(1, 99_999, 10, 0)  # points outside the log
    problems = check_store(s.cl, s.cq)
    assert any("T/0@5" in p and "@4" in p for p in problems)
    assert any(p.startswith("U/1@1") for p in problems)
    s.crash()


def test_crash_recovery_starts_from_checkpoint(tmp_path: Path) -> None:
    c = cfg(tmp_path)
    s = Store(c)
    for i in range(80):  # store timestamps 10_000, 11_000, ... across ~4 files
        rec = encode_record(topic="T", body=b"p" * 150, properties={"TAGS": "a"})
        s.cq.dispatch(s.cl.put_records([AppendRequest(rec, "T", 0, tags_code("a"))],
                                       store_timestamp=10_000 + 1000 * i))
    assert len(s.cl.mfq) >= 4
    third = s.cl.mfq.files[2]
    m = s.cl.get_message(third.file_from_offset)
    # checkpoint says everything up to just after the third file's first message was safe
    s.cp.physic_msg_timestamp = s.cp.logics_msg_timestamp = m.store_timestamp + 3000
    s.cp.flush()
    s.cp.close()
    s.crash()
    s2 = Store(c)
    assert s2.result.abnormal and s2.result.scan_start == third.file_from_offset
    assert s2.result.redispatched == 0 and len(s2.bodies("T", 0)) == 80
    s2.shutdown()
