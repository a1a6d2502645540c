"""Syscalls of one blocking client's lone sends against redis-py's XADD: ``strace -c -f`` of a
client process making N calls one at a time (fastmq ``Producer.send`` of 128 B to an ASYNC_FLUSH
fastmq-broker, or redis-py ``XADD`` to a redis-server), its servers started here and not traced.

    python -m benchmarks.lone_send_syscalls [--n 2000] [--out DIR]

Writes ``DIR/lone-send-syscalls-<stamp>-<sha>-{fastmq,redis}.txt`` (strace's summary table) and
prints calls per send of each. Counts, not time: strace slows every syscall.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.redis_pair import running  # noqa: E402

_CLIENT = r"""
import sys, time
kind, target, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = b"x" * 128
if kind == "fastmq":
    import fastmq
    p = fastmq.Producer("PG_SYSCALLS", namesrv_addr=target)
    p.start()
    for _ in range(200):
        p.send(fastmq.Message("SyscallBench", body))
    sys.stderr.write("MARK\n"); sys.stderr.flush()
    for _ in range(n):
        p.send(fastmq.Message("SyscallBench", body))
    p.shutdown()
else:
    import redis
    r = redis.Redis(port=int(target))
    for _ in range(200):
        r.xadd("SyscallBench", {"body": body})
    for _ in range(n):
        r.xadd("SyscallBench", {"body": body})
"""


def _table(kind: str, target: str, n: int, out: Path) -> Path:
    path = out / f"{kind}.strace"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run(["strace", "-c", "-f", "-o", str(path), sys.executable, "-c", _CLIENT, kind, target, str(n)],
                   check=True, env=env, timeout=600)
    return path


def _calls(table: str) -> dict[str, int]:
    calls: dict[str, int] = {}
    for line in table.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and not line.startswith("100.00"):
            calls[parts[-1]] = int(parts[3])
    return calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "profiles")
    a = ap.parse_args(argv)
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    with tempfile.TemporaryDirectory(prefix="fastmq-syscalls") as d:
        tmp = Path(d)
        with running(tmp) as peers:
            for kind, target in (("fastmq", peers.ns), ("redis", str(peers.redis_port))):
                table = _table(kind, target, a.n, tmp).read_text()
                dest = a.out / f"lone-send-syscalls-{stamp}-{sha}-{kind}.txt"
                dest.write_text(f"# strace -c -f of {a.n} lone sends (+200 warm-up, start-up included), {kind}\n" + table)
                calls = _calls(table)
                top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
                print(kind, dest.name, ", ".join(f"{k} {v / a.n:.2f}" for k, v in top), "(per send)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
