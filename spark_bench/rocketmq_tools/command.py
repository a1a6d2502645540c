"""``fastmq-bench rocketmq-tools``: Apache RocketMQ's own benchmark tools against fastmq's broker
and Apache RocketMQ's Java broker, alternately, as kept result files (issue 18).

    fastmq-bench rocketmq-tools --rocketmq-home DIR [--rocketmq-classpath CP] --out benchmarks/results/rocketmq-tools
                                [--shapes w16-s128,w16-s128-consumer] [--rounds 3] [--windows 3]

Opt-in, never part of the test suite: it needs a built Apache RocketMQ 4.x (its broker, NameServer
and ``example`` classes with their libraries) from outside this repository:

- ``--rocketmq-home`` / ``FASTMQ_ROCKETMQ_HOME``: ROCKETMQ_HOME, holding ``conf/logback_*.xml``
  (a distribution's directory, or any directory with those files);
- ``--rocketmq-classpath`` / ``FASTMQ_ROCKETMQ_CLASSPATH``: the classpath, by default
  ``HOME/conf:HOME/lib/*`` as the distribution's scripts build it;
- ``--java`` (default ``$JAVA_HOME/bin/java``, else ``java`` on the PATH).

It lives in ``fastmq-bench`` beside ``collate`` because its result files are read there and its
processes are managed like ``run``'s embedded servers; it does not use Spark (the tools are their
own load generators).

What it does: starts a Java NameServer and broker (ASYNC_FLUSH, the heap of the distribution's
bin/runbroker.sh, ``--java-broker-heap``) and a ``fastmq-namesrv`` and ``fastmq-broker`` as a
user runs them (console scripts next to this Python, a properties file, a temporary store), each
on loopback ports chosen at run time. Then, per shape (``-w`` threads x ``-s`` bytes, optionally
with the benchmark Consumer beside; default: 16 and 64 threads x 128 B and 1 KiB producer alone,
and 16 threads 128 B with a consumer), one warm-up run per broker and ``--rounds`` rounds of one
run on each broker, alternating (A B A B). A run starts the Producer with the tools' defaults
except ``-n -w -s -t``, drops its first 10 s line, keeps the next ``--windows``, and samples the
broker's utime+stime from /proc at each line: broker CPU per message = CPU over the kept span /
(mean TPS x span). With a Consumer, the consumer is started first and the run waits (bounded)
until it has drained any backlog. Both brokers pre-create ``BenchmarkTest`` with 1024 queues.
The shapes ``drainCOUNT-sBYTES`` (a backlog drained by the benchmark Consumer) and
``spark-WORKLOAD`` (``fastmq-bench run`` against each broker) run as ``spark_bench.rocketmq_tools.shapes``
describes, alternated the same way.

Output: ``OUT/<UTC stamp>-<commit>/`` with ``run-<shape>-<broker>-<n>.json`` (+ ``.log``: the
tools' output) per run and ``summary.json`` (medians per shape and broker, fastmq / Java), which
``fastmq-bench collate`` (so ``scripts/bench.sh --collate-only``) puts into RESULTS.md.

Every process it starts runs in its own session and is stopped by its process group in a
``finally`` (and at exit); every wait is bounded. Exit status: 0 every run ok, 1 a run or server
failed (the files say which), 2 bad options or no RocketMQ build.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from fastmq.testing import broker_process, namesrv_process

from .peer import (Peer, RunPlan, _ask, _loadavg, _machine, _now, _pull_rates, _rss_mb, _tool, next_line,
                   peer_label, proc_cpu_s, runq_wait_s)
from .process import (Managed, ManagedServer, PortTaken, ToolsError, free_port, listening, printed, stop_all,
                      wait_ready)
from .result import (BROKERS, RUN_SCHEMA, SUMMARY_SCHEMA, ConsumerLine, Shape, parse_consumer_line,
                           parse_producer_line, parse_shape, run_figures, summarize)

__all__ = ["DEFAULT_SHAPES", "ToolsError", "add_arguments", "run"]

DEFAULT_SHAPES = "w16-s128,w64-s128,w16-s1024,w64-s1024,w16-s128-consumer"
TOPIC = "BenchmarkTest"   # the tools' default; both brokers make it with 1024 queues at start
_PROG = "fastmq-bench rocketmq-tools"

# What Java 9+ must open for 4.9's MappedFile cleaner, DirectBuffer, netty's direct buffers and fastjson.
_OPENS = ("java.nio", "sun.nio.ch", "jdk.internal.ref", "java.lang", "java.lang.reflect", "java.util",
          "jdk.internal.misc")
# the distribution's runbroker.sh (Java 9+ branch) without its GC log
_BROKER_GC = ["-XX:+UseG1GC", "-XX:G1ReservePercent=25", "-XX:InitiatingHeapOccupancyPercent=30",
              "-XX:SoftRefLRUPolicyMSPerMB=0", "-XX:+AlwaysPreTouch"]
_COMMON = ["-server", "-XX:-OmitStackTraceInFastThrow", "-XX:-UseLargePages", "-XX:+PerfDisableSharedMem"]


def _runbroker_heap() -> str:
    """The broker heap of RocketMQ 4.9.8's ``distribution/bin/runbroker.sh``: a fixed ``-Xms8g
    -Xmx8g`` whatever the machine (it computes nothing from the machine's size; 5.3.3's is the
    same). A machine with less than 16 GB gets half its memory instead (whole GB, at least 1g),
    so the broker starts beside the load generators."""
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return "8g"
    return "8g" if mem_gb >= 16 else f"{max(1, int(mem_gb // 2))}g"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rocketmq-tools``."""
    p.add_argument("--out", required=True, help="results go to OUT/<UTC stamp>-<commit>/")
    p.add_argument("--rocketmq-home", default=os.environ.get("FASTMQ_ROCKETMQ_HOME", ""),
                   help="ROCKETMQ_HOME of a built Apache RocketMQ 4.x (conf/logback_*.xml); "
                        "default $FASTMQ_ROCKETMQ_HOME")
    p.add_argument("--rocketmq-classpath", default=os.environ.get("FASTMQ_ROCKETMQ_CLASSPATH", ""),
                   help="its classpath (broker, namesrv, example and libraries); default "
                        "$FASTMQ_ROCKETMQ_CLASSPATH, else HOME/conf:HOME/lib/*")
    p.add_argument("--java", default="", help="the java command (default $JAVA_HOME/bin/java, else java on PATH)")
    p.add_argument("--shapes", default=DEFAULT_SHAPES,
                   help=f"comma-separated wTHREADS-sBYTES[-consumer], drainCOUNT[k|m]-sBYTES (a backlog drained by "
                        f"the benchmark Consumer), spark-WORKLOAD (fastmq-bench run; spark-many-producers) "
                        f"(default {DEFAULT_SHAPES})")
    p.add_argument("--rounds", type=int, default=3, help="runs per broker and shape, alternating (default 3)")
    p.add_argument("--windows", type=int, default=3, help="10 s lines kept per run after the first (default 3)")
    p.add_argument("--warmup-windows", type=int, default=1,
                   help="lines kept by the warm-up run of each broker before each shape (0: no warm-up; default 1)")
    p.add_argument("--first", choices=BROKERS, default="java", help="which broker runs first in each round")
    p.add_argument("--java-broker-heap", default=_runbroker_heap(),
                   help="the Java broker's -Xms/-Xmx (default: 4.9.8's bin/runbroker.sh's 8g, or half the "
                        f"machine's memory when it has less than 16 GB, at least 1g: {_runbroker_heap()} here)")
    p.add_argument("--drain-timeout", type=float, default=240.0,
                   help="seconds a Consumer may take to drain a backlog before the Producer starts, and a "
                        "drain shape's fill and drain each (default 240)")
    p.add_argument("--work-dir", default="", help="where the temporary stores go (default: the system's temp dir)")
    p.add_argument("--py-spy", default="", metavar="PY_SPY",
                   help="record the fastmq broker over each run's kept windows with this py-spy "
                        "(`record --idle`, folded stacks: run-<shape>-fastmq-<n>-pyspy.folded); default: no profile")


