"""Message trace records in 4.9.8's text (TraceDataEncoder), the dispatcher's queue and batches."""
from __future__ import annotations

import asyncio
import logging
import zlib
from typing import Any

from fastmq.client.trace_data import (ConsumeReturnType, MessageType, TraceBean, TraceContext, TraceType,
                                      decode_trace, encode_context, trace_keys)
from fastmq.client.api import CompressedBody, send_request
from fastmq.client.trace_dispatcher import (COMPRESS_OVER, JOBS_MAX, KEYS_MAX, MAX_MSG_SIZE, QUEUE_SIZE,
                                           TraceDispatcher)
from fastmq.client.trace_hooks import pub_context, sub_after, sub_before, traced_listener
from fastmq.client.trace_query import trace_records
from fastmq.protocol.message import Message, MessageExt
from fastmq.protocol.message_queue import MessageQueue

S, E = "\x01", "\x02"


def _pub() -> TraceContext:
    bean = TraceBean(topic="TopicTest", msg_id="7F0000011234", offset_msg_id="0A00000100002A9F", tags="TagA",
                     keys="k1 k2", store_host="10.0.0.1:10911", body_length=11, msg_type=MessageType.Normal_Msg)
    return TraceContext(TraceType.Pub, 1700000000123, "DefaultRegion", "pg", cost_time=3, success=True,
                        beans=[bean])


def test_pub_record_is_4_9_8s_fourteen_fields() -> None:
    text = encode_context(_pub())
    assert text == S.join(["Pub", "1700000000123", "DefaultRegion", "pg", "TopicTest", "7F0000011234", "TagA",
                           "k1 k2", "10.0.0.1:10911", "11", "3", "0", "0A00000100002A9F", "true"]) + E
    assert trace_keys(_pub()) == ["7F0000011234", "k1", "k2"]


def test_missing_strings_are_written_as_java_writes_null() -> None:
    ctx = _pub()
    ctx.beans[0].tags = ctx.beans[0].keys = None
    f = encode_context(ctx)[:-1].split(S)
    assert f[6] == "null" and f[7] == "null"
    assert trace_keys(ctx) == ["7F0000011234"]


def test_sub_records_one_per_message_and_sub_after_nine_fields() -> None:
    beans = [TraceBean(msg_id="A", retry_times=0, keys="ka"), TraceBean(msg_id="B", retry_times=2, keys=None)]
    before = TraceContext(TraceType.SubBefore, 5, "R", "cg", request_id="REQ", beans=beans)
    assert encode_context(before) == (S.join(["SubBefore", "5", "R", "cg", "REQ", "A", "0", "ka"]) + E
                                      + S.join(["SubBefore", "5", "R", "cg", "REQ", "B", "2", "null"]) + E)
    after = TraceContext(TraceType.SubAfter, 5, "R", "cg", cost_time=7, success=False, request_id="REQ",
                         context_code=int(ConsumeReturnType.FAILED), beans=beans[:1])
    assert encode_context(after) == S.join(["SubAfter", "REQ", "A", "7", "false", "ka", "4", "5", "cg"]) + E


def test_end_transaction_record() -> None:
    bean = TraceBean(topic="T", msg_id="M", tags=None, keys="k", store_host="h:1", msg_type=MessageType.Trans_msg_Commit,
                     transaction_id="TX", transaction_state="COMMIT_MESSAGE", from_transaction_check=True)
    ctx = TraceContext(TraceType.EndTransaction, 9, "R", "pg", beans=[bean])
    assert encode_context(ctx) == S.join(["EndTransaction", "9", "R", "pg", "T", "M", "null", "k", "h:1", "2", "TX",
                                          "COMMIT_MESSAGE", "true"]) + E


