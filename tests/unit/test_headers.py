"""Typed custom headers: wire names, required fields, and both SEND header forms."""
from __future__ import annotations

import pytest

from fastmq.errors import RemotingCommandError
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import (ConsumerSendMsgBackRequestHeader, PullMessageRequestHeader,
                                     SendMessageRequestHeader, decode_send_header)


def _send_header() -> SendMessageRequestHeader:
    return SendMessageRequestHeader("PG", "TopicA", "TBW102", 4, 2, 0, 1_700_000_000_000, 0,
                                    "TAGS\x01tagA\x02UNIQ_KEY\x01AB\x02", 0, False, 16, False, None)


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                                  RequestCode.SEND_BATCH_MESSAGE])
def test_send_header_round_trips_in_both_forms(code: int) -> None:
    h = _send_header()
    fields = h.to_fields() if code == RequestCode.SEND_MESSAGE else h.to_v2_fields()
    assert all(isinstance(v, str) for v in fields.values())
    assert decode_send_header(create_request(code, fields)) == h


def test_v2_uses_letters() -> None:
    f = _send_header().to_v2_fields()
    assert f["a"] == "PG" and f["b"] == "TopicA" and f["e"] == "2" and f["k"] == "false"
    assert "topic" not in f and "n" not in f  # None fields are not sent, as Java omits nulls


def test_cpp_client_numbers_are_accepted() -> None:
    # The C++ client sends queueId and sysFlag as JSON numbers; the codec stringifies them.
    fields = {"consumerGroup": "G", "topic": "T", "queueId": "3", "queueOffset": "10", "maxMsgNums": "32",
              "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "0",
              "subscription": "tagA || tagB", "expressionType": "TAG"}
    h = PullMessageRequestHeader.decode(create_request(RequestCode.PULL_MESSAGE, fields))
    assert (h.queueId, h.queueOffset, h.suspendTimeoutMillis, h.subscription) == (3, 10, 15000, "tagA || tagB")


def test_missing_required_field_names_it() -> None:
    with pytest.raises(RemotingCommandError, match=r"the custom field <group> is null"):
        ConsumerSendMsgBackRequestHeader.decode(create_request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                               {"offset": "1", "delayLevel": "0"}))


def test_bad_number_is_a_typed_error() -> None:
    with pytest.raises(RemotingCommandError, match=r"<offset> is not a number"):
        ConsumerSendMsgBackRequestHeader.decode(create_request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                               {"offset": "x1", "group": "G", "delayLevel": "0"}))


def test_optional_fields_default() -> None:
    h = ConsumerSendMsgBackRequestHeader.decode(create_request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                               {"offset": "7", "group": "G", "delayLevel": 0}))
    assert (h.offset, h.originMsgId, h.unitMode, h.maxReconsumeTimes) == (7, None, False, None)


_PULL = {"consumerGroup": "G", "topic": "T", "queueId": "3", "queueOffset": "10", "maxMsgNums": "32",
         "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "0",
         "subscription": "*", "expressionType": "TAG"}


def _pull_variants():
    yield _PULL
    yield {**_PULL, "queueOffset": " 12 ", "extra": "x"}
    yield {k: v for k, v in _PULL.items() if k not in ("subscription", "expressionType")}
    for k in _PULL:
        yield {kk: v for kk, v in _PULL.items() if kk != k}           # each field missing
        yield {**_PULL, k: None}                                       # each field null
        yield {**_PULL, k: "12x"}                                      # each field not a number
    yield {}


@pytest.mark.parametrize("fields", list(_pull_variants()))
def test_pull_header_fast_read_agrees_with_the_generic_one(fields) -> None:
    cmd = create_request(RequestCode.PULL_MESSAGE)
    cmd.ext_fields = dict(fields)

    def outcome(read):
        try:
            return read()
        except RemotingCommandError as exc:
            return str(exc)
    assert outcome(lambda: PullMessageRequestHeader.decode(cmd)) == \
        outcome(lambda: PullMessageRequestHeader.from_fields(cmd.ext_fields))
