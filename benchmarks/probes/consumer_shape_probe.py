"""The fastmq broker alone under RocketMQ's benchmark Producer + Consumer: where its thread's time goes.

    FASTMQ_ROCKETMQ_HOME=... FASTMQ_ROCKETMQ_CLASSPATH=... \\
        python -m benchmarks.probes.consumer_shape_probe [--nice 0,-5,0,-5] [--settle 40] [--span 20] [--out FILE]

A diagnostic beside ``fastmq-bench rocketmq-tools`` (which compares the two brokers): it starts a
``fastmq-namesrv`` and ``fastmq-broker`` as that command does, then once per ``--nice`` value the
benchmark Consumer (defaults) and Producer (16 threads, 128 B), waits ``--settle`` seconds and
reads over ``--span`` seconds from /proc the broker's user and system CPU, its voluntary switches
(it slept in the poll), involuntary ones (it was preempted) and its run-queue wait (schedstat), with
the Producer's last TPS lines and the broker's pull rates. A nice value other than 0 is applied to
every broker thread (root only): not a setting to run with, but a measure of how much the broker's
throughput in this shape depends on its share of a saturated machine. Values alternate in the order
given, the same broker throughout.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _stat(pid: int) -> dict[str, float]:
    from spark_bench.rocketmq_tools.peer import runq_wait_s
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    status: dict[str, str] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            status[k] = v.strip()
    tick = os.sysconf("SC_CLK_TCK")
    return {"t": time.monotonic(), "user": int(fields[11]) / tick, "sys": int(fields[12]) / tick,
            "vol": float(status["voluntary_ctxt_switches"]), "invol": float(status["nonvoluntary_ctxt_switches"]),
            "runq": runq_wait_s(pid)}


def _renice(pid: int, nice: int) -> None:
    for t in os.listdir(f"/proc/{pid}/task"):
        os.setpriority(os.PRIO_PROCESS, int(t), nice)


def one(rt: Any, plan: Any, peer: Any, nice: int, settle: float, span: float, n: int) -> dict[str, Any]:
    pid = peer.broker.pid
    _renice(pid, nice)
    tools = []
    try:
        plog = plan.out / f"producer-{n}.log"
        tools.append(rt._tool(plan, "org.apache.rocketmq.example.benchmark.Consumer", ["-n", peer.namesrv, "-t", rt.TOPIC],
                              f"consumer-{n}", plan.out / f"consumer-{n}.log"))
        time.sleep(25)   # the Consumer's start and first rebalance
        tools.append(rt._tool(plan, "org.apache.rocketmq.example.benchmark.Producer",
                              ["-n", peer.namesrv, "-w", "16", "-s", "128", "-t", rt.TOPIC], f"producer-{n}", plog,
                              ["-Dorg.apache.rocketmq.client.sendSmartMsg=true"]))
        time.sleep(settle)
        a, load = _stat(pid), Path("/proc/loadavg").read_text().split()[:3]
        time.sleep(span)
        b = _stat(pid)
        rates = rt._pull_rates(peer.info["broker_addr"])
        dt = b["t"] - a["t"]
        tps = [int(line.split("Send TPS: ")[1].split()[0]) for line in plog.read_text().splitlines()
               if "Send TPS: " in line]
        return {"nice": nice, "loadavg_before": " ".join(load), "producer_tps_lines": tps[-3:],
                "broker_user_cores": (b["user"] - a["user"]) / dt, "broker_sys_cores": (b["sys"] - a["sys"]) / dt,
                "broker_runq_cores": (b["runq"] - a["runq"]) / dt,
                "voluntary_switches_per_s": (b["vol"] - a["vol"]) / dt,
                "involuntary_switches_per_s": (b["invol"] - a["invol"]) / dt, **rates}
    finally:
        for t in reversed(tools):
            t.stop(15.0)
        _renice(pid, 0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--nice", default="0", help="comma-separated nice values, one run each, in order (default 0)")
    p.add_argument("--settle", type=float, default=40.0)
    p.add_argument("--span", type=float, default=20.0)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    from spark_bench.rocketmq_tools import command as rt
    from spark_bench.rocketmq_tools.process import stop_all
    js = rt.java_setup(argparse.Namespace(rocketmq_home=os.environ.get("FASTMQ_ROCKETMQ_HOME", ""),
                                          rocketmq_classpath=os.environ.get("FASTMQ_ROCKETMQ_CLASSPATH", ""),
                                          java="", java_broker_heap="256m"))
    base = Path(tempfile.mkdtemp(prefix="fastmq-consumer-probe-"))
    (base / "client").mkdir()
    plan = rt.RunPlan(js, base, base / "client", 3, 120.0)
    peer = None
    runs = []
    try:
        peer = rt.start_fastmq(base / "fastmq")
        for n, nice in enumerate(int(v) for v in a.nice.split(",")):
            runs.append(one(rt, plan, peer, nice, a.settle, a.span, n))
            print(json.dumps(runs[-1]), flush=True)
    finally:
        if peer is not None:
            peer.stop()
        stop_all()
        shutil.rmtree(base, ignore_errors=True)
    if a.out:
        a.out.write_text(json.dumps({"schema": "fastmq-consumer-shape-probe/1", "settle_s": a.settle, "span_s": a.span,
                                     "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
