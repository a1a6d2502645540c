"""An embedded fastmq cluster for tests: a NameServer and brokers on free loopback ports.

The servers are the real ``fastmq-namesrv`` and ``fastmq-broker`` commands, started as a user
starts them (a config file each, their store and logs under one work directory), so a test talks
to what production runs, wire and process boundaries included. Use :class:`EmbeddedCluster`
directly, or the ``fastmq_cluster`` pytest fixture (:mod:`fastmq.testing_plugin`, registered for
every ``pip install fastmq`` through the ``pytest11`` entry point)::

    from fastmq.testing import EmbeddedCluster

    with EmbeddedCluster(tmp_path, brokers=1, slave=True) as cluster:
        producer = Producer("PG", namesrv_addr=cluster.namesrv_addr)
        ...

The lower-level pieces (:func:`namesrv_process`, :func:`broker_process`, :class:`ServerProcess`)
are for tests that restart, kill or misconfigure one server on purpose. Two drills built on them
are submodules, imported on their own: :mod:`fastmq.testing.txprobe` (a raw-wire transactional
producer, to test a broker's transaction checks) and :mod:`fastmq.testing.failover` (a NameServer
and a broker killed under a steady producer, and what it saw); :mod:`fastmq.testing.java_peer` runs
Apache RocketMQ's Java client against a cluster.
"""
from __future__ import annotations

import collections
import contextlib
import os
import signal
import socket
import string
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Iterator, Mapping, Sequence

__all__ = ["EmbeddedCluster", "ServerProcess", "broker_process", "free_port", "free_ports", "live_processes", "namesrv_process",
           "running_cluster", "wait_port"]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

#: Every ServerProcess started and not yet stopped: a suite can find the ones a failed test left
#: behind (``live_processes``) and stop them, instead of leaving servers running after the run.
_LIVE: set[ServerProcess] = set()


def live_processes() -> list[ServerProcess]:
    """The servers started through this module and not stopped since (a snapshot)."""
    return [p for p in _LIVE if p.alive()]


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    return free_ports(1)[0]


#: ports handed out lately by this process: a port picked but not yet bound by the server it was
#: picked for is free to the kernel, which may hand it to the next pick (two servers on one port)
_HANDED: collections.deque[int] = collections.deque(maxlen=512)
_HANDED_LOCK = threading.Lock()


def free_ports(n: int) -> list[int]:
    """``n`` different loopback TCP ports that were free a moment ago and that this process has
    not handed out lately (held together while picked, so the kernel gives each once)."""
    with contextlib.ExitStack() as stack, _HANDED_LOCK:
        ports: list[int] = []
        for _ in range(n + 64):  # (bounded: each socket stays bound, so each pick is a new port)
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
            if port not in _HANDED:
                ports.append(port)
                if len(ports) == n:
                    _HANDED.extend(ports)
                    return ports
        raise RuntimeError(f"no {n} free loopback ports found that were not handed out lately")


