"""The ``redis-streams`` driver against a plain redis-py script of the same shape (issue 33): the
driver's Redis peer must run as a competent user's code does, so its e2e p50 at 1,000 msgs/s
lands within 15% of benchmarks/redis_reference.py's (one producer thread XADD, one consumer
thread XREADGROUP BLOCK + XACK) on the same Redis, the same machine, at the same time. The script
runs in the workload's layout: e2e-latency-1k deals its producer and consumer to two tasks, so
the script's producer runs in a process of its own (``processes=2``).

Noise: this VM's two cores are shared, and a single run's p50 moves by more than 15% with the
load. The two are alternated (script, driver, driver, script: each side runs once early and once
late) and the median of each side's two p50s (their mean) is compared; every run's figures and
the load average are printed, so a failure says whether the machine or the driver moved. The
ratio is held only on a machine that was quiet throughout (a 1-minute load average at most its
CPU count at every run's start, and at most 5% of its CPU time stolen by the host over the
test): on a loaded one a ratio outside the margin is reported as an expected failure, naming the
load and the steal, since there the ratio moves either way with the load (below).

On 3 Dec 2026, quiet (load 0.7-1.6, steal under 3%): 0.93, 0.91 and 1.06 in a row, as a
fresh-clone CI run's 1.00 earlier that day. Before that the test was an expected failure
throughout: on 2 Dec 2026 the driver's median p50 was 342 µs against the script's 267 (1.28x)
at 8abb38d (load 3.4-3.8), and 308 against 268 (1.15x, passed) at a9aea18 (load 3.2-4.8), its
two runs 340 and 276 µs, and 338 against 321 (1.05x, passed; p99 2,974-3,249 µs against
2,367-2,714) at 0a963ed (load 1.4-2.2).
What was left then was not the Redis peer but the schedule every driver shares (spark_bench's
``task._produce``): it waited on the event loop's millisecond timers, so at 1,000 msgs/s each send
started 137-188 µs after its intended time (p50), where the script's ``time.sleep`` woke 89-91 µs
late. Both now wait precisely (``task.wait_until``: the loop's timer to 1.5 ms before, naps of at
most 0.2 ms with the loop's I/O between them, a spin of the last 0.1 ms; the script: ``time.sleep``
to 0.1 ms before, then a spin), so both measure Redis and its client, not their wake-up. With the
driver's schedule precise and the script's not, the driver was 0.84x the script (262 against
313 µs, load 5.5-6.6: its lateness was gone, the script's not). With both precise, four runs at
load 2.7-7.5: 1.56x (one driver run at 769 µs, p99 239 ms, load 7.2), 1.13x (passed), 1.35x and
1.19x; the driver's runs 217-300 µs (one outlier), the script's 176-237 µs (both lower than
before: neither waits for its wake-up any more). So the driver was about 20-35% behind the
plain script net of the schedule.

Looked for on 2 Dec 2026 (14:50-15:20 UTC, load 4.6 to 22: seven other helpers at work) with
every message stamped (intended time, XADD start, XADD return, consumer wake-up) in the Spark
runs and by benchmarks/probes/redis_driver_hops.py (the script's threads and the driver's own
classes without Spark, alternated). What was suspected (the consumer's read waiting behind the
pacer on a loop they share) does not happen in this shape: e2e-latency-1k deals its producer and
its consumer to two tasks, so the consumer is another process, and it takes its receipt time on
its own thread before anything reaches a loop. The parts, at the median: the way from XADD start
to the consumer's wake-up was the same in the driver's classes (two processes) as in the script
(176 and 170 µs against 180 and 166, load 7-10); the driver's send starts 6-10 µs after its slot
(the coroutine chain from ``wait_until`` to ``xadd``, shared with the fastmq driver) against the
script's 1 µs or less; under Spark, single runs at load 9-14 gave 166-223 µs to the consumer
against the script's 137. With the machine loaded the two producers part: the script sends a
late message after the one before it and falls behind for seconds at load 12 or more (its send
starts milliseconds late at the median, its p50 then in ms), the driver pipelines what is late
from its sender thread (24-57% of the sends at load 9-14), so the ratio swings either way with
the load. The test that day, unchanged code: 0.96 (166 against 172 µs, load 4.6-5.4, passed),
1.15 (178 against 155, load 14.8-15.2, passed) and 1.29 (187 against 145, load 18-19.8). The one
part found slower is the way to the consumer under Spark (not in the driver's classes without
it). One difference was in the comparison itself: the script ran both threads in one process,
the driver's workload runs two; in the probe's steadiest round (nice -10, load 20-23) the
script's way to the consumer was 150 and 127 µs in one process, 197 and 253 in two, and the
driver's classes (two processes) 172 and 163. So the script now runs its producer in a process
of its own (``processes=2``), the workload's layout. Twice at load 16-22 (the machine's busiest
half hour): 1.21 (227 against 187 µs, one driver run at 284) and 0.26 (one script run at 7 ms,
one driver run at 1.7 ms: each fell behind its schedule once), which says the load, not Redis.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server is not installed (apt-get install redis-server)")]

MARGIN = 0.15
RATE = 1000
DURATION_S = 10
SHAPE = "e2e-latency-1k"   # the shipped workload, shortened to DURATION_S
#: the host's share of this machine's CPU time above which it is called loaded (see the docstring)
STEAL_MAX = 0.05


def _cpu_times() -> tuple[int, int]:
    """(all CPU time, time stolen by the host) so far, in ticks (/proc/stat's first line)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return sum(v[:8]), (v[7] if len(v) > 7 else 0)


def test_driver_e2e_p50_within_15_percent_of_plain_redis_py(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    pytest.importorskip("pyspark")
    from benchmarks.redis_reference import local_redis, run
    from fastmq._ext import USING_EXTENSIONS
    from spark_bench import cli
    from spark_bench.run.workload import shipped_workloads

    text = shipped_workloads()[SHAPE].read_text()
    lines = [f"duration_s: {DURATION_S}" if ln.startswith("duration_s:") else ln for ln in text.splitlines()]
    assert f"producer_rate: {RATE}" in lines
    wl = tmp_path / f"{SHAPE}.yaml"
    wl.write_text("\n".join(lines) + "\n")
    pure = [] if USING_EXTENSIONS else ["--allow-pure"]
    script: list[dict] = []
    driver: list[dict] = []
    loads: list[float] = []
    cpu0 = _cpu_times()
    spark = cli._spark("local[2]", [])
    try:
        with local_redis() as addr:
            for i, side in enumerate(("script", "driver", "driver", "script")):
                load = os.getloadavg()[0]
                loads.append(load)
                if side == "script":
                    r = run(addr, rate=RATE, duration_s=DURATION_S, warmup_s=3.0, processes=2)
                    assert not r["errors"] and r["measured"] > 0.9 * RATE * DURATION_S, r
                    fig = {"p50": r["e2e_us"]["p50"], "p99": r["e2e_us"]["p99"], "peer": r["peer"]}
                    script.append(fig)
                else:
                    out = tmp_path / f"out{i}"
                    rc = cli.main(["run", str(wl), "--driver", "redis-streams", "--redis", addr, "--out", str(out),
                                   *pure], spark=spark)
                    res = json.loads((out / f"{SHAPE}-redis-streams" / "result.json").read_text())
                    assert rc == 0 and res["status"] == "ok", res["reason"]
                    fig = {"p50": res["e2e"]["latency_us"]["p50"], "p99": res["e2e"]["latency_us"]["p99"],
                           "peer": res["peer"]}
                    driver.append(fig)
                print(f"\n{side}: e2e p50 {fig['p50']:.0f} us p99 {fig['p99']:.0f} us (load {load:.2f}) "
                      f"{fig['peer']}")
    finally:
        spark.stop()
    assert all(f["peer"]["parser"] == "hiredis" for f in script + driver), "hiredis is not installed"
    cpu1 = _cpu_times()
    steal = (cpu1[1] - cpu0[1]) / max(cpu1[0] - cpu0[0], 1)
    s50 = statistics.median(f["p50"] for f in script)
    d50 = statistics.median(f["p50"] for f in driver)
    ratio = d50 / s50
    cpus = os.cpu_count() or 1
    print(f"\nmedian e2e p50: driver {d50:.0f} us, script {s50:.0f} us: driver / script {ratio:.2f} "
          f"(allowed {1 - MARGIN:.2f}..{1 + MARGIN:.2f}); load up to {max(loads):.2f} on {cpus} CPUs, "
          f"steal {steal:.1%}")
    if abs(ratio - 1) > MARGIN and (max(loads) > cpus or steal > STEAL_MAX):
        pytest.xfail(f"loaded machine (load up to {max(loads):.2f} on {cpus} CPUs, {steal:.1%} of CPU time stolen): "
                     f"driver / script {ratio:.2f}, outside {1 - MARGIN:.2f}..{1 + MARGIN:.2f}")
    assert abs(ratio - 1) <= MARGIN, (d50, s50, script, driver)
