"""The producer's hot path twins (fastmq/_ext/produce): the request frame each writes must be
byte for byte what the codec encodes for the producer's RemotingCommand, UNIQ_KEYs must come out
the same from both, and a batch must be checked, numbered and encoded identically."""
from __future__ import annotations

import asyncio
import gc
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
from fastmq.remoting.request_signer import RequestSigner
from tests.support import examples

PREFIX = "7F00000104D2CAFEBABE"
MONTH_MS = 1763900000000  # 2025-11-23, UTC

topics = st.from_regex(r"\A(%RETRY%)?[%|a-zA-Z0-9_-]{1,40}\Z")
texts = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=30)
props = st.dictionaries(texts.filter(bool), texts, max_size=6)
int32 = st.integers(-(2 ** 31), 2 ** 31 - 1)


@settings(max_examples=examples(300), deadline=None)
@given(group=texts.filter(bool), topic=topics, qid=st.integers(0, 1000), flag=int32, properties=props,
       body=st.binary(min_size=1, max_size=300), batch=st.booleans(), sys_flag=st.sampled_from([0, 1]),
       queue_nums=st.integers(1, 64))
@example(group='P"G\\', topic="%RETRY%G", qid=3, flag=-7, properties={"TAGS": "a\nb\t\"", "é": "ü\x03\x7f"},
         body=b"\x00", batch=False, sys_flag=1, queue_nums=4)
def test_frame_is_what_the_codec_encodes(produce, group: str, topic: str, qid: int, flag: int,
                                         properties: dict[str, str], body: bytes, batch: bool, sys_flag: int,
                                         queue_nums: int) -> None:
    p = Producer("PG", namesrv_addr="127.0.0.1:1", default_topic_queue_nums=queue_nums)
    p.group = group[:255]  # the Producer refuses such a name; the writer must still escape any
    msg = Message(topic, body, flag, dict(properties))
    req = p._request(msg, MessageQueue(topic, "b", qid), batch)
    req.ext_fields["f"] = str(sys_flag)  # _request only sets the compressed flag for big bodies
    w = produce.SendRequestWriter(p.group, "TBW102", queue_nums, req.language, req.version)
    got = w.frame(req.opaque, topic, qid, sys_flag, int(req.ext_fields["g"]), flag, msg.properties, req.body, batch)
    assert got == encode_frame(req)


@settings(max_examples=examples(150), deadline=None)
@given(group=texts.filter(bool), topic=topics, qid=st.integers(0, 1000), flag=int32, properties=props,
       body=st.binary(min_size=1, max_size=300), batch=st.booleans(), sys_flag=st.sampled_from([0, 1]),
       access_key=texts.filter(bool), token=st.none() | texts, key_twin=st.sampled_from(["c", "py"]))
@example(group="PG", topic="%RETRY%G", qid=0, flag=0, properties={"é": 'ü"\n'}, body=b"\x00", batch=True,
         sys_flag=1, access_key='a"k', token="", key_twin="c")
def test_signed_frame_is_what_the_signer_and_codec_make(produce, group: str, topic: str, qid: int, flag: int,
                                                        properties: dict[str, str], body: bytes, batch: bool,
                                                        sys_flag: int, access_key: str, token: str | None,
                                                        key_twin: str) -> None:
    """With a signer the frame carries AccessKey (SecurityToken) and Signature exactly as the
    general path's request does after the ACL hook (RequestSigner) signed it, under either
    twin's HMAC key."""
    signer = RequestSigner(access_key, "sk-secret", token)
    signer.key = importlib.import_module(f"fastmq._ext.acl_check_{key_twin}").HmacKey(b"sk-secret")
    p = Producer("PG", namesrv_addr="127.0.0.1:1", default_topic_queue_nums=8)
    p.group = group[:255]
    msg = Message(topic, body, flag, dict(properties))
    req = p._request(msg, MessageQueue(topic, "b", qid), batch)
    req.ext_fields["f"] = str(sys_flag)
    w = produce.SendRequestWriter(p.group, "TBW102", 8, req.language, req.version, signer=signer)
    assert w.signer is signer
    got = w.frame(req.opaque, topic, qid, sys_flag, int(req.ext_fields["g"]), flag, msg.properties, req.body, batch)
    signer(req)
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


def test_passes_says_yes_only_to_what_check_message_lets_through(produce) -> None:
    """SendFastPath.passes (the blocking send_async's check before check_message): true only for
    a running fast path, a topic validated before and a non-empty bytes body within the size
    limit; everything else is left to check_message."""
    from fastmq.client.produce_context import ProduceContext
    from fastmq.protocol.command import next_opaque
    ctx = ProduceContext({"T"}, {}, None, lambda addr: None, None, None, None, None)  # type: ignore[arg-type]
    fast = produce.SendFastPath(ctx, None, None, next_opaque)
    fast.max_message_size = 4
    ok = Message("T", b"abcd")
    assert not fast.passes(ok)  # not running (a producer not started, or one with RPC hooks)
    fast.running = True
    assert fast.passes(ok)
    for refused in (Message("U", b"a"), Message("T", b""), Message("T", b"abcde"), Message("T", bytearray(b"a")),
                    Message("T", memoryview(b"a")), Message("T", "text")):  # type: ignore[arg-type]
        assert not fast.passes(refused), refused


