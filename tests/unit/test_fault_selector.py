"""Queue selection and latency fault tolerance: both twins, and that they agree."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support import examples

NOW = 1_000_000


@pytest.mark.parametrize("latency, duration", [(0, 0), (49, 0), (50, 0), (100, 0), (549, 0), (550, 30000),
                                               (999, 30000), (1000, 60000), (2000, 120000), (3000, 180000),
                                               (14999, 180000), (15000, 600000), (30000, 600000)])
def test_latency_buckets(fault, latency: int, duration: int) -> None:
    assert fault.not_available_duration(latency) == duration


def test_fault_items(fault) -> None:
    t = fault.FaultTable(2)
    assert t.is_available(0, NOW) and t.is_available(99, NOW) and t.pick_one_at_least(NOW) == -1
    t.update(0, 20, False, NOW)              # fast send: no penalty
    assert t.is_available(0, NOW)
    t.update(1, 700, False, NOW)             # 550..1000 ms: 30 s penalty
    assert not t.is_available(1, NOW) and t.is_available(1, NOW + 30000)
    t.update(5, 10, True, NOW)               # failed send counts as 30 s: 10 min penalty; table grows
    assert t.capacity >= 6 and not t.is_available(5, NOW + 599_999) and t.is_available(5, NOW + 600_000)
    assert t.latency[5] == 10
    t.remove(5)
    assert t.is_available(5, NOW)


def test_pick_one_at_least_rotates_over_the_better_half(fault) -> None:
    t = fault.FaultTable()
    for b, lat in enumerate([3000, 100, 2000, 1000]):
        t.update(b, lat, False, NOW)
    # order: 1 (available, 100 ms), then penalised by latency: 3 (1000), 2 (2000), 0 (3000); half = 2
    picks = {t.pick_one_at_least(NOW) for _ in range(4)}
    assert picks == {1, 3}
    t2 = fault.FaultTable()
    t2.update(7, 5000, False, NOW)
    assert t2.pick_one_at_least(NOW) == 7


def test_select_queue_round_robin_and_retry(selector) -> None:
    qb = np.array([0, 0, 1, 1], dtype=np.int32)
    assert [selector.select_queue(qb, c) for c in range(5)] == [0, 1, 2, 3, 0]
    assert selector.select_queue(qb, 0, last_broker=0) == 2       # skips broker 0's queues
    assert selector.select_queue(qb, 2, last_broker=1) == 0
    assert selector.select_queue(np.array([1, 1], dtype=np.int32), 1, last_broker=1) == 1  # only broker
    assert selector.select_queue(np.array([], dtype=np.int32), 3) == -1
    assert selector.select_queue(qb, -7) == 3                      # counters may wrap negative


def test_select_queue_fault_avoids_penalised_and_last_failed(selector, fault) -> None:
    qb = np.array([0, 1, 2], dtype=np.int32)
    t = fault.FaultTable(3)
    t.update(0, 5000, False, NOW)
    args = (t.present, t.available_from, NOW)
    assert selector.select_queue_fault(qb, 0, -1, *args) == 1      # broker 0 penalised
    assert selector.select_queue_fault(qb, 0, 1, *args) == 2       # and 1 just failed
    t.update(2, 5000, False, NOW)
    assert selector.select_queue_fault(qb, 0, 1, t.present, t.available_from, NOW) == -1


def _load(stem: str, kind: str):
    return importlib.import_module(f"fastmq._ext.{stem}_{kind}")


@pytest.mark.c_ext
@settings(max_examples=examples(200), deadline=None)
@given(brokers=st.lists(st.integers(0, 7), max_size=12), counter=st.integers(-2**40, 2**40),
       last=st.integers(-1, 8), updates=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 20000), st.booleans(),
                                                           st.integers(-700_000, 700_000)), max_size=10),
       now=st.integers(0, 2_000_000))
def test_twins_agree(brokers, counter, last, updates, now) -> None:
    qb = np.array(brokers, dtype=np.int32)
    tables = [_load("fault", k).FaultTable(4) for k in ("py", "c")]
    for b, lat, iso, t in updates:
        for tb in tables:
            tb.update(b, lat, iso, NOW + t)
    py_t, c_t = tables
    assert np.array_equal(py_t.available_from, c_t.available_from) and np.array_equal(py_t.present, c_t.present)
    sp, sc = _load("selector", "py"), _load("selector", "c")
    assert sp.select_queue(qb, counter, last) == sc.select_queue(qb, counter, last)
    assert (sp.select_queue_fault(qb, counter, last, py_t.present, py_t.available_from, NOW + now)
            == sc.select_queue_fault(qb, counter, last, c_t.present, c_t.available_from, NOW + now))
    for _ in range(3):
        assert py_t.pick_one_at_least(NOW + now) == c_t.pick_one_at_least(NOW + now)
    for b in range(9):
        assert py_t.is_available(b, NOW + now) == c_t.is_available(b, NOW + now)


def test_queue_table(selector) -> None:
    fault = importlib.import_module(selector.__name__.replace("selector", "fault"))  # the matching twin
    qt = selector.QueueTable([0, 0, 1, 1, 2])
    assert len(qt) == 5 and [qt.select(c) for c in range(6)] == [0, 1, 2, 3, 4, 0]
    assert qt.select(0, last_broker=0) == 2
    t = fault.FaultTable(3)
    t.update(1, 5000, False, NOW)
    assert qt.select_fault(2, -1, t, NOW) == 4          # queues 2, 3 are broker 1's, in its penalty
    assert qt.select_fault(0, 0, t, NOW) == 4           # 0 just failed, 1 penalised
    assert [qt.select_of_broker(c, 1) for c in range(3)] == [2, 3, 2]
    assert qt.select_of_broker(0, 7) == -1 and selector.QueueTable([]).select(3) == -1


@pytest.mark.c_ext
@settings(max_examples=examples(200), deadline=None)
@given(brokers=st.lists(st.integers(0, 5), max_size=12), counter=st.integers(-2**40, 2**40), last=st.integers(-1, 6),
       updates=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 20000), st.booleans()), max_size=8),
       now=st.integers(-700_000, 700_000))
def test_queue_table_twins_agree(brokers, counter, last, updates, now) -> None:
    pairs = []
    for kind in ("py", "c"):
        t = _load("fault", kind).FaultTable(2)
        for b, lat, iso in updates:
            t.update(b, lat, iso, NOW)
        pairs.append((_load("selector", kind).QueueTable(brokers), t))
    (qp, tp), (qc, tc) = pairs
    assert qp.select(counter, last) == qc.select(counter, last)
    assert qp.select_fault(counter, last, tp, NOW + now) == qc.select_fault(counter, last, tc, NOW + now)
    for b in range(7):
        assert qp.select_of_broker(counter, b) == qc.select_of_broker(counter, b)
