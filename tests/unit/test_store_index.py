"""The message index: lookups by key, rolling files, and catching up from the commit log."""
from __future__ import annotations

import shutil

from fastmq.protocol.message import MessageExt, decode_record
from fastmq.store.config import MessageStoreConfig
from fastmq.store.index import IndexService
from fastmq.store.message_store import MessageStore


def _cfg(tmp_path, **kw) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=64 * 1024,
                              maxHashSlotNum=64, maxIndexNum=50, **kw)


def _msg(i: int, keys: str) -> MessageExt:
    return MessageExt("IdxTopic", f"body-{i}".encode(), properties={"KEYS": keys, "UNIQ_KEY": f"U{i:031d}"},
                      queue_id=0, born_host=("127.0.0.1", 1), born_timestamp=1)


def test_index_service_rolls_and_finds(tmp_path) -> None:
    svc = IndexService(tmp_path / "index", slots=8, entries=10)   # 9 entries a file: several files
    for i in range(40):
        svc.put("T", [f"k{i % 5}"], 1000 + i, 1_700_000_000_000 + i * 1000)
    assert len(svc.files) >= 4
    assert sorted(svc.query("T", "k3", 100, 0, 2**62)) == [1000 + i for i in range(40) if i % 5 == 3]
    assert svc.query("T", "k3", 2, 0, 2**62) == [1038, 1033]       # newest first, capped
    assert svc.query("Other", "k3", 100, 0, 2**62) == []
    assert svc.query("T", "k3", 100, 0, 1_700_000_000_000) == []   # before anything was stored
    svc.close()
    again = IndexService(tmp_path / "index", slots=8, entries=10)
    again.load()
    assert len(again.query("T", "k1", 100, 0, 2**62)) == 8 and again.max_phy_offset == 1039
    again.close()


async def test_store_indexes_keys_and_catches_up_after_losing_the_index(tmp_path) -> None:
    s = MessageStore(_cfg(tmp_path), "127.0.0.1:10911")
    s.load()
    s.start()
    for i in range(30):
        assert (await s.put_messages([_msg(i, f"order-{i} even" if i % 2 == 0 else f"order-{i}")])).ok
    [rec] = s.query_message("IdxTopic", "order-7", 10, 0, 2**62)
    assert decode_record(rec).body == b"body-7"
    assert len(s.query_message("IdxTopic", "even", 100, 0, 2**62)) == 15
    assert len(s.query_message("IdxTopic", f"U{3:031d}", 10, 0, 2**62)) == 1
    s.shutdown()

    shutil.rmtree(tmp_path / "index")                               # as if the index never made it to disk
    s2 = MessageStore(_cfg(tmp_path), "127.0.0.1:10911")
    s2.load()
    s2.start()
    try:
        assert len(s2.query_message("IdxTopic", "even", 100, 0, 2**62)) == 15
        assert decode_record(s2.query_message("IdxTopic", "order-29", 10, 0, 2**62)[0]).body == b"body-29"
    finally:
        s2.shutdown()


async def test_clean_restart_does_not_rescan_the_commit_log(tmp_path, monkeypatch) -> None:
    s = MessageStore(_cfg(tmp_path), "127.0.0.1:10911")
    s.load()
    s.start()
    assert (await s.put_messages([_msg(0, "k")])).ok
    s.shutdown()
    calls = []
    monkeypatch.setattr(MessageStore, "_index_catch_up", lambda self: calls.append(1))
    again = MessageStore(_cfg(tmp_path), "127.0.0.1:10911")
    again.load()
    again.start()
    try:
        assert calls == [] and len(again.query_message("IdxTopic", "k", 10, 0, 2**62)) == 1
    finally:
        again.shutdown()


async def test_replicated_records_are_indexed_only_into_reserved_space(tmp_path, monkeypatch) -> None:
    """Guards against a slave's SIGBUS on a full disk: the index reserves its entries a chunk
    ahead before a put, and a slave's reput (which indexes what replication copied) must do the
    same, or its writes reach blocks the disk never gave."""
    from fastmq.store import index as index_mod
    from fastmq.store.ha import ReputService
    monkeypatch.setattr(index_mod, "_RESERVE_CHUNK", 4)
    cfg = dict(maxHashSlotNum=64, maxIndexNum=1000)
    master = MessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path / "m"), mappedFileSizeCommitLog=64 * 1024,
                                             **cfg), "127.0.0.1:10911")
    master.load()
    master.start()
    slave = MessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path / "s"), mappedFileSizeCommitLog=64 * 1024,
                                            brokerRole="SLAVE", **cfg), "127.0.0.1:10912")
    slave.load()
    slave.start()
    try:
        for i in range(40):
            assert (await master.put_messages([_msg(i, f"rk-{i}")])).ok
        reput = ReputService(slave)
        view = master.commit_log.read_from(0, 1 << 20)
        data = bytes(view)
        view.release()
        slave.commit_log.append_raw(0, data)
        assert reput.run() == 40
        assert slave.index is not None
        f = slave.index.files[-1]
        assert f.count == 1 + 80  # (entry 0 is never used) KEYS and UNIQ_KEY of each record
        assert f._reserved_to >= index_mod.HEADER_SIZE + f.slots * 4 + f.count * 20
        assert len(slave.query_message("IdxTopic", "rk-33", 10, 0, 2**62)) == 1
    finally:
        slave.shutdown()
        master.shutdown()


def test_a_long_chain_is_walked_in_slices(tmp_path) -> None:
    """Issue 32, item 2: one key with 20,000 entries and a window that skips the newest is walked
    a bounded slice at a time, with the same answer as the whole walk."""
    svc = IndexService(tmp_path / "index", slots=16, entries=30_001)
    t0 = 1_700_000_000_000
    for i in range(20_000):
        svc.put("T", ["hot"], 10_000 + i, t0 + i * 1000)
    assert len(svc.files) == 1
    begin, end = t0 + 100 * 1000, t0 + 200 * 1000   # only old entries match: the walk passes 19,800 first
    whole = svc.query("T", "hot", 64, begin, end)
    assert whole == [10_000 + i for i in range(200, 136, -1)]
    w = svc.walk("T", "hot", 64, begin, end)
    steps = 0
    while not w.step(1024):
        steps += 1
        assert steps < 100
    assert w.found == whole and steps >= 19
    # the walk stops at the window's start, as 4.9.8's does: a wide max_num finds all 101 and no more
    assert len(svc.query("T", "hot", 1000, begin, end)) == 101
