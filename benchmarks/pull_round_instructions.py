"""Instructions per message of the broker's consume round, counted by valgrind (free of the VM's noise).

    python -m benchmarks.pull_round_instructions TREE [TREE ...] [--rounds 60] [--parts] [--out FILE]
    python -m benchmarks.pull_round_instructions --run ROUNDS [--part P]   (what runs under valgrind)

The shape of RocketMQ's benchmark Producer and push Consumer on one broker: a read of 16 sends
(one per queue, as 16 producer threads over one connection), the pulls held on those queues woken
and answered (one per queue, the consumer's one connection), and 16 new pulls that find nothing
and are held again. An in-process BrokerController (its store in a temporary directory, no
NameServer) does the work; the connections are real ``Connection`` objects over a transport that
only counts writes, so socket costs are not in the figure (see docs/performance.md, "The consume round",
for what they cost). Requests are built before the counted region; callgrind collects only inside
one ctypes callback (as benchmarks/instructions.py does), so start-up and set-up are left out.
Each TREE (a checkout with its extensions built) runs in its own valgrind process.

``--parts`` also counts two parts of the round on their own: ``sends`` (the sends and their
arrival notes, no pull woken or made) and ``held`` (only the consumer's new pulls, each finding
its queue's end and held: the first of the two passes a message costs). What is left of the
whole, the woken pulls and their answers, is the other pass.
"""
from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

QUEUES = 64
PER_READ = 16
_REGION = "_CallPythonObject"


class _CountingTransport:
    def __init__(self) -> None:
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False


