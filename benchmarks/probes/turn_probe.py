"""What holds up a process's event loop: long loop turns, Python GC pauses, its threads'
wake-ups, and (optionally) where the loop thread was during a stall. Loaded into every Python
process of a run by a ``sitecustomize`` (``e2e_tail_probe.py --write-site DIR``), so the broker,
the NameServer, both clients and a Spark run's task workers are measured unchanged.

- GC: ``gc.callbacks`` time every collection, by generation; pauses of 1 ms or more are listed
  with their time and what they collected.
- Loop turns: a 1 ms timer on each loop made by ``asyncio``/``uvloop.new_event_loop`` records
  how late it fires and the loop thread's CPU time since the previous firing: late with its CPU
  is a long turn of the process's own, late without it is the thread kept off the CPU.
  ``FASTMQ_PROBE_TICKS=0`` leaves the timer out (it wakes an idle loop 1,000 times a second).
- Timers: each fastmq ``every()`` timer's loop-thread CPU per call, by the timer's name.
- Threads: once a second, every thread's voluntary context switches (wake-ups), involuntary ones
  (preemptions) and CPU, from /proc, summed by name (pool threads by pool).
- Stacks (``FASTMQ_PROBE_STACKS=1``): a watchdog thread samples the loop thread's stack once per
  stall of more than 2 ms past the timer's due time. It gets the GIL only when the loop thread
  lets go (a blocking call) or at the switch interval, so it sees where the stall was.

Each process writes ``<FASTMQ_PROBE_DIR>/<name>-<pid>.json`` every 5 s and at exit (forked
workers that leave by ``os._exit`` have the last 5 s one).
"""
from __future__ import annotations

import atexit
import gc
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

_T0 = time.monotonic()
_state: dict[str, Any] = {"gc": {}, "gc_long": [], "lag_buckets": {}, "lag_long": [], "stacks": {}, "ticks": 0}
_gc_start = [0.0]
_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100)


def _gc_cb(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_start[0] = time.perf_counter()
        return
    d = time.perf_counter() - _gc_start[0]
    gen = str(info["generation"])
    g = _state["gc"].setdefault(gen, {"n": 0, "total_ms": 0.0, "max_ms": 0.0})
    g["n"] += 1
    g["total_ms"] += d * 1e3
    g["max_ms"] = max(g["max_ms"], d * 1e3)
    if d >= 0.001:
        _state["gc_long"].append({"t": round(time.time(), 4), "gen": int(gen), "ms": round(d * 1e3, 3),
                                  "collected": info["collected"]})


def _bucket(ms: float) -> str:
    for b in _BUCKETS_MS:
        if ms < b:
            return f"<{b}ms"
    return f">={_BUCKETS_MS[-1]}ms"


class _Monitor:
    PERIOD = 0.001

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.due = 0.0
        self.last = time.monotonic()
        self.thread_id = threading.get_ident()
        self.sampled_for = 0.0
        self.cpu = time.thread_time()

    def start(self) -> None:
        self.thread_id = threading.get_ident()
        self.due = self.loop.time() + self.PERIOD
        self.loop.call_at(self.due, self.tick)
        if os.environ.get("FASTMQ_PROBE_STACKS"):
            threading.Thread(target=self.watch, name="turn-probe", daemon=True).start()

    def tick(self) -> None:
        now = self.loop.time()
        late_ms = (now - self.due) * 1e3
        cpu = time.thread_time()
        cpu_ms, self.cpu = (cpu - self.cpu) * 1e3, cpu
        self.last = time.monotonic()
        _state["ticks"] += 1
        b = _bucket(late_ms)
        _state["lag_buckets"][b] = _state["lag_buckets"].get(b, 0) + 1
        if late_ms >= 2.0 and len(_state["lag_long"]) < 50000:
            _state["lag_long"].append({"t": round(time.time(), 4), "ms": round(late_ms, 3),
                                      "cpu_ms": round(cpu_ms, 3)})
        self.due = now + self.PERIOD
        self.loop.call_at(self.due, self.tick)

    def watch(self) -> None:
        while not _state.get("stopped"):
            time.sleep(0.001)
            stalled = time.monotonic() - self.last
            if stalled > 0.002 + self.PERIOD and self.sampled_for != self.last:
                self.sampled_for = self.last
                frame = sys._current_frames().get(self.thread_id)
                if frame is None:
                    continue
                stack = traceback.extract_stack(frame)[-8:]
                key = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(stack))
                s = _state["stacks"].setdefault(key, {"n": 0, "max_stalled_ms": 0.0})
                s["n"] += 1
                s["max_stalled_ms"] = max(s["max_stalled_ms"], round(stalled * 1e3, 3))
                s.setdefault("t", []).append(round(time.time(), 4))


