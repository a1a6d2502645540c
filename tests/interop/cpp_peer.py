"""Drive the official RocketMQ C++ client (PyPI ``rocketmq==0.4.4``) the way a user would.

Run as a separate process (``python tests/interop/cpp_peer.py produce ...``) with HOME set to a scratch
directory: librocketmq.so starts its own threads, writes logs under $HOME and can abort the
process, none of which may touch the pytest process. Prints one line ``RESULT {json}``:
``{"results": [{"topic", "ok", "status", "msg_id", "offset"} or {"topic", "ok": false, "error"}]}``,
one entry per message, in send order, plus ``elapsed_s`` (the send loop's wall time) and ``ok``
(how many succeeded); ``--quiet`` keeps only the first three entries, for long timing runs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def produce(args: argparse.Namespace) -> dict[str, Any]:
    from rocketmq.client import Message, Producer

    producer = Producer(args.group, timeout=args.timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    if args.access_key:  # ACL: the client signs every request (its SessionCredentials)
        producer.set_session_credentials(args.access_key, args.secret_key, "")
    producer.start()
    results: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    try:
        for topic in args.topic:
            for i in range(args.count):
                msg = Message(topic)
                msg.set_keys(f"key-{i}")
                msg.set_tags(args.tags)
                msg.set_property("userProp", f"value-{i}")
                msg.set_body(f"{args.body}-{i}")
                entry: dict[str, Any] = {"topic": topic}
                try:
                    if args.oneway:
                        producer.send_oneway(msg)
                        entry["ok"] = True
                    else:
                        r = producer.send_sync(msg)
                        entry.update(ok=True, status=int(r.status), msg_id=r.msg_id, offset=r.offset)
                except Exception as exc:  # the wrapper raises its own exception types; report the text
                    entry.update(ok=False, error=f"{type(exc).__name__}: {exc}")
                results.append(entry)
    finally:
        elapsed = time.perf_counter() - t0
        producer.shutdown()
    return {"results": results[:3] if args.quiet else results, "elapsed_s": elapsed,
            "ok": sum(1 for r in results if r["ok"])}


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("produce")
    pr.add_argument("--namesrv", required=True)
    pr.add_argument("--topic", required=True, action="append", help="repeat to send to several topics in turn")
    pr.add_argument("--group", default="PG_FASTMQ_TEST")
    pr.add_argument("--tags", default="TagA")
    pr.add_argument("--body", default="hello from the C++ client")
    pr.add_argument("--count", type=int, default=1, help="messages per topic")
    pr.add_argument("--oneway", action="store_true")
    pr.add_argument("--timeout-ms", type=int, default=3000)
    pr.add_argument("--quiet", action="store_true", help="report only the first results (long timing runs)")
    pr.add_argument("--access-key", default="", help="sign the requests (ACL) with this key ...")
    pr.add_argument("--secret-key", default="", help="... and this secret")
    args = p.parse_args()
    out = produce(args)
    print("RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
