"""The store's read with a SQL92 filter (MessageReader._sql_matched): records over several
commit-log files, the max-messages cut and the next offset, on both evaluator twins."""
from __future__ import annotations

from pathlib import Path

import pytest

from fastmq._ext import sql_filter_py
from fastmq.filter import compile_expression
from fastmq.store.get_message import GetStatus
from tests.support import bodies, msg, open_store

try:
    from fastmq._ext import sql_filter_c
except ImportError:
    sql_filter_c = None  # type: ignore[assignment]

TWINS = [pytest.param(sql_filter_py, id="py")]
if sql_filter_c is not None:
    TWINS.append(pytest.param(sql_filter_c, id="c", marks=pytest.mark.c_ext))


def program(impl, text):
    p = compile_expression(text)
    return impl.SqlProgram(p.nodes, p.consts, p.props, p.sets)


@pytest.mark.parametrize("impl", TWINS)
async def test_sql_read_across_files_and_limits(tmp_path: Path, impl) -> None:
    # 8 KiB commit-log files: 300 records of ~180 bytes span several; one consume-queue file
    s = open_store(tmp_path, mappedFileSizeConsumeQueue=20 * 1000)
    try:
        for start in range(0, 300, 50):
            r = await s.put_messages([msg(body=b"b%d" % i + b"x" * 60, n=str(i), even="1" if i % 2 == 0 else "0")
                                      for i in range(start, start + 50)])
            assert r.ok
        assert len(s.commit_log.mfq.files) > 3
        prog = program(impl, "n >= 100 AND even = 1")
        got, off, pulls = [], 0, 0
        while off < 300 and pulls < 100:
            res = s.get_message("g", "T", 0, off, 7, prog)
            pulls += 1
            if res.status is GetStatus.FOUND:
                assert res.msg_count <= 7
                got += [b[:b.index(b"x")] for b in bodies(res)]
            else:
                assert res.status is GetStatus.NO_MATCHED_MESSAGE
            assert res.next_begin_offset > off
            off = res.next_begin_offset
        assert got == [b"b%d" % i for i in range(100, 300, 2)]
        # the 7th match ends the first answer from 100: the next offset is just past it
        res = s.get_message("g", "T", 0, 100, 7, prog)
        assert res.msg_count == 7 and res.next_begin_offset == 113
        # nothing matches: the whole scan is skipped over, up to the queue's end
        res = s.get_message("g", "T", 0, 0, 32, program(impl, "n > 1000"))
        assert res.status is GetStatus.NO_MATCHED_MESSAGE and res.next_begin_offset == 300
    finally:
        s.shutdown()
