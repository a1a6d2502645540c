"""Logging for the server commands: stderr plus a file, as RocketMQ's logback setup does."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

__all__ = ["setup_logging", "LOG_FORMAT"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s - %(message)s"


def setup_logging(log_path: str, prog: str) -> None:
    """Log INFO and up to stderr and to ``log_path`` (a log file that cannot be opened is reported, not fatal)."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    try:
        p = Path(log_path).expanduser()
        p.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(p, encoding="utf-8"))
    except OSError as exc:
        print(f"{prog}: cannot open log file {log_path}: {exc}; logging to stderr only", file=sys.stderr)
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, handlers=handlers, force=True)
