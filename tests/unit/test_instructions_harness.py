"""benchmarks/instructions.py's workloads run on this checkout (natively; the counting under
valgrind is the benchmark's business), so the before/after tool does not rot."""
from __future__ import annotations

import pytest

from benchmarks import instructions
from fastmq import _driven
from fastmq._ext import USING_EXTENSIONS


@pytest.mark.parametrize("kind", instructions.KINDS)
@pytest.mark.parametrize("name", sorted(instructions.WORKLOADS))
def test_each_workload_runs(name: str, kind: str) -> None:
    if kind == "c" and not USING_EXTENSIONS:
        pytest.skip("compiled twins deselected")
    if name.startswith("store ") and (kind == "c") != USING_EXTENSIONS:
        pytest.skip("the store's twin is the process's (FASTMQ_NO_EXTENSIONS): the other pass runs this one")
    before = (_driven.GRACE_S, _driven.POLL_MAX_S, _driven.TURN_EVERY)
    instructions.run(kind, {name: 3})
    # the workloads run in this process: a module setting they changed would change every later
    # test's producers (lengthened GRACE_S / POLL_MAX_S once left blocking send_async unserved)
    assert (_driven.GRACE_S, _driven.POLL_MAX_S, _driven.TURN_EVERY) == before


def test_results_are_pytest_benchmark_files_collate_reads(tmp_path) -> None:
    import json

    from spark_bench.collate.load import read_pytest_benchmark

    doc = instructions._pytest_format("a" * 40, "2026-11-26T11:00:00+00:00",
                                      {("codec decode_send_v2", "c"): 1234.5, ("codec decode_send_v2", "py"): 9876.0})
    f = tmp_path / "pytest-x-instructions.json"
    f.write_text(json.dumps(doc))
    rows = [r for r in read_pytest_benchmark(f) if r["metric"] == "instructions"]
    assert sorted((r["variant"], r["value"], r["better"], r["gate"]) for r in rows) == [
        ("c", 1234.5, "lower", True), ("py", 9876.0, "lower", True)]


def test_run_refuses_an_unknown_workload(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        instructions.main(["run", "c", "no such=3"])
    assert e.value.code == 2 and "expected NAME=N" in capsys.readouterr().err