def wait_port(port: int, timeout: float = 20.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait (bounded by ``timeout``) until something accepts on 127.0.0.1:``port``.

    ``proc``: the process expected to listen; its exit before then raises at once.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


class ServerProcess:
    """A fastmq command run as a user would run it, stopped by PID on exit.

    ``argv`` starts with the console-script name (``fastmq-namesrv``); it is resolved next to the
    running interpreter so the test uses this venv's install (else it is looked up on PATH).
    Output goes to ``<workdir>/<command>-<port>.out``; a restart appends to it.
    """

    def __init__(self, argv: Sequence[str], port: int, workdir: Path, env: dict[str, str] | None = None,
                 ready_line: str | None = None) -> None:
        """``ready_line``: text the command prints once it is ready (for a broker: after its first
        registration with the NameServers); :meth:`start` waits for it after the port opens."""
        exe = Path(sys.executable).with_name(argv[0])
        self.argv = [str(exe), *argv[1:]] if exe.exists() else list(argv)
        self.port = port
        self.workdir = workdir
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"{Path(argv[0]).name}-{port}.out"
        self.ready_line = ready_line
        self._log: IO[bytes] | None = None

    @property
    def addr(self) -> str:
        """``127.0.0.1:<port>``, the address clients dial."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The process id of the last start (for sampling its CPU from /proc), or None before one."""
        return self.proc.pid if self.proc is not None else None

    @property
    def what(self) -> str:
        """The command's name (``fastmq-broker``), for messages about this process."""
        return Path(self.argv[0]).name

    def cpu_seconds(self) -> float:
        """User + system CPU the process has used, all its threads (``/proc/<pid>/stat``, Linux):
        benchmarks count a server's CPU per message from two readings."""
        if self.proc is None:
            raise RuntimeError(f"{self.what} was never started")
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the command name may hold spaces
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime (fields 14, 15)

    def alive(self) -> bool:
        """Started and not exited."""
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 20.0) -> ServerProcess:
        """Start the command and wait (bounded) until it listens and, if asked, is ready."""
        self._log = open(self.log_path, "ab")
        since = self._log.tell()  # a restart appends: only this run's lines count
        self.proc = subprocess.Popen(self.argv, cwd=self.workdir, env=self.env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        _LIVE.add(self)
        try:
            deadline = time.monotonic() + timeout
            wait_port(self.port, timeout, self.proc)
            if self.ready_line:
                self._wait_ready(since, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, since: int, deadline: float) -> None:
        # The broker accepts connections before its first registration (as 4.9's does): a client
        # that asks the NameServer for a route in between gets none, so we wait for the line
        # the command prints after that registration.
        needle = self.ready_line.encode() if self.ready_line else b""
        while True:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                if needle in f.read():
                    return
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv[0]} exited with {self.proc.returncode} before it was ready:\n"
                                   + self.output()[-2000:])
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.argv[0]} did not print {self.ready_line!r} in time")
            time.sleep(0.02)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        """Send ``sig`` and wait (bounded; SIGKILL after ``timeout``); the exit status, or None
        if it never started."""
        if self.proc is None:
            return None
        _LIVE.discard(self)
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log is not None:
            self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        """Stop it with SIGKILL, as a crash would."""
        self.stop(signal.SIGKILL)

    def output(self) -> str:
        """Everything the command printed (all runs)."""
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def namesrv_process(workdir: Path, **props: object) -> ServerProcess:
    """A ``fastmq-namesrv`` on a free port, its KV file and log under ``workdir`` (not started).

    ``props`` adds or overrides namesrv.properties keys.
    """
    port = free_port()
    conf = {"listenPort": port, "kvConfigPath": workdir / "kv.json", "logPath": workdir / "ns.log", **props}
    path = workdir / "ns.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    return ServerProcess(["fastmq-namesrv", "-c", str(path)], port, workdir, env={"HOME": str(workdir)})


def broker_process(workdir: Path, namesrv: str, *, port: int | None = None, **conf: object) -> ServerProcess:
    """A ``fastmq-broker`` on loopback, its store and log under ``workdir`` (not started).

    ``conf`` adds or overrides broker.conf keys (brokerName, flushDiskType, ...); ``port`` reuses a
    port, to restart a broker where it was.
    """
    return _broker(workdir, namesrv, port, conf)


def _broker(workdir: Path, namesrv: str, port: int | None, conf: Mapping[str, object]) -> ServerProcess:
    # haListenPort too: a master binds it, and listenPort + 1 (the default) may be another test's port
    ha_port, spare = free_ports(2)
    port = port or spare
    if ha_port == port:  # (a restart's own port, picked free now)
        ha_port = spare
    lines = {"brokerName": "broker-a", "namesrvAddr": namesrv, "listenPort": port, "haListenPort": ha_port,
             "brokerIP1": "127.0.0.1",
             "storePathRootDir": workdir / "store", "mappedFileSizeCommitLog": 4 * 1024 * 1024,
             "logPath": workdir / "broker.log", **conf}
    path = workdir / "broker.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return ServerProcess(["fastmq-broker", "-c", str(path)], port, workdir, env={"HOME": str(workdir)},
                         ready_line="boot success")


@contextlib.contextmanager
def running_cluster(workdir: Path, **broker_conf: object) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """A started ``fastmq-namesrv`` and ``fastmq-broker`` sharing ``workdir`` (``broker_conf`` as
    for :func:`broker_process`); on the way out the broker must stop cleanly (exit 0)."""
    ns = namesrv_process(workdir).start()
    try:
        broker = _broker(workdir, ns.addr, None, broker_conf).start()
        try:
            yield ns, broker
        finally:
            code = broker.stop()
            assert code == 0, broker.output()[-3000:]
    finally:
        ns.stop()


