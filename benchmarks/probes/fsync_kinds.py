"""What a durable 128 B append costs on this disk, by the kind of file it goes to (issue 18).

The SYNC_FLUSH benchmark's floor writes to a plain file; the broker writes through a shared
mapping of a big preallocated file. This measures the kinds side by side, in short blocks
taking turns (a shared disk's speed drifts within a minute), each a write of 128 B after the
last one and a sync, one at a time:

- ``plain_append``: ``write`` to a growing plain file, ``fdatasync`` (the benchmark's floor);
- ``in_place``: ``pwrite`` at offset 0 of a 4 KiB file already on disk, ``fdatasync``;
- ``falloc_mmap_fdatasync``: a ``posix_fallocate``-d file (unwritten extents), written through
  ``mmap``, ``fdatasync`` (what the broker did before this branch);
- ``falloc_warm_mmap_fdatasync``: the same, its pages read once first (the broker's warming);
- ``falloc_mmap_msync``: the same, ``msync`` of the written pages (RocketMQ 4.9's
  ``mappedByteBuffer.force()``);
- ``sparse_mmap_fdatasync``: a file grown by ``ftruncate`` (RocketMQ 4.9's ``setLength``,
  no blocks), written through ``mmap``, ``fdatasync``;
- ``zeroed_mmap_fdatasync``: a file whose zeros were written and synced first (written
  extents: RocketMQ's ``warmMappedFile`` under SYNC_FLUSH), written through ``mmap``,
  ``fdatasync``.

Prints p50/p99 per kind and the median of the per-block ratios to ``plain_append``; writes
JSON with ``--out``::

    .venv/bin/python benchmarks/probes/fsync_kinds.py --dir /work/tmp --blocks 10 --n 60 \\
        --out benchmarks/results/probes/fsync-kinds-$(date -u +%Y%m%dT%H%M%SZ).json
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import mmap
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

BODY = b"x" * 128
FILE_SIZE = 64 << 20
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MS_SYNC = 4


class Kind:
    """One file of one kind and the position of its next append."""

    def __init__(self, name: str, directory: Path) -> None:
        self.name = name
        self.path = directory / f"kind-{name}.bin"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.pos = 0
        self.mm: mmap.mmap | None = None
        if name == "in_place":
            os.write(self.fd, bytes(4096))
            os.fsync(self.fd)
        elif name.startswith("falloc"):
            os.posix_fallocate(self.fd, 0, FILE_SIZE)
            os.fsync(self.fd)
            if "warm" in name:  # the broker's MappedFile.warm: the unwritten pages read into the cache
                buf = bytearray(1 << 20)
                for off in range(0, FILE_SIZE, len(buf)):
                    os.preadv(self.fd, [buf], off)
        elif name.startswith("sparse"):
            os.ftruncate(self.fd, FILE_SIZE)
            os.fsync(self.fd)
        elif name.startswith("zeroed"):
            chunk = bytes(1 << 20)
            for off in range(0, FILE_SIZE, len(chunk)):
                os.pwrite(self.fd, chunk, off)
            os.fsync(self.fd)
        if "mmap" in name:
            self.mm = mmap.mmap(self.fd, FILE_SIZE)
            self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))

    def one(self) -> float:
        t0 = time.perf_counter()
        if self.name == "plain_append":
            os.write(self.fd, BODY)
        elif self.name == "in_place":
            os.pwrite(self.fd, BODY, 0)
        else:
            assert self.mm is not None
            self.mm[self.pos:self.pos + len(BODY)] = BODY
        if self.name.endswith("msync"):
            lo = self.pos // mmap.PAGESIZE * mmap.PAGESIZE
            hi = self.pos + len(BODY)
            if _libc.msync(self.addr + lo, hi - lo, _MS_SYNC) != 0:
                raise OSError(ctypes.get_errno(), "msync")
        else:
            os.fdatasync(self.fd)
        self.pos += len(BODY)
        return (time.perf_counter() - t0) * 1e6

    def close(self) -> None:
        if self.mm is not None:
            self.addr = 0
            self.mm.close()
        os.close(self.fd)
        self.path.unlink()


KINDS = ["plain_append", "in_place", "falloc_mmap_fdatasync", "falloc_warm_mmap_fdatasync", "falloc_mmap_msync",
         "sparse_mmap_fdatasync", "zeroed_mmap_fdatasync"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=None, help="directory on the store's file system (a temp dir in it is used)")
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--n", type=int, default=60, help="appends per block")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fsync-kinds", dir=args.dir))
    kinds = [Kind(k, tmp) for k in KINDS]
    blocks: dict[str, list[list[float]]] = {k: [] for k in KINDS}
    try:
        for b in range(args.blocks):
            order = kinds[b % len(kinds):] + kinds[:b % len(kinds)]
            for kind in order:
                run: Callable[[], float] = kind.one
                blocks[kind.name].append([run() for _ in range(args.n)])
    finally:
        for kind in kinds:
            kind.close()
        tmp.rmdir()
    summary = {}
    for k in KINDS:
        every = [x for blk in blocks[k] for x in blk]
        ratio = statistics.median(float(np.median(a)) / float(np.median(p)) for a, p in zip(blocks[k], blocks["plain_append"]))
        summary[k] = {"p50_us": round(float(np.percentile(every, 50)), 1), "p99_us": round(float(np.percentile(every, 99)), 1),
                      "block_ratio_to_plain_append": round(ratio, 3)}
        print(f"{k:24s} p50 {summary[k]['p50_us']:8.0f} us  p99 {summary[k]['p99_us']:8.0f} us  "
              f"x plain_append (median of blocks) {ratio:.2f}")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "blocks": blocks, "n": args.n, "loadavg": load,
                                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))


if __name__ == "__main__":
    main()
