"""The consumer's pull-body decoder against the reference decoder: the same MessageExt values for
every record shape, the same typed error for every bad body."""
from __future__ import annotations

import random

import pytest

from fastmq.client.pull_body import decode_pull_body
from fastmq.protocol.message import MessageFormatError, decode_records, encode_properties, encode_record


def _record(rng: random.Random, *, v6: bool = False) -> bytearray:
    props = {f"K{i}": "v" * rng.randrange(0, 5) for i in range(rng.randrange(0, 4))}
    if rng.random() < 0.5:
        props["UNIQ_KEY"] = f"{rng.getrandbits(64):016X}"
    return encode_record(
        topic=rng.choice(["T", "%RETRY%G", "Töpic", "x" * 127]), body=bytes(rng.getrandbits(8) for _ in
                                                                             range(rng.randrange(0, 40))),
        properties=props, queue_id=rng.randrange(8), flag=rng.randrange(-5, 5), queue_offset=rng.randrange(1 << 40),
        phys_offset=rng.randrange(1 << 40), sys_flag=rng.choice([0, 1, 4]), born_timestamp=rng.randrange(1 << 41),
        born_host=("::1" if v6 else f"10.0.{rng.randrange(3)}.1", rng.randrange(65536)),
        store_timestamp=rng.randrange(1 << 41), store_host=("192.168.1.7", 10911),
        reconsume_times=rng.randrange(3), prepared_transaction_offset=rng.randrange(100))


@pytest.mark.parametrize("seed", range(20))
def test_same_messages_as_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    body = b"".join(_record(rng, v6=seed % 5 == 4 and i == 3) for i in range(rng.randrange(0, 40)))
    assert decode_pull_body(body) == decode_records(body, verify_crc=False)
    assert decode_pull_body(memoryview(body)) == decode_records(body, verify_crc=False)


def test_empty_properties_and_empty_body() -> None:
    rec = bytes(encode_record(topic="T", body=b"", properties=encode_properties({})))
    assert decode_pull_body(rec) == decode_records(rec, verify_crc=False)


def _error(fn, data: bytes) -> str:
    with pytest.raises(MessageFormatError) as ei:
        fn(data)
    return str(ei.value)


@pytest.mark.parametrize("cut", [1, 10, 47, 88, 95])
def test_truncated_body_same_error(cut: int) -> None:
    rng = random.Random(cut)
    body = bytes(_record(rng) + _record(rng))
    bad = body[:-cut]
    assert _error(decode_pull_body, bad) == _error(lambda b: decode_records(b, verify_crc=False), bad)


@pytest.mark.parametrize("at", [4, 20, 95, -3])
def test_corrupt_bytes_same_result(at: int) -> None:
    rng = random.Random(at)
    body = bytearray(_record(rng))
    body[at] ^= 0xFF
    data = bytes(body)
    try:
        want = decode_records(data, verify_crc=False)
    except MessageFormatError as exc:
        assert _error(decode_pull_body, data) == str(exc)
    else:
        assert decode_pull_body(data) == want


def test_bad_utf8_properties_same_error() -> None:
    rec = bytearray(encode_record(topic="T", body=b"b", properties=b"a\x01\xff\xfe\x02"))
    assert _error(decode_pull_body, bytes(rec)) == _error(lambda b: decode_records(b, verify_crc=False), bytes(rec))
