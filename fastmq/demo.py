"""The main job of ``./scripts/demo.sh``: a local cluster from the embedded defaults, and traffic.

What runs today (issue 2): a real ``fastmq-namesrv`` process with its embedded default
configuration, a broker registration sent exactly as a RocketMQ broker sends it, and a client
that reads the route, the cluster table and the KV config back. The broker process, the demo
producer and the consumer join this script as issues 3 and 4 land; until then it says so
rather than pretending.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig, TopicRouteData
from .protocol.codes import RequestCode, ResponseCode
from .protocol.command import create_request
from .remoting import RemotingClient
from .remoting.loop import run

DEMO_TOPIC = "DemoTopic"
DEMO_CLUSTER = "DefaultCluster"
DEMO_BROKER = "broker-a"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pick_port(preferred: int) -> int:
    if _port_free(preferred):
        return preferred
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_namesrv(workdir: Path, port: int) -> subprocess.Popen:
    """Start ``fastmq-namesrv`` as a user would; only the port and paths leave the defaults."""
    props = workdir / "namesrv.properties"
    props.write_text(f"listenPort={port}\nkvConfigPath={workdir / 'kvConfig.json'}\n")
    exe = Path(sys.executable).with_name("fastmq-namesrv")
    argv = [str(exe) if exe.exists() else "fastmq-namesrv", "-c", str(props)]
    env = {**os.environ, "HOME": str(workdir)}  # the log file goes under $HOME/logs, as RocketMQ's does
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 20
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        print(f"  namesrv | {line.rstrip()}")
        if "boot success" in line:
            return proc
    proc.kill()
    raise SystemExit("fastmq-namesrv did not start; see its output above")


async def _traffic(namesrv: str) -> None:
    client = RemotingClient(namesrv_addrs=[namesrv])
    try:
        body = RegisterBrokerBody(
            topic_config_table={DEMO_TOPIC: TopicConfig(DEMO_TOPIC, read_queue_nums=4, write_queue_nums=4)},
            data_version=DataVersion())
        req = create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": DEMO_BROKER, "brokerAddr": "127.0.0.1:10911", "clusterName": DEMO_CLUSTER,
            "haServerAddr": "127.0.0.1:10912", "brokerId": 0, "compressed": False}, body.encode())
        resp = await client.invoke(namesrv, req, 3.0)
        print(f"REGISTER_BROKER {DEMO_BROKER} -> code {resp.code}")

        resp = await client.invoke_namesrv(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                          {"topic": DEMO_TOPIC}), 3.0)
        if resp.code != ResponseCode.SUCCESS or resp.body is None:
            raise SystemExit(f"route lookup failed: {resp.code} {resp.remark}")
        route = TopicRouteData.from_json(resp.body)
        print(f"GET_ROUTEINFO_BY_TOPIC {DEMO_TOPIC} ->")
        print(json.dumps(json.loads(route.to_json()), indent=2))

        resp = await client.invoke_namesrv(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                          {"topic": "NoSuchTopic"}), 3.0)
        print(f"GET_ROUTEINFO_BY_TOPIC NoSuchTopic -> code {resp.code}: {resp.remark!r}")

        await client.invoke_namesrv(create_request(RequestCode.PUT_KV_CONFIG, {
            "namespace": "ORDER_TOPIC_CONFIG", "key": DEMO_TOPIC, "value": f"{DEMO_BROKER}:4"}), 3.0)
        resp = await client.invoke_namesrv(create_request(RequestCode.GET_KV_CONFIG, {
            "namespace": "ORDER_TOPIC_CONFIG", "key": DEMO_TOPIC}), 3.0)
        print(f"KV ORDER_TOPIC_CONFIG/{DEMO_TOPIC} = {(resp.ext_fields or {}).get('value')!r}")
    finally:
        await client.close()


def main() -> int:
    """Run the demo; returns the exit status."""
    from . import _ext

    print(f"fastmq demo (compiled extensions: {'yes' if _ext.USING_EXTENSIONS else 'no, pure Python'})")
    with tempfile.TemporaryDirectory(prefix="fastmq-demo-") as tmp:
        port = _pick_port(9876)
        proc = _start_namesrv(Path(tmp), port)
        try:
            run(_traffic(f"127.0.0.1:{port}"))
            print("The broker (issue 3) and the producer/consumer (issue 4) are not built yet; "
                  "this demo stops at the NameServer.")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            print(f"fastmq-namesrv stopped (exit {rc})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