def _conf_value(server: ServerProcess, key: str) -> str:
    conf = (server.workdir / "broker.conf").read_text()
    return next(line.split("=", 1)[1] for line in conf.splitlines() if line.startswith(f"{key}="))


class EmbeddedCluster:
    """A NameServer and ``brokers`` masters (``broker-a``, ``broker-b``, ...), each with a slave if
    ``slave``, all real processes on free loopback ports under ``workdir``.

    ``broker_conf`` and ``namesrv_conf`` add or override keys of every broker.conf (slaves' too)
    and of the namesrv.properties. Layout: ``<workdir>/namesrv``, ``<workdir>/<brokerName>``,
    ``<workdir>/<brokerName>-slave``, each with its config, store and output. :meth:`stop` (or
    leaving the ``with`` block) stops slaves, then masters, then the NameServer, and raises if a
    broker that was still running did not exit cleanly.
    """

    def __init__(self, workdir: Path | str, *, brokers: int = 1, slave: bool = False,
                 broker_conf: Mapping[str, object] | None = None,
                 namesrv_conf: Mapping[str, object] | None = None) -> None:
        if not 1 <= brokers <= len(string.ascii_lowercase):
            raise ValueError(f"brokers must be 1..26, not {brokers}")
        self.workdir = Path(workdir)
        self.broker_count = brokers
        self.with_slave = slave
        self.broker_conf: dict[str, object] = dict(broker_conf or {})
        self.namesrv_conf: dict[str, object] = dict(namesrv_conf or {})
        self.namesrv: ServerProcess | None = None
        self.brokers: list[ServerProcess] = []
        """The masters, in the order of their names."""
        self.slaves: list[ServerProcess] = []
        """One slave per master (same index) when ``slave`` was asked for; else empty."""

    @property
    def namesrv_addr(self) -> str:
        """The NameServer's ``host:port``, for ``namesrv_addr=`` of producers and consumers."""
        if self.namesrv is None:
            raise RuntimeError("the cluster is not started")
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        """The first master's ``host:port``."""
        if not self.brokers:
            raise RuntimeError("the cluster is not started")
        return self.brokers[0].addr

    def start(self, timeout: float = 30.0) -> EmbeddedCluster:
        """Start every server and wait (bounded) until each broker has registered. A stopped
        cluster starts again on new ports over the same stores."""
        self.brokers, self.slaves = [], []
        try:
            ns_dir = self._dir("namesrv")
            self.namesrv = namesrv_process(ns_dir, **self.namesrv_conf).start(timeout)
            for i in range(self.broker_count):
                name = f"broker-{string.ascii_lowercase[i]}"
                conf = {"brokerName": name, **self.broker_conf}
                master = _broker(self._dir(name), self.namesrv.addr, None, conf).start(timeout)
                self.brokers.append(master)
                if self.with_slave:
                    ha = _conf_value(master, "haListenPort")
                    slave_conf = {**conf, "brokerId": 1, "brokerRole": "SLAVE",
                                  "haMasterAddress": f"127.0.0.1:{ha}"}
                    self.slaves.append(_broker(self._dir(f"{name}-slave"), self.namesrv.addr, None,
                                               slave_conf).start(timeout))
        except BaseException:
            self._stop_all()
            raise
        return self

    def stop(self) -> None:
        """Stop slaves, masters, then the NameServer (SIGTERM, bounded waits); raise
        AssertionError naming a broker that exited with a non-zero status."""
        bad = self._stop_all()
        if bad:
            raise AssertionError("brokers did not stop cleanly:\n" + "\n".join(bad))

    def _stop_all(self) -> list[str]:
        bad = []
        for b in [*self.slaves, *self.brokers]:
            running = b.alive()
            code = b.stop()
            if running and code != 0:
                bad.append(f"{b.addr} exit {code}: {b.output()[-2000:]}")
        if self.namesrv is not None:
            self.namesrv.stop()
        return bad

    def _dir(self, name: str) -> Path:
        d = self.workdir / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        ns = self.namesrv.addr if self.namesrv else "not started"
        return f"EmbeddedCluster(namesrv={ns}, brokers={[b.addr for b in self.brokers]})"