class _Resp:
    def __init__(self, code: int, ext: dict[str, str] | None) -> None:
        self.code, self.ext_fields, self.remark = code, ext, None


class _Owner:
    """The part of a ProduceContext an AsyncSend calls back."""

    def __init__(self) -> None:
        self.answers: list[object] = []
        self.failures: list[BaseException] = []

    def send_answered(self, entry, resp) -> None:
        self.answers.append(resp)

    def send_failed(self, entry, exc) -> None:
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
        owner, permits = _Owner(), _Permits()
        entry = produce.AsyncSend(owner, Message("T", b"x"), mq, "UNIQ", loop, lambda r, e: got.append((r, e)),
                                  permits, 3000, loop.time(), loop.time() + 3)
        assert not entry.answered() and not entry.done()
        entry.on_response(resp)
        assert entry.answered()
        if taken:
            r = entry.result()
            assert (r.status, r.msg_id, r.offset_msg_id, r.message_queue, r.queue_offset, r.region_id) == \
                   ("SEND_OK", "UNIQ", "OFF", mq, 41, "R")
            assert permits.released == 1 and got[-1] == (r, None) and owner.answers == []
        else:  # everything else is the producer's to judge, the permit still held
            assert not entry.done() and owner.answers == [resp] and permits.released == 0
        entry.finish(None, None) if not taken else None
        entry.release()
        assert permits.released == 1  # released once, however often asked


def _send_future(produce, loop, permits=None, callback=None, owner=None):
    return produce.AsyncSend(owner or _Owner(), None, MessageQueue("T", "b", 0), "U", loop, callback, permits, 3000,
                             0.0, 3.0)


async def test_async_send_failure_and_callback_errors(produce) -> None:
    loop = asyncio.get_running_loop()
    owner, permits = _Owner(), _Permits()
    entry = _send_future(produce, loop, permits, owner=owner)
    err = RuntimeError("gone")
    entry.on_failure(err)
    assert entry.answered() and not entry.done() and owner.failures == [err]

    def bad(r: object, e: object) -> None:
        raise KeyError("callback")
    entry = _send_future(produce, loop, callback=bad)
    entry.finish("result", None)
    with pytest.raises(KeyError):
        entry.result()
    entry = _send_future(produce, loop, permits, bad)
    assert entry.cancel()
    entry.finish("result", None)  # a cancelled caller: nothing to complete, the permit still comes back
    assert permits.released == 1 and entry.cancelled()


async def test_async_send_is_the_callers_future(produce) -> None:
    """The entry is the future send_async returns: asyncio takes it as one (tasks await it,
    gather, wait, wait_for, shield), and only the send completes it."""
    loop = asyncio.get_running_loop()
    f = _send_future(produce, loop)
    assert asyncio.isfuture(f) and f.get_loop() is loop and not f.done() and not f.cancelled()
    with pytest.raises(asyncio.InvalidStateError):
        f.result()
    with pytest.raises(asyncio.InvalidStateError):
        f.exception()
    with pytest.raises(RuntimeError):
        f.set_result("x")
    with pytest.raises(RuntimeError):
        f.set_exception(ValueError())

    task = asyncio.ensure_future(_await(f))
    await asyncio.sleep(0)
    seen: list[str] = []
    f.add_done_callback(lambda g: seen.append("first"))
    f.add_done_callback(lambda g: seen.append("second"))
    gone = seen.append
    f.add_done_callback(gone)
    assert f.remove_done_callback(gone) == 1 and f.remove_done_callback(gone) == 0
    f.finish("R", None)
    assert f.done() and f.result() == "R" and f.exception() is None
    assert await task == "R" and seen == ["first", "second"] and await f == "R"
    late: list[object] = []
    f.add_done_callback(late.append)  # after the end: still called, on the loop
    await asyncio.sleep(0)
    assert late == [f]

    ok, bad = _send_future(produce, loop), _send_future(produce, loop)
    gathered = asyncio.gather(ok, bad, return_exceptions=True)
    err = KeyError("k")
    bad.finish(None, err)
    ok.finish("fine", None)
    assert await gathered == ["fine", err]
    with pytest.raises(KeyError):
        bad.result()

    f = _send_future(produce, loop)
    assert await asyncio.shield(_later(f, "S")) == "S"
    f = _send_future(produce, loop)
    done, pending = await asyncio.wait([f], timeout=0.01)
    assert not done and pending == {f}


async def _later(f, result):
    asyncio.get_running_loop().call_soon(f.finish, result, None)
    return await f


async def test_async_send_future_cancelled_by_its_caller(produce) -> None:
    """A caller that stops waiting cancels the future; the send still ends once (its permit back)."""
    loop = asyncio.get_running_loop()
    permits = _Permits()
    f = _send_future(produce, loop, permits)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(f, 0.01)
    assert f.cancelled() and not f.cancel()
    with pytest.raises(asyncio.CancelledError):
        f.result()
    with pytest.raises(asyncio.CancelledError):
        f.exception()
    f.finish("late", None)
    assert f.cancelled() and permits.released == 1

    f = _send_future(produce, loop)
    task = asyncio.ensure_future(_await(f))
    await asyncio.sleep(0)
    task.cancel("stop")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert f.cancelled()
    with pytest.raises(asyncio.CancelledError, match="stop"):
        f.result()


