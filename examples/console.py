"""Console: `fastmq-admin console` started from Python, its JSON API asked once.

Uses the NameServer in ``NAMESRV_ADDR`` (default ``127.0.0.1:9876``): creates ``ExampleConsoleTopic``
on every master of the first cluster, sends one message, starts the console on a free port of
127.0.0.1 (what ``fastmq-admin console -n $NAMESRV_ADDR --port 8080`` serves, in this process),
then reads ``/api/topics``, ``/api/topics/ExampleConsoleTopic`` and the topic's messages of the
last minutes (``/api/messages``, the query by topic and time) as the pages do. Open the
printed address in a browser to see the pages while it runs (``--keep`` keeps it up until Ctrl-C).

Exits 0 once the console listed the topic, counted its message and found it by time, 1 otherwise (about 30 s).
"""
import asyncio
import os
import socket
import sys
import time

import aiohttp
from aiohttp import web

from fastmq.aio import Message, Producer
from fastmq.client.admin import Admin
from fastmq.console.app import ConsoleSettings, create_app

NAMESRV = os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
TOPIC = "ExampleConsoleTopic"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def main() -> int:
    async with Admin(NAMESRV) as admin:
        cluster = sorted((await admin.cluster_info()).cluster_addr_table)[0]
        await admin.update_topic(TOPIC, cluster=cluster, read_queue_nums=2, write_queue_nums=2)
        deadline = time.monotonic() + 30
        while TOPIC not in await admin.topic_list() and time.monotonic() < deadline:
            await asyncio.sleep(0.2)  # the broker registers the new topic with the NameServer
    begin_ms = int(time.time() * 1000) - 1000
    async with Producer("ExampleConsoleProducer", namesrv_addr=NAMESRV) as producer:
        print("sent", (await producer.send(Message(TOPIC, b"hello from the console example"))).msg_id)
    end_ms = int(time.time() * 1000) + 1000

    port = free_port()
    runner = web.AppRunner(create_app(ConsoleSettings(NAMESRV, host="127.0.0.1", port=port)))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"http://127.0.0.1:{port}"
    print("console on", url + "/")
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "/api/topics") as r:
                topics = [t["topic"] for t in (await r.json())["topics"]]
            print("topics:", ", ".join(t for t in topics if not t.startswith(("%", "RMQ_"))))
            async with http.get(f"{url}/api/topics/{TOPIC}") as r:
                detail = await r.json()
            print(f"{TOPIC}: {detail['messages']} message(s) over {len(detail['queues'])} queues")
            async with http.get(f"{url}/api/messages", params={"topic": TOPIC, "begin": begin_ms, "end": end_ms}) as r:
                by_time = [m["body"] for m in (await r.json())["messages"]]
            print(f"stored in the last seconds: {by_time}")
            if "--keep" in sys.argv:
                await asyncio.Event().wait()
    finally:
        await runner.cleanup()
    return 0 if TOPIC in topics and detail["messages"] >= 1 and "hello from the console example" in by_time else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
