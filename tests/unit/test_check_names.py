"""The broker's header-name guard (check_names): names found legal are remembered, in a bounded set;
an illegal name is refused every time, whatever was remembered before."""
from __future__ import annotations

from fastmq.broker.processors import base
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request


def _pull(topic: str, group: str):
    return create_request(RequestCode.PULL_MESSAGE, {"topic": topic, "consumerGroup": group})


def test_legal_names_pass_and_are_remembered() -> None:
    assert base.check_names(_pull("NamesT", "NamesG")) is None
    assert "NamesT" in base._LEGAL_TOPICS and "NamesG" in base._LEGAL_GROUPS
    assert base.check_names(_pull("NamesT", "NamesG")) is None


def test_illegal_names_are_refused_every_time() -> None:
    for _ in range(3):
        assert "illegal characters" in base.check_names(_pull("Bad/Topic", "G"))
        assert "illegal characters" in base.check_names(_pull("T", "bad group"))
    assert "Bad/Topic" not in base._LEGAL_TOPICS and "bad group" not in base._LEGAL_GROUPS
    send = create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "x" * 200})
    assert base.check_names(send) is not None  # too long: refused, not remembered
    assert "x" * 200 not in base._LEGAL_TOPICS


def test_the_remembered_names_stay_bounded() -> None:
    for i in range(base._LEGAL_MAX * 2 + 5):
        assert base.check_names(_pull(f"T{i}", f"G{i}")) is None
        assert len(base._LEGAL_TOPICS) <= base._LEGAL_MAX and len(base._LEGAL_GROUPS) <= base._LEGAL_MAX
