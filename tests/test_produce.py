"""The producer's hot path twins (fastmq/_ext/produce): the request frame each writes must be
byte for byte what the codec encodes for the producer's RemotingCommand, UNIQ_KEYs must come out
the same from both, and a batch must be checked, numbered and encoded identically."""
from __future__ import annotations

import asyncio
import importlib
import os
import pickle

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fastmq._ext import batch_py
from fastmq._ext.codec import encode_frame
from fastmq.client.producer import Producer
from fastmq.protocol.message import Message
from fastmq.protocol.message_queue import MessageQueue

PREFIX = "7F00000104D2CAFEBABE"
MONTH_MS = 1763900000000  # 2025-11-23, UTC

topics = st.from_regex(r"\A(%RETRY%)?[%|a-zA-Z0-9_-]{1,40}\Z")
texts = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=30)
props = st.dictionaries(texts.filter(bool), texts, max_size=6)
int32 = st.integers(-(2 ** 31), 2 ** 31 - 1)


@settings(max_examples=300, deadline=None)
@given(group=texts.filter(bool), topic=topics, qid=st.integers(0, 1000), flag=int32, properties=props,
       body=st.binary(min_size=1, max_size=300), batch=st.booleans(), sys_flag=st.sampled_from([0, 1]),
       queue_nums=st.integers(1, 64))
@example(group='P"G\\', topic="%RETRY%G", qid=3, flag=-7, properties={"TAGS": "a\nb\t\"", "é": "ü\x03\x7f"},
         body=b"\x00", batch=False, sys_flag=1, queue_nums=4)
def test_frame_is_what_the_codec_encodes(produce, group: str, topic: str, qid: int, flag: int,
                                         properties: dict[str, str], body: bytes, batch: bool, sys_flag: int,
                                         queue_nums: int) -> None:
    p = Producer(group[:255], namesrv_addr="127.0.0.1:1", default_topic_queue_nums=queue_nums)
    msg = Message(topic, body, flag, dict(properties))
    req = p._request(msg, MessageQueue(topic, "b", qid), batch)
    req.ext_fields["f"] = str(sys_flag)  # _request only sets the compressed flag for big bodies
    w = produce.SendRequestWriter(p.group, "TBW102", queue_nums, req.language, req.version)
    got = w.frame(req.opaque, topic, qid, sys_flag, int(req.ext_fields["g"]), flag, msg.properties, req.body, batch)
    assert got == encode_frame(req)


def test_frame_refuses_what_cannot_be_encoded(produce) -> None:
    w = produce.SendRequestWriter("PG", "TBW102", 4, 3, 409)
    with pytest.raises(ValueError, match="reserved separator"):
        w.frame(1, "T", 0, 0, 0, 0, {"K": "a\x01b"}, b"x", False)
    with pytest.raises(ValueError, match="outside int32"):
        w.frame(2 ** 31, "T", 0, 0, 0, 0, {}, b"x", False)
    with pytest.raises(ValueError, match="outside int32"):
        w.frame(1, "T", 0, 0, 0, -(2 ** 31) - 1, {}, b"x", False)
    with pytest.raises(TypeError):
        w.frame(1, "T", 0, 0, 0, 0, {}, "not bytes", False)
    with pytest.raises(UnicodeEncodeError):
        w.frame(1, "T", 0, 0, 0, 0, {"K": "\ud800"}, b"x", False)
    with pytest.raises(ValueError, match="header is"):  # its length shares a word with the serialize type
        w.frame(1, "T", 0, 0, 0, 0, {"K": "v" * (1 << 24)}, b"x", False)


