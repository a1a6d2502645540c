"""``fastmq-admin`` beside Apache RocketMQ 4.9.8's ``mqadmin`` (opt-in, as the other Java tests).

With ``FASTMQ_ROCKETMQ_CLASSPATH`` set (``source /work/java498/READY``): on one fastmq cluster,
after the same traffic, mqadmin's clusterList, topicList, topicStatus and consumerProgress tables
and fastmq-admin's ``--json`` hold the same rows. With ``FASTMQ_JAVA_NAMESRV`` also set (a running
Apache cluster, see READY): fastmq-admin's commands work against Apache's NameServer and broker.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from fastmq.blocking import Producer, PushConsumer
from fastmq.client.push_consumer import ConsumeStatus
from fastmq.protocol.message import Message
from fastmq.testing import running_cluster

CLASSPATH = os.environ.get("FASTMQ_ROCKETMQ_CLASSPATH", "")
OPENS = os.environ.get("FASTMQ_ROCKETMQ_JAVA_OPENS", "").split()
JAVA_NAMESRV = os.environ.get("FASTMQ_JAVA_NAMESRV", "")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.java_rocketmq, pytest.mark.slow,
              pytest.mark.skipif(not CLASSPATH, reason="FASTMQ_ROCKETMQ_CLASSPATH (Java RocketMQ 4.9.8) not set")]


def mqadmin_text(home: Path, *args: str) -> str:
    """What mqadmin printed (it exits 0 on success)."""
    r = subprocess.run(["java", *OPENS, f"-Duser.home={home}", "-cp", CLASSPATH,
                        "org.apache.rocketmq.tools.command.MQAdminStartup", *args],
                       capture_output=True, text=True, timeout=120,
                       # (ROCKETMQ_HOME for the tool's logback_tools.xml; without it, exit 0 and no output)
                       env={**os.environ, "ROCKETMQ_HOME": os.environ.get("FASTMQ_ROCKETMQ_HOME", "")})
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def mqadmin(home: Path, *args: str) -> list[list[str]]:
    """mqadmin's table rows, split on blanks (the header and the empty lines left out)."""
    return [line.split() for line in mqadmin_text(home, *args).splitlines() if line.strip() and not line.startswith("#")]


