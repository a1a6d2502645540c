"""What the sync_flush_* scripts share: a temporary directory holding a ``fastmq-namesrv`` and
``fastmq-broker`` processes of one flush mode each, all stopped and the directory deleted on the
way out (every broker fallocates its 256 MB commit-log file: hundreds of MB per run).

    with flush_rig("sync-flush-split") as rig:
        sync = rig.broker("SYNC_FLUSH", "split-S")
        ...  # rig.dir / "SYNC_FLUSH" / "store" is its store, on the filesystem of the others
"""
from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).resolve().parent
for _dir in (str(HERE), str(HERE.parent), str(HERE.parents[1])):  # (run as a script, or imported by a test)
    if _dir not in sys.path:
        sys.path.insert(0, _dir)

from test_sync_flush_benchmarks import one_in_flight  # noqa: E402

from fastmq.testing import ServerProcess, broker_process, namesrv_process  # noqa: E402

__all__ = ["FlushRig", "flush_rig"]

COMMIT_LOG_FILE_SIZE = 268435456
WARM_SENDS = 50  # the topic's creation and the first pages, before anything is timed


class FlushRig:
    """A namesrv in ``dir`` and the brokers started beside it (see :func:`flush_rig`)."""

    def __init__(self, directory: Path, namesrv: ServerProcess) -> None:
        self.dir = directory
        self.namesrv = namesrv
        self.brokers: list[ServerProcess] = []

    def broker(self, mode: str, name: str, *, sub: str | None = None, env: dict[str, str] | None = None,
               warm_start: int | None = 1_000_000) -> ServerProcess:
        """Start a broker of flush mode ``mode`` (SYNC_FLUSH, ASYNC_FLUSH) named ``name``, its
        store under ``dir / (sub or mode)``, with ``env`` added to its environment; then
        ``WARM_SENDS`` sends numbered from ``warm_start`` (None: none)."""
        d = self.dir / (sub or mode)
        d.mkdir()
        b = broker_process(d, self.namesrv.addr, brokerName=name, flushDiskType=mode,
                           mappedFileSizeCommitLog=COMMIT_LOG_FILE_SIZE)
        b.env.update(env or {})
        self.brokers.append(b)  # (before the start: one that fails half-way is stopped too)
        b.start()
        if warm_start is not None:
            one_in_flight(b.port, WARM_SENDS, start=warm_start)
        return b

    def stop(self, b: ServerProcess) -> None:
        """Stop one broker now (the others run on)."""
        self.brokers.remove(b)
        b.stop()


@contextlib.contextmanager
def flush_rig(prefix: str) -> Iterator[FlushRig]:
    """A temporary directory (named from ``prefix``) with a started namesrv; on exit every
    broker still running is stopped, then the namesrv, and the directory is deleted."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        rig = FlushRig(tmp, namesrv_process(tmp).start())
        try:
            yield rig
        finally:
            for b in reversed(rig.brokers):
                b.stop()
            rig.namesrv.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
