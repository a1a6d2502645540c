"""The pull-header decoder twins (``fastmq._ext.pull``): the same answer from both, and never a
header the general decoder (``Header.from_fields``) would not give."""
from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from fastmq.errors import RemotingCommandError
from fastmq.protocol.headers import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, PullMessageRequestHeader

_PULL = {"consumerGroup": "G", "topic": "T", "queueId": "3", "queueOffset": "10", "maxMsgNums": "32",
         "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "0",
         "subscription": "*", "expressionType": "TAG"}
_NUMBERS = [f.name for f in dataclasses.fields(PullMessageRequestHeader)][2:9]

#: values the fast decoder takes (plain ASCII decimals in range), and those it leaves to from_fields
TAKEN_INT = ["0", "7", "-1", "+5", "-0", "007", str(INT_MAX), str(INT_MIN)]
TAKEN_LONG = ["0", str(LONG_MAX), str(LONG_MIN), "+" + str(LONG_MAX), "0000000000000000001"]
LEFT = ["", " ", " 5", "5 ", "+", "-", "+-1", "--1", "1_0", "1e3", "0x10", "12abc", "\u0663", "５",
        "00000000000000000001", str(LONG_MAX + 1), str(LONG_MIN - 1), "1" + "0" * 40]
LEFT_INT = [str(INT_MAX + 1), str(INT_MIN - 1)]


def _general(fields: dict[str, Any]) -> Any:
    try:
        return PullMessageRequestHeader.from_fields(fields)
    except RemotingCommandError as exc:
        return str(exc)


def test_both_twins_number_the_fields_as_the_header_declares(pull) -> None:
    assert [name for name, _, _ in pull.PULL_NUMBERS] == _NUMBERS
    ranges = {name: (lo, hi) for name, lo, hi in pull.PULL_NUMBERS}
    assert ranges["queueId"] == ranges["maxMsgNums"] == ranges["sysFlag"] == (INT_MIN, INT_MAX)
    assert ranges["queueOffset"] == ranges["commitOffset"] == ranges["subVersion"] == (LONG_MIN, LONG_MAX)


def test_the_usual_header_is_the_general_decoders(pull) -> None:
    h = pull.decode_pull_header(dict(_PULL), PullMessageRequestHeader)
    assert h == _general(_PULL)
    without = {k: v for k, v in _PULL.items() if k not in ("subscription", "expressionType")}
    assert pull.decode_pull_header(without, PullMessageRequestHeader) == _general(without)


@pytest.mark.parametrize("name", _NUMBERS)
def test_each_number_taken_or_left_as_the_contract_says(pull, name: str) -> None:
    is_int = name in ("queueId", "maxMsgNums", "sysFlag")
    taken = TAKEN_INT + (TAKEN_LONG if not is_int else [])
    left = LEFT + (LEFT_INT if is_int else []) + (TAKEN_LONG[1:3] if is_int else [])
    for value in taken:
        fields = {**_PULL, name: value}
        got = pull.decode_pull_header(fields, PullMessageRequestHeader)
        assert got is not None and got == _general(fields), value
    for value in left:
        assert pull.decode_pull_header({**_PULL, name: value}, PullMessageRequestHeader) is None, repr(value)


@pytest.mark.parametrize("key", list(_PULL)[:9])
def test_a_missing_null_or_non_string_field_is_left_to_the_general_decoder(pull, key: str) -> None:
    for fields in ({k: v for k, v in _PULL.items() if k != key}, {**_PULL, key: None}, {**_PULL, key: 5}):
        assert pull.decode_pull_header(fields, PullMessageRequestHeader) is None


def test_the_twins_agree_on_random_text(pull) -> None:
    from fastmq._ext import pull_py
    rnd = random.Random(18)
    alphabet = "0123456789+- _x\u0663\t"
    for _ in range(3000):
        value = "".join(rnd.choice(alphabet if rnd.random() < 0.3 else "0123456789") for _ in range(rnd.randint(0, 21)))
        fields = {**_PULL, rnd.choice(_NUMBERS): value}
        got = pull.decode_pull_header(fields, PullMessageRequestHeader)
        assert got == pull_py.decode_pull_header(fields, PullMessageRequestHeader), repr(value)
        assert got is None or got == _general(fields), repr(value)


def _java_long(text: Any) -> Any:
    from fastmq.protocol.java_number import JavaNumberFormatError, parse_long
    try:
        return parse_long(text)
    except (JavaNumberFormatError, TypeError):
        return None


def test_usual_longs_reads_both_answer_numbers_or_leaves_them(pull) -> None:
    """The consumer's side: a pull answer's two numbers, each taken only in the usual form
    (the caller's ext_int decides the rest, as Long.parseLong)."""
    for value in TAKEN_INT + TAKEN_LONG:
        fields = {"suggestWhichBrokerId": "0", "nextBeginOffset": value, "minOffset": "0"}
        assert pull.usual_longs(fields, "suggestWhichBrokerId", "nextBeginOffset") == (0, _java_long(value)), value
        assert pull.usual_longs(fields, "nextBeginOffset", "suggestWhichBrokerId") == (_java_long(value), 0), value
    for value in LEFT + [None, 5, b"1"]:
        fields = {"suggestWhichBrokerId": "1", "nextBeginOffset": value}
        assert pull.usual_longs(fields, "suggestWhichBrokerId", "nextBeginOffset") is None, repr(value)
        assert pull.usual_longs(fields, "nextBeginOffset", "suggestWhichBrokerId") is None, repr(value)
    assert pull.usual_longs({"suggestWhichBrokerId": "1"}, "suggestWhichBrokerId", "nextBeginOffset") is None
    assert pull.usual_longs(None, "a", "b") is None
    assert pull.usual_longs({}, "a", "b") is None


def test_usual_longs_twins_agree_on_random_text(pull) -> None:
    from fastmq._ext import pull_py
    rnd = random.Random(33)
    alphabet = "0123456789+- _x\u0663\t"
    for _ in range(3000):
        value = "".join(rnd.choice(alphabet if rnd.random() < 0.3 else "0123456789") for _ in range(rnd.randint(0, 21)))
        fields = {"a": "7", "b": value}
        got = pull.usual_longs(fields, "a", "b")
        assert got == pull_py.usual_longs(fields, "a", "b"), repr(value)
        assert got is None or got == (7, _java_long(value)), repr(value)
