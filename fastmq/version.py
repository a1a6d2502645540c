"""fastmq's version, and the line every command prints for ``--version`` (STYLE.md 1.2): the
release and whether the compiled twins are the ones running, the first thing to know of a slow
or odd install (a wheel without its extensions, ``FASTMQ_NO_EXTENSIONS=1`` left set)."""
from __future__ import annotations

import argparse
import platform
import sys
from typing import Any, NoReturn, Sequence

__all__ = ["__version__", "version_text", "add_version_option"]

#: the release (pyproject.toml's ``[project] version`` says the same); ``fastmq.__version__`` reads it
__version__ = "0.1.0"


def version_text(prog: str) -> str:
    """``<prog> <version>``, the twins in use and the Python running them, on one line."""
    # here, not at the top: ``fastmq.__version__`` loads this module, and must not load a compiled codec
    from ._ext import USING_EXTENSIONS

    twins = ("accelerated (compiled extensions in use)" if USING_EXTENSIONS
             else "pure Python (compiled extensions not in use)")
    return f"{prog} {__version__}, {twins}, {platform.python_implementation()} {platform.python_version()}"


class _PrintVersion(argparse.Action):
    """argparse's ``action="version"`` re-wraps its text to the terminal's width; this prints the
    one line as it is (scripts grep it), to stdout, and exits 0."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and whether the compiled extensions are in use, and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> NoReturn:
        print(version_text(parser.prog), file=sys.stdout)
        parser.exit(0)


def add_version_option(parser: argparse.ArgumentParser) -> None:
    """Give a command ``--version`` (see :func:`version_text`)."""
    parser.add_argument("--version", action=_PrintVersion)
