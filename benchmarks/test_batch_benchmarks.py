"""A SEND_BATCH_MESSAGE body of 100 messages: compiled encoder twin vs the pure one.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_batch_benchmarks.py --benchmark-only``.
Messages of 128 B with the two properties a producer's batch carries (UNIQ_KEY, WAIT).
"""
from __future__ import annotations

import importlib
import os

import pytest

from fastmq.protocol.message import Message

TWINS = [pytest.param("py", id="py"), pytest.param("c", id="c", marks=pytest.mark.c_ext)]
MSGS = [Message("TopicTest", b"x" * 128, properties={"UNIQ_KEY": f"7F0000010B5C18B4AAC2512F4B6F{i:04X}",
                                                      "WAIT": "true"}) for i in range(100)]


@pytest.mark.parametrize("kind", TWINS)
def test_encode_batch_body_100(benchmark, kind: str) -> None:
    if kind == "c" and os.environ.get("FASTMQ_NO_EXTENSIONS"):
        pytest.skip("compiled twins deselected")
    encode = importlib.import_module(f"fastmq._ext.batch_{kind}").encode_batch_body
    body = benchmark(encode, MSGS)
    assert len(body) > 100 * 128