def test_round_trip_of_every_type() -> None:
    before = TraceContext(TraceType.SubBefore, 5, "R", "cg", request_id="REQ", beans=[TraceBean(msg_id="A", keys="x")])
    after = TraceContext(TraceType.SubAfter, 6, None, "cg", cost_time=1, request_id="REQ",
                         beans=[TraceBean(msg_id="A", keys="x")])
    end = TraceContext(TraceType.EndTransaction, 9, "R", "pg", beans=[TraceBean(
        topic="T", msg_id="M", keys="k", store_host="h:1", msg_type=MessageType.Trans_msg_Commit, transaction_id="TX",
        transaction_state="ROLLBACK_MESSAGE")])
    body = "".join(encode_context(c) for c in (_pub(), before, after, end))
    got = decode_trace(body.encode())
    assert [c.trace_type for c in got] == [TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter,
                                          TraceType.EndTransaction]
    assert got[0] == _pub()
    assert got[1].request_id == "REQ" and got[1].beans[0].msg_id == "A" and got[1].time_stamp == 5
    assert got[2].time_stamp == 6 and got[2].group_name == "cg" and got[2].region_id is None
    assert got[3].beans[0].transaction_state == "ROLLBACK_MESSAGE" and got[3].beans[0].msg_type == 2


def test_decoder_reads_older_layouts_and_skips_bad_records() -> None:
    pub13 = S.join(["Pub", "1", "R", "g", "T", "M", "t", "k", "h", "5", "2", "3", "false"]) + E
    pub15 = S.join(["Pub", "1", "R", "g", "T", "M", "t", "k", "h", "5", "2", "0", "OFF", "true", "1.2.3.4"]) + E
    sub6 = S.join(["SubAfter", "REQ", "M", "4", "true", "k"]) + E
    bad = ["Pub" + S + "x" + E, "Nope" + S + "1" + E, "SubBefore" + S + "1" + E, "\xff\x00" + E]
    got = decode_trace(pub13 + bad[0] + pub15 + bad[1] + sub6 + bad[2] + bad[3])
    assert [c.trace_type for c in got] == [TraceType.Pub, TraceType.Pub, TraceType.SubAfter]
    assert got[0].success is False and got[0].beans[0].msg_type == MessageType.Delay_Msg
    assert got[1].beans[0].offset_msg_id == "OFF" and got[1].beans[0].client_host == "1.2.3.4"
    assert got[2].context_code == 0 and got[2].group_name is None


def test_hooks_build_events_and_skip_trace_off_messages() -> None:
    msg = Message("T", b"hello", properties={"TAGS": "a", "KEYS": "k", "DELAY": "3"})
    ctx = pub_context("pg", msg, "ID", "OFF", True, "R", "h:1", 1000)
    assert ctx is not None and ctx.beans[0].msg_type == MessageType.Delay_Msg and ctx.beans[0].body_length == 5
    assert pub_context("pg", msg, "ID", "OFF", True, None, "h:1", 1000) is None  # a broker without MSG_REGION
    on = MessageExt("T", b"x", properties={"UNIQ_KEY": "U1", "MSG_REGION": "R"}, reconsume_times=2)
    off = MessageExt("T", b"y", properties={"UNIQ_KEY": "U2", "TRACE_ON": "false"})
    before = sub_before("cg", [on, off])
    assert [b.msg_id for b in before.beans] == ["U1"] and before.beans[0].retry_times == 2 and before.region_id == "R"
    after = sub_after(before, 2, True, ConsumeReturnType.SUCCESS)
    assert after.request_id == before.request_id and after.success and after.beans == before.beans


def _text(m: Message) -> bytes:
    """A trace message's records: its thread compresses a body of 4096 bytes or more, and the
    inner producer sends it as it is (with the COMPRESSED flag, tests/unit: send_request)."""
    if type(m.body) is CompressedBody:
        return zlib.decompress(m.body)
    assert len(m.body) < COMPRESS_OVER
    return m.body


class _Sink:
    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.started = self.stopped = False

    async def start(self) -> None:
        self.started = True

    async def shutdown(self) -> None:
        self.stopped = True

    def start_send(self, msg: Message, callback: Any, timeout_ms: int | None = None, awaited: bool = True) -> None:
        assert not awaited
        self.sent.append(msg)
        asyncio.get_running_loop().call_soon(callback, None, None)  # (answered on a later turn, as a send)


async def test_dispatcher_batches_keys_and_drops_when_full(caplog: Any) -> None:
    sink = _Sink()
    d = TraceDispatcher("pg", "PRODUCER", None, lambda group, name: sink)
    await d.start("ns:9876")
    assert sink.started and d.trace_topic == "RMQ_SYS_TRACE_TOPIC"
    with caplog.at_level(logging.WARNING, logger="fastmq.client"):
        for i in range(QUEUE_SIZE + 5):
            d.append(TraceContext(TraceType.Pub, i, "R", "pg", beans=[TraceBean(msg_id=f"M{i}", keys="k")]))
    assert d.discarded == 5 and sum("trace queue of pg full" in r.message for r in caplog.records) == 1
    await d.flush()
    assert sink.sent and all(m.topic == "RMQ_SYS_TRACE_TOPIC" for m in sink.sent)
    assert all(len(m.body) < MAX_MSG_SIZE for m in sink.sent)
    assert any(type(m.body) is CompressedBody for m in sink.sent)  # (1024 records: over 4096 bytes)
    records = [c for m in sink.sent for c in decode_trace(_text(m))]
    assert [c.beans[0].msg_id for c in records] == [f"M{i}" for i in range(QUEUE_SIZE)]
    keys = {k for m in sink.sent for k in m.properties["KEYS"].split(" ")}
    assert keys == {f"M{i}" for i in range(QUEUE_SIZE)} | {"k"}
    await d.shutdown()
    assert sink.stopped
    assert d.skips("RMQ_SYS_TRACE_TOPIC") and not d.skips("TopicTest")


async def test_answered_sends_are_bounded_and_sent_as_pub_records() -> None:
    from fastmq.client.producer import SendResult
    from fastmq.protocol.message_queue import MessageQueue
    sink = _Sink()
    d = TraceDispatcher("pg", "PRODUCER", None, lambda group, name: sink)
    d.store_host = {"b": "10.0.0.1:10911"}.get
    await d.start("ns:9876")
    for i in range(QUEUE_SIZE + 3):
        r = SendResult("SEND_OK", f"U{i}", f"O{i}", MessageQueue("T", "b", 0), i, "DefaultRegion")
        d.append_pub(Message("T", b"body", properties={"KEYS": f"k{i}"}), r, 1000)
    assert d.discarded == 3  # (the worker had no turn: the loop never ran)
    await d.flush()
    records = [c for m in sink.sent for c in decode_trace(_text(m))]
    assert [c.beans[0].msg_id for c in records] == [f"U{i}" for i in range(QUEUE_SIZE)]
    assert {c.beans[0].store_host for c in records} == {"10.0.0.1:10911"} and len(d.pub_rows) == 0
    keys = {k for m in sink.sent for k in m.properties["KEYS"].split(" ")}
    assert keys == {f"U{i}" for i in range(QUEUE_SIZE)} | {f"k{i}" for i in range(QUEUE_SIZE)}
    await d.shutdown()


