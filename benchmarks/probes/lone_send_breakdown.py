"""Where the broker's instructions for one send in flight go: the parts of ``broker lone_send_x10``.

    python -m benchmarks.probes.lone_send_breakdown [--out FILE]

``benchmarks.instructions`` counts the whole lone send (frame in, record stored, answer written).
This splits it, each part counted by valgrind in its own process (compiled twin, the same
broker set-up as that workload) and divided by the sends it made:

- ``whole``: the workload as ``benchmarks.instructions`` runs it;
- ``floor``: the same with the send processor answering a ready buffer (the harness's loop turn,
  the frame's decode, the dispatcher, the write): what is neither the processor nor the store;
- ``no_store``: the processor's work too, the store's put replaced by a ready PutResult;
- ``store_put`` (and ``store_put_no_index``, ``store_put_no_arrival``): ``put_batch_now`` of a
  lone send's batch alone, 300 of them, without the index or the arrival listener for the two
  variants;
- ``encode``: ``encode_sends`` of one request alone.

It also lists the Python bytecodes a send runs per function (``sys.settrace`` opcode events:
where interpretation, ~30 instructions a bytecode here, is spent). The parts overlap a little
(caches warm differently), so they add up to roughly, not exactly, the whole.
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from benchmarks import instructions as ins

ROOT = Path(__file__).resolve().parents[2]
SENDS = 300
PARTS = ("whole", "floor", "no_store", "store_put", "store_put_no_index", "store_put_no_arrival", "encode")


def _workload() -> Any:
    return ins.WORKLOADS["broker lone_send_x10"][0]("c")


def _processor(once: Any) -> Any:
    """The broker's send processor behind ``once`` (caught on one call)."""
    from fastmq.broker.processors import send as s
    seen: list[Any] = []
    orig = s.SendMessageProcessor.process_gathered

    def grab(self: Any, parts: Any) -> Any:
        seen.append(self)
        return orig(self, parts)
    s.SendMessageProcessor.process_gathered = grab  # type: ignore[method-assign]
    try:
        once()
    finally:
        s.SendMessageProcessor.process_gathered = orig  # type: ignore[method-assign]
    return seen[0]


def _encoder(proc: Any) -> Callable[[], Any]:
    from fastmq._ext.codec import RemotingCommand
    from fastmq._ext.send import encode_sends
    host, size, cluster = proc._fast_state()[:3]
    req = RemotingCommand(310, language=0, version=409, opaque=1, ext_fields=dict(ins._SEND_V2_EXT, n="bench", e="0"),
                          body=b"x" * 128, serialize_type=1)
    born = b"\x7f\x00\x00\x01\x00\x00\x9c\x40"
    return lambda: encode_sends([req], proc._fast_topics, born, host, cluster, size, 0, groups=proc._good_groups,
                                binary=True)


def run(part: str) -> None:
    """Set ``part`` up and make its SENDS sends inside one ctypes callback (what callgrind counts)."""
    once = _workload()
    once()
    calls: Callable[[], None]
    if part in ("whole", "floor", "no_store"):
        if part == "floor":
            from fastmq.broker.processors.send import SendMessageProcessor
            SendMessageProcessor.process_gathered = (  # type: ignore[method-assign]
                lambda self, parts: ([(parts[0][0], [b"x" * 200])], None))
        elif part == "no_store":
            from fastmq.store.message_store import MessageStore, PutResult, PutStatus
            MessageStore.put_batch_now = (  # type: ignore[method-assign]
                lambda self, b: PutResult(PutStatus.PUT_OK, "", 0, 0, 0, 1, None, 0))
        once()

        def calls() -> None:
            for _ in range(SENDS // 10):
                once()
    else:
        proc = _processor(once)
        enc = _encoder(proc)
        store = proc.broker.store
        if part == "encode":
            def calls() -> None:
                for _ in range(SENDS):
                    enc()
        else:
            batches = [enc() for _ in range(SENDS)]
            assert batches[0].n == 1, "the request did not take the fast path"
            index = store.index
            if part == "store_put_no_index":
                store.index = None  # (the lone put reads it once a put: None, no index entry)
            elif part == "store_put_no_arrival":
                store.on_arrival = None

            def calls() -> None:
                for b in batches:
                    store.put_batch_now(b)
    try:
        ctypes.CFUNCTYPE(None)(calls)()
    finally:
        if part == "store_put_no_index":
            store.index = index
        once.close()


def count(part: str, python: str) -> float:
    """Instructions per send of ``part``, from its own callgrind process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    env.pop("FASTMQ_NO_EXTENSIONS", None)
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=_CallPythonObject",
                               f"--callgrind-out-file={d}/cg.out", python, "-m", "benchmarks.probes.lone_send_breakdown",
                               "run", part], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"{part} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        for line in Path(f"{d}/cg.out").read_text().splitlines():
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1]) / SENDS
    raise RuntimeError(f"{part}: no totals in callgrind's output")


def opcodes(sends: int = 100) -> list[tuple[str, float, float]]:
    """(function, bytecodes per send, calls per send) of the whole workload, most first."""
    once = _workload()
    once()
    once()
    ops: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()

    def trace(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        key = f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"
        if event == "call":
            calls[key] += 1
        elif event == "opcode":
            ops[key] += 1
        return trace
    sys.settrace(trace)
    try:
        for _ in range(sends // 10):
            once()
    finally:
        sys.settrace(None)
        once.close()
    return [(k, v / sends, calls[k] / sends) for k, v in ops.most_common()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd")
    r = sub.add_parser("run")
    r.add_argument("part", choices=PARTS)
    p.add_argument("--out", type=Path, help="also write the report to this file")
    a = p.parse_args()
    if a.cmd == "run":
        run(a.part)
        return
    lines = [f"{part:22s} {count(part, sys.executable):10,.0f} instructions per send" for part in PARTS]
    table = opcodes()
    lines.append(f"\nPython bytecodes per send: {sum(v for _, v, _ in table):,.0f} (function, bytecodes, calls)")
    lines += [f"{v:8.1f} {c:5.2f}  {k}" for k, v, c in table if v >= 2]
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if a.out is not None:
        a.out.write_text(report)


if __name__ == "__main__":
    main()
