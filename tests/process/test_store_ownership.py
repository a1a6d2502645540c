"""One owner per store (issue 15, item 1): a second broker started by mistake, on the live one's
store or on its port, exits non-zero before it changes a file or talks to a NameServer, and the
live broker keeps serving and stays registered."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fastmq.aio import Message, Producer
from fastmq.store.lock import StoreLock, is_locked
from fastmq.store import StoreLockedError
from fastmq.testing import ServerProcess, broker_process, namesrv_process

pytestmark = pytest.mark.slow


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of the store files a refused broker would touch first and the live one
    leaves alone while idle (the live one rewrites its checkpoint every second)."""
    out = {}
    for name in ("abort", "lock", "config/subscriptionGroup.json"):
        p = root / name
        if p.is_file():
            st = p.stat()
            out[name] = (st.st_size, st.st_mtime_ns)
    assert "abort" in out and "lock" in out
    return out


def _run_refused(proc: ServerProcess) -> subprocess.CompletedProcess[str]:
    return subprocess.run(proc.argv, cwd=proc.workdir, env=proc.env, capture_output=True, text=True, timeout=60)


async def _send_with_fresh_client(ns_addr: str, group: str) -> None:
    """A new producer looks the route up at the NameServer: the live broker must still be there."""
    producer = Producer(group, namesrv_addr=ns_addr, send_msg_timeout=3000, retry_times_when_send_failed=0)
    await producer.start()
    try:
        r = await producer.send(Message("OwnerTopic", b"after the refused start"))
        assert r.status == "SEND_OK"
    finally:
        await producer.shutdown()


def test_lock_is_exclusive_and_dies_with_its_holder(tmp_path: Path) -> None:
    """Guards against two owners in one process tree: a second acquire fails with a typed error
    naming the lock file; releasing frees it."""
    a, b = StoreLock(tmp_path / "s"), StoreLock(tmp_path / "s")
    a.acquire()
    try:
        assert is_locked(tmp_path / "s")
        with pytest.raises(StoreLockedError, match="in use by another process"):
            b.acquire()
    finally:
        a.release()
    assert not is_locked(tmp_path / "s")
    b.acquire()
    b.release()
    with pytest.raises(FileNotFoundError):
        StoreLock(tmp_path / "missing").acquire(create=False)
    assert not (tmp_path / "missing").exists()


async def test_second_broker_on_a_live_store_or_port_is_refused(tmp_path: Path) -> None:
    """Guards against issue 15 item 1: a second broker on a live store deleted the live one's
    abort file, failed to bind and unregistered the live broker (no route for ~26 s)."""
    ns = namesrv_process(tmp_path).start()
    live = broker_process(tmp_path, ns.addr, brokerName="broker-owner").start()
    try:
        await _send_with_fresh_client(ns.addr, "PG_OWNER_1")
        store = tmp_path / "store"
        assert (store / "abort").exists()

        # same store, another port
        (tmp_path / "b2").mkdir()
        second = broker_process(tmp_path / "b2", ns.addr, brokerName="broker-owner", storePathRootDir=store)
        before = _snapshot(store)
        r = _run_refused(second)
        assert r.returncode != 0
        assert "in use by another process" in r.stdout + r.stderr, r.stdout + r.stderr
        assert _snapshot(store) == before      # abort file, metadata, logs: untouched
        await _send_with_fresh_client(ns.addr, "PG_OWNER_2")  # at once: still registered

        # another store, the live broker's port
        (tmp_path / "b3").mkdir()
        clash = broker_process(tmp_path / "b3", ns.addr, port=live.port, brokerName="broker-owner")
        before = _snapshot(store)
        r = _run_refused(clash)
        assert r.returncode != 0
        assert "address already in use" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
        own = tmp_path / "b3" / "store"
        assert not (own / "abort").exists() and not (own / "commitlog").exists()
        assert _snapshot(store) == before
        await _send_with_fresh_client(ns.addr, "PG_OWNER_3")
        assert live.proc is not None and live.proc.poll() is None
    finally:
        assert live.stop() == 0, live.output()[-3000:]
        ns.stop()
    assert not is_locked(tmp_path / "store")  # a clean stop gives the store back
