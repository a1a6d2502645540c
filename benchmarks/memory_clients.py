"""A process that holds N started producers, each its own client instance, for the memory
benchmarks (``test_memory_scaling.py`` reads this process's and the broker's RSS between steps).

    python memory_clients.py NAMESRV TOPIC

Each line read on stdin is a count: the process starts producers until it holds that many, each
sending one message (so each has fetched the route, connected to the NameServer and the broker
and sent its heartbeat: a registered, idle client), then prints ``ok <count>``. ``quit`` (or the
end of stdin) shuts them all down. A failure prints ``error <text>`` and exits 1.
"""
from __future__ import annotations

import asyncio
import sys

from fastmq.aio import Message, Producer
from fastmq.client.instance import ClientConfig
from fastmq.remoting.loop import run

STEP = 50  # producers started at once


async def _grow(held: list[Producer], want: int, namesrv: str, topic: str) -> None:
    while len(held) < want:
        batch = [Producer("PG_MEM", client_config=ClientConfig(namesrv_addr=namesrv, instance_name=f"mem{i}"))
                 for i in range(len(held), min(want, len(held) + STEP))]
        await asyncio.gather(*(p.start() for p in batch))
        held.extend(batch)
        await asyncio.gather(*(p.send(Message(topic, b"m")) for p in batch))


async def main(namesrv: str, topic: str) -> int:
    loop = asyncio.get_running_loop()
    held: list[Producer] = []
    try:
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if not line or line == "quit":
                return 0
            try:
                await asyncio.wait_for(_grow(held, int(line), namesrv, topic), 300)
            except Exception as exc:  # reported to the benchmark, which fails with it
                print(f"error {exc!r}", flush=True)
                return 1
            print(f"ok {len(held)}", flush=True)
    finally:
        await asyncio.wait_for(asyncio.gather(*(p.shutdown() for p in held), return_exceptions=True), 60)


if __name__ == "__main__":
    sys.exit(run(main(sys.argv[1], sys.argv[2])))
