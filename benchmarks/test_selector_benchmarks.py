"""Queue selection and fault-item lookups, compiled vs reference in one run.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_selector_benchmarks.py --benchmark-only``.
"""
from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

NOW = 1_700_000_000_000
TWINS = [pytest.param("py", id="py"), pytest.param("c", id="c", marks=pytest.mark.c_ext)]


def _twin(stem: str, kind: str):
    if kind == "c" and os.environ.get("FASTMQ_NO_EXTENSIONS"):
        pytest.skip("compiled twins deselected")
    return importlib.import_module(f"fastmq._ext.{stem}_{kind}")


@pytest.mark.parametrize("kind", TWINS)
def test_select_queue(benchmark, kind: str) -> None:
    sel = _twin("selector", kind)
    qb = np.repeat(np.arange(4, dtype=np.int32), 4)  # 4 brokers x 4 queues
    assert benchmark(sel.select_queue, qb, 12345, 2) in range(16)


@pytest.mark.parametrize("kind", TWINS)
def test_select_queue_fault(benchmark, kind: str) -> None:
    sel, fault = _twin("selector", kind), _twin("fault", kind)
    qb = np.repeat(np.arange(4, dtype=np.int32), 4)
    t = fault.FaultTable(4)
    t.update(0, 5000, False, NOW)   # broker 0 in its penalty: the scan has to skip its queues
    t.update(1, 20, False, NOW)
    idx = benchmark(sel.select_queue_fault, qb, 0, 1, t.present, t.available_from, NOW)
    assert qb[idx] in (2, 3)


@pytest.mark.parametrize("kind", TWINS)
def test_fault_update_and_check(benchmark, kind: str) -> None:
    t = _twin("fault", kind).FaultTable(8)

    def step() -> bool:
        t.update(3, 120, False, NOW)
        return t.is_available(3, NOW)
    assert benchmark(step)


@pytest.mark.parametrize("kind", TWINS)
def test_pick_one_at_least(benchmark, kind: str) -> None:
    t = _twin("fault", kind).FaultTable(8)
    for b in range(8):
        t.update(b, 600 + 300 * b, False, NOW)
    assert benchmark(t.pick_one_at_least, NOW) in range(8)


@pytest.mark.parametrize("kind", TWINS)
def test_queue_table_select(benchmark, kind: str) -> None:
    qt = _twin("selector", kind).QueueTable(np.repeat(np.arange(4, dtype=np.int32), 4))
    assert benchmark(qt.select, 12345, 2) in range(16)


@pytest.mark.parametrize("kind", TWINS)
def test_queue_table_select_fault(benchmark, kind: str) -> None:
    qt = _twin("selector", kind).QueueTable(np.repeat(np.arange(4, dtype=np.int32), 4))
    t = _twin("fault", kind).FaultTable(4)
    t.update(0, 5000, False, NOW)
    t.update(1, 20, False, NOW)
    assert benchmark(qt.select_fault, 0, 1, t, NOW) in range(8, 16)


@pytest.mark.parametrize("kind", TWINS)
def test_queue_table_select_reachable(benchmark, kind: str) -> None:
    # a send's selection while a broker is marked unreachable and another just failed
    qt = _twin("selector", kind).QueueTable(np.repeat(np.arange(4, dtype=np.int32), 4))
    t = _twin("fault", kind).FaultTable(4)
    t.mark_unreachable(0)
    assert benchmark(qt.select_reachable, 0, 1, t) in range(8, 16)
