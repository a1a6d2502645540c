"""Each wire fact is declared once in ``fastmq/protocol``; these tests fail when a twin or a copy
drifts from its declaration (docs/ARCHITECTURE.md, "Where each wire fact is declared").

The twins come from the ``codec``/``send``/``produce``... fixtures (pure and compiled in turn)."""
from __future__ import annotations

import dataclasses
import importlib
import re
import string
import struct
from pathlib import Path

import pytest

import fastmq
from fastmq.broker.processors.send import fast_send_header
from fastmq.errors import BrokerError
from fastmq.protocol.codes import LANGUAGE_NAMES, RETRY_RESPONSE_CODES, LanguageCode, RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import (SEND_FIELDS, SEND_V2_NAMES, PullMessageResponseHeader, SendMessageRequestHeader,
                                     SendMessageResponseHeader, declared, decode_send_header, send_wire_names)
from fastmq.protocol import record_layout, wire_pxd
from fastmq.protocol.message import MessageExt, decode_record, encode_record, pack_host
from fastmq.protocol.message_const import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst, MessageSysFlag

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
    assert "".join(SEND_V2_NAMES.values()) == string.ascii_lowercase[:len(SEND_FIELDS)]
    assert SEND_V2_NAMES["bname"] == "n"  # 4.9's SendMessageRequestHeaderV2
    with pytest.raises(KeyError):
        send_wire_names(("noSuchField",))


def test_hot_paths_key_long_name_headers_by_declared_fields() -> None:
    assert declared(SendMessageResponseHeader, "msgId", "queueOffset") == ("msgId", "queueOffset")
    with pytest.raises(KeyError, match="PullMessageResponseHeader declares no field 'nextOffset'"):
        declared(PullMessageResponseHeader, "nextOffset")


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


def test_a_field_declared_after_the_positional_ones_takes_the_generic_decoder(monkeypatch) -> None:
    # what declaring a 15th send header field does to fast_send_header: a request carrying it is
    # decoded by the generic reader, which knows every declared field
    import fastmq.broker.processors.send as send_processor
    calls = []
    monkeypatch.setattr(send_processor, "_LATER_V2", ("o",))
    monkeypatch.setattr(send_processor, "decode_send_header", lambda r: calls.append(r) or decode_send_header(r))
    fields = _every_field_set().to_v2_fields()
    fast_send_header(create_request(RequestCode.SEND_MESSAGE_V2, fields, b"x"))
    assert calls == []
    req = create_request(RequestCode.SEND_MESSAGE_V2, {**fields, "o": "later"}, b"x")
    assert fast_send_header(req) == _every_field_set() and calls == [req]


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


# -- the commit-log record layout -------------------------------------------------------------------

def test_layout_formats_and_positions_agree() -> None:
    for born_v6 in (False, True):
        for store_v6 in (False, True):
            pos = record_layout.positions(born_v6, store_v6)
            assert struct.calcsize(record_layout.fixed_format(born_v6, store_v6)) == pos["BODY"]
            for name, _code in record_layout.FIELDS:
                assert struct.calcsize(record_layout.fixed_format(born_v6, store_v6, upto=name)) == pos[name]
            sys_flag = (MessageSysFlag.BORNHOST_V6 if born_v6 else 0) | (MessageSysFlag.STOREHOST_V6 if store_v6 else 0)
            assert record_layout.record_length(sys_flag, 5, 3, 7) == pos["BODY"] + 5 + 1 + 3 + 2 + 7
            assert record_layout.store_timestamp_pos(sys_flag) == pos["STORETIMESTAMP"]
    assert struct.calcsize(record_layout.BATCH_HEAD_FORMAT) == record_layout.BATCH_POS["BODY"] == 20
    assert record_layout.BATCH_MIN_LEN == 22  # MessageDecoder.encodeMessages: 5 ints, then int16 propertiesLen
    assert (record_layout.MESSAGE_MAGIC_CODE, record_layout.BLANK_MAGIC_CODE) == (0xDAA320A7, 0xCBD43194)
    assert record_layout.POS_V4["QUEUEOFFSET"] == 20 and record_layout.POS_V4["BODY"] == 88  # 4.9's offsets


