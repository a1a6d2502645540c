"""Apache RocketMQ's Java client as a peer of a fastmq cluster: ``JavaPeer.java`` (shipped beside
this module) compiled against the client's classpath, then run to produce or consume, each run a
JVM of its own printing one JSON record a line::

    from fastmq.testing.java_peer import compile_java_peer, run_peer

    cp = compile_java_peer(tmp_path, "/opt/rocketmq/lib/*")    # needs javac
    sent, (result,), log = run_peer(cp, ["produce", cluster.namesrv_addr, "TopicTest", "10"], 120)

The commands (``produce NAMESRV TOPIC COUNT [batch] [size=N] [warm=N]``, ``consume NAMESRV TOPIC
GROUP EXPECT SECONDS [orderly] [fail=BODY] [sql=EXPR]``) are described at the top of ``JavaPeer.java``.
fastmq's interop tests and its client benchmark use it.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["PEER_SOURCE", "compile_java_peer", "run_peer"]

#: The peer's source, shipped with fastmq.
PEER_SOURCE = Path(__file__).resolve().with_name("JavaPeer.java")


def compile_java_peer(out: Path, classpath: str) -> str:
    """Compile ``JavaPeer`` into ``out`` with ``javac`` against ``classpath`` (the RocketMQ 4.x Java
    client and what it needs), bounded to 180 s; the classpath that runs it."""
    proc = subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(PEER_SOURCE)], capture_output=True,
                          text=True, timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"javac JavaPeer.java failed: {proc.stderr[-3000:]}")
    return f"{classpath}{os.pathsep}{out}"


def run_peer(cp: str, args: list[str], timeout: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """Run JavaPeer with ``args`` (bounded by ``timeout``); its SENT/MSG records, its RESULT/DONE
    record(s), and the end of its output for messages. Raises RuntimeError if it printed no end record."""
    proc = subprocess.run(["java", "-Xmx256m", "-cp", cp, "JavaPeer", *args], capture_output=True, text=True,
                          timeout=timeout)
    out = proc.stdout
    records = [json.loads(ln.split(" ", 1)[1]) for ln in out.splitlines() if ln.startswith(("SENT ", "MSG "))]
    ends = [json.loads(ln.split(" ", 1)[1]) for ln in out.splitlines() if ln.startswith(("RESULT ", "DONE "))]
    if not ends:
        raise RuntimeError(f"JavaPeer {args[0]} ended without a result (rc={proc.returncode}): "
                           f"{out[-2000:]} {proc.stderr[-3000:]}")
    return records, ends, out[-2000:] + proc.stderr[-2000:]