async def _await(f):
    return await f


async def test_async_send_failure_nobody_retrieved_is_logged(produce) -> None:
    """As asyncio does for a future: a send that failed, dropped with its error never looked at,
    is reported to the loop's exception handler; not when a callback had the error."""
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    try:
        f = _send_future(produce, loop)
        f.finish(None, KeyError("lost"))
        del f
        gc.collect()
        assert [c["message"] for c in reported] == ["AsyncSend exception was never retrieved"]
        assert isinstance(reported[0]["exception"], KeyError)
        reported.clear()
        f = _send_future(produce, loop, callback=lambda r, e: None)
        f.finish(None, KeyError("seen"))
        f = _send_future(produce, loop)
        f.finish(None, KeyError("looked at"))
        assert isinstance(f.exception(), KeyError)
        del f
        gc.collect()
        assert reported == []
    finally:
        loop.set_exception_handler(None)


_trace_props = st.fixed_dictionaries({}, optional={
    "TAGS": texts, "KEYS": texts, "TRAN_MSG": st.sampled_from(["true", "TRUE", "false", ""]),
    "DELAY": st.sampled_from(["", "0", "3"])})


@settings(max_examples=examples(100), deadline=None)
@given(properties=_trace_props, body=st.binary(min_size=1, max_size=40),
       region=st.sampled_from([None, "DefaultRegion"]), trace_on=st.sampled_from([None, "true", "false", "TRUE"]),
       status=st.sampled_from(["SEND_OK", "FLUSH_DISK_TIMEOUT"]), filled=st.sampled_from([0, 1, 2]),
       spelled=st.booleans())
def test_a_traced_async_send_leaves_pub_row_s_fields(produce, properties: dict[str, str], body: bytes,
                                                     region: str | None, trace_on: str | None, status: str,
                                                     filled: int, spelled: bool) -> None:
    """An asynchronous send of a traced producer, as it ends, leaves in its dispatcher's pub_rows
    the record trace_data.pub_row writes for its message and result (the compiled twin writes it
    by a C call; the pure twin through append_pub), with the drop when they are full and the
    wake when they reach the wake band."""
    from fastmq._ext.trace_encode import PubRows
    from fastmq.client.trace_data import pub_row
    from fastmq.client.trace_dispatcher import QUEUE_SIZE, WAKE_AT, TraceDispatcher
    loop = asyncio.new_event_loop()
    try:
        d = TraceDispatcher("PG", "PRODUCER", None, lambda g, i: None)  # type: ignore[arg-type, return-value]
        d.store_host = {"broker-a": "10.0.0.1:10911"}.get
        woken: list[int] = []
        d._loop = loop
        d._wake = lambda: woken.append(1)  # type: ignore[method-assign]
        # below the wake band, one below it (this send wakes), and full (a drop)
        before = (0, WAKE_AT - 1, QUEUE_SIZE)[filled]
        mq = MessageQueue("T", "broker-a", 2)
        filler = produce.SendResult("SEND_OK", "F", "O", mq, 1, "R")
        for _ in range(before):
            pub_row(d.pub_rows, Message("T", b"x"), filler, 1)
        # ``spelled``: property names built at run time (not interned: the compiled twin looks them up)
        msg = Message("T", body, 0, {("".join(list(k)) if spelled else k): v for k, v in properties.items()})
        entry = produce.AsyncSend(_Owner(), msg, mq, "UNIQ", loop, None, None, 3000, 0.0, 3.0)
        entry.tracer, entry.trace_begin_ms = d, 1_700_000_000_000
        result = produce.SendResult(status, "UNIQ", "OFF", mq, 41, region, trace_on)
        entry.finish(result, None)
        want = PubRows(d.trace_topic, "PG", d.store_host, QUEUE_SIZE, WAKE_AT)
        recorded = filled < 2 and pub_row(want, msg, result, 1_700_000_000_000) == 0 and len(want) == 1
        assert len(d.pub_rows) == before + recorded
        assert d.discarded == (1 if filled == 2 and region is not None and result.trace_on else 0)
        assert woken == ([1] if filled == 1 and recorded else [])
        got = d.pub_rows.chunk(before, 1 << 30)[:2]
        wanted = want.chunk(0, 1 << 30)[:2]
        cut = [t.split(b"\x01") for t in (got[0], wanted[0])]  # (the answer's wall clock ms apart)
        # (every field but the cost, the 11th: the answer's wall clock ms apart)
        assert cut[0][:10] + cut[0][11:] == cut[1][:10] + cut[1][11:] and got[1] == wanted[1]
        if recorded:
            assert abs(int(cut[0][10]) - int(cut[1][10])) < 10_000
        assert entry.result() is result
    finally:
        loop.close()
