"""The main job of ``./scripts/demo.sh``: a local cluster from the embedded defaults, then traffic.

It starts a real ``fastmq-namesrv`` and a real ``fastmq-broker`` (their embedded default
configuration; only ports and directories are chosen here, in a temporary directory), sends
messages with the fastmq Producer, consumes them with a PushConsumer (one of them once refused,
so it comes back through the retry topic).
"""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .aio import Message, MessageExt, Producer
from .client.push_consumer import ConsumeStatus, PushConsumer
from .remoting.loop import run

DEMO_TOPIC = "DemoTopic"
DEMO_MESSAGES = 10


def _say(line: str) -> None:
    """One whole line per write: listeners run on several consumer threads at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _port(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
            return port


def _start(cmd: str, args: list[str], workdir: Path, ready: str) -> subprocess.Popen[str]:
    """Start a fastmq command as a user would and wait (bounded) for its boot line."""
    exe = Path(sys.executable).with_name(cmd)
    argv = [str(exe) if exe.exists() else cmd, *args]
    env = {**os.environ, "HOME": str(workdir)}  # logs go under $HOME/logs, as RocketMQ's do
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if ready in line:
            print(f"  {cmd} | {line.rstrip()}")
            return proc
    proc.kill()
    raise SystemExit(f"{cmd} did not start")


def _stop(proc: subprocess.Popen[str], name: str) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    print(f"{name} stopped (exit {rc})")


async def _traffic(namesrv: str) -> None:
    async with Producer("DemoProducerGroup", namesrv_addr=namesrv) as producer:
        for i in range(DEMO_MESSAGES):
            tag = "TagA" if i % 2 == 0 else "TagB"
            r = await producer.send(Message(DEMO_TOPIC, f"Hello fastmq {i}".encode(),
                                            properties={"TAGS": tag, "KEYS": f"order-{i}"}))
            print(f"sent #{i} {tag}: {r.status} msg_id={r.msg_id} queue={r.message_queue.queue_id} "
                  f"offset={r.queue_offset}")

    received: list[str] = []
    refused: set[str] = set()

    def listener(msgs: list[MessageExt]) -> str:
        for m in msgs:
            uid = m.properties.get("UNIQ_KEY", "")
            if m.body.endswith(b" 4") and uid not in refused:
                refused.add(uid)
                _say(f"consumer: RECONSUME_LATER for {m.body.decode()} (it will come back via the retry topic)")
                return ConsumeStatus.RECONSUME_LATER
            received.append(m.body.decode())
            _say(f"consumer: {m.body.decode()!r} tag={m.tags} keys={m.properties.get('KEYS')} "
                 f"reconsume_times={m.reconsume_times}")
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("DemoConsumerGroup", namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(DEMO_TOPIC, "TagA || TagB")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        deadline = time.monotonic() + 40  # the retried message waits out delay level 3 (10 s)
        while len(set(received)) < DEMO_MESSAGES and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
    finally:
        await consumer.shutdown()
    print(f"consumed {len(set(received))} of {DEMO_MESSAGES} messages")
    if len(set(received)) < DEMO_MESSAGES:
        raise SystemExit("demo: not every message came back")


def main() -> int:
    """Run the demo; returns the exit status."""
    from . import _ext

    print(f"fastmq demo (compiled extensions: {'yes' if _ext.USING_EXTENSIONS else 'no, pure Python'})")
    with tempfile.TemporaryDirectory(prefix="fastmq-demo-") as tmp:
        work = Path(tmp)
        ns_port, broker_port = _port(9876), _port(10911)
        (work / "namesrv.properties").write_text(f"listenPort={ns_port}\nkvConfigPath={work / 'kvConfig.json'}\n")
        namesrv = _start("fastmq-namesrv", ["-c", str(work / "namesrv.properties")], work, "boot success")
        try:
            (work / "broker.conf").write_text(
                f"namesrvAddr=127.0.0.1:{ns_port}\nlistenPort={broker_port}\nhaListenPort={_port(10912)}\n"
                f"brokerIP1=127.0.0.1\n"
                f"storePathRootDir={work / 'store'}\nmappedFileSizeCommitLog=67108864\n")
            broker = _start("fastmq-broker", ["-c", str(work / "broker.conf")], work, "boot success")
            try:
                run(_traffic(f"127.0.0.1:{ns_port}"))
            finally:
                _stop(broker, "fastmq-broker")
        finally:
            _stop(namesrv, "fastmq-namesrv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
