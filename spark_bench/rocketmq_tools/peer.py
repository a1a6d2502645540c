"""What a ``rocketmq-tools`` run and its shapes share, below both: a system under test (``Peer``),
what every run shares (``RunPlan``), starting one of Apache's tools and reading its lines, the
broker's own counters (GET_BROKER_RUNTIME_INFO) and the /proc samples (CPU, run-queue wait, RSS,
the machine's idle share and load) each run records.

``command`` (the two systems, one Producer run, the command) and ``shapes`` (drain and Spark
shapes) both import this module and never each other at import time.
"""
from __future__ import annotations

import json
import os
import queue
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, Sequence

from .process import Managed

__all__ = ["Jvm", "Peer", "RunPlan", "next_line", "peer_label", "proc_cpu_s", "runq_wait_s"]

_TICK = os.sysconf("SC_CLK_TCK")


class Jvm(Protocol):
    """How to start a JVM of the RocketMQ build (``command.JavaSetup``)."""

    def jvm(self, heap: list[str], log_home: Path, extra: Sequence[str] = ()) -> list[str]: ...

    def env(self) -> dict[str, str]: ...


def _ask(addr: str, code: int, fields: dict[str, Any], timeout: float = 5.0) -> Any:
    from fastmq.protocol.command import create_request
    from fastmq.remoting import RemotingClient
    from fastmq.remoting.loop import run as run_loop

    async def ask() -> Any:
        c = RemotingClient()
        try:
            return await c.invoke(addr, create_request(code, fields), timeout)
        finally:
            await c.close()
    return run_loop(ask())


def _pull_rates(addr: str, puts: bool = False) -> dict[str, float]:
    """The broker's own pull counters over its last 10 s (GET_BROKER_RUNTIME_INFO's getFoundTps,
    getMissTps, getTransferedTps: pulls that found messages, pulls that found none, messages
    they carried, per second), which both brokers keep alike, and with ``puts`` its count of
    messages put today (msgPutTotalTodayNow, as ``puts``); empty when it does not answer."""
    from fastmq.protocol.codes import RequestCode, ResponseCode
    keys = (("getFoundTps", "pull_found_tps"), ("getMissTps", "pull_miss_tps"), ("getTransferedTps", "pull_msgs_tps"))
    try:
        r = _ask(addr, RequestCode.GET_BROKER_RUNTIME_INFO, {})
        if r.code != ResponseCode.SUCCESS or not r.body:
            return {}
        table = json.loads(r.body).get("table", {})
        return {out: float(str(table.get(key, "")).split()[0])
                for key, out in keys + ((("msgPutTotalTodayNow", "puts"),) if puts else ())}
    except Exception:  # (a missing or empty figure included) the rates are context, not a reason to stop
        return {}


@dataclass
class Peer:
    """One system under test: its NameServer, its broker and what was learnt at start."""

    name: str
    namesrv: str
    broker: Managed
    procs: list[Managed] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def stop(self) -> None:
        for p in reversed(self.procs):   # the broker unregisters from a NameServer still up
            p.stop()


def peer_label(peer: Peer) -> dict[str, Any]:
    """What a run document records of the broker it ran against: its version, flush and (Java) heap."""
    return {k: peer.info[k] for k in ("version", "flush", "heap", "java") if peer.info.get(k)}


def proc_cpu_s(pid: int) -> float:
    """utime+stime in seconds of ``pid`` (all its threads) and its live descendants; 0 once gone."""
    total, todo, seen = 0.0, [pid], 0
    while todo and seen < 10_000:
        p = todo.pop()
        seen += 1
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def runq_wait_s(pid: int) -> float:
    """Seconds ``pid``'s threads have waited runnable for a CPU (the second field of each
    task's /proc schedstat): time the process was ready to work but the machine ran something
    else, which utime+stime do not show; 0 once gone or without schedstats."""
    total = 0.0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    for t in tasks[:10_000]:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[1]) / 1e9
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            pass
    return total


def _machine() -> tuple[int, int]:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return ""


@dataclass
class RunPlan:
    """What every run of this command shares."""

    js: Jvm
    out: Path
    client_home: Path
    windows: int
    drain_timeout: float
    tool_start_timeout: float = 90.0
    py_spy: str = ""


def _tool(plan: RunPlan, cls: str, args: list[str], what: str, log: Path, extra: Sequence[str] = ()) -> Managed:
    # the distribution's benchmark/runclass.sh heap; G1 where it names CMS (gone in Java 14+)
    argv = plan.js.jvm(["-Xms1g", "-Xmx1g", "-Xmn256m"], plan.client_home, extra) + [cls, *args]
    return Managed(argv, what, log, plan.client_home, plan.js.env(), pipe=True)


def next_line(tool: Managed, what: str) -> tuple[float, str] | str | None:
    """``tool``'s next line (arrival time, text) within 0.5 s, None when none came, or why it ended
    once it has exited and every line it wrote has been taken."""
    try:
        return tool.lines.get(timeout=0.5)
    except queue.Empty:
        return f"the {what} exited with {tool.proc.returncode}" if tool.finished() and tool.lines.empty() else None


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
