"""The two SQL92 evaluator twins agree on random expressions and properties (Hypothesis), one
record at a time and over runs of stored records."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fastmq._ext import sql_filter_py
from fastmq.errors import FilterExpressionError
from fastmq.filter import compile_expression
from fastmq.protocol.message import encode_record

sql_filter_c = pytest.importorskip("fastmq._ext.sql_filter_c", reason="the compiled twin is not built")
pytestmark = pytest.mark.c_ext

NAMES = ["a", "b", "c", "A", "TAGS"]
# values that exercise every conversion: ints at their edges, doubles in Java's forms, booleans,
# blanks, non-ASCII digits, invalid UTF-8, hex doubles, NaN and signed zeros
VALUES = ["1", "0", "-1", "+3", "3.5", "-0.0", "0.0", "NaN", "-Infinity", "1e3", "1.5d", " 2 ", "2147483647",
          "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808", "true", "TRUE", "false",
          "yes", "", "x", "é", "١٢", "0x1p3", "0x10", "1_0", ".5", "5.", "1e", "00000000000000000000001"]
LITERALS = ["1", "0", "3", "2147483648", "5L", "9223372036854775807", "1.5", "3.", ".5", "1E3", "TRUE", "FALSE",
            "'1'", "'x'", "'é'", "'true'", "''", "-1", "- 2.5", "NULL"]

atoms = st.one_of(st.sampled_from(NAMES), st.sampled_from(LITERALS))


def _combine(children):
    two = st.tuples(children, children)
    return st.one_of(
        two.map(lambda t: f"({t[0]} AND {t[1]})"),
        two.map(lambda t: f"({t[0]} OR {t[1]})"),
        children.map(lambda c: f"NOT ({c})"),
        st.tuples(children, st.sampled_from(["=", "<>", ">", ">=", "<", "<="]), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(NAMES), st.sampled_from(LITERALS), st.sampled_from(LITERALS),
                  st.booleans()).map(lambda t: f"({t[0]} {'NOT ' if t[3] else ''}BETWEEN {t[1]} AND {t[2]})"),
        st.tuples(st.sampled_from(NAMES), st.lists(st.sampled_from(VALUES), min_size=1, max_size=6),
                  st.booleans()).map(lambda t: f"({t[0]} {'NOT ' if t[2] else ''}IN ("
                                               + ", ".join("'" + v.replace("'", "''") + "'" for v in t[1]) + "))"),
        children.map(lambda c: f"({c} IS NULL)"),
        children.map(lambda c: f"({c} IS NOT NULL)"),
    )


expressions = st.recursive(atoms, _combine, max_leaves=12)
raw_values = st.one_of(st.sampled_from(VALUES).map(lambda v: v.encode()),
                       st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"1\xff", b"\xef\xbf\xbd"]))
properties = st.dictionaries(st.sampled_from(NAMES), raw_values, max_size=5)


def encoded(props: dict[str, bytes]) -> bytes:
    return b"".join(k.encode() + b"\x01" + v + b"\x02" for k, v in props.items())


def both(text: str):
    try:
        prog = compile_expression(text)
    except FilterExpressionError:
        return None
    args = (prog.nodes, prog.consts, prog.props, prog.sets)
    return sql_filter_py.SqlProgram(*args), sql_filter_c.SqlProgram(*args)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions, st.lists(properties, min_size=1, max_size=4))
@example("(a = 1.5)", [{"a": b"0x1.8p0"}])
@example("(a = '\xe9')", [{"a": b"\xc3\xa9"}, {"a": b"\xff"}])
@example("(a IN ('\ufffd'))", [{"a": b"\xff"}])
@example("(a > b)", [{"a": "١".encode(), "b": b"0"}])
def test_twins_agree_on_a_properties_string(text, many):
    progs = both(text)
    if progs is None:
        return
    py, c = progs
    for props in many:
        data = encoded(props)
        assert c.evaluate(data) == py.evaluate(data), (text, props)


@settings(max_examples=150, deadline=None)
@given(expressions, st.lists(properties, min_size=1, max_size=12), st.integers(0, 5))
def test_twins_agree_on_stored_records(text, many, most):
    progs = both(text)
    if progs is None:
        return
    buf = bytearray(b"\0" * 16)  # (records start past the buffer's base, as in a file)
    offs, sizes = [], []
    for i, props in enumerate(many):
        rec = encode_record(topic="T", body=b"b%d" % i, properties=encoded(props), sys_flag=0x10 if i % 3 else 0,
                            born_host=("::1", 1) if i % 3 else ("127.0.0.1", 1))
        offs.append(1000 + len(buf))
        sizes.append(len(rec))
        buf += rec
    offs_a, sizes_a = np.array(offs, dtype=np.int64), np.array(sizes, dtype=np.int64)
    got = []
    for impl in progs:
        out = np.zeros(len(offs), dtype=np.uint8)
        ret = impl.match_records(memoryview(bytes(buf)), 1000, offs_a, sizes_a, 0, out, most)
        got.append((ret, out.tolist()))
    assert got[0] == got[1], text
    # and a record's match is its properties' verdict
    (stop, _), marks = got[0]
    for i in range(stop):
        assert marks[i] == (progs[0].evaluate(encoded(many[i])) == sql_filter_py.TRUE)


def test_records_outside_the_buffer_stop_the_run():
    py, c = both("a = 1")
    rec = encode_record(topic="T", body=b"x", properties=b"a\x011\x02")
    buf = bytes(rec) * 2
    offs = np.array([0, len(rec), 5 * len(rec)], dtype=np.int64)
    sizes = np.array([len(rec)] * 3, dtype=np.int64)
    for impl in (py, c):
        out = np.zeros(3, dtype=np.uint8)
        assert impl.match_records(buf, 0, offs, sizes, 0, out, 0) == (2, 2)
        assert out.tolist() == [1, 1, 0]
    garbage = np.zeros(3, dtype=np.uint8)
    for impl in (py, c):  # not a message (bad magic): nothing is read from it
        assert impl.match_records(b"\0" * 200, 0, offs[:1], np.array([150], dtype=np.int64), 0, garbage, 0) == (1, 0)
