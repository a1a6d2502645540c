"""Benchmark settings: the ``c_ext`` params are skipped in a pure run, and never silently measure the reference.

tests/conftest.py does not reach this directory, so the same rules are repeated here (without
re-registering its ``--no-extensions`` option, which would clash when both directories run at once).
"""
from __future__ import annotations

import importlib
import os
import shutil
from typing import TYPE_CHECKING, Iterator

import pytest

from fastmq.testing import EmbeddedCluster, ServerProcess

if TYPE_CHECKING:
    from benchmarks.redis_pair import RedisPair

NO_EXT = bool(os.environ.get("FASTMQ_NO_EXTENSIONS"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    no_ext = NO_EXT
    try:
        no_ext = no_ext or bool(config.getoption("--no-extensions"))
    except ValueError:  # the option lives in tests/conftest.py, which may not be loaded
        pass
    if no_ext:
        skip = pytest.mark.skip(reason="compiled twins deselected (FASTMQ_NO_EXTENSIONS / --no-extensions)")
        for item in items:
            if "c_ext" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def codec_twins() -> dict:
    """``{"py": codec_py, "c": codec_c}``; ``c`` is missing in a pure run."""
    mods = {"py": importlib.import_module("fastmq._ext.codec_py")}
    if not NO_EXT:
        # A benchmark that measured the reference under the compiled twin's name would lie.
        mods["c"] = importlib.import_module("fastmq._ext.codec_c")
    return mods



@pytest.fixture(scope="module")
def fastmq_and_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisPair]:
    """The two servers the redis comparisons measure (:func:`benchmarks.redis_pair.running`), for
    one module; skipped without redis-server or redis-py."""
    pytest.importorskip("redis")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from benchmarks.redis_pair import running  # (the repository's root is on sys.path only for the tests)
    with running(tmp_path_factory.mktemp("fastmq-and-redis")) as pair:
        yield pair


@pytest.fixture(scope="module")
def async_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A NameServer and one ASYNC_FLUSH ``fastmq-broker`` (256 MiB commit-log files) for one
    module; the broker's process, for its port and its CPU."""
    tmp = tmp_path_factory.mktemp("async-broker")
    with EmbeddedCluster(tmp, broker_conf={"brokerName": "bench", "flushDiskType": "ASYNC_FLUSH",
                                           "mappedFileSizeCommitLog": 268435456}) as cluster:
        yield cluster.brokers[0]