@pytest.mark.parametrize("hosts", [("10.0.0.1", "10.0.0.2"), ("::1", "10.0.0.2"), ("10.0.0.1", "fe80::2")])
def test_every_record_field_survives_the_declared_layout(records, hosts: tuple[str, str]) -> None:
    raw = bytes(encode_record(topic="T", body=b"body", properties={"TAGS": "t", "KEYS": "k"}, queue_id=3, flag=4,
                              queue_offset=5, phys_offset=6, sys_flag=MessageSysFlag.COMPRESSED, born_timestamp=7,
                              born_host=(hosts[0], 8), store_timestamp=9, store_host=(hosts[1], 10),
                              reconsume_times=11, prepared_transaction_offset=12))
    m = decode_record(raw)
    want = (m.topic, m.body, m.flag, m.properties, m.queue_id, m.store_size, m.queue_offset, m.sys_flag,
            m.born_timestamp, m.born_host, m.store_timestamp, m.store_host, m.commit_log_offset,
            m.reconsume_times, m.prepared_transaction_offset)
    assert want == ("T", b"body", 4, {"TAGS": "t", "KEYS": "k"}, 3, len(raw), 5, m.sys_flag, 7, (hosts[0], 8), 9,
                    (hosts[1], 10), 6, 11, 12)
    got = records.decode_v4(raw, MessageExt)
    if ":" in "".join(hosts):
        assert got is None  # the plain decoder takes IPv4 hosts only, by the declared SYSFLAG bits
    else:
        assert got == [m]


def test_generated_pxd_is_the_declaration() -> None:
    # setup.py rewrites it before a build; a declaration changed without a rebuild shows here
    assert wire_pxd.PXD_PATH.read_text() == wire_pxd.render(), "run python -m fastmq.protocol.wire_pxd and rebuild"


@pytest.mark.c_ext
@pytest.mark.parametrize("module", ["fastmq._ext.send_c", "fastmq._ext.record_writer_c", "fastmq._ext.records_c"])
def test_compiled_twins_were_built_with_the_declared_facts(module: str) -> None:
    compiled = importlib.import_module(module).wire_facts()
    want: dict[str, object] = dict(wire_pxd.constants())
    want.update({f"PROP_{k}": v for k, v in wire_pxd.property_names().items()})
    assert compiled == want


# -- property names and separators ------------------------------------------------------------------

def test_property_names_are_4_9s() -> None:
    assert (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR) == ("\x01", "\x02")
    c = MessageConst
    assert (c.KEYS, c.TAGS, c.WAIT_STORE_MSG_OK, c.DELAY_TIME_LEVEL, c.TRANSACTION_PREPARED, c.CLUSTER,
            c.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, c.MAX_OFFSET, c.MIN_OFFSET, c.REAL_TOPIC, c.REAL_QUEUE_ID,
            c.RETRY_TOPIC, c.ORIGIN_MESSAGE_ID, c.RECONSUME_TIME, c.MAX_RECONSUME_TIMES) == (
        "KEYS", "TAGS", "WAIT", "DELAY", "TRAN_MSG", "CLUSTER", "UNIQ_KEY", "MAX_OFFSET", "MIN_OFFSET", "REAL_TOPIC",
        "REAL_QID", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES")


# Files allowed to spell a wire fact's value: the declarations, and user-facing examples.
_DECLARATIONS = {"protocol/message_const.py", "protocol/record_layout.py", "protocol/codes.py", "protocol/wire_pxd.py",
                 "_ext/wire_facts.pxd", "demo.py", "__init__.py", "aio.py", "blocking.py"}
_NAMES = "|".join(v for k, v in vars(MessageConst).items() if not k.startswith("_") and k != "KEY_SEPARATOR")
_COPY = re.compile(r"""\bb?["'](%s)["']|["'}]\\x0[12]|0x(DAA320A7|CBD43194)|-626843481|-875286124""" % _NAMES,
                   re.IGNORECASE)


def test_no_module_spells_a_declared_fact_again() -> None:
    for copy in ('k == b"TAGS"', "s.split('\\x02')", "_MAGIC = 0xDAA320A7", 'f"{k}\\x01{v}"'):
        assert _COPY.search(copy), copy  # the scan sees a copy when there is one
    root = Path(fastmq.__file__).resolve().parent
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in (".py", ".pyx", ".pxd", ".pxi") or rel in _DECLARATIONS:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _COPY.search(code) and "reserved separator" not in code:
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []
