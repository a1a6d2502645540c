"""``fastmq-admin`` against a real NameServer and broker, run as a user runs it (``python -m
fastmq.admin_cli``): its tables, its ``--json``, its exit codes and one-line errors; and the
blocking :class:`fastmq.blocking.Admin` the command is built on."""
from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Iterator

import pytest

from fastmq import admin_cli
from fastmq.blocking import Admin, Producer, PushConsumer
from fastmq.client.admin import SubscriptionGroupConfig, TopicNotFoundError
from fastmq.errors import ClientError
from fastmq.protocol.message import Message
from fastmq.testing import ServerProcess, broker_process, free_port, namesrv_process

CLUSTER, BROKER, TOPIC, GROUP = "AdminCluster", "admin-b", "AdminTopic", "AdminGroup"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    root = tmp_path_factory.mktemp("admin")
    (root / "ns").mkdir()
    (root / "b").mkdir()
    with namesrv_process(root / "ns") as ns:
        with broker_process(root / "b", ns.addr, brokerClusterName=CLUSTER, brokerName=BROKER,
                            autoCreateTopicEnable="false", traceTopicEnable="true") as b:
            yield ns, b


def _admin(*args: str, env: dict[str, str] | None = None, process: bool = False) -> subprocess.CompletedProcess[str]:
    """``fastmq-admin ARGS``: in a process of its own, as a user runs it, when ``process`` or
    ``env`` says so (the exit-code tests); otherwise its ``main`` in this process with its output
    captured, which tests the same code without a Python start-up per command."""
    if process or env is not None:
        return subprocess.run([sys.executable, "-m", "fastmq.admin_cli", *args], capture_output=True, text=True,
                              timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            admin_cli.main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # what the interpreter would print and exit 1 for
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["fastmq-admin", *args], code, out.getvalue(), err.getvalue())


admin = _admin


