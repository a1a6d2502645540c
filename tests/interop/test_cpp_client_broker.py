"""Acceptance 1 of the broker issue: the official RocketMQ C++ client against fastmq-namesrv + fastmq-broker.

Its Producer sends with send_sync and send_oneway (keys, tags, a user property); its PushConsumer
(clustering) receives every message with the same body, keys, tags and property; a handler that
answers RECONSUME_LATER once gets the message again through ``%RETRY%<group>``. The client runs in
subprocesses (tests/interop/cpp_peer.py, tests/interop/cpp_consumer_peer.py) with HOME in a temp dir.
"""
from __future__ import annotations

import json

import pytest

from tests.interop.cpp_runner import produce, run_peer

pytestmark = [pytest.mark.cpp_client, pytest.mark.slow]


def test_cpp_producer_and_push_consumer_with_retry(cpp_cluster):
    namesrv, broker, home = cpp_cluster
    topic = "CppAcceptance"
    sync = produce(namesrv.addr, topic, home, body="sync", tags="TagA", count=6, oneway=False)
    assert all(r["ok"] and r["status"] == 0 for r in sync), sync
    oneway = produce(namesrv.addr, topic, home, body="oneway", tags="TagFail", count=3, oneway=True)
    assert all(r["ok"] for r in oneway), oneway

    expected = {f"sync-{i}": ("TagA", f"key-{i}", f"value-{i}") for i in range(6)}
    expected.update({f"oneway-{i}": ("TagFail", f"key-{i}", f"value-{i}") for i in range(3)})
    out, proc = run_peer("cpp_consumer_peer.py", ["--namesrv", namesrv.addr, "--topic", topic,
                                                  "--group", "GID_FASTMQ_ACCEPT", "--expect", str(len(expected)),
                                                  "--fail-tag", "TagFail", "--seconds", "60"], home, 120)
    deliveries = [json.loads(ln[4:]) for ln in out.splitlines() if ln.startswith("MSG ")]
    done = [json.loads(ln[5:]) for ln in out.splitlines() if ln.startswith("DONE ")]
    assert done, f"consumer did not finish (rc={proc.returncode}): {out[-3000:]} {proc.stderr[-2000:]}"
    assert done[0]["complete"], (done, deliveries)

    ok = {d["body"]: d for d in deliveries if d["status"] == "CONSUME_SUCCESS"}
    assert set(ok) == set(expected)
    for d in deliveries:
        tags, keys, prop = expected[d["body"]]
        assert (d["topic"], d["tags"], d["keys"], d["user_prop"]) == (topic, tags, keys, prop), d
    # every TagFail message was refused once, then came back through the retry topic
    for body in (b for b, v in expected.items() if v[0] == "TagFail"):
        firsts = [d for d in deliveries if d["body"] == body]
        assert firsts[0]["status"] == "RECONSUME_LATER" and firsts[0]["reconsume_times"] == 0
        assert ok[body]["reconsume_times"] >= 1 and ok[body]["retry_topic"] == topic
