"""The body of one Spark task of a run (a barrier stage: every task runs at the same time).

1. Start its producers and consumers (a backlog workload stores its backlog here, consumers
   not started yet) and say hello to the driver's control socket with what it runs on
   (fastmq version, commit, compiled extensions or not) and whether its set-up worked.
2. ``BarrierTaskContext.barrier()``: every task is set up.
3. Wait for the driver's plan (absolute start, window start and end) or its refusal.
4. Send on schedule until the window ends, keep consuming until idle, report an interval line
   to the driver as each interval closes, and return the counts, histograms and marks.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import time
from typing import Any

from .drivers import Receiver, Sender, make_receiver, make_sender
from .recorder import Plan, Recorder

__all__ = ["run_task", "task_env", "wait_until", "KILL_HOOK"]

#: test hook: "<task>:<seconds>" makes that task's process exit that long into the window
KILL_HOOK = "FASTMQ_BENCH_TEST_KILL_TASK"
IDLE_S = 2.0          # consumers stop after this long without a message, once the window ended
DRAIN_MAX_S = 60.0    # and in any case this long after it


def task_env() -> dict[str, Any]:
    """What this process measures with: fastmq's version, its git commit when known, and whether
    the compiled extensions are the live twins."""
    import platform

    import fastmq
    from fastmq._ext import USING_EXTENSIONS
    commit = os.environ.get("FASTMQ_COMMIT")
    if not commit:
        import subprocess
        try:
            commit = subprocess.run(["git", "-C", os.path.dirname(fastmq.__file__), "rev-parse", "HEAD"],
                                    capture_output=True, text=True, timeout=5).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            commit = None
    if not commit:
        commit = _installed_commit()
    return {"host": socket.gethostname(), "pid": os.getpid(), "fastmq_version": fastmq.__version__,
            "commit": commit, "compiled": bool(USING_EXTENSIONS), "python": platform.python_version()}


def _installed_commit() -> str | None:
    """The commit an installed (not checked-out) fastmq was built from, where pip recorded it:
    ``direct_url.json``'s vcs_info of a ``pip install git+...``; None otherwise."""
    from importlib import metadata
    try:
        text = metadata.distribution("fastmq").read_text("direct_url.json")
        info = json.loads(text or "{}").get("vcs_info") or {}
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None
    return info.get("commit_id") or None


class _Control:
    """JSON lines to and from the driver's control socket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def send(self, msg: dict[str, Any]) -> None:
        self.writer.write(json.dumps(msg).encode() + b"\n")
        await self.writer.drain()

    async def recv(self) -> dict[str, Any]:
        line = await self.reader.readline()
        if not line:
            raise ConnectionError("the driver closed the control connection")
        return json.loads(line)  # type: ignore[no-any-return]


#: The event loop's timers count whole milliseconds (libuv's, under uvloop; epoll's timeout under
#: asyncio's own loop), so a send slept for on them starts a few hundred microseconds off its slot
#: (137-188 us late at the median, against 89-91 us for a thread's ``time.sleep``). The schedule
#: sleeps on them only to within TIMER_SLACK_NS of the slot, then naps in blocking slices of at
#: most NAP_NS with the loop's I/O and other tasks run between them, and spins the last SPIN_NS:
#: about a tenth of a core at 1,000 sends a second, and the loop never held more than a nap.
TIMER_SLACK_NS = 1_500_000
NAP_NS = 200_000
SPIN_NS = 100_000


async def wait_until(due_ns: int) -> None:
    """Return at epoch ``due_ns`` (``time.time_ns()``), to some microseconds when the machine
    lets this process run."""
    left = due_ns - time.time_ns()
    if left > TIMER_SLACK_NS + 500_000:
        await asyncio.sleep((left - TIMER_SLACK_NS) / 1e9)
    while (left := due_ns - time.time_ns()) > SPIN_NS:
        time.sleep(min(left - SPIN_NS, NAP_NS) / 1e9)
        await asyncio.sleep(0)   # what arrived meanwhile (answers, messages) is read between naps
    while time.time_ns() < due_ns:   # at most SPIN_NS, plus a nap's overshoot when it woke early
        pass


async def _produce(s: Sender, rate: float, batch: int, plan: Plan, start_seq: int, stop_ns: int) -> int:
    """Send on schedule until ``stop_ns``; the next sequence number."""
    seq = start_seq
    step_ns = 1e9 * batch / rate if rate else 0.0
    i = 0
    while True:
        now = time.time_ns()
        if now >= stop_ns:
            break
        intended: int | None = None
        if step_ns:
            intended = plan.t0_ns + int(i * step_ns)
            if intended >= stop_ns:
                break
            if intended > now:
                await wait_until(intended)
        await s.send(range(seq, seq + batch), intended)
        seq += batch
        i += 1
        if not step_ns and i % 64 == 0:
            await asyncio.sleep(0)   # a window that never fills must not starve the consumers
    return seq


async def _build_backlog(s: Sender, count: int, batch: int) -> int:
    seq = 0
    while seq < count:
        n = min(batch, count - seq)
        await s.send(range(seq, seq + n), None)
        seq += n
    await s.window.drain(60)
    return seq


async def _intervals(ctl: _Control, rec: Recorder, plan: Plan, task: int) -> None:
    for i in range(plan.intervals):
        at = plan.window_start_ns + (i + 1) * plan.interval_ns + 50_000_000
        await asyncio.sleep(max(0.0, (at - time.time_ns()) / 1e9))
        snap = rec.interval_snapshot(i)
        for k in ("publish_hist", "e2e_hist"):
            if snap[k] is not None:
                snap[k] = base64.b64encode(snap[k]).decode()
        await ctl.send({"type": "interval", "task": task, **snap})


def _kill_hook(task: int, hook: str) -> float | None:
    who, _, after = hook.partition(":")
    return float(after or 0) if hook and who == str(task) else None


def run_task(spec: dict[str, Any], barrier: Any) -> dict[str, Any]:
    """Run one task (inside a barrier stage); ``barrier()`` is the stage's barrier call."""
    from fastmq.remoting.loop import new_event_loop
    loop = new_event_loop()
    try:
        return _run(loop, spec, barrier)
    finally:
        loop.close()


def _run(loop: asyncio.AbstractEventLoop, spec: dict[str, Any], barrier: Any) -> dict[str, Any]:
    task, w, driver, target = spec["task"], spec["workload"], spec["driver"], spec["target"]
    payload = base64.b64decode(spec["payload"])
    host, _, port = spec["control"].rpartition(":")
    ctl = _Control(*loop.run_until_complete(asyncio.open_connection(host, int(port))))
    # the plan is not known yet: a placeholder that keeps set-up events (backlog) out of any window
    rec = Recorder(Plan(0, 0, 0, 10**9))
    senders: list[Sender] = []
    receivers: list[Receiver] = []
    started: list[Any] = []
    backlog_seq: dict[int, int] = {}
    setup_error = None

    async def setup() -> None:
        for p in spec["producers"]:
            s = make_sender(driver, rec, p["pid"], p["topic"], w, payload, target)
            await s.start()
            started.append(s)
            senders.append(s)
        for c in spec["consumers"]:
            receivers.append(make_receiver(driver, rec, c["cid"], c["topic"], c["group"], w, target))
        if w["backlog"]:
            share = -(-w["backlog"] // max(1, spec["producers_total"]))
            counts = await asyncio.gather(*(_build_backlog(s, share, w["batch_size"]) for s in senders))
            backlog_seq.update({s.pid: n for s, n in zip(senders, counts)})
        else:
            for r in receivers:
                await r.start()
                started.append(r)
    try:
        loop.run_until_complete(asyncio.wait_for(setup(), 120))
    except Exception as exc:  # any failure to set up is reported, then the stage is refused together
        setup_error = f"task {task}: set-up failed: {type(exc).__name__}: {exc}"
    env = task_env()
    loop.run_until_complete(ctl.send({"type": "ready", "task": task, "env": env, "error": setup_error}))
    barrier()
    answer = loop.run_until_complete(ctl.recv())
    if answer.get("type") != "plan":
        loop.run_until_complete(_stop_all(started))
        return {"task": task, "env": env, "refused": answer.get("reason", "refused by the driver")}
    plan = Plan(**answer["plan"])
    rec.set_plan(plan)
    drain_cut: list[bool] = []
    kill_after = _kill_hook(task, spec.get("kill") or "")

    async def load() -> None:
        await asyncio.sleep(max(0.0, (plan.t0_ns - time.time_ns()) / 1e9))
        if w["backlog"]:
            for r in receivers:
                await r.start()
                started.append(r)
        ticker = asyncio.ensure_future(_intervals(ctl, rec, plan, task))
        if kill_after is not None:
            loop.call_at(loop.time() + (plan.window_start_ns - time.time_ns()) / 1e9 + kill_after, os._exit, 3)
        rate = w["producer_rate"] / max(1, spec["producers_total"])
        await asyncio.gather(*(_produce(s, rate, w["batch_size"] if w["send_mode"] == "batch" else 1, plan,
                                        backlog_seq.get(s.pid, 0), plan.window_end_ns) for s in senders))
        unanswered = sum(await asyncio.gather(*(s.window.drain(10) for s in senders)))
        if unanswered:
            rec.error("unanswered", time.time_ns(), unanswered)
        if receivers:
            deadline = time.monotonic() + DRAIN_MAX_S
            while True:
                last = max(r.last_ns for r in receivers)
                if time.time_ns() - max(last, plan.window_end_ns) > IDLE_S * 1e9:
                    break
                if time.monotonic() > deadline:
                    drain_cut.append(True)
                    break
                await asyncio.sleep(0.1)
        await ticker
        await _stop_all(started)
    loop.run_until_complete(load())
    out = rec.result()
    out.update(task=task, env=env, drain_cut=bool(drain_cut))
    loop.run_until_complete(ctl.send({"type": "done", "task": task}))
    ctl.writer.close()
    return out


async def _stop_all(started: list[Any]) -> None:
    for x in reversed(started):
        try:
            await asyncio.wait_for(x.stop(), 15)
        except Exception:  # a client that cannot stop cleanly must not hide the run's figures
            pass