def ok_json(*args: str) -> Any:
    r = admin(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def until(fn: Any, seconds: float = 20) -> Any:
    deadline = time.monotonic() + seconds
    for _ in range(1000):
        try:
            v = fn()
            if v:
                return v
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    raise AssertionError("not reached in time")


def test_cluster_topic_and_messages(servers: tuple[ServerProcess, ServerProcess]) -> None:
    ns, b = servers
    rows = until(lambda: ok_json("clusterList", "-n", ns.addr))
    assert [{k: r[k] for k in ("cluster", "brokerName", "brokerId", "addr", "version")} for r in rows] == [
        {"cluster": CLUSTER, "brokerName": BROKER, "brokerId": 0, "addr": b.addr, "version": "V4_9_8"}]
    assert 0 <= rows[0]["space"] <= 1 and rows[0]["inTps"] >= 0
    table = admin("clusterList", "-n", ns.addr)
    assert table.returncode == 0 and "#Cluster Name" in table.stdout and b.addr in table.stdout
    assert "#InTPS(LOAD)" in table.stdout and "#SPACE" in table.stdout

    r = admin("updateTopic", "-n", ns.addr, "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4")
    assert r.returncode == 0 and f"create topic to {b.addr} success." in r.stdout, r.stderr
    until(lambda: TOPIC in ok_json("topicList", "-n", ns.addr))
    route = ok_json("topicRoute", "-n", ns.addr, "-t", TOPIC)
    assert route["queueDatas"][0]["brokerName"] == BROKER and route["queueDatas"][0]["readQueueNums"] == 4

    with Producer("AdminPG", namesrv_addr=ns.addr) as p:
        sent = [p.send(Message(TOPIC, b"body %d" % i, properties={"KEYS": f"k{i}", "TAGS": "tA"}))
                for i in range(6)]
    status = ok_json("topicStatus", "-n", ns.addr, "-t", TOPIC)
    assert [q["queueId"] for q in status] == [0, 1, 2, 3]
    assert sum(q["maxOffset"] - q["minOffset"] for q in status) == 6
    assert "#Min Offset" in admin("topicStatus", "-n", ns.addr, "-t", TOPIC).stdout

    # by id (the offset message id) and by key, through the index
    got = ok_json("queryMsgById", "-n", ns.addr, "-i", sent[2].offset_msg_id)
    assert got[0]["body"] == "body 2" and got[0]["keys"] == ["k2"] and got[0]["topic"] == TOPIC
    text = admin("queryMsgById", "-n", ns.addr, "-i", sent[2].offset_msg_id).stdout
    assert "Message Body:" in text and "body 2" in text
    found = until(lambda: ok_json("queryMsgByKey", "-n", ns.addr, "-t", TOPIC, "-k", "k4"))
    assert [m["body"] for m in found] == ["body 4"]

    # the broker's own views
    status_kv = ok_json("brokerStatus", "-n", ns.addr, "-b", b.addr)
    assert status_kv["brokerVersionDesc"] == "V4_9_8" and int(status_kv["msgPutTotalTodayNow"]) >= 6
    conf = ok_json("getBrokerConfig", "-n", ns.addr, "-c", CLUSTER)
    assert conf["brokerName"] == BROKER and conf["brokerClusterName"] == CLUSTER

    # the library the command is built on
    with Admin(ns.addr) as a:
        assert TOPIC in a.topic_list()
        assert sum(q.max_offset for q in a.topic_status(TOPIC)) == 6
        with pytest.raises(TopicNotFoundError):
            a.topic_route("NoSuchTopic")

    # sendMessage to one queue, read back with queryMsgByOffset
    sent_one = ok_json("sendMessage", "-n", ns.addr, "-t", TOPIC, "-p", "hello admin", "-k", "kk", "-c", "tX",
                       "-b", BROKER, "-i", "1")
    assert (sent_one["queueId"], sent_one["sendStatus"]) == (1, "SEND_OK")
    got = ok_json("queryMsgByOffset", "-n", ns.addr, "-t", TOPIC, "-b", BROKER, "-i", "1", "-o",
                  str(sent_one["queueOffset"]))
    assert (got["body"], got["tags"], got["keys"]) == ("hello admin", "tX", ["kk"])
    r = admin("queryMsgByOffset", "-n", ns.addr, "-t", TOPIC, "-b", BROKER, "-i", "1", "-o", "999")
    assert r.returncode == 1 and "999" in r.stderr
    assert "#Send Result" in admin("sendMessage", "-n", ns.addr, "-t", TOPIC, "-p", "x").stdout

    r = admin("deleteTopic", "-n", ns.addr, "-c", CLUSTER, "-t", TOPIC)
    assert r.returncode == 0, r.stderr
    assert TOPIC not in ok_json("topicList", "-n", ns.addr)


def test_sub_group_and_consumer_progress(servers: tuple[ServerProcess, ServerProcess]) -> None:
    ns, b = servers
    r = admin("updateSubGroup", "-n", ns.addr, "-b", b.addr, "-g", GROUP, "-r", "3", "-d", "false")
    assert r.returncode == 0 and "success" in r.stdout, r.stderr
    topic = "AdminProgressTopic"
    assert admin("updateTopic", "-n", ns.addr, "-b", b.addr, "-t", topic, "-r", "2", "-w", "2").returncode == 0
    until(lambda: topic in ok_json("topicList", "-n", ns.addr))
    with Producer("AdminPG2", namesrv_addr=ns.addr) as p:
        for i in range(5):
            p.send(Message(topic, b"m%d" % i))
    with Admin(ns.addr) as a:
        # a group's committed offset, as a consumer would commit it: through the library's API
        from fastmq.protocol.message_queue import MessageQueue
        from fastmq.blocking import _blocking
        for qid, off in ((0, 1), (1, 0)):  # (a reset needs an offset on every queue, as in 4.9.8)
            _blocking.call(a._core.api.update_consumer_offset_oneway(b.addr, GROUP, MessageQueue(topic, BROKER, qid),
                                                                     off), 10)
        progress = until(lambda: [p for p in a.consumer_progress(GROUP, topic) if p.consumer_offset == 1])
        assert progress[0].queue.queue_id == 0
        assert isinstance(SubscriptionGroupConfig(GROUP).to_obj()["retryMaxTimes"], int)
    data = ok_json("consumerProgress", "-n", ns.addr, "-g", GROUP, "-t", topic)
    assert data["diffTotal"] == 5 - 1
    assert sum(q["brokerOffset"] for q in data["queues"]) == 5
    text = admin("consumerProgress", "-n", ns.addr, "-g", GROUP, "-t", topic).stdout
    assert "#Consumer Offset" in text and "Diff Total: 4" in text
    # resetOffsetByTime with no consumer online: the offsets changed in the broker (mqadmin's fallback)
    rows = ok_json("resetOffsetByTime", "-n", ns.addr, "-g", GROUP, "-t", topic, "-s", "-1")  # -1: the end
    assert sum(r["offset"] for r in rows) == 5
    assert ok_json("consumerProgress", "-n", ns.addr, "-g", GROUP, "-t", topic)["diffTotal"] == 0
    rows = ok_json("resetOffsetByTime", "-n", ns.addr, "-g", GROUP, "-t", topic, "-s", "1970-01-02#00:00:00:000")
    assert [r["offset"] for r in rows] == [0, 0]
    assert ok_json("consumerProgress", "-n", ns.addr, "-g", GROUP, "-t", topic)["diffTotal"] == 5
    r = admin("resetOffsetByTime", "-n", ns.addr, "-g", GROUP, "-t", topic, "-s", "yesterday")
    assert r.returncode == 2 and "-s" in r.stderr
    r = admin("deleteSubGroup", "-n", ns.addr, "-b", b.addr, "-g", GROUP)
    assert r.returncode == 0 and "success" in r.stdout, r.stderr


def test_errors_and_exit_codes(servers: tuple[ServerProcess, ServerProcess]) -> None:
    ns, _b = servers
    admin = functools.partial(_admin, process=True)  # exit codes as a user meets them
    r = admin("topicRoute", "-n", ns.addr, "-t", "NoSuchTopic")
    assert r.returncode == 4 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "NoSuchTopic" in r.stderr and "not exist" in r.stderr
    r = admin("topicStatus", "-n", ns.addr, "-t", "NoSuchTopic", "--json")
    assert r.returncode == 4
    dead = f"127.0.0.1:{free_port()}"
    r = admin("clusterList", "-n", dead, "--timeout", "2")
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and dead in r.stderr
    r = admin("topicRoute", "-n", ns.addr)  # no -t
    assert r.returncode == 2 and "-t" in r.stderr
    r = admin("clusterList", env={"NAMESRV_ADDR": ""})
    assert r.returncode == 2 and "NAMESRV_ADDR" in r.stderr
    r = admin("noSuchCommand")
    assert r.returncode == 2
    r = admin("deleteTopic", "-n", ns.addr, "-c", "NoSuchCluster", "-t", "X")
    assert r.returncode == 1 and "NoSuchCluster" in r.stderr
    # NAMESRV_ADDR stands in for -n, as for mqadmin
    assert admin("topicList", env={"NAMESRV_ADDR": ns.addr}).returncode == 0


def test_connections_config_and_write_perm(servers: tuple[ServerProcess, ServerProcess]) -> None:
    from fastmq.blocking import PushConsumer
    from fastmq.client.push_consumer import ConsumeStatus
    ns, b = servers
    topic, group = "AdminConnTopic", "AdminConnGroup"
    assert admin("updateTopic", "-n", ns.addr, "-b", b.addr, "-t", topic, "-r", "2", "-w", "2").returncode == 0
    until(lambda: topic in ok_json("topicList", "-n", ns.addr))
    c = PushConsumer(group, namesrv_addr=ns.addr)
    c.subscribe(topic, "tagA || tagB")
    c.register_message_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    c.start()
    try:
        with Producer("AdminConnPG", namesrv_addr=ns.addr) as p:
            p.send(Message(topic, b"x"))
            conns = until(lambda: ok_json("consumerConnection", "-n", ns.addr, "-g", group)["connectionSet"])
            assert len(conns) == 1 and conns[0]["language"] == "PYTHON"
            cc = ok_json("consumerConnection", "-n", ns.addr, "-g", group)
            assert cc["subscriptionTable"][topic]["subString"] == "tagA || tagB"
            assert cc["messageModel"] == "CLUSTERING"
            text = admin("consumerConnection", "-n", ns.addr, "-g", group).stdout
            assert "Below is subscription:" in text and "tagA || tagB" in text
            # online: the broker computes the offsets and tells the consumer
            # (refused, as by 4.9.8, until the consumer has committed an offset on every queue)
            r = until(lambda: (r := admin("resetOffsetByTime", "-n", ns.addr, "-g", group, "-t", topic,
                                          "-s", "now")).returncode == 0 and r)
            assert "#Offset" in r.stdout, r.stderr
            # consumerProgress with no -g: a line per group, online ones with their clients
            groups = {g["group"]: g for g in ok_json("consumerProgress", "-n", ns.addr)}
            assert groups[group]["count"] == 1 and groups[group]["messageModel"] == "CLUSTERING"
            assert "#Diff Total" in admin("consumerProgress", "-n", ns.addr).stdout
            # queryMsgById -g -d: the message consumed again, directly, by that client
            sent_x = p.send(Message(topic, b"again"))
            client_id = conns[0]["clientId"]
            res = ok_json("queryMsgById", "-n", ns.addr, "-i", sent_x.offset_msg_id, "-g", group, "-d", client_id)
            assert res[0]["consumeResult"] == "CR_SUCCESS"
            r = admin("queryMsgById", "-n", ns.addr, "-i", sent_x.offset_msg_id, "-g", group, "-d", "nobody")
            assert r.returncode == 1 and "not online" in r.stderr
            prods = until(lambda: ok_json("producerConnection", "-n", ns.addr, "-g", "AdminConnPG", "-t", topic))
            assert len(prods) == 1 and prods[0]["language"] == "PYTHON"
    finally:
        c.shutdown()

    # updateBrokerConfig, read back with getBrokerConfig
    r = admin("updateBrokerConfig", "-n", ns.addr, "-b", b.addr, "-k", "maxMessageSize", "-v", "2097152")
    assert r.returncode == 0 and f"update broker config success, {b.addr}" in r.stdout, r.stderr
    assert ok_json("getBrokerConfig", "-n", ns.addr, "-b", b.addr)["maxMessageSize"] == "2097152"
    r = admin("updateBrokerConfig", "-n", ns.addr, "-b", b.addr, "-k", "maxMessageSize", "-v", "lots")
    assert r.returncode == 1 and "maxMessageSize" in r.stderr

    # wipeWritePerm / addWritePerm: the route's perm loses and regains its write bit
    counts = ok_json("wipeWritePerm", "-n", ns.addr, "-b", BROKER)
    assert counts[ns.addr] >= 1
    assert ok_json("topicRoute", "-n", ns.addr, "-t", topic)["queueDatas"][0]["perm"] & 2 == 0
    assert "add write perm of broker" in admin("addWritePerm", "-n", ns.addr, "-b", BROKER).stdout
    assert ok_json("topicRoute", "-n", ns.addr, "-t", topic)["queueDatas"][0]["perm"] & 2 == 2


def test_query_msg_trace_by_id(servers: tuple[ServerProcess, ServerProcess]) -> None:
    ns, _b = servers
    topic = "AdminTraceTopic"
    with Admin(ns.addr) as a:
        a.update_topic(topic, cluster=CLUSTER)
    until(lambda: topic in ok_json("topicList", "-n", ns.addr))
    consumed: list[str] = []
    producer = Producer("AdminTracePG", namesrv_addr=ns.addr, enable_trace=True)
    producer.start()
    consumer = PushConsumer("AdminTraceCG", namesrv_addr=ns.addr, enable_trace=True,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(lambda msgs: consumed.append(msgs[0].msg_id) or "CONSUME_SUCCESS")
    try:
        sent = until(lambda: producer.send(Message(topic, b"traced", properties={"KEYS": "k1"})))
        consumer.start()
        until(lambda: consumed)
        records = until(lambda: (lambda d: d if {"Pub", "SubBefore", "SubAfter"} <= {r["type"] for r in d} else None)(
            ok_json("queryMsgTraceById", "-n", ns.addr, "-i", sent.msg_id)), 30)
    finally:
        consumer.shutdown()
        producer.shutdown()
    pub = next(r for r in records if r["type"] == "Pub")
    assert (pub["group"], pub["topic"], pub["keys"], pub["success"]) == ("AdminTracePG", topic, "k1", True)
    r = admin("queryMsgTraceById", "-n", ns.addr, "-i", sent.msg_id)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
    assert lines[1].split()[:2] == ["Pub", "AdminTracePG"] and lines[1].split()[-1] == "success"
    sub = lines.index(next(x for x in lines if x.startswith("#Type") and "#ConsumerGroup" in x))
    assert lines[sub + 1].split()[:2] == ["Sub", "AdminTraceCG"]
    # no such trace topic: exit 4 as for any unknown topic; an unknown id: no records
    r = admin("queryMsgTraceById", "-n", ns.addr, "-i", sent.msg_id, "-t", "NoSuchTraceTopic")
    assert r.returncode == 4 and "NoSuchTraceTopic" in r.stderr, (r.returncode, r.stderr)
    assert ok_json("queryMsgTraceById", "-n", ns.addr, "-i", "0" * 32) == []
    assert admin("queryMsgTraceById", "-n", ns.addr).returncode == 2


def test_progress_shows_on_a_terminal_only(servers: tuple[ServerProcess, ServerProcess]) -> None:
    """Commands that ask broker after broker (clusterList, consumerProgress with no -g,
    brokerStatus / getBrokerConfig with -c) draw a progress line on a terminal's stderr and wipe
    it; piped, stderr stays empty."""
    import pty
    import select
    ns, b = servers
    for args in (["clusterList"], ["consumerProgress"], ["getBrokerConfig", "-c", CLUSTER]):
        master, slave = pty.openpty()
        try:
            r = subprocess.run([sys.executable, "-m", "fastmq.admin_cli", *args, "-n", ns.addr], stdout=subprocess.PIPE,
                               stderr=slave, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
            os.close(slave)
            slave = -1
            seen = b""
            for _ in range(100):  # what the command wrote is waiting in the terminal's buffer
                if not select.select([master], [], [], 0.5)[0]:
                    break
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other side is closed and drained
                    break
                if not chunk:
                    break
                seen += chunk
        finally:
            os.close(master)
            if slave >= 0:
                os.close(slave)
        assert r.returncode == 0 and r.stdout, args
        assert f"{args[0]}: asking".encode() in seen, (args, seen)
        assert b"\n" not in seen and seen.endswith(b"\r"), (args, seen)  # the line is wiped, nothing left
        piped = admin(*args, "-n", ns.addr)
        assert piped.returncode == 0 and piped.stderr == "", (args, piped.stderr)


def test_consume_message(servers: tuple[ServerProcess, ServerProcess]) -> None:
    """consumeMessage (ConsumeMessageCommand): its three modes, its lines and its refusals."""
    from fastmq.protocol.message_queue import MessageQueue
    ns, b = servers
    topic = "AdminConsumeTopic"
    assert admin("updateTopic", "-n", ns.addr, "-b", b.addr, "-t", topic, "-r", "2", "-w", "2").returncode == 0
    until(lambda: topic in ok_json("topicList", "-n", ns.addr))
    q0, q1 = MessageQueue(topic, BROKER, 0), MessageQueue(topic, BROKER, 1)
    with Producer("AdminConsumePG", namesrv_addr=ns.addr) as p:
        sent = [p.send_to_queue(Message(topic, b"q0-%d" % i, properties={"TAGS": "tA"}), q0) for i in range(5)]
        sent += [p.send_to_queue(Message(topic, b"q1-%d" % i, properties={"TAGS": "tB"}), q1) for i in range(3)]

    def bodies(*args: str) -> list[str]:
        return [m["body"] for pull in ok_json("consumeMessage", "-n", ns.addr, "-t", topic, *args)["pulls"]
                for m in pull["messages"]]

    # DEFAULT: every queue, oldest first
    assert bodies() == [f"q0-{i}" for i in range(5)] + [f"q1-{i}" for i in range(3)]
    r = admin("consumeMessage", "-n", ns.addr, "-t", topic)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines.count("Consume ok") == 2 and len([x for x in lines if x.startswith("MSGID: ")]) == 8
    first = next(x for x in lines if x.startswith("MSGID: "))
    assert first.startswith(f"MSGID: {sent[0].msg_id} MessageExt [brokerName={BROKER}, queueId=0, ")
    assert f"msgId={sent[0].offset_msg_id}," in first and "MIN_OFFSET=0" in first and first.endswith(" BODY: q0-0")
    assert "body=[113, 48, 45, 48]" in first and "TAGS=tA" in first  # Arrays.toString of the body's bytes
    assert f"MessageQueue [topic={topic}, brokerName={BROKER}, queueId=1] print msg finished. " \
           "status=NO_NEW_MSG, offset=3" in lines
    # -c: the older ones of the first queue only
    r = admin("consumeMessage", "-n", ns.addr, "-t", topic, "-c", "3")
    assert "The older 3 message of the 0 queue will be provided" in r.stdout.splitlines()
    assert bodies("-c", "3") == ["q0-0", "q0-1", "q0-2"]
    assert bodies("-s", "2000-01-01#00:00:00:000") == bodies()  # a time range, searched per queue
    # BYQUEUE and BYOFFSET
    assert bodies("-b", BROKER, "-i", "1") == ["q1-0", "q1-1", "q1-2"]
    assert bodies("-b", BROKER, "-i", "0", "-o", "3") == ["q0-3", "q0-4"]
    r = admin("consumeMessage", "-n", ns.addr, "-t", topic, "-b", BROKER, "-i", "0", "-c", "2")
    assert r.stdout.splitlines()[0] == "The oldler 2 message will be provided"
    assert bodies("-b", BROKER, "-i", "0", "-c", "2") == ["q0-0", "q0-1"]
    r = admin("consumeMessage", "-n", ns.addr, "-t", topic, "-b", BROKER, "-i", "0", "-o", "99")
    assert r.returncode == 0 and r.stdout.strip() == f"{q0} no matched msg, offset=99"
    # the library under it
    with Admin(ns.addr) as a:
        got = a.pull(q1, 1, 32)
        assert got.status == "FOUND" and [bytes(m.body) for m in got.messages] == [b"q1-1", b"q1-2"]
        assert (got.next_begin_offset, a.max_offset(q1), a.pull(q1, 3, 32).status) == (3, 3, "NO_NEW_MSG")
        # the console's query by topic and time: newest first, bounded, queue by queue
        now = int(time.time() * 1000) + 1000
        by_time = [bytes(m.body).decode() for m in a.messages_by_time(topic, 0, now)]
        assert sorted(by_time) == sorted(f"q0-{i}" for i in range(5)) + [f"q1-{i}" for i in range(3)]
        assert [bytes(m.body) for m in a.messages_by_time(topic, 0, now, 3)] == [b"q0-4", b"q0-3", b"q0-2"]
        assert a.messages_by_time(topic, 0, 1) == []
        with pytest.raises(ClientError, match="before the begin"):
            a.messages_by_time(topic, now, 0)
    # its refusals, in its words (exit 2, one line)
    future = str(int(time.time() * 1000) + 3_600_000)
    for args, text in ((["-i", "0"], "Please set the brokerName before queueId!"),
                       (["-b", BROKER, "-o", "1"], "Please set queueId before offset!"),
                       (["-c", "0"], "Please input a positive messageNumber!"),
                       (["-s", future], "Please set the beginTimestamp before now!"),
                       (["-e", future], "Please set the endTimestamp before now!"),
                       (["-s", "2000", "-e", "1000"], "Please make sure that the beginTimestamp is less than or "
                                                      "equal to the endTimestamp"),
                       (["-s", "yesterday"], "-s 'yesterday'")):
        r = admin("consumeMessage", "-n", ns.addr, "-t", topic, *args)
        assert (r.returncode, r.stdout) == (2, "") and text in r.stderr and r.stderr.count("\n") == 1, (args, r)
    assert admin("consumeMessage", "-n", ns.addr, "-t", "NoSuchTopic").returncode == 4
    r = admin("consumeMessage", "-n", ns.addr, "-t", topic, "-b", "no-such-broker", "-i", "0")
    assert r.returncode == 1 and "no-such-broker" in r.stderr

    # printMsg (PrintMessageSubCommand): every queue, a header line and a rule each, tags filtered
    r = admin("printMsg", "-n", ns.addr, "-t", topic)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"minOffset=0, maxOffset=5, {q0}" and lines.count("-" * 56) == 2
    assert len([x for x in lines if x.startswith("MSGID: ")]) == 8 and "Consume ok" not in lines
    data = ok_json("printMsg", "-n", ns.addr, "-t", topic, "-s", "tB")
    assert [m["body"] for p in data["pulls"] for m in p["messages"]] == ["q1-0", "q1-1", "q1-2"]
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in data["queues"]] == [(0, 0, 5), (1, 0, 3)]
    r = admin("printMsg", "-n", ns.addr, "-t", topic, "-d", "false", "-b", "2000-01-01#00:00:00:000")
    assert r.stdout.count("BODY: NOT PRINT BODY") == 8
    assert admin("printMsg", "-n", ns.addr, "-t", topic, "-c", "NoSuchCharset").returncode == 2


def test_namesrv_and_kv_config(servers: tuple[ServerProcess, ServerProcess]) -> None:
    """getNamesrvConfig / updateNamesrvConfig, updateKvConfig / deleteKvConfig."""
    ns, _b = servers
    conf = ok_json("getNamesrvConfig", "-n", ns.addr)
    assert conf[ns.addr]["orderMessageEnable"] == "false"
    text = admin("getNamesrvConfig", "-n", ns.addr).stdout
    assert text.startswith(f"============{ns.addr}============\n") and "orderMessageEnable" in text
    r = admin("updateNamesrvConfig", "-n", ns.addr, "-k", "orderMessageEnable", "-v", "true")
    assert r.returncode == 0 and r.stdout == f"update name server config success![{ns.addr}]\norderMessageEnable : true\n"
    try:
        assert ok_json("getNamesrvConfig", "-n", ns.addr)[ns.addr]["orderMessageEnable"] == "true"
    finally:
        assert admin("updateNamesrvConfig", "-n", ns.addr, "-k", "orderMessageEnable", "-v", "false").returncode == 0
    r = admin("updateNamesrvConfig", "-n", ns.addr, "-k", "kvConfigPath", "-v", "/tmp/x")
    assert r.returncode == 1 and "black list" in r.stderr and r.stderr.count("\n") == 1
    assert admin("updateNamesrvConfig", "-n", ns.addr, "-k", "orderMessageEnable").returncode == 2

    r = admin("updateKvConfig", "-n", ns.addr, "-s", "AdminNS", "-k", "k1", "-v", "v1")
    assert r.returncode == 0 and r.stdout == "create or update kv config to namespace success.\n", r.stderr
    with Admin(ns.addr) as a:
        assert a.kv_config("AdminNS", "k1") == "v1"
        r = admin("deleteKvConfig", "-n", ns.addr, "-s", "AdminNS", "-k", "k1")
        assert r.returncode == 0 and r.stdout == "delete kv config from namespace success.\n", r.stderr
        assert a.kv_config("AdminNS", "k1") is None
    assert admin("updateKvConfig", "-n", ns.addr, "-k", "k1", "-v", "v1").returncode == 2  # no -s
