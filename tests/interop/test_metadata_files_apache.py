"""The broker's ``topics.json`` and ``subscriptionGroup.json`` as fastmq writes them (only changed
entries encoded again, issue 32) read by Apache RocketMQ 4.9.8's own classes, as its broker reads
them at start (opt-in: ``FASTMQ_ROCKETMQ_CLASSPATH``, the 4.9.8 install's classpath with the
broker jar, and ``java``; see /work/java498/READY)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fastmq.broker.config import BrokerConfig
from fastmq.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from fastmq.broker.topic_config import TopicConfigManager
from fastmq.protocol.bodies import TopicConfig

CLASSPATH = os.environ.get("FASTMQ_ROCKETMQ_CLASSPATH", "")
OPENS = os.environ.get("FASTMQ_ROCKETMQ_JAVA_OPENS", "").split()
SOURCE = Path(__file__).resolve().parent / "java" / "ConfigFilesReader.java"

pytestmark = [pytest.mark.java_rocketmq, pytest.mark.skipif(
    not CLASSPATH or shutil.which("java") is None,
    reason="FASTMQ_ROCKETMQ_CLASSPATH (Apache RocketMQ 4.9.8's install) and java not both set")]


def test_apache_reads_the_files_fastmq_writes(tmp_path: Path) -> None:
    topics = TopicConfigManager(BrokerConfig(), tmp_path / "topics.json")
    for i in range(600):   # several blocks of the encoder
        topics.update(TopicConfig(f"T{i}", 1 + i % 8, 1 + i % 8, 6, order=i % 5 == 0))
    topics.persist()
    topics.update(TopicConfig("T3", 7, 7, 4))   # a change inside an early block, then a deletion
    topics.delete("T10")
    topics.persist()
    groups = SubscriptionGroupManager(tmp_path / "subscriptionGroup.json")
    for i in range(300):
        groups.update(SubscriptionGroupConfig(f"G{i}", retry_max_times=i % 17, broker_id=1 << 33))
    groups.persist()

    run = subprocess.run(["java", *OPENS, "-cp", CLASSPATH, str(SOURCE), str(tmp_path / "topics.json"),
                          str(tmp_path / "subscriptionGroup.json")], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    table, version = topics.snapshot()
    assert lines[0] == f"dataVersion {version.counter}"
    want = [f"topic {n} {t.read_queue_nums} {t.write_queue_nums} {t.perm} {str(t.order).lower()}"
            for n, t in sorted(table.items())]   # (the reader prints them in key order)
    assert [ln for ln in lines if ln.startswith("topic ")] == want
    assert "topic T3 7 7 4 false" in lines and not any(ln.startswith("topic T10 ") for ln in lines)
    want_groups = [f"group {n} {g.retry_max_times} {g.broker_id}" for n, g in sorted(groups.table.items())]
    assert [ln for ln in lines if ln.startswith("group ")] == want_groups
