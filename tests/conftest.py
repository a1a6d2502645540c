"""Shared fixtures: the twin selector, a guard against silent pure fallback, a remoting client;
and the layers: each test is marked with its folder's name (unit, process, interop, spark).

The embedded cluster (``fastmq_cluster``) is fastmq.testing's pytest plugin, loaded by the
``-p fastmq.testing_plugin`` of pyproject's addopts."""
from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path

import pytest

NO_EXT = bool(os.environ.get("FASTMQ_NO_EXTENSIONS"))
TESTS = Path(__file__).resolve().parent
#: The folders under tests/, each a marker of the same name (registered in pyproject.toml).
LAYERS = ("unit", "process", "interop", "spark")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--no-extensions", action="store_true", help="skip tests of the compiled twins")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `-m unit` selects what `tests/unit` does; a test outside the layer folders would be in none,
    # so it is refused rather than left out of every layer's run
    stray = set()
    for item in items:
        try:
            parts = item.path.relative_to(TESTS).parts
        except ValueError:  # benchmarks/
            continue
        if len(parts) > 1 and parts[0] in LAYERS:
            item.add_marker(getattr(pytest.mark, parts[0]))
        else:
            stray.add(str(item.path))
    if stray:
        raise pytest.UsageError(f"tests outside the layer folders {', '.join(LAYERS)} of tests/: "
                                + ", ".join(sorted(stray)))
    if config.getoption("--no-extensions") or NO_EXT:
        skip = pytest.mark.skip(reason="compiled twins deselected")
        for item in items:
            if "c_ext" in item.keywords:
                item.add_marker(skip)


def pytest_report_header(config: pytest.Config) -> str:
    """How full the temp dirs' disk is: over 90% every broker a test starts refuses sends
    (RocketMQ's diskSpaceWarningLevelRatio), and the failures that follow name no test's fault."""
    from fastmq.store.disk_space import DISK_SPACE_WARNING_RATIO, disk_used_ratio
    tmp = tempfile.gettempdir()
    ratio = disk_used_ratio(tmp)
    line = f"temp dir {tmp}: its disk is {ratio * 100:.0f}% used"
    if ratio > DISK_SPACE_WARNING_RATIO - 0.05:
        line += (f" -- WARNING: brokers refuse sends above {DISK_SPACE_WARNING_RATIO * 100:.0f}%;"
                 " free space (old pytest-of-* dirs?) before trusting this run")
    return line


def pytest_configure(config: pytest.Config) -> None:
    if not NO_EXT:
        # A test run that silently measured the pure twin would prove nothing
        # about the compiled one: refuse it.
        ext_dir = Path(__file__).resolve().parent.parent / "fastmq" / "_ext"
        for pyx in sorted(ext_dir.glob("*_c.pyx")):
            name = f"fastmq._ext.{pyx.stem}"
            try:
                importlib.import_module(name)
            except ImportError as exc:  # pragma: no cover - build problem
                raise pytest.UsageError(
                    f"{name} is not built; run `pip install -e .` "
                    "or set FASTMQ_NO_EXTENSIONS=1 for a pure run"
                ) from exc


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Servers a test's own body started and left running (it failed before its clean-up) are
    killed when the body ends, so no run leaves processes behind. Fixtures' servers are not
    touched: they start before the body and their teardown stops them."""
    from fastmq.testing import live_processes
    before = set(live_processes())
    yield
    for proc in set(live_processes()) - before:
        proc.kill()


def _twin_params(stem: str) -> list:
    return [
        pytest.param(f"fastmq._ext.{stem}_py", id="py"),
        pytest.param(f"fastmq._ext.{stem}_c", id="c", marks=pytest.mark.c_ext),
    ]


def _twin_fixture(stem: str, what: str):
    """A module-scoped fixture giving each twin of ``fastmq._ext.<stem>`` in turn (``py``, ``c``)."""
    def fixture(request: pytest.FixtureRequest):
        return importlib.import_module(request.param)
    fixture.__doc__ = f"Each {what} twin in turn (``py`` and ``c``)."
    return pytest.fixture(scope="module", params=_twin_params(stem), name=stem)(fixture)


codec = _twin_fixture("codec", "codec")
fault = _twin_fixture("fault", "latency-fault")
selector = _twin_fixture("selector", "queue-selection")
send = _twin_fixture("send", "broker send-stage")
batch = _twin_fixture("batch", "SEND_BATCH_MESSAGE body encoder")
records = _twin_fixture("records", "plain-IPv4 pull-body record decoder")
produce = _twin_fixture("produce", "producer hot path")
pull = _twin_fixture("pull", "broker pull-header decoder")
sync_wait = _twin_fixture("sync_wait", "group-commit wait-then-sync")
lone_put = _twin_fixture("lone_put", "store one-record put")


@pytest.fixture
async def client():
    """A ``RemotingClient`` with a short connect timeout, closed after the test.

    Modules that need another kind of client define their own ``client`` fixture, which wins.
    """
    from fastmq.remoting import RemotingClient  # not at import time: pytest_configure checks the twins first

    c = RemotingClient(connect_timeout=2)
    try:
        yield c
    finally:
        await c.close()