async def test_long_keys_cut_trace_messages_below_the_properties_limit() -> None:
    """Records whose messages carry long KEYS: every trace message's KEYS stays within KEYS_MAX
    bytes (a broker refuses properties over 32,767), every record is sent, and each message id
    is in the KEYS of the message holding its record; one record's keys longer than the limit
    keep its id and lose the words that do not fit."""
    from fastmq.client.producer import SendResult
    from fastmq.protocol.message_queue import MessageQueue
    sink = _Sink()
    d = TraceDispatcher("pg", "PRODUCER", None, lambda group, name: sink)
    d.store_host = {"b": "10.0.0.1:10911"}.get
    await d.start("ns:9876")
    n = 300
    for i in range(n):  # the compiled buffer's path (answered sends)
        r = SendResult("SEND_OK", f"U{i}", f"O{i}", MessageQueue("T", "b", 0), i, "DefaultRegion")
        d.append_pub(Message("T", b"body", properties={"KEYS": f"k{i}-" + "x" * 700 + " é" * 100}), r, 1000)
    for i in range(n):  # the contexts' path (consumers' and transactions' records)
        d.append(TraceContext(TraceType.Pub, i, "R", "pg",
                              beans=[TraceBean(msg_id=f"M{i}", keys=f"c{i}-" + "y" * 900)]))
    r = SendResult("SEND_OK", "BIG", "OBIG", MessageQueue("T", "b", 0), 0, "DefaultRegion")
    d.append_pub(Message("T", b"body", properties={"KEYS": " ".join(f"w{j}-" + "z" * 60 for j in range(600))}),
                 r, 1000)
    await d.flush()
    assert len(sink.sent) > 2 * n * 800 // 24_000  # cut by keys, not by size
    sent_ids: list[str] = []
    for m in sink.sent:
        keys = m.properties["KEYS"]
        assert len(keys.encode("utf-8")) <= KEYS_MAX
        ids = [c.beans[0].msg_id for c in decode_trace(_text(m))]
        assert set(ids) <= set(keys.split(" "))
        sent_ids += ids
    assert sorted(sent_ids) == sorted([f"U{i}" for i in range(n)] + ["BIG"] + [f"M{i}" for i in range(n)])
    big = next(m for m in sink.sent if "BIG" in m.properties["KEYS"].split(" "))
    assert "w0-" + "z" * 60 in big.properties["KEYS"].split(" ") and "w599-" + "z" * 60 not in big.properties["KEYS"]
    await d.shutdown()


async def test_traced_listener_records_outcomes() -> None:
    sink = _Sink()
    d = TraceDispatcher("cg", "CONSUMER", "MyTrace", lambda group, name: sink)
    msgs = [MessageExt("T", b"x", properties={"UNIQ_KEY": "U1"})]

    def ok(batch: list[MessageExt]) -> str:
        return "CONSUME_SUCCESS"

    async def later(batch: list[MessageExt]) -> str:
        return "RECONSUME_LATER"

    def boom(batch: list[MessageExt]) -> str:
        raise RuntimeError("no")

    assert traced_listener(ok, "cg", d)(msgs) == "CONSUME_SUCCESS"
    assert traced_listener(ok, "cg", d).__qualname__ == ok.__qualname__
    assert await traced_listener(later, "cg", d)(msgs) == "RECONSUME_LATER"
    try:
        traced_listener(boom, "cg", d)(msgs)
    except RuntimeError:
        pass
    # (each event encoded by the thread that appended it: its text and its keys)
    events = [decode_trace(text)[0] for text, _keys in d._queue]
    assert [e.trace_type for e in events] == [TraceType.SubBefore, TraceType.SubAfter] * 3
    assert [(e.success, e.context_code) for e in events[1::2]] == [(True, 0), (False, 4), (False, 2)]


def test_reader_keeps_the_records_of_the_message_and_skips_bad_bodies() -> None:
    good = MessageExt("RMQ_SYS_TRACE_TOPIC", (encode_context(_pub()) + S.join(
        ["SubAfter", "R", "OTHER", "1", "true", "k", "0", "9", "cg"]) + E).encode(), commit_log_offset=10,
        born_host=("1.2.3.4", 5))
    bad = MessageExt("RMQ_SYS_TRACE_TOPIC", b"\xff\xfe", commit_log_offset=20)
    garbage = MessageExt("RMQ_SYS_TRACE_TOPIC", b"Pub\x01nonsense\x02", commit_log_offset=30)
    got = trace_records("7F0000011234", [good, bad, garbage, good])
    assert [r.trace_type for r in got] == ["Pub"] and got[0].client_host == "1.2.3.4:5"


def _cost_apart(text: bytes) -> list[list[str]]:
    """The records of ``text``, each record's costTime (the answer's wall clock) left out."""
    return [f[:10] + f[11:] for f in (r.split(S) for r in text.decode().split(E) if r)]


