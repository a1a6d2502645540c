"""Helpers for tests that start real fastmq processes on loopback."""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

if TYPE_CHECKING:
    from fastmq.remoting import RemotingServer


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def addr_of(srv: "RemotingServer") -> str:
    """The ``host:port`` a client dials to reach an in-process server listening on loopback."""
    return f"127.0.0.1:{srv.port}"


def wait_port(port: int, timeout: float = 20.0, proc: subprocess.Popen | None = None) -> None:
    """Wait (bounded) until something accepts on 127.0.0.1:port."""
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

    ``argv`` starts with the console-script name (``fastmq-namesrv``); it is
    resolved next to the running interpreter so the test uses this venv's
    install.
    """

    def __init__(self, argv: Sequence[str], port: int, workdir: Path, env: dict[str, str] | None = None,
                 ready_line: str | None = None):
        """``ready_line``: text the command prints once it is ready (for a broker: after its first
        registration with the NameServers); :meth:`start` waits for it after the port opens."""
        exe = Path(sys.executable).with_name(argv[0])
        self.argv = [str(exe), *argv[1:]] if exe.exists() else list(argv)
        self.port = port
        self.workdir = workdir
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.log_path = workdir / f"{Path(argv[0]).name}-{port}.out"
        self.ready_line = ready_line

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "ServerProcess":
        self._log = open(self.log_path, "ab")
        since = self._log.tell()  # a restart appends: only this run's lines count
        self.proc = subprocess.Popen(self.argv, cwd=self.workdir, env=self.env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
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
        # that asks the NameServer for a route in between gets none, so tests wait for the line
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
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def namesrv_process(workdir: Path, **props: object) -> ServerProcess:
    """A ``fastmq-namesrv`` on a free port, its KV file and log under ``workdir`` (not started)."""
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
    port = port or free_port()
    # haListenPort too: a master binds it, and listenPort + 1 (the default) may be another test's port
    lines = {"brokerName": "broker-a", "namesrvAddr": namesrv, "listenPort": port, "haListenPort": free_port(),
             "brokerIP1": "127.0.0.1",
             "storePathRootDir": workdir / "store", "mappedFileSizeCommitLog": 4 * 1024 * 1024,
             "logPath": workdir / "broker.log", **conf}
    path = workdir / "broker.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return ServerProcess(["fastmq-broker", "-c", str(path)], port, workdir, env={"HOME": str(workdir)},
                         ready_line="boot success")


@contextlib.contextmanager
def running_cluster(workdir: Path, **broker_conf: object) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """A started ``fastmq-namesrv`` and ``fastmq-broker`` (``broker_conf`` as for
    :func:`broker_process`); on the way out the broker must stop cleanly (exit 0)."""
    ns = namesrv_process(workdir).start()
    try:
        broker = broker_process(workdir, ns.addr, **broker_conf).start()  # type: ignore[arg-type]
        try:
            yield ns, broker
        finally:
            assert broker.stop() == 0, broker.output()[-3000:]
    finally:
        ns.stop()


async def wait_until(pred: Callable[[], bool], seconds: float, every: float = 0.05) -> bool:
    """Poll ``pred`` for up to ``seconds`` (bounded); its last value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(every)
    return pred()


async def consume_positions(namesrv: str, group: str, topic: str, wanted: Iterable[bytes],
                            seconds: float) -> dict[bytes, tuple[int, int]]:
    """Consume ``topic`` from its first offset with a lite pull consumer until every body in
    ``wanted`` arrived or ``seconds`` passed (bounded); each body's ``(queue id, queue offset)``."""
    from fastmq.client.push_consumer import PullConsumer

    want = set(wanted)
    consumer = PullConsumer(group, namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    await consumer.start()
    got: dict[bytes, tuple[int, int]] = {}
    try:
        deadline = time.monotonic() + seconds
        while not want <= got.keys() and time.monotonic() < deadline:
            for m in await consumer.poll(1.0):
                got[m.body] = (m.queue_id, m.queue_offset)
    finally:
        await consumer.shutdown()
    return got
