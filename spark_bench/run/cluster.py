"""The systems under test, seen from the driver: embedded servers and the admin requests.

With no ``--namesrv`` a run starts a local ``fastmq-namesrv`` and ``fastmq-broker`` (temporary
store) and stops them after; ``redis-streams`` starts a local ``redis-server`` the same way
(AOF ``everysec`` beside the broker's ASYNC_FLUSH, ``always`` beside SYNC_FLUSH). Against any
RocketMQ 4.x cluster the driver creates the workload's topics on every master
(UPDATE_AND_CREATE_TOPIC), reads the brokers' own counters (GET_TOPIC_STATS_INFO: stored;
GET_CONSUME_STATS: consumed) and removes the topics after.
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastmq.testing import ServerProcess

__all__ = ["BenchError", "EmbeddedProcess", "start_fastmq", "start_redis", "RocketAdmin", "RedisAdmin"]


class BenchError(RuntimeError):
    """A run that cannot go on; the text says why (it goes to result.json and the terminal)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with {proc.returncode} before listening: "
                             f"{log.read_text(errors='replace')[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise BenchError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f}s")


class EmbeddedProcess:
    """A server this run started; ``stop()`` ends it (by its PID) and removes its directory."""

    def __init__(self, argv: list[str], port: int, workdir: Path, what: str, owns_dir: bool = True) -> None:
        self.port, self.workdir, self.what, self.owns_dir = port, workdir, what, owns_dir
        self.log = workdir / f"{what}.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(argv, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        try:
            _wait_port(port, self.proc, what, self.log)
        except BaseException:
            self.stop()
            raise

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _script(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        raise BenchError(f"{name} not found next to {sys.executable} nor on PATH: install fastmq there")
    return found


def start_fastmq(base: Path, flush: str = "ASYNC_FLUSH") -> tuple[ServerProcess, ServerProcess]:
    """A local NameServer and broker (store under ``base``), started and registered."""
    from fastmq.testing import EmbeddedCluster

    # the broker's own commit-log file size (1 GiB): fastmq.testing's default is sized for tests
    conf = {"brokerName": "bench-broker", "brokerClusterName": "BenchCluster", "flushDiskType": flush,
            "autoCreateTopicEnable": "false", "mappedFileSizeCommitLog": 1 << 30}
    try:
        cluster = EmbeddedCluster(base, broker_conf=conf).start()
    except (OSError, RuntimeError, TimeoutError) as exc:
        raise BenchError(f"the embedded fastmq cluster did not start: {exc}") from exc
    assert cluster.namesrv is not None
    return cluster.namesrv, cluster.brokers[0]


def start_redis(base: Path, flush: str = "ASYNC_FLUSH") -> EmbeddedProcess:
    """A local redis-server with AOF on, fsync matched to the broker's flush mode."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise BenchError("redis-server is not installed (e.g. apt-get install redis-server): "
                         "the redis-streams driver starts one locally")
    port = _free_port()
    d = base / "redis"
    d.mkdir(parents=True, exist_ok=True)
    fsync = "always" if flush == "SYNC_FLUSH" else "everysec"
    return EmbeddedProcess([exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d), "--save", "",
                            "--appendonly", "yes", "--appendfsync", fsync, "--daemonize", "no"], port, d, "redis")


def _run(coro: Any) -> Any:
    from fastmq.remoting.loop import run
    return run(coro)


class RocketAdmin:
    """Admin requests to a RocketMQ 4.x cluster (fastmq's or Apache's) through its NameServer."""

    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv
        self.masters: dict[str, str] = {}

    async def _ask(self, addr: str, code: int, fields: dict[str, Any], timeout: float = 5.0) -> Any:
        from fastmq.protocol.command import create_request
        from fastmq.remoting import RemotingClient
        c = RemotingClient()
        try:
            return await c.invoke(addr, create_request(code, fields), timeout)
        finally:
            await c.close()

    def _ask_ns(self, code: int, fields: dict[str, Any]) -> Any:
        problems = []
        for addr in self.namesrv.split(";"):
            try:
                return _run(self._ask(addr.strip(), code, fields))
            except Exception as exc:  # every NameServer is tried before giving up
                problems.append(f"{addr}: {type(exc).__name__}: {exc}")
        raise BenchError(f"NameServer {self.namesrv} unreachable ({'; '.join(problems)})")

    def connect(self, wait_s: float = 30.0) -> dict[str, str]:
        """The cluster's masters (broker name -> address), from GET_BROKER_CLUSTER_INFO, waiting
        up to ``wait_s`` for the first master: a broker listens before its first registration
        reaches the NameServer, and on a loaded machine that gap reached the first ask."""
        from fastmq.protocol.bodies import ClusterInfo
        from fastmq.protocol.codes import RequestCode, ResponseCode
        deadline = time.monotonic() + wait_s
        while True:
            r = self._ask_ns(RequestCode.GET_BROKER_CLUSTER_INFO, {})
            if r.code != ResponseCode.SUCCESS:
                raise BenchError(f"NameServer {self.namesrv}: cluster info refused: code {r.code} {r.remark}")
            info = ClusterInfo.from_json(r.body or b"{}")
            self.masters = {name: bd.broker_addrs[0] for name, bd in sorted(info.broker_addr_table.items())
                            if 0 in bd.broker_addrs}
            if self.masters:
                return self.masters
            if time.monotonic() >= deadline:
                raise BenchError(f"NameServer {self.namesrv} knows no master broker (waited {wait_s:.0f}s)")
            time.sleep(0.2)

    def create_topic(self, topic: str, queues: int) -> None:
        """UPDATE_AND_CREATE_TOPIC on every master, then wait (bounded) for the route."""
        from fastmq.protocol.codes import RequestCode, ResponseCode
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}
        for name, addr in self.masters.items():
            try:
                r = _run(self._ask(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
            except Exception as exc:
                raise BenchError(f"cannot create topic {topic} on {name} ({addr}): {type(exc).__name__}: {exc}")
            if r.code != ResponseCode.SUCCESS:
                raise BenchError(f"cannot create topic {topic} on {name} ({addr}): code {r.code}: {r.remark}")
        deadline = time.monotonic() + 35
        while time.monotonic() < deadline:
            if self._ask_ns(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).code == ResponseCode.SUCCESS:
                return
            time.sleep(0.2)
        raise BenchError(f"topic {topic} was created on the brokers but the NameServer has no route for it")

    def delete(self, topics: list[str], groups: list[str]) -> None:
        from fastmq.protocol.codes import RequestCode
        for addr in self.masters.values():
            for t in topics:
                _run(self._ask(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": t}))
            for g in groups:
                _run(self._ask(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": g, "removeOffset": "true"}))
        for t in topics:
            self._ask_ns(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": t})

    def stored(self, topics: list[str]) -> int:
        """Messages stored in ``topics``: the sum of every queue's max offset on every master."""
        from fastmq.protocol.bodies import loads_mq_keyed
        from fastmq.protocol.codes import RequestCode, ResponseCode
        total = 0
        for name, addr in self.masters.items():
            for t in topics:
                r = _run(self._ask(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": t}))
                if r.code != ResponseCode.SUCCESS:
                    raise BenchError(f"topic stats of {t} on {name}: code {r.code}: {r.remark}")
                total += sum(int(v["maxOffset"]) for v in loads_mq_keyed(r.body)["offsetTable"].values())
        return total

    def consumed(self, pairs: list[tuple[str, str]]) -> int:
        """Committed consumer offsets summed over (group, topic) pairs and masters."""
        from fastmq.protocol.bodies import loads_mq_keyed
        from fastmq.protocol.codes import RequestCode, ResponseCode
        total = 0
        for name, addr in self.masters.items():
            for g, t in pairs:
                r = _run(self._ask(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": g, "topic": t}))
                if r.code != ResponseCode.SUCCESS:
                    raise BenchError(f"consume stats of {g} on {name}: code {r.code}: {r.remark}")
                total += sum(int(v["consumerOffset"]) for v in loads_mq_keyed(r.body)["offsetTable"].values())
        return total


class RedisAdmin:
    """The same questions asked of Redis: streams as topics, consumer groups as groups."""

    def __init__(self, addr: str) -> None:
        import redis
        host, _, port = addr.rpartition(":")
        self.r = redis.Redis(host=host, port=int(port), socket_timeout=10)
        try:
            self.r.ping()
        except Exception as exc:
            raise BenchError(f"redis at {addr} unreachable: {exc}") from None

    def create(self, topics: list[str], pairs: list[tuple[str, str]]) -> None:
        for g, t in pairs:
            self.r.xgroup_create(t, g, id="0", mkstream=True)

    def stored(self, topics: list[str]) -> int:
        return sum(int(self.r.xlen(t)) for t in topics)

    def consumed(self, pairs: list[tuple[str, str]]) -> int:
        total = 0
        for g, t in pairs:
            for info in self.r.xinfo_groups(t):
                if info["name"].decode() == g:
                    read = info.get("entries-read")
                    total += int(read or 0) - int(info.get("pending") or 0)
        return total

    def delete(self, topics: list[str], groups: list[str]) -> None:
        for t in topics:
            self.r.delete(t)


def temp_base() -> Path:
    """A temporary directory for embedded servers' stores."""
    return Path(tempfile.mkdtemp(prefix="fastmq-bench-"))


