"""``fastmq-bench run`` on a real standalone Spark cluster: a ``spark-class`` Master and Worker
(pip's pyspark has no sbin start scripts) on loopback. The Worker runs fastmq without its
compiled extensions, so the run is refused unless ``--allow-pure``, and then says so."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fastmq.testing import free_port, wait_port

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]

WORKLOAD = """\
name: standalone
topics: 1
queues_per_topic: 2
message_size: 100
producers_per_topic: 1
consumer_groups_per_topic: 1
consumers_per_group: 1
producer_rate: 200
send_mode: async
in_flight: 8
warmup_s: 1
duration_s: 2
"""


def _spark_class() -> str:
    import pyspark
    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


class _Daemon:
    """A spark-class daemon, stopped by its PID."""

    def __init__(self, argv: list[str], port: int, log: Path, env: dict[str, str]) -> None:
        self.out = open(log, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                     start_new_session=True)
        try:
            wait_port(port, 120, self.proc)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.out.close()


def test_standalone_cluster_refuses_pure_executors_unless_allowed(tmp_path: Path) -> None:
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    master = _Daemon([_spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                      "--port", str(port), "--webui-port", "0"], port, tmp_path / "master.log", env)
    try:
        wport = free_port()
        worker = _Daemon([_spark_class(), "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                          "--cores", "2", "--memory", "1G", "--host", "127.0.0.1", "--port", str(wport),
                          "--webui-port", "0", "--work-dir", str(tmp_path / "work")], wport, tmp_path / "worker.log",
                         {**env, "FASTMQ_NO_EXTENSIONS": "1"})
        try:
            wl = tmp_path / "w.yaml"
            wl.write_text(WORKLOAD)
            bench = [str(Path(sys.executable).with_name("fastmq-bench")), "run", str(wl),
                     "--master", f"spark://127.0.0.1:{port}"]
            proc = subprocess.run([*bench, "--out", str(tmp_path / "refused")], capture_output=True, text=True,
                                  timeout=400, env={**os.environ, **env}, cwd=tmp_path)
            assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
            r = json.loads((tmp_path / "refused" / "standalone-fastmq" / "result.json").read_text())
            assert r["status"] == "failed" and "without its compiled extensions" in r["reason"]
            assert "--allow-pure" in r["reason"] and r["publish"] is None and r["env"]["compiled"] is False
            assert "without its compiled extensions" in proc.stdout

            proc = subprocess.run([*bench, "--out", str(tmp_path / "pure"), "--allow-pure"], capture_output=True,
                                  text=True, timeout=400, env={**os.environ, **env}, cwd=tmp_path)
            r = json.loads((tmp_path / "pure" / "standalone-fastmq" / "result.json").read_text())
            assert proc.returncode == 0, r["reason"]
            assert r["status"] == "ok" and r["env"]["compiled"] is False and r["env"]["executors"] >= 1
            assert r["env"]["master"] == f"spark://127.0.0.1:{port}" and r["env"]["cores"] == 2
            assert r["sent_ok"] == r["received"] == r["broker"]["stored"] > 0
            assert "PURE-PYTHON" in proc.stdout
        finally:
            worker.stop()
    finally:
        master.stop()


# ---------------------------------------------------------------- several hosts (issue 31)

MULTI = """\
name: multihost
topics: 1
queues_per_topic: 4
message_size: 128
producers_per_topic: 1
consumer_groups_per_topic: 1
consumers_per_group: 1
producer_rate: 500
send_mode: async
in_flight: 16
warmup_s: 2
duration_s: {duration}
tasks: 2
"""


def _netns_reason() -> str | None:
    import shutil
    if os.geteuid() != 0:
        return "needs root to create network namespaces (ip netns)"
    if shutil.which("ip") is None:
        return "needs iproute2's ip (ip netns, veth, bridge)"
    probe = f"fmqp{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None if made.returncode == 0 else f"ip netns add refused here: {made.stderr.strip()}"


class _Hosts:
    """Network namespaces joined by a bridge, as hosts on a LAN: the bridge is 10.200.0.1 (the
    driver, Spark master and NameServer), each namespace one more address, with no default route
    (the issue's setting). Names carry this process's id; :meth:`close` deletes all of them."""

    def __init__(self, names: list[str]) -> None:
        tag = os.getpid() % 100000
        self.bridge = f"fmqbr{tag}"
        self.ns: dict[str, str] = {}
        self.ip: dict[str, str] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            self._ip("link", "add", "name", self.bridge, "type", "bridge")
            self._ip("addr", "add", "10.200.0.1/24", "dev", self.bridge)
            self._ip("link", "set", self.bridge, "up")
            for i, name in enumerate(names):
                ns, host_end = f"fmq{tag}{name}", f"fmv{tag}{i}"
                self._ip("netns", "add", ns)
                self.ns[name] = ns
                self._ip("link", "add", host_end, "type", "veth", "peer", "name", "eth1", "netns", ns)
                self._ip("link", "set", host_end, "master", self.bridge)
                self._ip("link", "set", host_end, "up")
                self.ip[name] = f"10.200.0.{i + 2}"
                self._ip("-n", ns, "addr", "add", f"{self.ip[name]}/24", "dev", "eth1")
                self._ip("-n", ns, "link", "set", "eth1", "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    def popen(self, host: str | None, argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        prefix = ["ip", "netns", "exec", self.ns[host]] if host else []
        with open(log, "ab") as out:
            p = subprocess.Popen(prefix + argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                 start_new_session=True)
        self.procs.append(p)
        return p

    def close(self) -> None:
        import signal
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)   # its own session: the worker with its executors
                    p.wait(30)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait(10)
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)


def _wait_tcp(addr: tuple[str, int], proc: subprocess.Popen[bytes], timeout: float) -> None:
    import socket
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{proc.args} exited with {proc.returncode}"
        try:
            with socket.create_connection(addr, timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"nothing listens on {addr} after {timeout:.0f}s")


def _bench_until(argv: list[str], env: dict[str, str], cwd: Path, on_window: Any = None,
                 timeout: float = 400) -> tuple[int, str]:
    """Run fastmq-bench; ``on_window()`` once its first progress line (1 s into the window) shows."""
    import threading
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, **env}, cwd=cwd) as proc:
        timer = threading.Timer(timeout, proc.kill)   # bounded whatever the run does
        timer.start()
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if on_window is not None and line.startswith("[") and "s] publish" in line:
                    on_window()
                    on_window = None
            return proc.wait(30), "".join(lines)
        finally:
            timer.cancel()


@pytest.mark.skipif(_netns_reason() is not None, reason=str(_netns_reason()))
def test_multi_host_cluster_in_network_namespaces(tmp_path: Path) -> None:
    """Issue 31: two workers and the broker on hosts of their own (network namespaces on a bridge,
    no default route): a healthy run; a broker killed mid-run; a worker killed mid-run."""
    import signal
    hosts = _Hosts(["w1", "w2", "broker"])
    py = str(Path(sys.executable))
    base_env = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                "PYSPARK_PYTHON": py}
    try:
        mport, nport, bport = free_port(), free_port(), free_port()
        master = hosts.popen(None, [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", "10.200.0.1",
                                    "--port", str(mport), "--webui-port", "0"], tmp_path / "master.log",
                             {**base_env, "SPARK_LOCAL_IP": "10.200.0.1"})
        _wait_tcp(("10.200.0.1", mport), master, 120)
        (tmp_path / "ns.properties").write_text(f"listenPort={nport}\n")
        namesrv = hosts.popen(None, [py, "-m", "fastmq.namesrv", "-c", str(tmp_path / "ns.properties"),
                                     "--log-file", str(tmp_path / "namesrv.file.log")], tmp_path / "namesrv.log",
                              base_env)
        _wait_tcp(("10.200.0.1", nport), namesrv, 60)
        # no brokerIP1: the broker must find 10.200.0.4 itself on a host without a default route
        (tmp_path / "broker.conf").write_text(
            f"brokerName=mh-broker\nnamesrvAddr=10.200.0.1:{nport}\nlistenPort={bport}\nautoCreateTopicEnable=false\n"
            f"storePathRootDir={tmp_path / 'store'}\nmappedFileSizeCommitLog=67108864\n")
        broker = hosts.popen("broker", [py, "-m", "fastmq.broker", "-c", str(tmp_path / "broker.conf"),
                                        "--log-file", str(tmp_path / "broker.file.log")], tmp_path / "broker.log",
                             base_env)
        _wait_tcp((hosts.ip["broker"], bport), broker, 60)
        for w in ("w1", "w2"):
            wport = free_port()
            p = hosts.popen(w, [_spark_class(), "org.apache.spark.deploy.worker.Worker", f"spark://10.200.0.1:{mport}",
                                "--cores", "1", "--memory", "1G", "--host", hosts.ip[w], "--port", str(wport),
                                "--webui-port", "0", "--work-dir", str(tmp_path / f"work-{w}")],
                            tmp_path / f"worker-{w}.log", {**base_env, "SPARK_LOCAL_IP": hosts.ip[w]})
            _wait_tcp((hosts.ip[w], wport), p, 120)
        workers = hosts.procs[-2:]
        wl = tmp_path / "multihost.yaml"
        env = {**base_env, "SPARK_LOCAL_IP": "10.200.0.1"}
        bench = [str(Path(sys.executable).with_name("fastmq-bench")), "run", str(wl),
                 "--master", f"spark://10.200.0.1:{mport}", "--namesrv", f"10.200.0.1:{nport}",
                 "--conf", "spark.driver.host=10.200.0.1", "--conf", "spark.executor.memory=512m",
                 "--executor-wait", "90", "--progress"]  # (read from a pipe: asked for)

        wl.write_text(MULTI.format(duration=5))
        rc, text = _bench_until([*bench, "--out", str(tmp_path / "ok")], env, tmp_path)
        r = json.loads((tmp_path / "ok" / "multihost-fastmq" / "result.json").read_text())
        print(text)
        assert rc == 0 and r["status"] == "ok", (r["reason"], text[-3000:])
        assert r["shape"]["executors"] == 2 and r["shape"]["slots"] == 2 and r["shape"]["tasks"] == 2
        assert r["sent_ok"] == r["received"] == r["broker"]["stored"] > 0 and r["lost"] == 0
        assert "unknown opaque" not in text
        assert any((tmp_path / "ok" / "multihost-fastmq" / "intervals.parquet").glob("part-*"))

        # the broker dies 1 s into the window: named with when, not reported as message loss
        wl.write_text(MULTI.format(duration=6))
        rc, text = _bench_until([*bench, "--out", str(tmp_path / "broker")], env, tmp_path,
                                on_window=lambda: os.kill(broker.pid, signal.SIGKILL))
        r = json.loads((tmp_path / "broker" / "multihost-fastmq" / "result.json").read_text())
        print(text)
        assert rc == 1 and r["status"] == "failed", text[-3000:]
        assert f"broker {hosts.ip['broker']}:{bport} unreachable since t=" in r["reason"], r["reason"]
        assert "never reached" not in r["reason"] and r["left_behind"]["topics"], r
        assert "Traceback" not in text

        # a worker dies 1 s into the window (the broker is back): named with its host
        broker = hosts.popen("broker", [py, "-m", "fastmq.broker", "-c", str(tmp_path / "broker.conf"),
                                        "--log-file", str(tmp_path / "broker.file.log")], tmp_path / "broker2.log",
                             base_env)
        _wait_tcp((hosts.ip["broker"], bport), broker, 60)
        rc, text = _bench_until([*bench, "--out", str(tmp_path / "worker")], env, tmp_path,
                                on_window=lambda: os.killpg(workers[1].pid, signal.SIGKILL))
        r = json.loads((tmp_path / "worker" / "multihost-fastmq" / "result.json").read_text())
        print(text)
        assert rc == 1 and r["status"] == "failed", text[-3000:]
        assert "ended before finishing its load" in r["reason"] and hosts.ip["w2"] in r["reason"], r["reason"]
        assert r["env"]["compiled"] is not False and "Traceback" not in text
    finally:
        hosts.close()
