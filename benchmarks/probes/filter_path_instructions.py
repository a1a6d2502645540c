"""Did the SQL92 filter's place in the store's read cost the pulls without one anything?

    python -m benchmarks.probes.filter_path_instructions TREE [TREE ...] [--calls 200]

Counts, under valgrind (callgrind, collecting inside one ctypes callback as
``benchmarks/pull_round_instructions.py`` does), the instructions of ``MessageReader.get_message``
for a pull of 32 from a queue of 4,000 stored messages (one in ten tagged ``tagA``), three ways:
``plain`` (no filter: the usual pull), ``tag`` (the subscription ``tagA``) and, in a tree that has
it, ``sql`` (``TAGS = 'tagA'``). Each TREE (a checkout with its extensions built) and each way
runs in its own valgrind process; the figure is instructions per call.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_REGION = "_CallPythonObject"
N = 4000


def _run(way: str, calls: int) -> None:
    import asyncio
    import shutil

    from fastmq.protocol.message import MessageExt, tags_code
    from fastmq.store.config import ASYNC_FLUSH, MessageStoreConfig
    from fastmq.store.message_store import MessageStore

    d = tempfile.mkdtemp(prefix="filter-path-")
    cfg = MessageStoreConfig(storePathRootDir=d, mappedFileSizeCommitLog=16 * 1024 * 1024,
                             mappedFileSizeConsumeQueue=300_000 * 20, flushDiskType=ASYNC_FLUSH)
    s = MessageStore(cfg, "127.0.0.1:10911")
    s.load()
    s.start()
    loop = asyncio.new_event_loop()
    try:
        msgs = [MessageExt("T", b"x" * 128, properties={"TAGS": "tagA" if i % 10 == 0 else "tagB"}, queue_id=0,
                           born_host=("127.0.0.1", 1), born_timestamp=1_700_000_000_000) for i in range(N)]
        assert loop.run_until_complete(s.put_messages(msgs)).ok
        if way == "plain":
            flt = None
        elif way == "tag":
            flt = {tags_code("tagA")}
        else:
            from fastmq.filter import compile_expression
            flt = compile_expression("TAGS = 'tagA'")
        starts = [(k * 97) % (N - 400) for k in range(calls)]
        s.get_message("G", "T", 0, 0, 32, flt)  # warm

        def calls_() -> None:
            for off in starts:
                s.get_message("G", "T", 0, off, 32, flt)
        ctypes.CFUNCTYPE(None)(calls_)()
    finally:
        loop.close()
        s.shutdown()
        shutil.rmtree(d, ignore_errors=True)


def count(tree: Path, way: str, calls: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={_REGION}",
                               f"--dump-after={_REGION}", f"--callgrind-out-file={d}/cg.out", sys.executable,
                               str(Path(__file__).resolve()), "--run", way, "--calls", str(calls)],
                              env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode:
            raise RuntimeError(proc.stderr[-3000:])
        dumps = list(Path(d).glob("cg.out.*"))  # (the dump after the callback; cg.out is the empty rest)
        if len(dumps) != 1:
            raise RuntimeError(f"{tree}: expected one callgrind dump, found {len(dumps)}")
        m = re.search(r"^totals:\s+(\d+)", dumps[0].read_text(), re.M)
        if m is None:
            raise RuntimeError(f"{dumps[0]}: no totals line")
        return int(m.group(1)) / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="*", type=Path)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--run")
    a = ap.parse_args()
    if a.run:
        _run(a.run, a.calls)
        return
    out = {}
    for tree in a.trees:
        has_sql = (tree / "fastmq" / "filter").is_dir()
        for way in ("plain", "tag", "sql") if has_sql else ("plain", "tag"):
            out[f"{tree} {way}"] = round(count(tree, way, a.calls))
            print(f"{tree} {way}: {out[f'{tree} {way}']:,} instructions per get_message", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
