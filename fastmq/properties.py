"""Moved to :mod:`fastmq.common.properties`; this name stays only until the branches that still
import it are merged (nothing in fastmq imports it)."""
from __future__ import annotations

from .common.properties import *  # noqa: F401,F403
from .common.properties import __all__  # noqa: F401
