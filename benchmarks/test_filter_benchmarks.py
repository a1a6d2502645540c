"""SQL92 property filters against tag filters: a backlog drained through each, per scanned message.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_filter_benchmarks.py --benchmark-only``.

A store holds ``BACKLOG`` messages on one queue, one in ten with tag ``tagA`` and property
``region = 'eu'`` (the rest ``tagB``, ``us``), each with an ``amount``. One round drains the whole
queue with pulls of 32 (MessageReader.get_message, as the broker's pull processor calls it):

- ``tag``: the subscription ``tagA`` (the consume-queue entry's tag code is compared, no record read);
- ``sql``: ``region = 'eu'`` (each record's properties are read in the mapped commit log);
- ``sql-and``: ``region = 'eu' AND amount BETWEEN 0 AND 1000000`` (two properties, a conversion);
- ``sql-py``: ``sql`` with the pure evaluator twin.

``msgs_per_round`` is the backlog, so the collated per-message figure is per scanned message.
``test_evaluate_only`` times the compiled evaluator alone over the stored records (one
``match_records`` call per round), per message.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
import pytest

from fastmq._ext import sql_filter_py
from fastmq.filter import compile_expression
from fastmq.protocol.message import MessageExt, tags_code
from fastmq.store.config import ASYNC_FLUSH, MessageStoreConfig
from fastmq.store.message_store import MessageStore

BACKLOG = 20_000
TOPIC = "BenchSql"


@contextlib.contextmanager
def _backlog(root) -> Iterator[MessageStore]:
    import asyncio

    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024 * 1024,
                             mappedFileSizeConsumeQueue=300_000 * 20, flushDiskType=ASYNC_FLUSH)
    s = MessageStore(cfg, "127.0.0.1:10911")
    s.load()
    s.start()
    loop = asyncio.new_event_loop()
    try:
        for start in range(0, BACKLOG, 1000):
            msgs = [MessageExt(TOPIC, b"x" * 128, properties={
                "TAGS": "tagA" if i % 10 == 0 else "tagB", "region": "eu" if i % 10 == 0 else "us",
                "amount": str(i * 7 % 100_000), "UNIQ_KEY": f"{i:032X}"}, queue_id=0,
                born_host=("127.0.0.1", 50000), born_timestamp=1_700_000_000_000) for i in range(start, start + 1000)]
            assert loop.run_until_complete(s.put_messages(msgs)).ok
        yield s
    finally:
        loop.close()
        s.shutdown()


def _drain(s: MessageStore, flt) -> int:
    off, got = 0, 0
    while off < BACKLOG:
        res = s.get_message("G", TOPIC, 0, off, 32, flt)
        got += res.msg_count
        off = res.next_begin_offset
    return got


def _filter(kind: str):
    if kind == "tag":
        return {tags_code("tagA")}
    prog = compile_expression("region = 'eu' AND amount BETWEEN 0 AND 1000000" if kind == "sql-and"
                              else "region = 'eu'")
    if kind == "sql-py":
        return sql_filter_py.SqlProgram(prog.nodes, prog.consts, prog.props, prog.sets)
    return prog


@pytest.mark.parametrize("kind", ["tag", "sql", "sql-and", "sql-py"])
def test_drain_backlog_through_filter(benchmark, tmp_path, kind: str) -> None:
    with _backlog(tmp_path) as s:
        flt = _filter(kind)
        assert _drain(s, flt) == BACKLOG // 10
        rounds = 1 if kind == "sql-py" else 7
        got = benchmark.pedantic(_drain, args=(s, flt), rounds=rounds, iterations=1)
    assert got == BACKLOG // 10
    benchmark.extra_info["msgs_per_round"] = BACKLOG
    benchmark.extra_info["matching"] = 0.1


def test_evaluate_only(benchmark, tmp_path) -> None:
    with _backlog(tmp_path) as s:
        cq = s.reader.queues.queues[(TOPIC, 0)]
        arr = cq.get_entries(0, BACKLOG)
        offs, sizes = arr["offset"].astype(np.int64), arr["size"].astype(np.int64)
        mf = s.reader.commit_log.mfq.find_mapped_file_by_offset(int(offs[0]))
        buf = mf.select(0)
        prog = compile_expression("region = 'eu' AND amount BETWEEN 0 AND 1000000")
        out = np.zeros(len(offs), dtype=np.uint8)

        def once() -> tuple[int, int]:
            return prog.match_records(buf, mf.file_from_offset, offs, sizes, 0, out, 0)

        assert benchmark(once) == (BACKLOG, BACKLOG // 10)
    benchmark.extra_info["msgs_per_round"] = BACKLOG
