"""The Java 4.9.8 client with ``-Dtls.enable=true`` against fastmq servers that take TLS only
(opt-in: needs ``FASTMQ_JAVA_CLASSPATH``, javac and the ``openssl`` command).

The NameServer and broker run ``tls.server.mode=enforcing`` with a certificate made at test time;
the Java client, in 4.9.8's default test mode, trusts any server certificate. The system property
reaches the JVM through ``JAVA_TOOL_OPTIONS``.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fastmq.remoting.tls import make_self_signed
from fastmq.testing import broker_process, namesrv_process
from fastmq.testing.java_peer import compile_java_peer, run_peer

CLASSPATH = os.environ.get("FASTMQ_JAVA_CLASSPATH", "")
pytestmark = pytest.mark.skipif(not CLASSPATH or shutil.which("javac") is None or shutil.which("openssl") is None,
                                reason="FASTMQ_JAVA_CLASSPATH (RocketMQ's Java client), javac and openssl not all set")


def test_java_client_with_tls_enable_on_an_enforcing_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cp = compile_java_peer(tmp_path / "peer", CLASSPATH)
    cert, key = make_self_signed(str(tmp_path), "server")
    keys = {"tls.server.mode": "enforcing", "tls.server.certPath": cert, "tls.server.keyPath": key,
            "tls.enable": "true", "tls.config.file": tmp_path / "absent"}
    with namesrv_process(tmp_path, **keys) as ns, broker_process(tmp_path, ns.addr, **keys):
        monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dtls.enable=true")
        sent, (result,), log = run_peer(cp, ["produce", ns.addr, "JavaTls", "5"], 120)
        assert result["ok"] == 5, log
        msgs, (done,), log = run_peer(cp, ["consume", ns.addr, "JavaTls", "GID_JAVA_TLS", "5", "60"], 120)
        assert done["complete"], log
        assert sorted(m["body"] for m in msgs) == [f"java-{i}" for i in range(5)], log
        # and without TLS the same client is refused (nothing sent)
        monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dtls.enable=false")
        try:
            _, (result,), log = run_peer(cp, ["produce", ns.addr, "JavaTls", "1"], 120)
            assert not result.get("ok"), log
        except RuntimeError:
            pass  # (no route at all: the peer gives up before its result line)
