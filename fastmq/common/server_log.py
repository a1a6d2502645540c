"""Logging for the server commands: stderr plus a size-rotated file, as RocketMQ's logback setup
does (``rocketmq_client``/``broker.log`` roll at a size and keep a few old files).

Four keys, in the ``-c`` properties file or as options (an option wins over the file):

======================  =====================  ======================================================
key                     option                 meaning
======================  =====================  ======================================================
``logPath``             ``--log-file``         the log file (default ``~/logs/rocketmqlogs/<server>.log``)
``logLevel``            ``--log-level``        TRACE/DEBUG, INFO, WARN, ERROR or OFF (default INFO)
``logMaxBytes``         ``--log-max-bytes``    roll the file at this size; 0 never rolls (default 128 MiB)
``logBackups``          ``--log-backups``      rolled files kept: ``<file>.1`` .. ``<file>.N`` (default 10)
======================  =====================  ======================================================
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import logging.handlers
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Hashable

from ..errors import ConfigError

__all__ = ["setup_logging", "LOG_FORMAT", "LogConfig", "LOG_KEYS", "add_log_options", "apply_log_options",
           "RepeatedLog"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s - %(message)s"

#: logback's level names (TRACE and OFF included) to the logging module's levels.
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "WARNING": logging.WARNING, "ERROR": logging.ERROR, "OFF": logging.CRITICAL + 10}


@dataclass
class LogConfig:
    """Where and how much a server logs; keys named as the other config keys are."""

    #: The log file (``--log-file``). Default: ``~/logs/rocketmqlogs/broker.log`` or ``namesrv.log``.
    logPath: str = ""
    #: TRACE/DEBUG, INFO, WARN, ERROR or OFF (``--log-level``).
    logLevel: str = "INFO"
    #: Roll the file at this many bytes; 0 never rolls (``--log-max-bytes``).
    logMaxBytes: int = 128 * 1024 * 1024
    #: Rolled files kept, ``<file>.1`` .. ``<file>.N``; at least 1 (``--log-backups``).
    logBackups: int = 10

    def validate(self) -> None:
        """Raise ConfigError naming a key the logging set-up cannot use."""
        if self.logLevel.strip().upper() not in _LEVELS:
            raise ConfigError(f"logLevel={self.logLevel}: expected one of {', '.join(_LEVELS)}")
        if self.logMaxBytes < 0:
            raise ConfigError(f"logMaxBytes={self.logMaxBytes}: must be >= 0 (0 never rolls the file)")
        if self.logBackups < 1:
            # RotatingFileHandler never rolls with no backup: the file would grow for ever
            raise ConfigError(f"logBackups={self.logBackups}: must be >= 1 (set logMaxBytes=0 to never roll)")

    @property
    def level(self) -> int:
        return _LEVELS[self.logLevel.strip().upper()]


#: The keys :class:`LogConfig` takes out of a server's properties file.
LOG_KEYS = frozenset(f.name for f in dataclasses.fields(LogConfig))


def add_log_options(parser: argparse.ArgumentParser) -> None:
    """``--log-file``, ``--log-level``, ``--log-max-bytes`` and ``--log-backups``."""
    g = parser.add_argument_group("logging (options override the config file's logPath, logLevel, "
                                  "logMaxBytes, logBackups)")
    g.add_argument("--log-file", metavar="PATH", help="log file")
    g.add_argument("--log-level", metavar="LEVEL", help="TRACE, DEBUG, INFO, WARN, ERROR or OFF")
    g.add_argument("--log-max-bytes", metavar="N", type=int, help="roll the log file at N bytes (0: never)")
    g.add_argument("--log-backups", metavar="N", type=int, help="rolled log files to keep (>= 1)")


def apply_log_options(cfg: LogConfig, args: argparse.Namespace) -> LogConfig:
    """A copy of ``cfg`` with the command-line options over it, validated.

    Raises:
        ConfigError: a bad level, size or backup count.
    """
    out = dataclasses.replace(cfg)
    for opt, key in (("log_file", "logPath"), ("log_level", "logLevel"), ("log_max_bytes", "logMaxBytes"),
                     ("log_backups", "logBackups")):
        v = getattr(args, opt, None)
        if v is not None:
            setattr(out, key, v)
    out.validate()
    return out


def setup_logging(log: LogConfig | str, prog: str) -> None:
    """Log to stderr and to the log file, rolled by size (a file that cannot be opened is
    reported, not fatal). ``log`` is a :class:`LogConfig` or just the file's path."""
    cfg = log if isinstance(log, LogConfig) else LogConfig(logPath=log)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    try:
        p = Path(cfg.logPath).expanduser()
        p.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.handlers.RotatingFileHandler(p, maxBytes=cfg.logMaxBytes, backupCount=cfg.logBackups,
                                                             encoding="utf-8"))
    except OSError as exc:
        print(f"{prog}: cannot open log file {cfg.logPath}: {exc}; logging to stderr only", file=sys.stderr)
    logging.basicConfig(level=cfg.level, format=LOG_FORMAT, handlers=handlers, force=True)


class RepeatedLog:
    """One kind of log line that a client can repeat at will, rate-limited per key: the first
    occurrence is logged as it is; later ones within ``interval`` seconds are only counted, and
    the count is logged once the interval is over, "(repeated N times in the last T s)", with the
    latest occurrence's text: by the next occurrence of the key, or by the next line of any key
    (the counts of every key are swept once an interval). RocketMQ 4.9.8 logs every occurrence,
    which lets one misbehaving client fill the disk.

    Keys are bounded (``max_keys``): past that, new keys share one bucket, so a client varying
    what it sends cannot grow the table or the log without bound either.
    """

    _OTHER = ("(other keys)",)

    def __init__(self, logger: logging.Logger, interval: float = 60.0, *, max_keys: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval = interval
        self.max_keys = max_keys
        self.clock = clock
        # key -> [start of its window, occurrences counted but not logged, level, msg, args] (latest)
        self._state: dict[Hashable, list[Any]] = {}
        self._swept_at = clock()

    def log(self, level: int, key: Hashable, msg: str, *args: Any) -> bool:
        """Log ``msg % args`` at ``level`` unless ``key`` was logged within the interval; True if logged."""
        now = self.clock()
        if now - self._swept_at >= self.interval:
            self._sweep(now, key)
        st = self._state.get(key)
        if st is None and len(self._state) >= self.max_keys:
            key = self._OTHER
            st = self._state.get(key)
        if st is not None and now - st[0] < self.interval:
            st[1] += 1
            st[2:] = level, msg, args
            return False
        if st is not None and st[1]:
            msg = f"{msg} (repeated {st[1]} times in the last {now - st[0]:.0f} s)"
        self._state[key] = [now, 0, level, msg, args]
        self.logger.log(level, msg, *args)
        return True

    def _sweep(self, now: float, skip: Hashable) -> None:
        """Log the counts of keys whose interval is over (the key being logged reports its own)."""
        self._swept_at = now
        for key, st in list(self._state.items()):
            if key == skip or now - st[0] < self.interval:
                continue
            if st[1]:
                self.logger.log(st[2], f"{st[3]} (repeated {st[1]} times in the last {now - st[0]:.0f} s)", *st[4])
            del self._state[key]  # quiet for a whole interval: its next occurrence is a first one

    def error(self, key: Hashable, msg: str, *args: Any) -> bool:
        return self.log(logging.ERROR, key, msg, *args)

    def warning(self, key: Hashable, msg: str, *args: Any) -> bool:
        return self.log(logging.WARNING, key, msg, *args)
