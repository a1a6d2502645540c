"""Issue 17 acceptance on real processes: two NameServers, two brokers, a steady producer and a
consumer group of two; NameServer 1 and then broker a killed -9 (and, busy, broker b paused for
~700 ms right after). No send fails after the client's own retries, no try goes to a once it is
marked unreachable and at most one per send before, and every acknowledged message is consumed
once a is back (fastmq.testing.failover runs it)."""
from __future__ import annotations

from pathlib import Path

import pytest

from fastmq.testing.failover import run_failover

pytestmark = pytest.mark.slow


def _check(out) -> None:
    summary = out.as_dict()
    print(summary)
    assert out.sends_failed == 0, summary
    assert out.sends_ok > 200, summary                      # it kept sending throughout
    assert out.callbacks_extra == 0, summary                # an async callback reports once
    assert out.acked_on_a_after_death == 0, summary
    assert out.max_tries_on_a_per_send <= 1, summary
    assert out.tries_on_unreachable == 0, summary
    # whatever marks it: a handful of tries on the dead broker in all (those in flight when it
    # died, or the one that found it dead), not one per send
    assert out.tries_on_a_after_death <= (2 if out.api == "blocking" else 20), summary
    assert out.not_consumed == 0, summary
    # consumers kept reading broker b's queues: no gap near a pull's long-poll timeout (15 s)
    assert out.longest_consume_gap_b_ms < 15_000, summary
    # the route caught up within seconds, not at the 30 s poll: a left the producer's tables
    assert 0 <= out.a_left_route_ms < 5_000, summary


@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "busy"])
async def test_blocking_producer_rides_over_a_dead_namesrv_and_broker(tmp_path: Path, busy: bool) -> None:
    _check(await run_failover(tmp_path, api="blocking", busy=busy))


@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "busy"])
async def test_asyncio_producer_rides_over_a_dead_namesrv_and_broker(tmp_path: Path, busy: bool) -> None:
    # with a group of two lite pull consumers (the blocking tests use push consumers)
    _check(await run_failover(tmp_path, api="aio", busy=busy, consumer="lite"))


async def test_default_settings_ride_over_it_too(tmp_path: Path) -> None:
    # without latency fault tolerance (the default) an unreachable broker is passed over all the same
    _check(await run_failover(tmp_path, api="blocking", busy=True, fault=False))
