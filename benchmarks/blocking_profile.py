"""One shape of the blocking client for a profiler to watch: a fastmq-namesrv and fastmq-broker
started here, then ``send`` (one in flight), ``send_async`` (rounds of 20,000 with a callback,
all awaited) or ``consume`` (100,000 messages stored, then read by a PushConsumer with a plain
function listener) for about ``seconds``, and the rate printed. For example::

    py-spy record --native --threads -o send.svg -- .venv/bin/python benchmarks/blocking_profile.py send 6

(``--idle`` too to see where the threads wait: the blocking client's time is mostly waiting.)
The flame graphs kept from issue 18 are in benchmarks/results/profiles/.
"""
from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fastmq  # noqa: E402  (after the path: this checkout's fastmq and tests.support)
from fastmq.testing import broker_process, namesrv_process  # noqa: E402

BODY = b"x" * 128
N_ASYNC, N_CONSUME = 20_000, 100_000


def main(shape: str, seconds: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="fastmq-blocking-profile"))
    ns = namesrv_process(tmp).start()
    b = broker_process(tmp, ns.addr, brokerName="bench", mappedFileSizeCommitLog=268435456).start()
    try:
        with fastmq.Producer("PG_PROFILE", namesrv_addr=ns.addr) as p:
            p.send(fastmq.Message("ProfileBench", b"warm"))
            end, n, t0 = time.monotonic() + seconds, 0, time.perf_counter()
            if shape == "send":
                while time.monotonic() < end:
                    for _ in range(200):
                        p.send(fastmq.Message("ProfileBench", BODY))
                    n += 200
            elif shape == "send_async":
                while time.monotonic() < end:
                    done, acked = threading.Event(), [0]

                    def on_sent(result: object, error: BaseException | None) -> None:
                        acked[0] += 1
                        if acked[0] == N_ASYNC:
                            done.set()
                    for _ in range(N_ASYNC):
                        p.send_async(fastmq.Message("ProfileBench", BODY), on_sent)
                    assert done.wait(120)
                    n += N_ASYNC
            elif shape == "consume":
                for _ in range(N_CONSUME // 100):
                    p.send_batch([fastmq.Message("ProfileBench", BODY) for _ in range(100)])
            else:
                raise SystemExit(f"unknown shape {shape!r}: send, send_async or consume")
            if n:
                print(f"{shape}: {n / (time.perf_counter() - t0):,.0f} /s", flush=True)
        if shape == "consume":
            lock, done_c, seen = threading.Lock(), threading.Event(), [0]

            def listener(msgs: list[fastmq.MessageExt]) -> str:
                with lock:
                    seen[0] += len(msgs)
                    if seen[0] >= N_CONSUME:
                        done_c.set()
                return fastmq.ConsumeStatus.CONSUME_SUCCESS
            c = fastmq.PushConsumer("GID_PROFILE", namesrv_addr=ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            c.subscribe("ProfileBench")
            c.register_message_listener(listener)
            t0 = time.perf_counter()
            c.start()
            try:
                assert done_c.wait(300)
                print(f"consume: {N_CONSUME / (time.perf_counter() - t0):,.0f} msgs/s", flush=True)
            finally:
                c.shutdown()
    finally:
        b.stop()
        ns.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "send", float(sys.argv[2]) if len(sys.argv) > 2 else 6.0)
