"""Drive the official RocketMQ C++ client (PyPI ``rocketmq==0.4.4``) the way a user would.

Run as a separate process (``python tests/cpp_peer.py produce ...``): librocketmq.so starts its own
threads, writes logs under $HOME and can abort the process, none of which may touch the pytest
process. Prints one JSON line with the outcome.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def produce(args: argparse.Namespace) -> dict:
    from rocketmq.client import Message, Producer

    producer = Producer(args.group, timeout=args.timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    results = []
    t0 = time.perf_counter()
    try:
        for i in range(args.count):
            msg = Message(args.topic)
            msg.set_keys(f"key-{i}")
            msg.set_tags(args.tags)
            msg.set_property("userProp", f"value-{i}")
            msg.set_body(f"{args.body}-{i}")
            try:
                if args.oneway:
                    producer.send_oneway(msg)
                    results.append({"ok": True})
                else:
                    r = producer.send_sync(msg)
                    results.append({"ok": True, "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset})
            except Exception as exc:  # the wrapper raises its own exception types; report the text
                results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        elapsed = time.perf_counter() - t0
        producer.shutdown()
    return {"results": results if not args.quiet else results[:3], "elapsed_s": elapsed,
            "ok": sum(1 for r in results if r["ok"])}


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("produce")
    pr.add_argument("--namesrv", required=True)
    pr.add_argument("--topic", required=True)
    pr.add_argument("--group", default="PG_FASTMQ_TEST")
    pr.add_argument("--tags", default="TagA")
    pr.add_argument("--body", default="hello from the C++ client")
    pr.add_argument("--count", type=int, default=1)
    pr.add_argument("--oneway", action="store_true")
    pr.add_argument("--timeout-ms", type=int, default=3000)
    pr.add_argument("--quiet", action="store_true", help="report only the first results (for long runs)")
    args = p.parse_args()
    out = produce(args)
    print("RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