def _route_ready(namesrv: str) -> Callable[[], bool]:
    from fastmq.protocol.codes import RequestCode, ResponseCode

    def check() -> bool:
        try:
            return bool(_ask(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}).code
                        == ResponseCode.SUCCESS)
        except Exception:  # not up yet, or a timeout: asked again until the deadline
            return False
    return check


def _broker_version(addr: str, classpath: str = "", tries: int = 5) -> str:
    """The broker's brokerVersionDesc (``V4_9_8``), asked up to ``tries`` times (a broker just booted
    on a loaded machine may not answer the first ask in time); else the version of the
    ``rocketmq-broker-X.jar`` on ``classpath`` (``4.9.8``); else ''."""
    from fastmq.protocol.codes import RequestCode, ResponseCode
    for i in range(tries):
        try:
            r = _ask(addr, RequestCode.GET_BROKER_RUNTIME_INFO, {}, timeout=10.0)
            if r.code == ResponseCode.SUCCESS and r.body:
                v = str(json.loads(r.body).get("table", {}).get("brokerVersionDesc", ""))
                if v:
                    return v
        except Exception:  # the version is a label in the summary, not a reason to stop
            pass
        if i + 1 < tries:
            time.sleep(2.0)
    return _jar_version(classpath)


def _jar_version(classpath: str) -> str:
    """The X of the first ``rocketmq-broker-X.jar`` on ``classpath`` (entries ending ``/*`` listed)."""
    for entry in classpath.split(os.pathsep):
        p = Path(entry)
        names = [c.name for c in sorted(p.parent.glob("rocketmq-broker-*.jar"))] if p.name == "*" else [p.name]
        for name in names:
            m = re.fullmatch(r"rocketmq-broker-(\d[\w.-]*)\.jar", name)
            if m:
                return m[1]
    return ""


