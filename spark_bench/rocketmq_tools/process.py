"""The processes ``fastmq-bench rocketmq-tools`` starts (servers, the Java tools, py-spy): each
in its own session, stopped by its process group, also at exit; ports free for them, and the
bounded wait until one is ready, with the typed errors of a start that failed. fastmq's own servers
start through :mod:`fastmq.testing` (:class:`ManagedServer`), as every test and benchmark starts them."""
from __future__ import annotations

import atexit
import os
import queue
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Callable

from fastmq.testing import ServerProcess

__all__ = ["Managed", "ManagedServer", "PortTaken", "ToolsError", "free_port", "listening", "port_free", "printed",
           "stop_all", "wait_ready"]


class ToolsError(RuntimeError):
    """A run that cannot start or go on; the text says why."""


class PortTaken(ToolsError):
    """A server lost its port to another process between our check and its bind (worth one more try)."""


class Managed:
    """A process this command started, in its own session; stopped by its process group."""

    live: list["Managed"] = []

    def __init__(self, argv: list[str], what: str, log: Path, cwd: Path, env: dict[str, str] | None = None,
                 pipe: bool = False) -> None:
        self.what, self.log_path = what, log
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self._log: IO[bytes] = open(log, "ab")
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE if pipe else self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        Managed.live.append(self)
        self._reader: threading.Thread | None = None
        if pipe:
            self._reader = threading.Thread(target=self._read, name=f"read-{what}", daemon=True)
            self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self._log.write(raw)
            self._log.flush()
            self.lines.put((time.monotonic(), raw.decode("utf-8", "replace")))

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def finished(self) -> bool:
        """Exited, and every line it wrote is in ``lines``."""
        return self.proc.poll() is not None and (self._reader is None or not self._reader.is_alive())

    def output(self, last: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-last:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to the group (a Java broker's shutdown hook flushes and unmaps), SIGKILL after ``timeout``."""
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        if self in Managed.live:
            Managed.live.remove(self)
        if self._reader is not None:   # the group is gone, so its pipe ends: the reader finishes
            self._reader.join(10.0)
        if self._reader is None or not self._reader.is_alive():
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._log.close()


class ManagedServer(Managed):
    """A fastmq server (:func:`fastmq.testing.namesrv_process` / :func:`~fastmq.testing.broker_process`),
    started and waited for (bounded by ``timeout``: listening, and a broker's first registration) by
    fastmq.testing, then managed as the other processes: its pid for /proc, stopped at exit too."""

    def __init__(self, server: ServerProcess, what: str, timeout: float) -> None:
        # no Managed.__init__: fastmq.testing starts the process
        self.server, self.what, self.log_path = server, what, server.log_path
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()   # nothing is piped
        self._reader: threading.Thread | None = None
        try:
            server.start(timeout)
        except (RuntimeError, TimeoutError) as e:   # server.start stopped it
            text = f"{what} exited or was not ready ({e}): {self.output(1500)}"
            raise (PortTaken if "address already in use" in self.output(1 << 16).lower() else ToolsError)(text) from None
        assert server.proc is not None
        self.proc = server.proc
        Managed.live.append(self)

    def output(self, last: int = 2000) -> str:
        try:
            return self.server.output()[-last:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (the broker flushes and unregisters), SIGKILL after ``timeout``."""
        self.server.stop(timeout=timeout)
        if self in Managed.live:
            Managed.live.remove(self)


def stop_all() -> None:
    for m in reversed(list(Managed.live)):
        m.stop(timeout=10.0)


atexit.register(stop_all)


def port_free(port: int, host: str = "0.0.0.0") -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(neighbours: tuple[int, ...] = ()) -> int:
    """A port free on every address, with ``port + d`` free too for each ``d`` (a Java broker also
    listens on port-2, its fast channel, and port+1, its HA port)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("0.0.0.0", 0))
            port = int(s.getsockname()[1])
        if all(1024 < port + d < 65536 and port_free(port + d) for d in neighbours):
            return port
    raise ToolsError(f"no free port with free neighbours {neighbours} after 50 tries")


def wait_ready(ok: Callable[[], bool], proc: Managed, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            text = f"{what} exited with {proc.proc.returncode} before it was ready: {proc.output(1500)}"
            raise (PortTaken if "address already in use" in proc.output(1 << 16).lower() else ToolsError)(text)
        if ok():
            return
        time.sleep(0.2)
    raise ToolsError(f"{what} was not ready within {timeout:.0f}s: {proc.output(1500)}")


def listening(port: int) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False
    return check


def printed(proc: Managed, needle: str) -> Callable[[], bool]:
    return lambda: needle in proc.output(1 << 20)
