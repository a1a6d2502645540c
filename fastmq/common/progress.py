"""Progress on a terminal for commands that wait on many servers: one line, rewritten in place on
stderr while the work goes on and wiped when it is done; nothing at all when stderr is not a
terminal (piped, redirected, under CI), so scripts reading the output see only the output."""
from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress", "on_terminal"]


def on_terminal(stream: TextIO, force: bool | None = None) -> bool:
    """Whether progress goes to ``stream``: ``force`` when given (a command's
    ``--progress`` / ``--no-progress``), else whether ``stream`` is a terminal."""
    if force is not None:
        return force
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """``progress(done, total)`` as work goes on; ``close()`` (or leaving ``with``) wipes the line.

    Args:
        label: what is being done, e.g. ``"asking brokers"``.
        stream: where to write (stderr); shown only if it is a terminal.
        min_interval: seconds between redraws (the last one, done == total, is always drawn).
    """

    def __init__(self, label: str, stream: TextIO | None = None, min_interval: float = 0.1) -> None:
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.enabled = on_terminal(self.stream)
        self.min_interval = min_interval
        self._drawn_at = float("-inf")
        self._width = 0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._drawn_at < self.min_interval:
            return
        self._drawn_at = now
        text = f"{self.label}: {done}/{total}"
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = max(self._width, len(text))

    def close(self) -> None:
        """Wipe the line, leaving the terminal as it was."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
