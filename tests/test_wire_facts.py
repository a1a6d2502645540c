"""Each wire fact is declared once in ``fastmq/protocol``; these tests fail when a twin or a copy
drifts from its declaration (docs/ARCHITECTURE.md, "Where each wire fact is declared").

The twins come from the ``codec``/``send``/``produce``... fixtures (pure and compiled in turn)."""
from __future__ import annotations

import dataclasses

import pytest

from fastmq.broker.processors.send import fast_send_header
from fastmq.errors import BrokerError
from fastmq.protocol.codes import LANGUAGE_NAMES, RETRY_RESPONSE_CODES, LanguageCode, RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import (SEND_FIELDS, SEND_V2_NAMES, SendMessageRequestHeader, decode_send_header,
                                     send_wire_names)
from fastmq.protocol.message import pack_host

# -- codes and the retriable set --------------------------------------------------------------------


def test_retry_set_is_4_9_producers() -> None:
    # DefaultMQProducer.retryResponseCodes; SYSTEM_BUSY is left to the caller
    assert RETRY_RESPONSE_CODES == {17, 14, 1, 16, 204, 205}


@pytest.mark.parametrize("code", [int(c) for c in ResponseCode] + [999])
def test_error_retriable_reads_the_set(code: int) -> None:
    assert BrokerError.for_code(code, "r").retriable is (code in RETRY_RESPONSE_CODES)


# -- language table ---------------------------------------------------------------------------------

def test_language_names_are_the_enum() -> None:
    assert [LANGUAGE_NAMES.index(m.name) for m in LanguageCode] == [int(m) for m in LanguageCode]
    assert len(LANGUAGE_NAMES) == len(LanguageCode)


@pytest.mark.parametrize("lang", [int(m) for m in LanguageCode] + [len(LanguageCode), 120])
def test_codec_twins_spell_every_language_from_the_table(codec, lang: int) -> None:
    assert codec.LANGUAGE_NAMES is LANGUAGE_NAMES
    frame = codec.encode_frame(codec.RemotingCommand(10, language=lang, opaque=1))
    name = LANGUAGE_NAMES[lang] if lang < len(LANGUAGE_NAMES) else "OTHER"
    assert f'"language":"{name}"'.encode() in frame
    assert codec.decode_frame(frame).language == (lang if lang < len(LANGUAGE_NAMES) else int(LanguageCode.OTHER))


# -- the send request header ------------------------------------------------------------------------

def test_v2_letters_follow_the_declaration_order() -> None:
    assert SEND_FIELDS == tuple(f.name for f in dataclasses.fields(SendMessageRequestHeader))
    assert list(SEND_V2_NAMES) == list(SEND_FIELDS)
    assert "".join(SEND_V2_NAMES.values()) == "abcdefghijklmn"[:len(SEND_FIELDS)]
    with pytest.raises(KeyError):
        send_wire_names(("noSuchField",))


def _every_field_set(**kw: object) -> SendMessageRequestHeader:
    """A send header whose every field holds a value other than its default."""
    values: dict[str, object] = {}
    for i, f in enumerate(dataclasses.fields(SendMessageRequestHeader)):
        t = str(f.type)
        values[f.name] = (True if t.startswith("bool") else 1000 + i if t.startswith(("int", "Long"))
                          else f"v{i}")
    values["properties"] = "TAGS\x01t\x02"
    values.update(kw)
    return SendMessageRequestHeader(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                                  RequestCode.SEND_BATCH_MESSAGE])
def test_broker_header_readers_agree_on_every_field(code: int) -> None:
    h = _every_field_set()
    fields = h.to_fields() if code == RequestCode.SEND_MESSAGE else h.to_v2_fields()
    assert len(fields) == len(SEND_FIELDS)
    req = create_request(code, fields, b"x")
    assert fast_send_header(req) == decode_send_header(req) == h


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
def test_send_twins_read_the_declared_names(send, code: int) -> None:
    # a header with every field set through the declaration is taken by the fast path...
    h = _every_field_set(topic="T1", queueId=1, sysFlag=0, batch=False, defaultTopicQueueNums=4)
    fields = h.to_fields() if code == RequestCode.SEND_MESSAGE else h.to_v2_fields()
    b = send.encode_sends([create_request(code, fields, b"body")], {"T1": (4, 4, 0)}, pack_host("10.0.0.1", 1),
                          pack_host("10.0.0.2", 2), b"CLUSTER\x01C\x02", 1 << 20)
    assert b.fast == [0]
    # ...and each field it checks is read under its declared name: a bad value there sends it the long way
    for attr in ("producerGroup", "defaultTopic"):
        bad = dict(fields)
        del bad[attr if code == RequestCode.SEND_MESSAGE else SEND_V2_NAMES[attr]]
        b = send.encode_sends([create_request(code, bad, b"body")], {"T1": (4, 4, 0)}, pack_host("10.0.0.1", 1),
                              pack_host("10.0.0.2", 2), b"CLUSTER\x01C\x02", 1 << 20)
        assert b.slow == [0], attr
    for attr in ("defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag", "reconsumeTimes",
                 "maxReconsumeTimes"):
        bad = dict(fields)
        bad[attr if code == RequestCode.SEND_MESSAGE else SEND_V2_NAMES[attr]] = "x1"
        b = send.encode_sends([create_request(code, bad, b"body")], {"T1": (4, 4, 0)}, pack_host("10.0.0.1", 1),
                              pack_host("10.0.0.2", 2), b"CLUSTER\x01C\x02", 1 << 20)
        assert b.slow == [0], attr


@pytest.mark.parametrize("topic", ["T", "%RETRY%G"])
@pytest.mark.parametrize("batch", [False, True])
def test_producer_writer_is_the_declared_header_byte_for_byte(produce, codec, topic: str, batch: bool) -> None:
    w = produce.SendRequestWriter("PG", "TBW102", 4, int(LanguageCode.PYTHON), 409)
    frame = w.frame(77, topic, 3, 0, 1_700_000_000_123, 5, {"TAGS": "t"}, b"body", batch)
    h = SendMessageRequestHeader("PG", topic, "TBW102", 4, 3, 0, 1_700_000_000_123, 5, "TAGS\x01t\x02", 0, False,
                                 16 if topic.startswith("%RETRY%") else None, batch)
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    fields = h.to_v2_fields()
    fields[SEND_V2_NAMES["batch"]] = "true" if batch else "false"  # the producer always says it
    cmd = codec.RemotingCommand(code, language=int(LanguageCode.PYTHON), version=409, opaque=77,
                                ext_fields=fields, body=b"body")
    assert frame == codec.encode_frame(cmd)
