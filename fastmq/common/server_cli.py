"""The front half both server commands share, as RocketMQ's ``mqnamesrv`` and ``mqbroker`` do.

``-c FILE`` names a properties file, ``-p`` prints the effective configuration and exits 0,
``--version`` prints fastmq's version and whether the compiled extensions run, and a
configuration error is one line on stderr (``<prog>: <reason>``) and exit status 2, before any
logging is set up or port is bound.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable, TypeVar

from ..errors import ConfigError
from ..version import add_version_option
from .properties import format_config

__all__ = ["EXIT_CONFIG_ERROR", "server_parser", "load_or_report", "print_config"]

T = TypeVar("T")

EXIT_CONFIG_ERROR = 2


def server_parser(prog: str, description: str, config_help: str) -> argparse.ArgumentParser:
    """A parser with ``-c/--configFile``, ``-p/--printConfigItem`` and ``--version``; the caller adds
    its own options."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_version_option(parser)
    parser.add_argument("-c", "--configFile", help=config_help)
    parser.add_argument("-p", "--printConfigItem", action="store_true", help="print all config items and exit")
    return parser


def load_or_report(prog: str, load: Callable[[], T]) -> T | None:
    """``load()``, or None after reporting its :class:`ConfigError` on stderr (exit with
    :data:`EXIT_CONFIG_ERROR` then)."""
    try:
        return load()
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None


def print_config(*cfgs: object) -> int:
    """Write the effective configuration of ``cfgs`` to stdout (``-p``); the exit status, 0."""
    sys.stdout.write(format_config(*cfgs))
    return 0
