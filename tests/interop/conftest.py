"""Fixtures the interop tests share: ``cpp_cluster``, a fastmq cluster for the C++ client's peers."""
from __future__ import annotations

from pathlib import Path

import pytest

from fastmq.testing import EmbeddedCluster

#: Every delay level one second, so a retry comes back within the test.
FAST_LEVELS = " ".join(["1s"] * 18)


@pytest.fixture
def cpp_cluster(tmp_path: Path):
    """A fastmq cluster for the C++ client's peers: (namesrv, broker, the peers' HOME)."""
    pytest.importorskip("rocketmq.client")
    conf = {"brokerClusterName": "FastCluster", "brokerName": "fast-broker-a", "mappedFileSizeCommitLog": 256 * 1024,
            "mappedFileSizeConsumeQueue": 6000, "messageDelayLevel": FAST_LEVELS, "defaultTopicQueueNums": 4}
    with EmbeddedCluster(tmp_path / "cluster", broker_conf=conf) as cluster:
        yield cluster.namesrv, cluster.brokers[0], tmp_path