def test_uniq_ids_agree_and_count_on(produce) -> None:
    ref = importlib.import_module("fastmq._ext.produce_py").UniqIds(PREFIX)
    ids = produce.UniqIds(PREFIX)
    for now in (MONTH_MS, MONTH_MS + 1, MONTH_MS + 40 * 24 * 3600 * 1000):
        assert ids.next(now) == ref.next(now)
        assert ids.take(3, now) == ref.take(3, now)
    first = ids.next(MONTH_MS)
    assert len(first) == 32 and first.startswith(PREFIX) and first == first.upper()
    assert ids.take(0) == []
    # the 16-bit counter wraps; the milliseconds are those since the month began (UTC)
    many = ids.take(70000, MONTH_MS)
    assert many[0][-4:] != "0000" and len(set(many)) == 65536
    start, nxt = produce.month_bounds(MONTH_MS)
    assert (start, nxt) == (1761955200000, 1764547200000)
    assert int(ids.next(MONTH_MS)[20:28], 16) == MONTH_MS - start
    with pytest.raises(ValueError):
        produce.UniqIds("short")
    ids.reseed("0" * 20)
    assert ids.next(MONTH_MS) == "0" * 20 + f"{MONTH_MS - start:08X}0000"


def test_forked_child_makes_keys_of_its_own() -> None:
    """A pre-forking server's workers must not repeat the parent's UNIQ_KEYs."""
    from fastmq.client.message_id import create_uniq_id
    mine = create_uniq_id()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(w, create_uniq_id().encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        child = os.read(r, 64).decode()
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    assert len(child) == 32 and child[:20] != mine[:20]


def _batch(n: int, **extra: object) -> list[Message]:
    return [Message("T", f"b{i}".encode(), i, {"KEYS": f"k{i}", **extra}) for i in range(n)]


def test_encode_batch_agrees_with_the_body_encoder(produce) -> None:
    ids = produce.UniqIds(PREFIX)
    msgs = _batch(5)
    msgs[2].properties["UNIQ_KEY"] = "GIVEN"
    body, joined = produce.encode_batch(msgs, "T", 1024, ids)
    assert body == batch_py.encode_batch_body(msgs)
    assert joined.split(",") == [m.properties["UNIQ_KEY"] for m in msgs]
    assert joined.split(",")[2] == "GIVEN" and len(set(joined.split(","))) == 5


@pytest.mark.parametrize("spoil", [
    lambda ms: setattr(ms[1], "topic", "Other"),
    lambda ms: setattr(ms[1], "body", b""),
    lambda ms: setattr(ms[1], "body", bytearray(b"x")),
    lambda ms: setattr(ms[1], "body", b"x" * 2000),
    lambda ms: ms[1].properties.__setitem__("DELAY", "3"),
])
def test_encode_batch_leaves_the_exact_checks_to_the_caller(produce, spoil) -> None:
    msgs = _batch(3)
    spoil(msgs)
    assert produce.encode_batch(msgs, "T", 1024, produce.UniqIds(PREFIX)) is None
    assert all("UNIQ_KEY" not in m.properties for m in msgs)  # nothing changed
    ok = _batch(2, DELAY="0")
    assert produce.encode_batch(ok, "T", 1024, produce.UniqIds(PREFIX)) is not None
    with pytest.raises(ValueError, match="reserved separator"):
        produce.encode_batch(_batch(2, BAD="\x02"), "T", 1024, produce.UniqIds(PREFIX))


def test_send_result_is_an_immutable_value(produce) -> None:
    mq = MessageQueue("T", "b", 1)
    r = produce.SendResult("SEND_OK", "U", "O", mq, 7)
    assert r == produce.SendResult("SEND_OK", "U", "O", MessageQueue("T", "b", 1), 7, None)
    assert r != produce.SendResult("SEND_OK", "U", "O", mq, 8)
    assert hash(r) == hash(produce.SendResult("SEND_OK", "U", "O", mq, 7))
    assert (r.status, r.msg_id, r.offset_msg_id, r.message_queue, r.queue_offset, r.region_id) == \
           ("SEND_OK", "U", "O", mq, 7, None)
    assert repr(r).startswith("SendResult(status='SEND_OK', msg_id='U', offset_msg_id='O', message_queue=")
    with pytest.raises(AttributeError):
        r.status = "X"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(r)) == r