def test_the_fast_pub_record_is_the_encoders_text() -> None:
    from fastmq._ext.trace_encode import PubRows, join_keys
    from fastmq.client.producer import SendResult
    from fastmq.client.trace_data import pub_row
    from fastmq.protocol.message_queue import MessageQueue
    hosts = {"b": "10.0.0.1:10911"}.get
    rows = PubRows("RMQ_SYS_TRACE_TOPIC", "pg", hosts, 1024, 256)
    want, want_keys = [], []
    for props in ({"TAGS": "t", "KEYS": "k1 k2"}, {}, {"TRAN_MSG": "true", "KEYS": " k "}, {"DELAY": "2"}):
        msg = Message("T", b"body", properties=dict(props))
        for status in ("SEND_OK", "FLUSH_DISK_TIMEOUT"):
            r = SendResult(status, "UNIQ", "OFFID", MessageQueue("T", "b", 1), 7, "DefaultRegion")
            ctx = pub_context("pg", msg, "UNIQ", "OFFID", status == "SEND_OK", "DefaultRegion", "10.0.0.1:10911", 100)
            assert ctx is not None
            assert pub_row(rows, msg, r, 100) == 0
            want.append(encode_context(ctx))
            want_keys += trace_keys(ctx)
    text, keys, n = rows.chunk(0, 1 << 20)
    assert n == len(want) and _cost_apart(text) == _cost_apart("".join(want).encode())
    assert join_keys(keys) == " ".join(dict.fromkeys(k.strip() for k in want_keys))
    # no record without MSG_REGION or with TRACE_ON=false; none for the trace topic itself
    rows = PubRows("T", "pg", hosts, 1024, 256)
    pub_row(rows, Message("T", b""), SendResult("SEND_OK", "U", "O", MessageQueue("T", "b", 1), 7, None), 1)
    pub_row(rows, Message("T", b""), SendResult("SEND_OK", "U", "O", MessageQueue("T", "b", 1), 7, "R", False), 1)
    pub_row(rows, Message("T", b""), SendResult("SEND_OK", "U", "O", MessageQueue("T", "b", 1), 7, "R"), 1)
    assert len(rows) == 0


def test_a_compressed_body_is_sent_as_it_is_with_the_compressed_flag() -> None:
    text = b"Pub" * 2000
    mq = MessageQueue("RMQ_SYS_TRACE_TOPIC", "b", 0)
    done = send_request(Message(mq.topic, CompressedBody(zlib.compress(text, 5))), mq, "g", 4, 4096)
    plain = send_request(Message(mq.topic, text), mq, "g", 4, 4096)  # compressed by the producer
    small = send_request(Message(mq.topic, b"Pub"), mq, "g", 4, 4096)
    assert type(done.body) is bytes and done.body == plain.body and zlib.decompress(done.body) == text
    assert [int(r.ext_fields["f"]) for r in (done, plain, small)] == [1, 1, 0]  # MessageSysFlag.COMPRESSED


async def test_a_thread_behind_drops_whole_batches_counted_and_a_flush_sends_the_rest() -> None:
    sink = _Sink()
    d = TraceDispatcher("pg", "PRODUCER", None, lambda group, name: sink)
    for i in range(JOBS_MAX + 2):  # handed on before the thread runs: as if it were stuck
        d.append(TraceContext(TraceType.Pub, i, "R", "pg", beans=[TraceBean(msg_id=f"M{i}")]))
        d.append(TraceContext(TraceType.Pub, i, "R", "pg", beans=[TraceBean(msg_id=f"N{i}")]))
        d._drain()
    assert d.discarded == 4 and d._packer.jobs_waiting == JOBS_MAX  # the last two batches, two events each
    await d.start("ns:9876")
    await d.flush()
    records = [c.beans[0].msg_id for m in sink.sent for c in decode_trace(_text(m))]
    assert records == [f"{x}{i}" for i in range(JOBS_MAX) for x in "MN"]
    await d.shutdown()
    assert d._thread is None and sink.stopped