# ---------------------------------------------------------------- the two systems


@dataclass
class JavaSetup:
    """How to run the RocketMQ build: the java command, its major version, classpath and home."""

    java: str
    major: int
    classpath: str
    home: Path
    broker_heap: str
    version_text: str = ""

    def jvm(self, heap: list[str], log_home: Path, extra: Sequence[str] = ()) -> list[str]:
        opens: list[str] = []
        if self.major >= 9:
            for pkg in _OPENS:
                opens += ["--add-opens", f"java.base/{pkg}=ALL-UNNAMED"]
            opens += ["--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true"]
        return [self.java, *_COMMON, *heap, *extra, *opens, f"-Duser.home={log_home}",
                f"-Drocketmq.home.dir={self.home}", "-cp", self.classpath]

    def env(self) -> dict[str, str]:
        return {**os.environ, "ROCKETMQ_HOME": str(self.home)}


def java_setup(a: argparse.Namespace) -> JavaSetup:
    """The RocketMQ build named by the options or environment.

    Raises:
        ToolsError: no home, no conf, no java, or no classpath, each with what to give.
    """
    if not a.rocketmq_home:
        raise ToolsError("no RocketMQ build: give --rocketmq-home (or FASTMQ_ROCKETMQ_HOME) of a built Apache "
                         "RocketMQ 4.x, and --rocketmq-classpath (or FASTMQ_ROCKETMQ_CLASSPATH) unless HOME/lib "
                         "holds its jars")
    home = Path(a.rocketmq_home).resolve()
    for conf in ("logback_broker.xml", "logback_namesrv.xml"):
        if not (home / "conf" / conf).is_file():
            raise ToolsError(f"--rocketmq-home {home}: no conf/{conf} (ROCKETMQ_HOME of a RocketMQ 4.x build)")
    cp = a.rocketmq_classpath
    if not cp:
        if not any((home / "lib").glob("*.jar")):
            raise ToolsError(f"--rocketmq-home {home}: no lib/*.jar; give --rocketmq-classpath "
                             "(or FASTMQ_ROCKETMQ_CLASSPATH)")
        cp = f"{home / 'conf'}{os.pathsep}{home / 'lib' / '*'}"
    java = a.java or (str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "")
    java = java or shutil.which("java") or ""
    if not java or not Path(java).exists():
        raise ToolsError("no java: give --java, set JAVA_HOME, or put java on the PATH")
    try:
        text = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError) as e:
        raise ToolsError(f"{java} -version failed: {e}") from e
    m = re.search(r'version "(1\.)?(\d+)', text)
    if m is None:
        raise ToolsError(f"{java} -version: no version in {text[:200]!r}")
    return JavaSetup(java, int(m[2]), cp, home, a.java_broker_heap, text.splitlines()[0] if text else "")


def _young(heap: str) -> str:
    m = re.fullmatch(r"(\d+)([kmgKMG]?)", heap)
    if m is None:
        raise ToolsError(f"--java-broker-heap {heap!r}: expected a size such as 256m")
    return f"{max(1, int(m[1]) // 2)}{m[2]}"