class _Resp:
    def __init__(self, code: int, ext: dict[str, str] | None) -> None:
        self.code, self.ext_fields, self.remark = code, ext, None


class _Owner:
    send_latency_fault_enable = False

    def __init__(self) -> None:
        self.answers: list[object] = []
        self.failures: list[BaseException] = []

    def _async_answer(self, entry, resp) -> None:
        self.answers.append(resp)

    def _async_failed(self, entry, exc) -> None:
        self.failures.append(exc)


class _Permits:
    def __init__(self) -> None:
        self.released = 0

    def release(self) -> None:
        self.released += 1


async def test_async_send_completes_a_plain_success_itself(produce, codec) -> None:
    loop = asyncio.get_running_loop()
    mq = MessageQueue("T", "b", 2)
    got: list[tuple[object, object]] = []
    for resp, taken in [
        (codec.RemotingCommand(0, flag=1, ext_fields={"msgId": "OFF", "queueId": "2", "queueOffset": "41",
                                                      "MSG_REGION": "R"}), True),
        (codec.RemotingCommand(0, flag=1, ext_fields={"msgId": "OFF", "queueId": "3", "queueOffset": "41"}), False),
        (codec.RemotingCommand(0, flag=1, ext_fields={"msgId": "OFF", "queueId": "2", "queueOffset": " 41"}), False),
        (codec.RemotingCommand(0, flag=1, ext_fields={"queueId": "2", "queueOffset": "41"}), False),
        (codec.RemotingCommand(0, flag=1), False),
        (codec.RemotingCommand(14, flag=1, ext_fields={"msgId": "OFF", "queueId": "2", "queueOffset": "41"}), False),
    ]:
        owner, permits, fut = _Owner(), _Permits(), loop.create_future()
        entry = produce.AsyncSend(owner, Message("T", b"x"), mq, "UNIQ", fut, lambda r, e: got.append((r, e)),
                                  permits, 3000, loop.time(), loop.time() + 3)
        assert not entry.done()
        entry.set_result(resp)
        assert entry.done()
        if taken:
            r = fut.result()
            assert (r.status, r.msg_id, r.offset_msg_id, r.message_queue, r.queue_offset, r.region_id) == \
                   ("SEND_OK", "UNIQ", "OFF", mq, 41, "R")
            assert permits.released == 1 and got[-1] == (r, None) and owner.answers == []
        else:  # everything else is the producer's to judge, the permit still held
            assert not fut.done() and owner.answers == [resp] and permits.released == 0
        entry.finish(None, None) if not taken else None
        entry.release()
        assert permits.released == 1  # released once, however often asked


async def test_async_send_failure_and_callback_errors(produce) -> None:
    loop = asyncio.get_running_loop()
    owner, permits = _Owner(), _Permits()
    entry = produce.AsyncSend(owner, None, MessageQueue("T", "b", 0), "U", loop.create_future(), None, permits,
                              3000, 0.0, 3.0)
    err = RuntimeError("gone")
    entry.set_exception(err)
    assert entry.done() and owner.failures == [err]

    def bad(r: object, e: object) -> None:
        raise KeyError("callback")
    fut = loop.create_future()
    entry = produce.AsyncSend(owner, None, MessageQueue("T", "b", 0), "U", fut, bad, None, 3000, 0.0, 3.0)
    entry.finish("result", None)
    with pytest.raises(KeyError):
        fut.result()
    fut = loop.create_future()
    fut.cancel()
    entry = produce.AsyncSend(owner, None, MessageQueue("T", "b", 0), "U", fut, bad, permits, 3000, 0.0, 3.0)
    entry.finish("result", None)  # a cancelled caller: nothing to complete, the permit still comes back
    assert permits.released == 1
