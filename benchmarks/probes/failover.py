"""What a producer sees when a broker dies: issue 17's failover scenario as a benchmark.

    python benchmarks/probes/failover.py --out DIR [--runs blocking:quiet,blocking:busy,aio:busy]

Each run starts two NameServers and two brokers on loopback, sends a message every few ms,
kills NameServer 1 and then broker a with SIGKILL (``busy``: pauses broker b for 700 ms right
after), restarts a and waits until a consumer group of two has consumed every acknowledged
message (fastmq.testing.failover). Writes ``DIR/failover.json``: per run, the longest stall
(the longest gap between two acknowledgements), the p99 and max send latency from a's death on,
the tries spent on the dead broker, sends ok and failed, and what was not consumed. It runs the
checkout it lives in (its root goes first on ``sys.path``). The clients' warnings go to
``DIR/failover.log``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastmq.testing.failover import run_failover  # noqa: E402


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="directory for failover.json")
    ap.add_argument("--runs", default="blocking:quiet,blocking:busy,aio:quiet,aio:busy",
                    help="comma-separated api:load pairs (api: blocking or aio; load: quiet or busy)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    # the clients' warnings (each failed try, each broker marked) go to a file beside the result
    logging.basicConfig(filename=args.out / "failover.log", level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    results = []
    for spec in args.runs.split(","):
        api, _, load = spec.strip().partition(":")
        if api not in ("blocking", "aio") or load not in ("quiet", "busy"):
            ap.error(f"bad run {spec!r}: expected blocking|aio:quiet|busy")
        with tempfile.TemporaryDirectory(prefix="fastmq-failover-") as tmp:
            t0 = time.monotonic()
            out = asyncio.run(run_failover(Path(tmp), api=api, busy=load == "busy"))
            d = out.as_dict()
            d["wall_s"] = round(time.monotonic() - t0, 1)
            results.append(d)
            print(f"{api}:{load}: ok {out.sends_ok}, failed {out.sends_failed}, longest stall "
                  f"{out.longest_stall_ms:.0f} ms, p99 {out.p99_send_ms_during_failover:.1f} ms, tries on dead broker "
                  f"{out.tries_on_a_after_death}, not consumed {out.not_consumed}", flush=True)
    doc = {"workload": "failover", "commit": _commit(), "python": platform.python_version(),
           "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": results}
    (args.out / "failover.json").write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if all(r["sends_failed"] == 0 and r["not_consumed"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
