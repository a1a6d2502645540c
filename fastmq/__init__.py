"""fastmq: Apache RocketMQ's architecture in Python, wire-compatible with RocketMQ 4.x."""
from __future__ import annotations

__version__ = "0.1.0"
