"""One owner per store: the exclusive lock on ``<storePathRootDir>/lock``.

RocketMQ's DefaultMessageStore locks a ``lock`` file in the store root with
``FileChannel.tryLock`` before it starts, so a second broker on the same directory fails
instead of sharing the files. We use ``fcntl.flock``: the kernel drops the lock when the
process dies (kill -9 included), so a crashed broker never leaves a stale lock behind.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from . import StoreLockedError

__all__ = ["StoreLock", "LOCK_FILE_NAME", "is_locked"]

LOCK_FILE_NAME = "lock"


class StoreLock:
    """The lock of one store root. :meth:`acquire` takes it or raises; :meth:`release` gives it up."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.path = self.root / LOCK_FILE_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, *, create: bool = True) -> None:
        """Take the lock without waiting (idempotent).

        ``create`` False: a missing root is an error rather than a new empty store (a checker
        must not make a store at a mistyped path).

        Raises:
            StoreLockedError: another process holds it.
            FileNotFoundError: the root is missing and ``create`` is False.
        """
        if self._fd is not None:
            return
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        elif not self.root.is_dir():
            raise FileNotFoundError(f"{self.root}: no such store directory")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLockedError(
                f"the store {self.root} is in use by another process (it holds {self.path}); "
                "one store serves one broker: stop that broker or give this one its own storePathRootDir"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Unlock (closing the descriptor drops the flock)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def is_locked(root: str | Path) -> bool:
    """Whether some process holds the lock of the store at ``root`` (a missing lock file: no)."""
    path = Path(root) / LOCK_FILE_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the lock we may just have taken
    return False
