"""The ``redis-streams`` driver against a plain redis-py script of the same shape (issue 33): the
driver's Redis peer must run as a competent user's code does, so its e2e p50 at 1,000 msgs/s
lands within 15% of benchmarks/redis_reference.py's (one producer thread XADD, one consumer
thread XREADGROUP BLOCK + XACK) on the same Redis, the same machine, at the same time.

Noise: this VM's two cores are shared, and a single run's p50 moves by more than 15% with the
load. The two are alternated (script, driver, driver, script: each side runs once early and once
late) and the median of each side's two p50s (their mean) is compared; every run's figures and
the load average are printed, so a failure says whether the machine or the driver moved.

Expected to fail for now (xfail, not strict: it can pass): on 2 Dec 2026 the driver's median p50
was 342 µs against the script's 267 (1.28x) at 8abb38d (load 3.4-3.8), and 308 against 268
(1.15x, passed) at a9aea18 (load 3.2-4.8), its two runs 340 and 276 µs, and 338 against 321
(1.05x, passed; p99 2,974-3,249 µs against 2,367-2,714) at 0a963ed (load 1.4-2.2).
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
before: neither waits for its wake-up any more). So the driver is about 20-35% behind the plain
script net of the schedule: its consumer and producer run inside a Spark Python worker, on an
event loop with threads for the blocking client; that gap is the next thing to find. Still xfail
(not strict).
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


@pytest.mark.xfail(strict=False, reason="with both schedules precise the driver is 1.13-1.35x the script "
                   "(1.56x with an outlier run at load 7): a gap beside the schedule is left (see the docstring)")
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
    spark = cli._spark("local[2]", [])
    try:
        with local_redis() as addr:
            for i, side in enumerate(("script", "driver", "driver", "script")):
                load = os.getloadavg()[0]
                if side == "script":
                    r = run(addr, rate=RATE, duration_s=DURATION_S, warmup_s=3.0)
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
    s50 = statistics.median(f["p50"] for f in script)
    d50 = statistics.median(f["p50"] for f in driver)
    print(f"\nmedian e2e p50: driver {d50:.0f} us, script {s50:.0f} us: driver / script {d50 / s50:.2f} "
          f"(allowed {1 - MARGIN:.2f}..{1 + MARGIN:.2f})")
    assert abs(d50 / s50 - 1) <= MARGIN, (d50, s50, script, driver)
