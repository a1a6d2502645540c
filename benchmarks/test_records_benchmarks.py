"""A pull body's records into MessageExt objects: compiled twin vs pure twin vs ``decode_records``.

Real timings: ``.venv/bin/python -m pytest benchmarks/test_records_benchmarks.py --benchmark-only``.
The body is what a push consumer gets for one pull of 32: records of 128 B messages from one
producer host, with the properties a Java producer sends (KEYS, UNIQ_KEY, WAIT, TAGS).
"""
from __future__ import annotations

import importlib
import os

import pytest

from fastmq.protocol.message import MessageExt, decode_records, encode_record

TWINS = [pytest.param("py", id="py"), pytest.param("c", id="c", marks=pytest.mark.c_ext)]
N = 32


def _body() -> bytes:
    return b"".join(bytes(encode_record(
        topic="TopicTest", body=b"x" * 128, queue_id=3, queue_offset=1000 + i, phys_offset=4096 * i,
        properties={"KEYS": f"OrderID{i}", "UNIQ_KEY": f"7F0000010B5C18B4AAC2512F4B6F{i:04X}", "WAIT": "true",
                    "TAGS": "TagA"},
        born_timestamp=1_700_000_000_000 + i, born_host=("10.0.0.7", 53422), store_timestamp=1_700_000_000_001 + i,
        store_host=("10.0.0.2", 10911))) for i in range(N))


BODY = _body()


@pytest.mark.parametrize("kind", TWINS)
def test_decode_v4_32_records(benchmark, kind: str) -> None:
    if kind == "c" and os.environ.get("FASTMQ_NO_EXTENSIONS"):
        pytest.skip("compiled twins deselected")
    decode_v4 = importlib.import_module(f"fastmq._ext.records_{kind}").decode_v4
    out = benchmark(decode_v4, BODY, MessageExt)
    assert len(out) == N


def test_decode_records_32_records_reference(benchmark) -> None:
    out = benchmark(decode_records, BODY, verify_crc=False)
    assert len(out) == N
