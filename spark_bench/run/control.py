"""The driver's end of a run: a TCP socket every task reports to, and the progress line.

Tasks connect, set up, and send ``ready`` (with what they run on); once all have, the driver
answers each with one ``plan`` (absolute start, measured window) or a ``refuse`` with the reason
(a task failed to set up, or one lacks the compiled extensions without ``--allow-pure``). During
the run tasks send an ``interval`` line as each interval closes; the driver merges them and
prints one progress line per interval (unless ``show_intervals`` is off: output piped). A connection that ends without ``done`` is a task that
died: the run is failed and the Spark job cancelled at once rather than left to time out.
"""
from __future__ import annotations

import base64
import json
import socket
import threading
import time
from typing import Any, Callable

from .histogram import LatencyHistogram
from .recorder import Plan

__all__ = ["ControlServer"]


class ControlServer:
    """Accepts ``tasks`` connections; see the module text for the protocol."""

    def __init__(self, tasks: int, *, consumers: bool = True, warmup_s: float, duration_s: float, interval_s: float, allow_pure: bool,
                 on_failure: Callable[[str], None], print_fn: Callable[[str], None] = print,
                 bind: str = "0.0.0.0", advertise: str = "127.0.0.1", show_intervals: bool = True) -> None:
        self.consumers = consumers
        self.tasks, self.warmup_s, self.duration_s, self.interval_s = tasks, warmup_s, duration_s, interval_s
        self.allow_pure, self.on_failure, self.print = allow_pure, on_failure, print_fn
        self.show_intervals = show_intervals
        self.sock = socket.create_server((bind, 0))
        self.addr = f"{advertise}:{self.sock.getsockname()[1]}"
        self.lock = threading.Lock()
        self.conns: dict[int, socket.socket] = {}
        self.ready: dict[int, dict[str, Any]] = {}
        self.done: set[int] = set()
        self.failure: str | None = None
        self.plan: Plan | None = None
        self.plan_set = threading.Event()
        self.intervals: dict[int, dict[int, dict[str, Any]]] = {}
        self.printed = -1
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="bench-control").start()

    def close(self) -> None:
        self._closed = True
        self.sock.close()
        with self.lock:
            for c in self.conns.values():
                try:
                    c.close()
                except OSError:
                    pass

    def fail(self, reason: str) -> None:
        with self.lock:
            if self.failure is not None:
                return
            self.failure = reason
        self.on_failure(reason)

    # -------------------------------------------------------------- threads

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, str(peer[0])), daemon=True).start()

    def where(self, task: int, ip: str = "") -> str:
        """Where a task ran, for a reason: its host, address and process as it said hello."""
        env = (self.ready.get(task) or {}).get("env") or {}
        parts = [p for p in (env.get("executor") and f"executor {env['executor']}", env.get("host"),
                             ip, env.get("pid") and f"pid {env['pid']}") if p]
        return f" ({', '.join(map(str, parts))})" if parts else ""

    def _serve(self, conn: socket.socket, ip: str = "") -> None:
        task = -1
        try:
            for line in conn.makefile("rb"):
                msg = json.loads(line)
                task = msg["task"]
                kind = msg["type"]
                if kind == "ready":
                    with self.lock:
                        self.conns[task] = conn
                        self.ready[task] = msg
                        all_in = len(self.ready) == self.tasks
                    if all_in:
                        self._decide()
                elif kind == "interval":
                    self._interval(msg)
                elif kind == "done":
                    with self.lock:
                        self.done.add(task)
        except (OSError, ValueError, KeyError):
            pass
        if not self._closed and task not in self.done and not (self.plan is None and self.failure):
            self.fail(f"task {task}{self.where(task, ip)} ended before finishing its load "
                      "(its process or executor died)"
                      if task >= 0 else "a task closed its control connection before saying hello")

    def _decide(self) -> None:
        errors = [m["error"] for _, m in sorted(self.ready.items()) if m["error"]]
        pure = sorted(t for t, m in self.ready.items() if not m["env"]["compiled"])
        reason = None
        if errors:
            reason = "; ".join(errors)
        elif pure and not self.allow_pure:
            hosts = sorted({self.ready[t]["env"]["host"] for t in pure})
            reason = (f"task(s) {', '.join(map(str, pure))} on {', '.join(hosts)} run fastmq without its compiled "
                      "extensions (fastmq._ext.USING_EXTENSIONS is False): install the built wheel there, or "
                      "pass --allow-pure to measure the pure-Python twins")
        if reason:
            with self.lock:
                self.failure = reason
            self._broadcast({"type": "refuse", "reason": reason})
            self.plan_set.set()
            return
        t0 = time.time_ns() + 1_000_000_000   # every task must hear the plan before t0
        ws = t0 + int(self.warmup_s * 1e9)
        self.plan = Plan(t0, ws, ws + int(self.duration_s * 1e9), int(self.interval_s * 1e9))
        self._broadcast({"type": "plan", "plan": self.plan.to_json()})
        self.plan_set.set()

    def _broadcast(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg).encode() + b"\n"
        with self.lock:
            conns = list(self.conns.values())
        for c in conns:
            try:
                c.sendall(data)
            except OSError:
                pass

    def _interval(self, msg: dict[str, Any]) -> None:
        with self.lock:
            self.intervals.setdefault(msg["i"], {})[msg["task"]] = msg
            if not self.show_intervals:
                return
            ready = [i for i, per in self.intervals.items() if len(per) == self.tasks and i > self.printed]
        for i in sorted(ready):
            self._print(i)

    def _print(self, i: int) -> None:
        per = self.intervals[i]
        pub, e2e = LatencyHistogram(), LatencyHistogram()
        for m in per.values():
            if m.get("publish_hist"):
                pub.merge(LatencyHistogram.from_bytes(base64.b64decode(m["publish_hist"])))
            if m.get("e2e_hist"):
                e2e.merge(LatencyHistogram.from_bytes(base64.b64decode(m["e2e_hist"])))
        n_pub = sum(m["publish"] for m in per.values())
        n_e2e = sum(m["e2e"] for m in per.values())
        errs = sum(m["errors"] for m in per.values())
        self.printed = i
        line = f"[{(i + 1) * self.interval_s:6.1f}s] publish {n_pub / self.interval_s:10,.0f} msgs/s p99 {pub.percentile(99) / 1000:9,.0f} us"
        if self.consumers:
            line += f" | consume {n_e2e / self.interval_s:10,.0f} msgs/s e2e p99 {e2e.percentile(99) / 1000:9,.0f} us"
        self.print(f"{line} | errors so far {errs}")