async def _rounds(rounds: int, part: str = "all") -> None:
    from fastmq.broker.config import BrokerConfig
    from fastmq.broker.consumer_manager import ClientChannelInfo
    from fastmq.broker.controller import BrokerController
    from fastmq.protocol.codes import RequestCode
    from fastmq.protocol.command import create_request
    from fastmq.protocol.heartbeat import ConsumerData, SubscriptionData
    from fastmq.remoting.connection import Connection
    from fastmq.store.config import MessageStoreConfig

    d = tempfile.mkdtemp(prefix="pull-round-")
    try:
        bc = BrokerConfig()
        bc.listenPort, bc.namesrvAddr = 0, ""
        sc = MessageStoreConfig()
        sc.storePathRootDir, sc.storePathCommitLog, sc.haListenPort = d, d + "/commitlog", 0
        sc.diskMaxUsedSpaceRatio = 99  # a shared machine's full disk must not refuse the sends
        b = BrokerController(bc, sc)
        await b.start()
        disp = b.server.dispatcher
        consumer, producer = Connection(disp.dispatch), Connection(disp.dispatch)
        ct, pt = _CountingTransport(), _CountingTransport()
        consumer.transport, producer.transport = ct, pt  # type: ignore[assignment]
        consumer.remote_addr, producer.remote_addr = "127.0.0.1:1", "127.0.0.1:2"
        group, topic = "benchmark_consumer", "BenchmarkTest"
        b.consumer_manager.register(ClientChannelInfo(consumer, "c1"),
                                    ConsumerData(group, subscriptions=[SubscriptionData(topic)]))
        offs = [0] * QUEUES

        def pull(q: int) -> Any:  # the push consumer's: commit offset + suspend, no subscription
            return create_request(RequestCode.PULL_MESSAGE, {
                "consumerGroup": group, "topic": topic, "queueId": q, "queueOffset": offs[q], "maxMsgNums": 32,
                "sysFlag": 3, "commitOffset": offs[q], "suspendTimeoutMillis": 15000, "subVersion": 0,
                "expressionType": "TAG"})

        def send(q: int) -> Any:
            return create_request(RequestCode.SEND_MESSAGE_V2, {
                "a": "benchmark_producer", "b": topic, "c": "TBW102", "d": 4, "e": q, "f": 0,
                "g": 1700000000000, "h": 0, "i": "UNIQ_KEY\x01AB\x02WAIT\x01true\x02", "j": 0, "k": "false",
                "m": "false"}, b"x" * 128)

        nxt = [0]

        def plan(n: int, part: str) -> list[tuple[list[Any], list[Any]]]:
            work = []
            for _ in range(n):
                qs = [(nxt[0] + k) % QUEUES for k in range(PER_READ)]
                nxt[0] = (nxt[0] + PER_READ) % QUEUES
                sends = [send(q) for q in qs]
                for q in qs:
                    if part != "held":  # (held alone: no sends, so the pulls ask for the queues' ends)
                        offs[q] += 1
                work.append((sends, [pull(q) for q in qs]))
            return work

        def run(work: list[tuple[list[Any], list[Any]]], part: str) -> None:
            for sends, pulls in work:
                if part != "held":
                    disp.dispatch(producer, sends)
                    disp.run_gathered()                # the loop's next turn: the gathered sends
                if part == "all":
                    b.hold_service._wake_arrivals()    # and the turn after: the held pulls they serve
                if part != "sends":
                    disp.dispatch(consumer, pulls)     # the consumer pulls again: held

        disp.dispatch(consumer, [pull(q) for q in range(QUEUES)])
        run(plan(20, "all"), "all")  # warm: files made, caches filled
        work = plan(rounds, part)
        ct.writes = 0
        ctypes.CFUNCTYPE(None)(lambda: run(work, part))()
        print(json.dumps({"messages": rounds * PER_READ, "consumer_writes": ct.writes, "held": len(b.hold_service)}))
        await asyncio.sleep(0.01)
        await b.shutdown()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def count(tree: Path, rounds: int, part: str = "all") -> dict[str, Any]:
    """One valgrind process over ``tree`` (``part`` of the round): instructions per message and
    what the run reported."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={_REGION}",
                               f"--dump-after={_REGION}", f"--callgrind-out-file={d}/cg.out", sys.executable,
                               str(Path(__file__).resolve()), "--run", str(rounds), "--part", part],
                              env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"{tree}: exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        dumps = list(Path(d).glob("cg.out.*"))
        if len(dumps) != 1:
            raise RuntimeError(f"{tree}: expected one callgrind dump, found {len(dumps)}")
        m = re.search(r"^totals:\s+(\d+)", dumps[0].read_text(), re.M)
        if m is None:
            raise RuntimeError(f"{dumps[0]}: no totals line")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    top = subprocess.run(["git", "-C", str(tree), "rev-parse", "--show-toplevel"], capture_output=True,
                         text=True).stdout.strip()
    # (a tree that is not a checkout's top, such as an unpacked `git archive`, has no commit of its own)
    rev = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip() if top and Path(top).resolve() == tree.resolve() else ""
    return {"tree": str(tree), "commit": rev, "part": part, **report,
            "instructions_per_message": int(m[1]) / report["messages"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("trees", nargs="*", type=Path)
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--parts", action="store_true", help="also count the sends alone and the held pulls alone")
    p.add_argument("--run", type=int, help=argparse.SUPPRESS)
    p.add_argument("--part", choices=("all", "sends", "held"), default="all", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    a = p.parse_args()
    if a.run:
        try:
            import uvloop
            uvloop.run(_rounds(a.run, a.part))
        except ImportError:
            asyncio.run(_rounds(a.run, a.part))
        return 0
    results = [count(t, a.rounds, part) for t in a.trees for part in (("all", "sends", "held") if a.parts else ("all",))]
    for r in results:
        print(f"{r['commit'] or r['tree']} {r['part']}: {r['instructions_per_message']:,.0f} instructions per message "
              f"({r['messages']} messages, {r['consumer_writes']} consumer writes)")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"schema": "fastmq-pull-round-instructions/1", "rounds": a.rounds,
                                     "queues": QUEUES, "per_read": PER_READ, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
