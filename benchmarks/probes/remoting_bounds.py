"""Peak memory of a broker / NameServer under hostile remoting loads (issue 15 item 6).

Run against the code on PYTHONPATH (so the same script measures before and after a change):

    PYTHONPATH=$PWD .venv/bin/python benchmarks/probes/remoting_bounds.py [scenario ...]

Scenarios: ``longpoll`` (clients park pulls carrying 4 MiB bodies, then disconnect),
``partial`` (40 connections each send most of a 16 MiB frame and stall), ``register`` (a
compressed REGISTER_BROKER body of ~2.5 MiB naming 1,000,000 topics). Memory is the server's
VmRSS from /proc; each line says what was measured.
"""
from __future__ import annotations

import socket
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastmq._ext.codec import encode_frame  # noqa: E402
from fastmq.protocol.codes import RequestCode  # noqa: E402
from fastmq.protocol.command import create_request  # noqa: E402
from fastmq.testing import broker_process, namesrv_process  # noqa: E402

MiB = 1024 * 1024
TOPICS = 1_000_000  # ~2.5 MiB compressed, ~32 MiB inflated


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def alive(addr: str, timeout: float = 10.0) -> float:
    """Seconds a GET_ROUTEINFO_BY_TOPIC round trip takes (any answer counts)."""
    host, port = addr.rsplit(":", 1)
    t0 = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(encode_frame(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})))
        head = s.recv(4)
        assert len(head) == 4, "no answer"
    return time.monotonic() - t0


def longpoll(tmp: Path) -> None:
    ns = namesrv_process(tmp).start()
    b = broker_process(tmp, ns.addr, mappedFileSizeCommitLog=16 * MiB).start()
    try:
        assert b.proc is not None
        pid = b.proc.pid
        host, port = "127.0.0.1", b.port
        # make the topic exist (a send auto-creates it) so the pulls park as caught up
        with socket.create_connection((host, port)) as s:
            s.sendall(encode_frame(create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "BoundsT", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
                "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})))
            s.recv(65536)
        base = rss_mib(pid)
        body = b"L" * (4 * MiB)
        peak = base
        for _round in range(3):
            socks = []
            for c in range(5):
                s = socket.create_connection((host, port))
                for q in range(24):
                    s.sendall(encode_frame(create_request(RequestCode.PULL_MESSAGE, {
                        "consumerGroup": "GID_BOUNDS", "topic": "BoundsT", "queueId": q % 4, "queueOffset": 0,
                        "maxMsgNums": 32, "sysFlag": 2 | 4, "commitOffset": 0, "suspendTimeoutMillis": 600000,
                        "subscription": "*", "subVersion": 0}, body=body)))
                socks.append(s)
            time.sleep(1.5)
            peak = max(peak, rss_mib(pid))
            for s in socks:
                s.close()
            time.sleep(1.5)
        after = rss_mib(pid)
        print(f"longpoll: 3 rounds x 5 clients x 24 held pulls with 4 MiB bodies, closed after each round: "
              f"broker VmRSS {base:.0f} MiB at start, peak {peak:.0f} MiB, {after:.0f} MiB 1.5 s after the last "
              f"close (+{after - base:.0f} MiB held); answers in {alive(ns.addr):.3f} s")
    finally:
        b.stop()
        ns.stop()


def partial(tmp: Path) -> None:
    ns = namesrv_process(tmp).start()
    b = broker_process(tmp, ns.addr, mappedFileSizeCommitLog=16 * MiB).start()
    try:
        assert b.proc is not None
        pid = b.proc.pid
        base = rss_mib(pid)
        socks = []
        chunk = b"P" * MiB
        refused = 0
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", b.port))
            s.settimeout(5)
            try:
                s.sendall(struct.pack(">I", 16 * MiB - 4))
                for _ in range(15):
                    s.sendall(chunk)
            except OSError:
                refused += 1
            socks.append(s)
        time.sleep(1.0)
        peak = rss_mib(pid)
        closed = 0
        for s in socks:
            try:
                s.settimeout(0.2)
                if s.recv(1) == b"":
                    closed += 1
            except socket.timeout:
                pass
            except OSError:
                closed += 1
        for s in socks:
            s.close()
        print(f"partial: 40 connections x 15 MiB of a 16 MiB frame: broker VmRSS {base:.0f} MiB at start, "
              f"{peak:.0f} MiB with them open (+{peak - base:.0f} MiB); {closed} of 40 closed by the broker; "
              f"answers in {alive(b.addr):.3f} s")
    finally:
        b.stop()
        ns.stop()


def _compact_register_body(topics: int) -> bytes:
    """A compressed REGISTER_BROKER body (RegisterBrokerBody.encode's layout) with ``topics`` topics."""
    dv = b'{"counter":1,"timestamp":1}'
    parts = [struct.pack(">i", len(dv)), dv, struct.pack(">i", topics)]
    for i in range(topics):
        t = b"T%09d 8 8 6 SINGLE_TAG" % i
        parts += [struct.pack(">i", len(t)), t]
    parts += [struct.pack(">i", 2), b"[]"]
    return zlib.compress(b"".join(parts), 9)


def register(tmp: Path) -> None:
    ns = namesrv_process(tmp).start()
    try:
        assert ns.proc is not None
        pid = ns.proc.pid
        base = rss_mib(pid)
        body = _compact_register_body(TOPICS)
        req = create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": "evil", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "haServerAddr": "127.0.0.1:2",
            "brokerId": 0, "compressed": "true", "bodyCrc32": 0}, body=body)
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", ns.port), timeout=300) as s:
            s.sendall(encode_frame(req))
            time.sleep(0.2)
            try:
                probe = f"{alive(ns.addr, 60):.3f} s"   # while the registration is being handled
            except TimeoutError:
                probe = "no answer within 60 s"
            s.recv(4)
            took = time.monotonic() - t0
            peak = rss_mib(pid)
        print(f"register: {len(body) / MiB:.1f} MiB zlib body of {TOPICS:,} topics: the NameServer answered it in "
              f"{took:.2f} s, another client's request sent 0.2 s after it: {probe}; VmRSS {base:.0f} -> "
              f"{peak:.0f} MiB")
    finally:
        ns.stop()


SCENARIOS = {"longpoll": longpoll, "partial": partial, "register": register}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(SCENARIOS):
        with tempfile.TemporaryDirectory() as d:
            SCENARIOS[name](Path(d))
