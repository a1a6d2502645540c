"""Shared fixtures: the twin selector, a guard against silent pure fallback, a remoting client."""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

NO_EXT = bool(os.environ.get("FASTMQ_NO_EXTENSIONS"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--no-extensions", action="store_true", help="skip tests of the compiled twins")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--no-extensions") or NO_EXT:
        skip = pytest.mark.skip(reason="compiled twins deselected")
        for item in items:
            if "c_ext" in item.keywords:
                item.add_marker(skip)


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


def _twin_params(stem: str) -> list:
    return [
        pytest.param(f"fastmq._ext.{stem}_py", id="py"),
        pytest.param(f"fastmq._ext.{stem}_c", id="c", marks=pytest.mark.c_ext),
    ]


@pytest.fixture(scope="module", params=_twin_params("codec"))
def codec(request: pytest.FixtureRequest):
    """Each codec twin in turn (``py`` and ``c``)."""
    return importlib.import_module(request.param)


@pytest.fixture(scope="module", params=_twin_params("fault"))
def fault(request: pytest.FixtureRequest):
    """Each latency-fault twin in turn (``py`` and ``c``)."""
    return importlib.import_module(request.param)


@pytest.fixture(scope="module", params=_twin_params("selector"))
def selector(request: pytest.FixtureRequest):
    """Each queue-selection twin in turn (``py`` and ``c``)."""
    return importlib.import_module(request.param)


@pytest.fixture(scope="module", params=_twin_params("send"))
def send(request: pytest.FixtureRequest):
    """Each send-pipeline twin in turn (``py`` and ``c``)."""
    return importlib.import_module(request.param)


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


@pytest.fixture(scope="module", params=_twin_params("batch"))
def batch(request: pytest.FixtureRequest):
    """Each SEND_BATCH_MESSAGE body encoder twin in turn (``py`` and ``c``)."""
    return importlib.import_module(request.param)


@pytest.fixture(scope="module", params=_twin_params("records"))
def records(request: pytest.FixtureRequest):
    """Each plain-IPv4 pull-body record decoder twin in turn (``py`` and ``c``)."""
    return importlib.import_module(request.param)