def _wrap(factory: Any) -> Any:
    def new_event_loop(*a: Any, **kw: Any) -> Any:
        loop = factory(*a, **kw)
        if os.environ.get("FASTMQ_PROBE_TICKS", "1") != "0":  # (the 1 ms timer wakes the loop 1000 times a second)
            loop.call_soon(_Monitor(loop).start)
        return loop
    return new_event_loop


def _threads() -> dict[str, Any]:
    """Each thread's wake-ups (voluntary context switches), preemptions and CPU so far, by the
    thread's name (Linux /proc)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, Any] = {"t": time.time()}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            status = open(f"/proc/self/task/{tid}/status").read()
            stat = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        vol = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
        nonvol = int(status.split("nonvoluntary_ctxt_switches:")[1].split()[0])
        name = names.get(int(tid), "native-" + tid)
        name = name.rstrip("0123456789").rstrip("_-") or name  # pool threads summed by pool
        acc = out.setdefault(name, {"wakeups": 0, "preempted": 0, "cpu_ms": 0.0, "threads": 0})
        acc["wakeups"] += vol
        acc["preempted"] += nonvol
        acc["cpu_ms"] += (int(stat[11]) + int(stat[12])) * 1000 / tick
        acc["threads"] += 1
    return out


def _dump(final: bool = True) -> None:
    d = os.environ.get("FASTMQ_PROBE_DIR")
    if not d:
        return
    name = os.path.basename(sys.argv[0] or "python")
    if _state.get("forked"):
        name += "-forked"
    if "--role" in sys.argv[:-1]:
        name += "-" + sys.argv[sys.argv.index("--role") + 1]
    _state["gc_count_thresholds"] = list(gc.get_threshold())
    _state["gc_frozen"] = gc.get_freeze_count()
    _state["gc_tracked"] = len(gc.get_objects()) if final else _state.get("gc_tracked")
    _state["run_s"] = round(time.monotonic() - _T0, 3)
    if final:
        _state["stopped"] = True  # the watchdog thread stops adding
        time.sleep(0.005)
    for _ in range(3):
        try:
            text = json.dumps(_state)
            break
        except RuntimeError:  # changed while being read (the loop thread records on)
            continue
    else:
        return
    path = os.path.join(d, f"{name}-{os.getpid()}.json")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def _timed_every(every: Any) -> Any:
    """fastmq's periodic timers, each call's loop-thread CPU time recorded by the timer's name."""
    import inspect

    def wrapped(interval_s: float, fn: Any) -> Any:
        name = getattr(fn, "__qualname__", None) or getattr(getattr(fn, "func", None), "__qualname__", repr(fn))

        async def timed() -> None:
            c0 = time.thread_time()
            r = fn()
            if inspect.isawaitable(r):
                await r
            ms = (time.thread_time() - c0) * 1e3  # (an awaiting timer also counts what ran meanwhile)
            t = _state.setdefault("timers", {}).setdefault(name, {"n": 0, "cpu_ms_max": 0.0, "cpu_ms_total": 0.0,
                                                                   "interval_s": interval_s})
            t["n"] += 1
            t["cpu_ms_max"] = round(max(t["cpu_ms_max"], ms), 3)
            t["cpu_ms_total"] = round(t["cpu_ms_total"] + ms, 3)
        return every(interval_s, timed)
    return wrapped


def install() -> None:
    """Hook GC and every event loop made from now on (uvloop's and asyncio's)."""
    gc.callbacks.append(_gc_cb)
    import asyncio
    asyncio.new_event_loop = _wrap(asyncio.new_event_loop)
    try:
        import uvloop
        uvloop.new_event_loop = _wrap(uvloop.new_event_loop)
    except ImportError:
        pass
    try:
        import fastmq.remoting.loop as fl
    except ImportError:  # a process without fastmq (Spark's, redis-py's side): GC and loops only
        pass
    else:
        fl.every = _timed_every(fl.every)  # (before the modules that import it by name load)
    atexit.register(_dump)
    os.register_at_fork(after_in_child=_forked)
    threading.Thread(target=_dump_every, name="turn-probe-dump", daemon=True).start()


def _forked() -> None:
    # a forked worker (Spark's Python workers fork from a daemon and leave by os._exit: no
    # atexit) keeps its own record, written every few seconds
    global _T0
    _T0 = time.monotonic()
    for k in ("gc_long", "lag_long", "thread_snaps"):
        _state[k] = []
    for k in ("gc", "lag_buckets", "stacks", "timers"):
        _state[k] = {}
    _state["ticks"] = 0
    _state["forked"] = True
    threading.Thread(target=_dump_every, name="turn-probe-dump", daemon=True).start()


def _dump_every() -> None:
    while not _state.get("stopped"):
        time.sleep(1.0)
        _state.setdefault("thread_snaps", []).append(_threads())
        if len(_state["thread_snaps"]) % 5:
            continue
        try:
            _dump(final=False)
        except Exception:  # noqa: BLE001 - a probe must never take its process down
            pass