def start_java(d: Path, js: JavaSetup, ready_timeout: float = 120.0) -> Peer:
    """A Java NameServer and broker (ASYNC_FLUSH, autoCreateTopicEnable) in the new directory ``d``, both ready."""
    (d / "namesrv").mkdir(parents=True)
    (d / "broker").mkdir(parents=True)
    ns_port = free_port()
    ns_conf = d / "namesrv" / "namesrv.properties"
    ns_conf.write_text(f"listenPort={ns_port}\nkvConfigPath={d / 'namesrv' / 'kvConfig.json'}\n"
                       f"configStorePath={d / 'namesrv' / 'namesrv.properties.store'}\n")
    ns = Managed(js.jvm(["-Xms128m", "-Xmx128m", "-Xmn64m"], d / "namesrv", ["-XX:+UseG1GC"])
                 + ["org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(ns_conf)],
                 "java-namesrv", d / "namesrv" / "console.log", d / "namesrv", js.env())
    peer = Peer("java", f"127.0.0.1:{ns_port}", ns, [ns])
    try:
        wait_ready(listening(ns_port), ns, "the Java NameServer", ready_timeout)
        port = free_port((-2, 1))
        store = d / "broker" / "store"
        conf = {"brokerClusterName": "DefaultCluster", "brokerName": f"javapeer-{port}", "brokerId": 0,
                "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH", "autoCreateTopicEnable": "true",
                "namesrvAddr": peer.namesrv, "brokerIP1": "127.0.0.1", "listenPort": port,
                "haListenPort": port + 1, "storePathRootDir": store, "storePathCommitLog": store / "commitlog"}
        b_conf = d / "broker" / "broker.conf"
        b_conf.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        heap = js.broker_heap
        # runbroker.sh (4.9.8) on Java 9+: -Xms = -Xmx, G1 sizing its young generation (no -Xmn),
        # 16m regions, MaxDirectMemorySize=15g (a limit, not an allocation)
        broker = Managed(js.jvm([f"-Xms{heap}", f"-Xmx{heap}", "-XX:G1HeapRegionSize=16m",
                                 "-XX:MaxDirectMemorySize=15g"], d / "broker", _BROKER_GC)
                         + ["org.apache.rocketmq.broker.BrokerStartup", "-c", str(b_conf), "-n", peer.namesrv],
                         "java-broker", d / "broker" / "console.log", d / "broker", js.env())
        _await_broker(peer, broker, "the Java broker", ready_timeout)
        peer.info = {"broker_addr": f"127.0.0.1:{port}", "version": _broker_version(f"127.0.0.1:{port}", js.classpath),
                     "java": js.version_text, "heap": heap, "flush": "ASYNC_FLUSH"}
    except BaseException:
        peer.stop()
        raise
    return peer


def _await_broker(peer: Peer, broker: Managed, what: str, ready_timeout: float) -> None:
    """Make ``broker`` the peer's (stopped with it from now on) and wait until it has booted and the
    NameServer serves its route of TOPIC."""
    peer.broker = broker
    peer.procs.append(broker)
    wait_ready(printed(broker, "boot success"), broker, what, ready_timeout)
    wait_ready(_route_ready(peer.namesrv), broker, f"{what}'s route of {TOPIC}", ready_timeout)


def _retrying(start: Callable[[Path], Peer], base: Path, tries: int = 3) -> Peer:
    """``start(dir)`` again, in a fresh directory with fresh ports, when a port was taken meanwhile
    (ports are chosen free, but other processes on a shared machine choose too)."""
    for n in range(1, tries + 1):
        try:
            return start(base / f"try{n}")
        except PortTaken as e:
            if n == tries:
                raise
            print(f"{_PROG}: {str(e).splitlines()[0][:200]}; trying other ports", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def start_fastmq(d: Path, ready_timeout: float = 120.0) -> Peer:
    """``fastmq-namesrv`` and ``fastmq-broker`` as a user runs them, started through fastmq.testing
    (a properties file each, the broker's store with 1 GiB commit-log files, as its default, and the
    logs under the new directory ``d``)."""
    (d / "namesrv").mkdir(parents=True)
    (d / "broker").mkdir(parents=True)
    ns = ManagedServer(namesrv_process(d / "namesrv", bindAddress="127.0.0.1", logPath=d / "namesrv" / "namesrv.log"),
                       "fastmq-namesrv", ready_timeout)
    peer = Peer("fastmq", ns.server.addr, ns, [ns])
    try:
        port = free_port()
        server = broker_process(d / "broker", peer.namesrv, port=port, brokerClusterName="DefaultCluster",
                                brokerName=f"fastmq-{port}", brokerId=0, flushDiskType="ASYNC_FLUSH",
                                autoCreateTopicEnable="true", mappedFileSizeCommitLog=1 << 30,
                                logPath=d / "broker" / "broker.log")
        broker = ManagedServer(server, "fastmq-broker", ready_timeout)
        _await_broker(peer, broker, "fastmq-broker", ready_timeout)
        m = re.search(r"extensions=(\w+), uvloop=(\w+)", broker.output(1 << 20))
        import fastmq
        peer.info = {"broker_addr": f"127.0.0.1:{port}", "version": f"fastmq {fastmq.__version__}",
                     "extensions": m[1] if m else "", "uvloop": m[2] if m else "", "flush": "ASYNC_FLUSH",
                     "source": str(Path(fastmq.__file__).resolve().parent.parent)}
    except BaseException:
        peer.stop()
        raise
    return peer


# ---------------------------------------------------------------- one run


def _drain(cons: Managed, deadline: float, consumer_lines: list[tuple[float, ConsumerLine]]) -> bool:
    """Wait until two Consumer lines in a row show no backlog (under 100 msgs/s: one alone can be
    the window before its first rebalance); False at ``deadline``."""
    quiet = 0
    while time.monotonic() < deadline and cons.alive():
        try:
            t, line = cons.lines.get(timeout=0.5)
        except queue.Empty:
            continue
        c = parse_consumer_line(line)
        if c is not None:
            consumer_lines.append((t, c))
            quiet = quiet + 1 if c.tps < 100 else 0
            if quiet == 2:
                return True
    return False


def one_run(plan: RunPlan, peer: Peer, shape: Shape, n: int, warmup: int = 0) -> dict[str, Any]:
    """One Producer run (and Consumer, for a consumer shape) against ``peer``; its run document,
    written to ``plan.out`` unless it is a warm-up (``warmup``: lines kept)."""
    windows = warmup or plan.windows
    tag = f"{shape.name}-{peer.name}-{'warmup' if warmup else n}"
    log = plan.out / f"run-{tag}.log" if not warmup else plan.client_home / f"run-{tag}.log"
    doc: dict[str, Any] = {"schema": RUN_SCHEMA, "broker": peer.name, "shape": shape.name, "threads": shape.threads,
                           "size": shape.size, "consumer": shape.consumer, "round": n, "warmup": bool(warmup),
                           "started_at": _now(), "namesrv": peer.namesrv, "windows_kept": windows,
                           "loadavg_before": _loadavg(), "file": f"run-{tag}.json", "log": log.name,
                           "peer": peer_label(peer)}
    tools: list[Managed] = []
    spy: Managed | None = None
    samples: list[dict[str, Any]] = []
    consumer_lines: list[tuple[float, ConsumerLine]] = []
    reason = ""
    try:
        cons = None
        if shape.consumer:
            cons = _tool(plan, "org.apache.rocketmq.example.benchmark.Consumer", ["-n", peer.namesrv, "-t", TOPIC],
                         f"consumer-{tag}", log.with_name(f"run-{tag}-consumer.log"))
            tools.append(cons)
            if not _drain(cons, time.monotonic() + plan.drain_timeout, consumer_lines):
                reason = (f"the Consumer did not drain the backlog within {plan.drain_timeout:.0f}s"
                          if cons.alive() else f"the Consumer exited with {cons.proc.returncode}")
        if not reason:
            prod = _tool(plan, "org.apache.rocketmq.example.benchmark.Producer",
                         ["-n", peer.namesrv, "-w", str(shape.threads), "-s", str(shape.size), "-t", TOPIC],
                         f"producer-{tag}", log, ["-Dorg.apache.rocketmq.client.sendSmartMsg=true"])
            tools.append(prod)
            # a line every 10 s, the first after 10-20 s: the JVM's start and one spare window on top
            deadline = time.monotonic() + plan.tool_start_timeout + (windows + 2) * 10.0
            while len(samples) < windows + 1 and time.monotonic() < deadline:
                if not peer.broker.alive():
                    reason = f"the {peer.name} broker exited with {peer.broker.proc.returncode} during the run"
                    break
                if cons is not None:
                    while not cons.lines.empty():
                        t, text = cons.lines.get_nowait()
                        c = parse_consumer_line(text)
                        if c is not None:
                            consumer_lines.append((t, c))
                got = next_line(prod, "Producer")
                if isinstance(got, str):
                    reason = got
                    break
                if got is None:
                    continue
                t, text = got
                p = parse_producer_line(text)
                if p is None:
                    continue
                jiffies, idle = _machine()
                samples.append({"t": t, "tps": p.tps, "max_rt_ms": p.max_rt_ms, "avg_rt_ms": p.avg_rt_ms,
                                "send_failed": p.send_failed, "response_failed": p.response_failed,
                                "broker_cpu_s": proc_cpu_s(peer.broker.pid), "tool_cpu_s": proc_cpu_s(prod.pid),
                                "machine_jiffies": jiffies, "machine_idle": idle,
                                "broker_runq_s": runq_wait_s(peer.broker.pid)})
                if cons is not None:
                    samples[-1]["consumer_cpu_s"] = proc_cpu_s(cons.pid)
                    samples[-1].update(_pull_rates(peer.info.get("broker_addr", "")))
                if len(samples) == 1 and plan.py_spy and peer.name == "fastmq" and not warmup:
                    spy = Managed([plan.py_spy, "record", "--idle", "--nonblocking", "-r", "100", "-f", "raw",
                                   "-d", str(windows * 10), "-p", str(peer.broker.pid), "-o",
                                   str(log.with_name(f"run-{tag}-pyspy.folded").resolve())],
                                  f"py-spy-{tag}", log.with_name(f"run-{tag}-pyspy.log"), plan.out)
            if not reason and len(samples) < windows + 1:
                reason = f"{len(samples)} of {windows + 1} Producer lines within the run's time limit"
        if cons is not None:   # its lines up to the Producer's last
            while not cons.lines.empty():
                t, text = cons.lines.get_nowait()
                c = parse_consumer_line(text)
                if c is not None:
                    consumer_lines.append((t, c))
    finally:
        rss = _rss_mb(peer.broker.pid)
        if spy is not None:   # it stops by itself after the kept windows and writes its file then
            try:
                spy.proc.wait(20.0)
            except subprocess.TimeoutExpired:
                os.killpg(spy.proc.pid, signal.SIGINT)   # (SIGINT: it still writes what it has)
            spy.stop(timeout=10.0)
        for tool in reversed(tools):
            tool.stop(timeout=15.0)
    t0 = samples[0]["t"] if samples else 0.0
    doc["producer_lines"] = [{**s, "t": round(s["t"] - t0, 3)} for s in samples]
    doc["consumer_lines"] = [{"t": round(t - t0, 3), "tps": c.tps, "fail": c.fail, "avg_b2c_ms": c.avg_b2c_ms,
                              "avg_s2c_ms": c.avg_s2c_ms} for t, c in consumer_lines]
    doc["loadavg_after"] = _loadavg()
    if not reason:
        doc["figures"] = {**run_figures(samples, windows, consumer_lines), "broker_rss_mb": rss}
    doc["status"], doc["reason"] = ("failed", reason) if reason else ("ok", "")
    if not warmup:
        (plan.out / doc["file"]).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def _line(doc: dict[str, Any]) -> str:
    head = f"  {doc['broker']:6s} {doc['shape']:18s} {'warm-up' if doc['warmup'] else 'run ' + str(doc['round'])}"
    if doc["status"] != "ok":
        return f"{head}: FAILED: {doc['reason']}"
    f = doc["figures"]
    if doc.get("kind", "producer") != "producer":
        from .shapes import shape_line
        return f"{head}: {shape_line(doc)}"
    cpu = f"{f['cpu_us_per_msg']:.1f}" if f["cpu_us_per_msg"] is not None else "-"
    rt = f"{f['avg_rt_ms']:.2f}" if f["avg_rt_ms"] is not None else "-"
    cons = f"  consumer {f['consumer_tps']:.0f}/s" if f["consumer_tps"] is not None else ""
    return (f"{head}: TPS {f['tps']:8.0f}  avg RT {rt} ms  broker CPU {cpu} us/msg "
            f"({f['broker_cpu_cores'] or 0:.2f} cores){cons}  windows {f['windows']}")


def _commit() -> tuple[str, bool]:
    import fastmq
    root = Path(fastmq.__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return "nocommit", False
    return head or "nocommit", dirty


def run(a: argparse.Namespace) -> int:
    """The ``rocketmq-tools`` subcommand; returns the exit status."""
    try:
        shapes = [parse_shape(s) for s in a.shapes.split(",") if s.strip()]
        if not shapes:
            raise ValueError("--shapes names no shape")
        for opt in ("rounds", "windows"):
            if getattr(a, opt) < 1:
                raise ValueError(f"--{opt} must be at least 1")
        if a.warmup_windows < 0:
            raise ValueError("--warmup-windows must be 0 or more")
        _young(a.java_broker_heap)
        js = java_setup(a)
    except (ValueError, ToolsError) as e:
        print(f"{_PROG}: {e}", file=sys.stderr)
        return 2
    commit, dirty = _commit()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    # absolute: the tools and the Spark runs of the spark- shapes are started in a client directory
    out = (Path(a.out) / f"{stamp}-{commit}{'-dirty' if dirty else ''}").resolve()
    out.mkdir(parents=True, exist_ok=False)
    base = Path(tempfile.mkdtemp(prefix="fastmq-rocketmq-tools-", dir=a.work_dir or None))
    (base / "client").mkdir()
    plan = RunPlan(js, out, base / "client", a.windows, a.drain_timeout, py_spy=a.py_spy)
    order = [a.first] + [b for b in BROKERS if b != a.first]
    summary: dict[str, Any] = {
        "schema": SUMMARY_SCHEMA, "stamp": stamp, "commit": commit, "dirty": dirty, "started_at": _now(),
        "settings": {"shapes": [s.name for s in shapes], "rounds": a.rounds, "windows": a.windows,
                     "window_s": 10, "dropped_lines": 1, "warmup_windows": a.warmup_windows, "order": order,
                     "topic": TOPIC, "flush": "ASYNC_FLUSH", "java_broker_heap": a.java_broker_heap},
        "env": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg_start": _loadavg()}}
    runs: list[dict[str, Any]] = []
    peers: dict[str, Peer] = {}
    status, reason = "failed", "stopped before the end (interrupted)"
    print(f"{_PROG}: results in {out}; stores under {base}", flush=True)
    try:
        try:
            peers["java"] = _retrying(lambda d: start_java(d, js), base / "java")
            peers["fastmq"] = _retrying(start_fastmq, base / "fastmq")
        except ToolsError as e:
            reason = str(e)
            print(f"{_PROG}: FAILED: {reason}", file=sys.stderr)
            return 1
        for name, p in peers.items():
            summary["env"][name] = p.info
            print(f"  {name}: namesrv {p.namesrv}, broker {p.info.get('broker_addr')} pid {p.broker.pid} "
                  f"({p.info.get('version')})", flush=True)
        from .shapes import RUNS
        for shape in shapes:
            one = RUNS.get(shape.kind, one_run)
            if a.warmup_windows:
                for b in order:
                    print(_line(one(plan, peers[b], shape, 0, a.warmup_windows)), flush=True)
            for n in range(1, a.rounds + 1):
                for b in order:
                    doc = one(plan, peers[b], shape, n, 0)
                    runs.append(doc)
                    print(_line(doc), flush=True)
                    if not peers[b].broker.alive():
                        raise ToolsError(f"the {b} broker exited with {peers[b].broker.proc.returncode}: "
                                         f"{peers[b].broker.output(1500)}")
        entries, status, reason = summarize(runs, shapes)
        summary["shapes"] = entries
    except ToolsError as e:
        reason = str(e)
        print(f"{_PROG}: FAILED: {reason}", file=sys.stderr)
    finally:
        for p in peers.values():
            p.stop()
        stop_all()
        shutil.rmtree(base, ignore_errors=True)
        if "shapes" not in summary:   # what was measured before the failure stays readable
            summary["shapes"] = summarize(runs, shapes)[0]
        summary.update({"status": status, "reason": reason, "finished_at": _now()})
        summary["env"]["loadavg_end"] = _loadavg()
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    for s in summary["shapes"]:
        f, j, r = s["fastmq"]["median"], s["java"]["median"], s["ratio"]
        print(f"{s['shape']:18s} TPS fastmq {_f(f['tps'])} java {_f(j['tps'])} ratio {_f(r['tps'], 2)}; "
              f"CPU us/msg fastmq {_f(f['cpu_us_per_msg'], 1)} java {_f(j['cpu_us_per_msg'], 1)}")
    print(f"{_PROG}: {status}{': ' + reason if reason else ''}; summary in {out / 'summary.json'}")
    return 0 if status == "ok" else 1


def _f(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"
