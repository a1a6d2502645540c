"""Running the official C++ client's peers (cpp_peer.py, cpp_consumer_peer.py, each a subprocess with
HOME in a temp dir), for the interop tests and tests/process/test_dead_master.py."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def run_peer(script: str, args: list[str], home: Path, timeout: float) -> tuple[str, subprocess.CompletedProcess]:
    """Run ``script`` (a peer beside this file) with ``args``, bounded by ``timeout``: (its stdout, the process)."""
    proc = subprocess.run([sys.executable, str(HERE / script), *args], capture_output=True, text=True,
                          timeout=timeout, env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, cwd=home)
    return proc.stdout, proc


def produce(ns: str, topic: str, home: Path, *, body: str, tags: str, count: int, oneway: bool,
            credentials: tuple[str, str] | None = None) -> list[dict]:
    """Send ``count`` messages with the C++ Producer (sync, or oneway), signed with ``credentials``
    (access key, secret) when given; its per-message results."""
    args = ["produce", "--namesrv", ns, "--topic", topic, "--tags", tags, "--body", body, "--count", str(count)]
    if credentials:
        args += ["--access-key", credentials[0], "--secret-key", credentials[1]]
    out, proc = run_peer("cpp_peer.py", args + (["--oneway"] if oneway else []), home, 90)
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"producer printed no result (rc={proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    return json.loads(lines[-1][len("RESULT "):])["results"]
