"""One send in flight for 5 s from a fastmq client (``aio`` or ``blocking``) to a real fastmq-namesrv
and ASYNC_FLUSH fastmq-broker in a temp dir, with a profiler attached to this process:
``python lone_send_profile_client.py aio perf record -F 2000 -g -o OUT`` (the profiler's argv
follows the mode; ``-p PID`` is appended). Prints the wall and CPU time per send."""
import asyncio, sys, tempfile, time, os, subprocess
from pathlib import Path
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import fastmq, fastmq.aio
from fastmq.testing import broker_process, namesrv_process
tmp = Path(tempfile.mkdtemp())
ns = namesrv_process(tmp).start()
b = broker_process(tmp, ns.addr, brokerName="bench", flushDiskType="ASYNC_FLUSH", mappedFileSizeCommitLog=268435456).start()
mode = sys.argv[1]
try:
    if mode == "aio":
        async def main():
            ap = fastmq.aio.Producer("PG_DECOMP_AIO", namesrv_addr=ns.addr)
            await ap.start(); await ap.send(fastmq.Message("DecompTopic", b"warm"))
            spy = subprocess.Popen(sys.argv[2:] + ["-p", str(os.getpid())]) if len(sys.argv) > 2 else None
            await asyncio.sleep(1)
            t0 = time.perf_counter(); c0 = time.process_time(); n = 0
            while time.perf_counter() - t0 < 5:
                await ap.send(fastmq.Message("DecompTopic", b"x" * 128)); n += 1
            print("aio per send us", (time.perf_counter() - t0) / n * 1e6, "cpu us", (time.process_time() - c0) / n * 1e6)
            if spy: spy.send_signal(2); spy.wait()
            await ap.shutdown()
        asyncio.run(main())
    else:
        with fastmq.Producer("PG_DECOMP", namesrv_addr=ns.addr) as p:
            p.send(fastmq.Message("DecompTopic", b"warm"))
            spy = subprocess.Popen(sys.argv[2:] + ["-p", str(os.getpid())]) if len(sys.argv) > 2 else None
            time.sleep(1)
            t0 = time.perf_counter(); c0 = time.process_time(); n = 0
            while time.perf_counter() - t0 < 5:
                p.send(fastmq.Message("DecompTopic", b"x" * 128)); n += 1
            print("blocking per send us", (time.perf_counter() - t0) / n * 1e6, "cpu us", (time.process_time() - c0) / n * 1e6)
            if spy: spy.send_signal(2); spy.wait()
finally:
    b.stop(); ns.stop()
