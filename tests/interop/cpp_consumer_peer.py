"""Drive the official RocketMQ C++ client's PushConsumer (PyPI ``rocketmq==0.4.4``) in its own process.

    python tests/interop/cpp_consumer_peer.py --namesrv ADDR --topic T --group G --expect N [--fail-tag TAG]

Prints one ``MSG {json}`` line per delivery (topic, tags, keys, body, user property, reconsume
times, the status the handler returned) and ``DONE {json}`` at the end. A delivery whose tag is
``--fail-tag`` is answered RECONSUME_LATER the first time its body is seen, so it must come back
through ``%RETRY%<group>``. The process ends when ``--expect`` distinct bodies were consumed
successfully or after ``--seconds``, whichever comes first.

The callback is registered through the wrapper's private ``_register_callback`` so that it can
return RECONSUME_LATER explicitly: the public ``subscribe`` turns a raised exception into
CONSUME_SUCCESS (the exception is re-raised inside the ctypes callback).
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time


def _text(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def consume(args: argparse.Namespace) -> dict:
    from rocketmq.client import PushConsumer, RecvMessage, _CConsumeStatus, _to_bytes, dll, ffi_check

    consumer = PushConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.set_thread_count(1)
    consumer.set_message_batch_max_size(1)
    lock = threading.Lock()
    ok_keys: set[str] = set()
    failed_once: set[str] = set()
    done = threading.Event()
    count = {"deliveries": 0}

    def on_message(_consumer: object, handle: object) -> int:
        m = RecvMessage(handle)
        keys = _text(m.keys) or ""
        tags = _text(m.tags)
        body = _text(m.body) or ""
        fail = False
        with lock:
            count["deliveries"] += 1
            if args.fail_tag and tags == args.fail_tag and body not in failed_once:
                failed_once.add(body)
                fail = True
            else:
                ok_keys.add(body)
            rec = {"topic": _text(m.topic), "tags": tags, "keys": keys, "body": body,
                   "user_prop": _text(m.get_property(args.prop)), "retry_topic": _text(m.get_property("RETRY_TOPIC")),
                   "reconsume_times": int(m.reconsume_times), "queue_id": int(m.queue_id),
                   "status": "RECONSUME_LATER" if fail else "CONSUME_SUCCESS"}
            print("MSG " + json.dumps(rec), flush=True)
            if len(ok_keys) >= args.expect:
                done.set()
        return _CConsumeStatus.RECONSUME_LATER.value if fail else _CConsumeStatus.CONSUME_SUCCESS.value

    ffi_check(dll.Subscribe(consumer._handle, _to_bytes(args.topic), _to_bytes(args.expression)))
    consumer._register_callback(on_message)
    consumer.start()
    t0 = time.monotonic()
    try:
        done.wait(args.seconds)
    finally:
        consumer.shutdown()
    with lock:
        return {"ok_bodies": sorted(ok_keys), "failed_once": sorted(failed_once), "deliveries": count["deliveries"],
                "complete": len(ok_keys) >= args.expect, "elapsed": round(time.monotonic() - t0, 2)}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--namesrv", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", default="GID_FASTMQ_CPP_PUSH")
    p.add_argument("--expression", default="*")
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--fail-tag", default=None)
    p.add_argument("--prop", default="userProp", help="the user property to report")
    p.add_argument("--seconds", type=float, default=60.0)
    args = p.parse_args()
    out = consume(args)
    print("DONE " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
