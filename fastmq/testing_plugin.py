"""The pytest plugin of :mod:`fastmq.testing`: the ``fastmq_cluster`` fixture.

Installed with fastmq through the ``pytest11`` entry point, so any test suite can ask for a real
cluster, as Kafka users ask for an embedded Kafka::

    async def test_round_trip(fastmq_cluster):
        async with Producer("PG", namesrv_addr=fastmq_cluster.namesrv_addr) as p:
            ...

One cluster serves a whole test module (servers take seconds to start; the tests of a module
share it, so give each test its own topic or group); ``fastmq_fresh_cluster`` is the same
cluster started for one test, for a test that needs an empty broker. A module chooses its cluster's shape with
the ``fastmq_cluster`` marker, whose keywords are :class:`~fastmq.testing.EmbeddedCluster`'s::

    pytestmark = pytest.mark.fastmq_cluster(brokers=2, slave=True,
                                            broker_conf={"flushDiskType": "SYNC_FLUSH"})

This module is kept apart from :mod:`fastmq.testing` so that the cluster itself needs no pytest.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from .testing import EmbeddedCluster

__all__ = ["fastmq_cluster", "fastmq_fresh_cluster"]


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``fastmq_cluster`` marker (suites running ``--strict-markers`` accept it)."""
    config.addinivalue_line(
        "markers", "fastmq_cluster(**kwargs): the shape of this module's fastmq_cluster fixture "
                   "(EmbeddedCluster's keywords: brokers, slave, broker_conf, namesrv_conf)")


@pytest.fixture(scope="module")
def fastmq_cluster(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """A started :class:`~fastmq.testing.EmbeddedCluster` shared by the tests of one module,
    under a fresh temp dir; stopped (and checked to stop cleanly) after the module's last test."""
    with EmbeddedCluster(tmp_path_factory.mktemp("fastmq-cluster"), **_shape(request)) as cluster:
        yield cluster


@pytest.fixture
def fastmq_fresh_cluster(request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """Like ``fastmq_cluster`` (same marker), but started for this test alone: for a test that
    counts what a topic holds from its first offset, or reuses another test's names."""
    with EmbeddedCluster(tmp_path_factory.mktemp("fastmq-cluster"), **_shape(request)) as cluster:
        yield cluster


def _shape(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("fastmq_cluster")
    return dict(marker.kwargs) if marker is not None else {}