def fastmq_text(*args: str) -> str:
    """What fastmq-admin printed for people (no --json)."""
    r = subprocess.run([sys.executable, "-m", "fastmq.admin_cli", *args], capture_output=True,
                       text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    return r.stdout


def fastmq_admin(*args: str) -> Any:
    return json.loads(fastmq_text(*args, "--json"))


def traffic(ns: str, topic: str, group: str, sent: int, consumed: int) -> None:
    """``sent`` messages on ``topic``; ``group`` consumes ``consumed`` of them and commits."""
    with Producer(f"PG_{group}", namesrv_addr=ns) as p:
        for i in range(sent):
            p.send(Message(topic, b"m%d" % i))
    if not consumed:
        return
    seen: list[Any] = []
    done = threading.Event()

    def listener(msgs: list[Any]) -> str:
        seen.extend(msgs)
        if len(seen) >= consumed:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS
    c = PushConsumer(group, namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(topic, "*")
    c.register_message_listener(listener)
    c.start()
    try:
        assert done.wait(30)
    finally:
        c.shutdown()


@pytest.fixture(scope="module")
def fastmq_ns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_cluster(tmp_path_factory.mktemp("admin-interop")) as (ns, _broker):
        yield ns.addr


def test_same_rows_as_mqadmin(fastmq_ns: str, tmp_path: Path) -> None:
    ns = fastmq_ns
    topic, group = f"AdmI_{uuid.uuid4().hex[:6]}", f"AdmIG_{uuid.uuid4().hex[:6]}"
    assert fastmq_admin("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4")
    deadline = time.monotonic() + 20
    while topic not in fastmq_admin("topicList", "-n", ns) and time.monotonic() < deadline:
        time.sleep(0.2)
    traffic(ns, topic, group, 12, 12)

    rows = mqadmin(tmp_path, "clusterList", "-n", ns)
    ours = fastmq_admin("clusterList", "-n", ns)
    assert [r[:4] for r in rows] == [[o["cluster"], o["brokerName"], str(o["brokerId"]), o["addr"]] for o in ours]

    assert {r[0] for r in mqadmin(tmp_path, "topicList", "-n", ns)} == set(fastmq_admin("topicList", "-n", ns))

    rows = mqadmin(tmp_path, "topicStatus", "-n", ns, "-t", topic)
    ours = fastmq_admin("topicStatus", "-n", ns, "-t", topic)
    assert [r[:4] for r in rows] == [[o["brokerName"], str(o["queueId"]), str(o["minOffset"]), str(o["maxOffset"])]
                                     for o in ours]

    rows = mqadmin(tmp_path, "consumerProgress", "-n", ns, "-g", group)
    ours = fastmq_admin("consumerProgress", "-n", ns, "-g", group)
    table = [r[:6] for r in rows if not r[0].startswith(("Consume", "Diff"))]
    assert table == [[q["topic"], q["brokerName"], str(q["queueId"]), str(q["brokerOffset"]),
                      str(q["consumerOffset"]), str(q["diff"])] for q in ours["queues"]]
    assert [r for r in rows if r[0] == "Diff"][0][-1] == str(ours["diffTotal"])

    # with no -g: a line per group, ending with its total lag (type and model are blank offline)
    rows = mqadmin(tmp_path, "consumerProgress", "-n", ns)
    ours = fastmq_admin("consumerProgress", "-n", ns)
    assert {r[0]: r[-1] for r in rows} == {g["group"]: str(g["diffTotal"]) for g in ours}


def test_newer_commands_print_as_mqadmin(fastmq_ns: str, tmp_path: Path) -> None:
    """consumeMessage, printMsg, get/updateNamesrvConfig and update/deleteKvConfig: on the same
    cluster, fastmq-admin prints what mqadmin prints, and a write by one is seen by the other."""
    ns = fastmq_ns
    topic = f"AdmP_{uuid.uuid4().hex[:6]}"
    fastmq_admin("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
    deadline = time.monotonic() + 20
    while topic not in fastmq_admin("topicList", "-n", ns) and time.monotonic() < deadline:
        time.sleep(0.2)
    with Producer("AdmPrintPG", namesrv_addr=ns) as p:
        for i in range(3):
            p.send(Message(topic, b"body %d" % i, properties={"KEYS": f"k{i}", "TAGS": "tA" if i % 2 else "tB"}))

    def same(*args: str, ordered: bool = True) -> str:
        theirs, ours = mqadmin_text(tmp_path, *args), fastmq_text(*args)
        if ordered:
            assert ours.splitlines() == theirs.splitlines(), (args, theirs, ours)
        else:
            assert sorted(ours.splitlines()) == sorted(theirs.splitlines()), (args, theirs, ours)
        return ours

    assert same("consumeMessage", "-n", ns, "-t", topic).count("MSGID: ") == 3
    assert "queueId=1" in same("consumeMessage", "-n", ns, "-t", topic, "-b", "broker-a", "-i", "1")
    same("consumeMessage", "-n", ns, "-t", topic, "-c", "1")
    assert same("printMsg", "-n", ns, "-t", topic).count("MSGID: ") == 3
    assert same("printMsg", "-n", ns, "-t", topic, "-s", "tA", "-d", "false").count("NOT PRINT BODY") == 1

    # (mqadmin walks a java.util.Properties, whose order is the JVM's: Hashtable's on Java 8, a
    # ConcurrentHashMap's from 9 on; fastmq-admin sorts the keys, so the same lines are compared)
    before = same("getNamesrvConfig", "-n", ns, ordered=False)
    assert f"============{ns}============" in before
    # a key both NameServers have; set by mqadmin, seen by fastmq-admin, and back
    key = "clusterTest"
    assert key in before
    same_update = mqadmin_text(tmp_path, "updateNamesrvConfig", "-n", ns, "-k", key, "-v", "true")
    assert "true" in fastmq_admin("getNamesrvConfig", "-n", ns)[ns][key]
    assert fastmq_text("updateNamesrvConfig", "-n", ns, "-k", key, "-v", "true").splitlines() == \
        same_update.splitlines()
    fastmq_text("updateNamesrvConfig", "-n", ns, "-k", key, "-v", "false")
    assert same("getNamesrvConfig", "-n", ns, ordered=False) == before

    space, k = "AdmPrintSpace", f"key_{uuid.uuid4().hex[:6]}"
    theirs = mqadmin_text(tmp_path, "updateKvConfig", "-n", ns, "-s", space, "-k", k, "-v", "v1")
    ours = fastmq_text("updateKvConfig", "-n", ns, "-s", space, "-k", k, "-v", "v2")
    assert ours.splitlines() == theirs.splitlines()
    theirs = mqadmin_text(tmp_path, "deleteKvConfig", "-n", ns, "-s", space, "-k", k)
    ours = fastmq_text("deleteKvConfig", "-n", ns, "-s", space, "-k", k)
    assert ours.splitlines() == theirs.splitlines()


@pytest.mark.skipif(not JAVA_NAMESRV, reason="FASTMQ_JAVA_NAMESRV (an Apache RocketMQ cluster) not set")
def test_against_apache_cluster(tmp_path: Path) -> None:
    ns = JAVA_NAMESRV
    clusters = fastmq_admin("clusterList", "-n", ns)
    assert clusters and clusters[0]["version"] == "V4_9_8"
    topic = f"AdmA_{uuid.uuid4().hex[:6]}"
    fastmq_admin("updateTopic", "-n", ns, "-c", clusters[0]["cluster"], "-t", topic, "-r", "2", "-w", "2")
    deadline = time.monotonic() + 30
    while topic not in fastmq_admin("topicList", "-n", ns) and time.monotonic() < deadline:
        time.sleep(0.5)
    group = f"AdmAG_{topic}"
    traffic(ns, topic, group, 4, 4)
    assert sum(q["maxOffset"] for q in fastmq_admin("topicStatus", "-n", ns, "-t", topic)) == 4
    progress = fastmq_admin("consumerProgress", "-n", ns, "-g", group, "-t", topic)
    assert progress["diffTotal"] == 0 and sum(q["consumerOffset"] for q in progress["queues"]) == 4
    assert fastmq_admin("updateSubGroup", "-n", ns, "-c", clusters[0]["cluster"], "-g", group, "-r", "3")
    assert fastmq_admin("deleteSubGroup", "-n", ns, "-c", clusters[0]["cluster"], "-g", group)
    assert fastmq_admin("brokerStatus", "-n", ns, "-b", clusters[0]["addr"])["brokerVersionDesc"] == "V4_9_8"
    assert "brokerName" in fastmq_admin("getBrokerConfig", "-n", ns, "-b", clusters[0]["addr"])
    fastmq_admin("deleteTopic", "-n", ns, "-c", clusters[0]["cluster"], "-t", topic)
