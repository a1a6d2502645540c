"""The responders of ``test_request_reply_vs_redis.py``, in a process of their own (a responder is
another program than its requester), both on one asyncio loop, each idle while the other's
requests run:

- fastmq: a ``PushConsumer`` of TOPIC whose ``async def`` listener answers each request with
  ``create_reply_message`` sent by a ``Producer`` (RocketMQ's ResponseConsumer);
- Redis, as a Python user builds RPC on it: ``XREADGROUP BLOCK`` on the request stream, then one
  pipeline of ``LPUSH`` (the body, prefixed with the request's correlation id, to the reply list
  the request names) and ``XACK``.

    python -m benchmarks.rpc_responders NAMESRV REDIS_PORT

Prints ``READY`` once both read; ends when its stdin closes.
"""
from __future__ import annotations

import asyncio
import sys
from typing import Any

import fastmq.aio as aio

TOPIC = "RpcBenchRequests"
STREAM = "rpc:requests"
GROUP = "rpc-responders"


async def main(ns: str, redis_port: int) -> None:
    import redis.asyncio as aredis
    replier = aio.Producer("PG_RPC_BENCH_REPLY", namesrv_addr=ns)
    await replier.start()

    async def respond(msgs: list[aio.MessageExt]) -> aio.ConsumeStatus:
        for m in msgs:
            await replier.send(aio.create_reply_message(m, m.body))
        return aio.ConsumeStatus.CONSUME_SUCCESS
    consumer = aio.PushConsumer("CG_RPC_BENCH", namesrv_addr=ns, consume_from_where="CONSUME_FROM_LAST_OFFSET")
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(respond)
    await consumer.start()

    rds: Any = aredis.Redis(host="127.0.0.1", port=redis_port)
    try:
        await rds.xgroup_create(STREAM, GROUP, id="$", mkstream=True)
    except Exception:  # BUSYGROUP: made by an earlier run
        pass

    async def redis_responder() -> None:
        while True:
            got = await rds.xreadgroup(GROUP, "r1", {STREAM: ">"}, count=1, block=0)
            for _stream, entries in got:
                for entry_id, fields in entries:
                    pipe = rds.pipeline(transaction=False)
                    pipe.lpush(fields[b"reply_to"], fields[b"cid"] + b":" + fields[b"body"])
                    pipe.xack(STREAM, GROUP, entry_id)
                    await pipe.execute()
    task = asyncio.ensure_future(redis_responder())
    print("READY", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the benchmark closes our stdin
    task.cancel()
    await consumer.shutdown()
    await replier.shutdown()
    await rds.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
