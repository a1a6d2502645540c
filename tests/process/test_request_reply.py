"""Request-reply through a real ``fastmq-broker``: fastmq's requester (``Producer.request`` and
``request_async``, asyncio and blocking) and a fastmq responder (a push consumer that answers
with ``create_reply_message``), and the broker's side raw (SEND_REPLY_MESSAGE 324/325, the push
326 to the requester's connection, ``storeReplyMessageEnable``, 4.9.8's refusals).

The responder decides by the request body's first word: ``echo`` replies at once, ``slow`` after
the request's timeout, ``twice`` replies two times, ``big`` replies with a body to be compressed,
``hold-<n>`` waits until the test lets it go, ``none`` never replies. What each of its reply sends
ended with is kept by body.
"""
from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any, AsyncIterator, Iterator

import pytest
import pytest_asyncio

import fastmq
from fastmq.aio import ConsumeStatus, Message, MessageExt, Producer, PushConsumer, create_reply_message
from fastmq.errors import BrokerError, RequestSendError, RequestTimeoutError, SendFailedError
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import RemotingCommand, create_request, response_for
from fastmq.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from fastmq.protocol.heartbeat import HeartbeatData, ProducerData
from fastmq.protocol.message import MessageConst, encode_properties
from fastmq.remoting import Connection, RemotingClient, RequestProcessor
from fastmq.testing import EmbeddedCluster
from tests.process.helpers import update_broker_config, until
from tests.support import read_topic

CLUSTER = "DefaultCluster"
REPLY_TOPIC = f"{CLUSTER}_REPLY_TOPIC"
TOPIC = "RpcRequests"
# the broker refuses a body over 64 KiB: a request that big fails its send (MESSAGE_ILLEGAL)
BROKER = {"maxMessageSize": 65536, "brokerClusterName": CLUSTER}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path_factory.mktemp("rpc-cluster"), broker_conf=BROKER) as c:
        yield c


class Responder:
    """A push consumer of TOPIC answering by the body's first word (see the module's note)."""

    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv
        self.outcomes: dict[bytes, list[Any]] = {}
        self.release: dict[bytes, asyncio.Event] = {}
        self.seen: set[bytes] = set()
        self.queue_of: dict[bytes, int] = {}  # the queue each request was read from
        self.producer = Producer(f"PG_RPC_REPLY_{uuid.uuid4().hex[:6]}", namesrv_addr=namesrv,
                                 retry_times_when_send_failed=0)
        self.consumer = PushConsumer(f"CG_RPC_{uuid.uuid4().hex[:6]}", namesrv_addr=namesrv,
                                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        self.consumer.subscribe(TOPIC)
        self.consumer.register_message_listener(self.listener)

    async def start(self) -> None:
        await self.producer.start()
        await self.consumer.start()

    async def stop(self) -> None:
        await self.consumer.shutdown()
        await self.producer.shutdown()

    async def _reply(self, m: MessageExt, body: bytes) -> None:
        try:
            r: Any = await self.producer.send(create_reply_message(m, body))
        except Exception as exc:
            r = exc
        self.outcomes.setdefault(m.body, []).append(r)

    async def listener(self, msgs: list[MessageExt]) -> ConsumeStatus:
        for m in msgs:
            self.seen.add(m.body)
            self.queue_of[m.body] = m.queue_id
            word = m.body.split()[0]
            if word == b"echo":
                await self._reply(m, b"re: " + m.body)
            elif word == b"big":  # over the producer's 4 KiB: sent compressed, pushed compressed
                await self._reply(m, m.body * 200)
            elif word == b"twice":
                await self._reply(m, b"first " + m.body)
                await self._reply(m, b"second " + m.body)
            elif word == b"slow":
                asyncio.get_running_loop().call_later(
                    1.5, lambda m=m: asyncio.ensure_future(self._reply(m, b"late " + m.body)))
            elif word.startswith(b"hold"):
                ev = self.release.setdefault(m.body, asyncio.Event())

                async def later(m: MessageExt = m, ev: asyncio.Event = ev) -> None:
                    await asyncio.wait_for(ev.wait(), 30)
                    await self._reply(m, b"re: " + m.body)
                asyncio.ensure_future(later())
        return ConsumeStatus.CONSUME_SUCCESS


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def responder(cluster: EmbeddedCluster) -> AsyncIterator[Responder]:
    r = Responder(cluster.namesrv_addr)
    # the topic first, so the responder's group is placed on its queues from the start
    async with Producer("PG_RPC_SETUP", namesrv_addr=cluster.namesrv_addr) as p:
        await p.send(Message(TOPIC, b"setup"))
    await r.start()
    yield r
    await r.stop()


async def _requester(cluster: EmbeddedCluster, **kw: Any) -> Producer:
    p = Producer(f"PG_RPC_REQ_{uuid.uuid4().hex[:6]}", namesrv_addr=cluster.namesrv_addr, **kw)
    await p.start()
    return p


async def _first_reply(p: Producer, body: bytes) -> MessageExt:
    """The reply to ``body``, asking again while the responder is not yet placed on the queues."""
    for _ in range(10):
        try:
            return await p.request(Message(TOPIC, body), timeout_ms=3000)
        except RequestTimeoutError:
            continue
    raise AssertionError("no reply in 10 tries")


pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


async def test_request_gets_the_reply(cluster: EmbeddedCluster, responder: Responder) -> None:
    p = await _requester(cluster)
    try:
        body = f"echo {uuid.uuid4().hex}".encode()
        reply = await _first_reply(p, body)
        assert reply.body == b"re: " + body
        props = reply.properties
        assert props[MessageConst.MESSAGE_TYPE] == "reply"
        assert props[MessageConst.REPLY_TO_CLIENT] == p.instance.client_id
        assert props[MessageConst.MESSAGE_TTL] == "3000"
        assert MessageConst.REPLY_MESSAGE_ARRIVE_TIME in props
        assert MessageConst.PUSH_REPLY_TIME in props
        assert reply.topic == REPLY_TOPIC
        # the request as stored: CLUSTER added by the broker, the request's three properties
        (req,) = [m for m in await read_topic(cluster.namesrv_addr, TOPIC, {body}, 20, 0) if m.body == body]
        assert req.properties[MessageConst.CLUSTER] == CLUSTER
        assert req.properties[MessageConst.CORRELATION_ID] == props[MessageConst.CORRELATION_ID]
        # the reply was also stored in the reply topic (storeReplyMessageEnable, on by default)
        stored = await read_topic(cluster.namesrv_addr, REPLY_TOPIC, {b"re: " + body}, 20, 0)
        assert b"re: " + body in {m.body for m in stored}
        # a reply over 4 KiB is compressed by the responder's producer and inflated by the requester
        big = f"big {uuid.uuid4().hex}".encode()
        reply = await p.request(Message(TOPIC, big), timeout_ms=5000)
        assert reply.body == big * 200 and reply.sys_flag & 1
        # several at once, each to its own caller
        bodies = [f"echo {i} {uuid.uuid4().hex}".encode() for i in range(8)]
        replies = await asyncio.gather(*(p.request(Message(TOPIC, b), timeout_ms=5000) for b in bodies))
        assert [r.body for r in replies] == [b"re: " + b for b in bodies]
    finally:
        await p.shutdown()


async def test_request_after_plain_sends_to_the_topic(cluster: EmbeddedCluster, responder: Responder) -> None:
    """A producer that sent to the topic before (route known, no heartbeat since its start) still
    gets the reply of its first request: the broker must know its connection before the reply."""
    first = await _requester(cluster)
    try:
        await _first_reply(first, b"echo placed")  # (the responder has its queues)
    finally:
        await first.shutdown()
    p = await _requester(cluster)
    try:
        await p.send(Message(TOPIC, b"plain first"))
        body = f"echo {uuid.uuid4().hex}".encode()
        reply = await p.request(Message(TOPIC, body), timeout_ms=5000)
        assert reply.body == b"re: " + body
    finally:
        await p.shutdown()


async def test_request_async_three_outcomes(cluster: EmbeddedCluster, responder: Responder) -> None:
    p = await _requester(cluster, max_message_size=1 << 20, compress_msg_body_over_howmuch=1 << 20)
    try:
        await _first_reply(p, b"echo warm-up")
        got: dict[str, tuple[Any, Any]] = {}
        done = asyncio.Event()

        def cb(name: str) -> Any:
            def f(reply: MessageExt | None, error: BaseException | None) -> None:
                assert name not in got, "a callback ran twice"
                got[name] = (reply, error)
                if len(got) == 3:
                    done.set()
            return f
        await p.request_async(Message(TOPIC, b"echo async"), cb("reply"), timeout_ms=5000)
        await p.request_async(Message(TOPIC, b"none " + b"x" * 70_000), cb("send failed"), timeout_ms=5000)
        await p.request_async(Message(TOPIC, b"none at all"), cb("timeout"), timeout_ms=800)
        await asyncio.wait_for(done.wait(), 20)
        reply, error = got["reply"]
        assert error is None and reply.body == b"re: echo async"
        reply, error = got["send failed"]
        assert reply is None and isinstance(error, RequestSendError) and not error.sent
        assert isinstance(error.__cause__, BrokerError) and error.__cause__.code == ResponseCode.MESSAGE_ILLEGAL
        reply, error = got["timeout"]
        assert reply is None and isinstance(error, RequestTimeoutError) and error.sent
        assert error.code == 10006 and "OK, but wait reply message timeout, 800 ms." in str(error)
        await asyncio.sleep(0.5)  # nothing more comes: one outcome each
        assert len(got) == 3
        # the blocking request of a send that fails raises RequestSendError
        with pytest.raises(RequestSendError):
            await p.request(Message(TOPIC, b"none " + b"x" * 70_000), timeout_ms=3000)
    finally:
        await p.shutdown()


async def test_slow_responder_times_out_and_late_reply_is_acknowledged(cluster: EmbeddedCluster,
                                                                      responder: Responder) -> None:
    p = await _requester(cluster)
    try:
        await _first_reply(p, b"echo warm-up")
        body = f"slow {uuid.uuid4().hex}".encode()
        with pytest.raises(RequestTimeoutError) as info:
            await p.request(Message(TOPIC, body), timeout_ms=1000)
        assert info.value.sent and isinstance(info.value, TimeoutError)
        # the late reply still reaches this client, which answers the broker SUCCESS and drops it
        assert await until(lambda: _ready(responder.outcomes.get(body)), 10)
        (late,) = responder.outcomes[body]
        assert not isinstance(late, BaseException), late
        assert await until(lambda: _ready(p.instance.requests.unmatched >= 1), 5)
        assert not p.instance.requests.pending
    finally:
        await p.shutdown()


async def test_responder_gone_times_out(cluster: EmbeddedCluster) -> None:
    """No responder reads the topic: the request is stored, the wait ends with the timeout."""
    p = await _requester(cluster)
    try:
        with pytest.raises(RequestTimeoutError) as info:
            await p.request(Message("RpcNobodyListens", b"anyone?"), timeout_ms=1000)
        assert info.value.sent
        assert "send request message to <RpcNobodyListens> OK, but wait reply message timeout, 1000 ms." \
            in str(info.value)
    finally:
        await p.shutdown()


async def test_second_reply_is_dropped(cluster: EmbeddedCluster, responder: Responder) -> None:
    p = await _requester(cluster)
    try:
        await _first_reply(p, b"echo warm-up")
        before = p.instance.requests.unmatched
        body = f"twice {uuid.uuid4().hex}".encode()
        reply = await p.request(Message(TOPIC, body), timeout_ms=5000)
        assert reply.body == b"first " + body
        assert await until(lambda: _ready(len(responder.outcomes.get(body, [])) == 2), 10)
        # both reply sends succeeded (the broker pushed both; the client acknowledged both)
        assert all(not isinstance(o, BaseException) for o in responder.outcomes[body]), responder.outcomes[body]
        assert await until(lambda: _ready(p.instance.requests.unmatched == before + 1), 5)
    finally:
        await p.shutdown()


async def test_requester_gone_before_the_reply(cluster: EmbeddedCluster, responder: Responder) -> None:
    """The requester disconnects while the responder works: the reply's send is refused with
    4.9.8's SYSTEM_ERROR "channel of <id> not found", and the reply is still stored."""
    p = await _requester(cluster)
    await _first_reply(p, b"echo warm-up")
    client_id = p.instance.client_id
    body = f"hold-1 {uuid.uuid4().hex}".encode()
    waiting = asyncio.ensure_future(p.request(Message(TOPIC, body), timeout_ms=20_000))
    assert await until(lambda: _ready(body in responder.seen), 10)
    await p.shutdown()  # the instance ends its pending requests, then closes its connections
    with pytest.raises(RequestTimeoutError):
        await waiting
    responder.release[body].set()
    assert await until(lambda: _ready(body in responder.outcomes), 10)
    (outcome,) = responder.outcomes[body]
    assert isinstance(outcome, SendFailedError), outcome
    cause = outcome.__cause__
    assert isinstance(cause, BrokerError) and cause.code == ResponseCode.SYSTEM_ERROR
    assert f"push reply message fail, channel of <{client_id}> not found." in str(cause), str(cause)
    stored = await read_topic(cluster.namesrv_addr, REPLY_TOPIC, {b"re: " + body}, 20, 0)
    assert b"re: " + body in {m.body for m in stored}


async def test_blocking_request_and_callback_thread(cluster: EmbeddedCluster, responder: Responder) -> None:
    """The blocking facade, from a thread of its own (the responder runs on this test's loop)."""
    def run() -> list[Any]:
        with fastmq.Producer(f"PG_RPC_BLOCK_{uuid.uuid4().hex[:6]}", namesrv_addr=cluster.namesrv_addr) as p:
            reply = None
            for _ in range(10):
                try:
                    reply = p.request(fastmq.Message(TOPIC, b"echo blocking"), timeout_ms=3000)
                    break
                except fastmq.RequestTimeoutError:
                    continue
            assert reply is not None and reply.body == b"re: echo blocking"
            got: list[Any] = []
            done = threading.Event()

            def cb(reply: MessageExt | None, error: BaseException | None) -> None:
                got.append((reply, error, threading.current_thread().name))
                done.set()
            p.request_async(fastmq.Message(TOPIC, b"echo blocking async"), cb, timeout_ms=5000)
            assert done.wait(20)
            return got + [threading.current_thread().name]
    got = await asyncio.to_thread(run)
    (reply, error, thread), caller = got
    assert error is None and reply.body == b"re: echo blocking async"
    assert thread != caller


async def test_request_to_a_chosen_queue(cluster: EmbeddedCluster, responder: Responder) -> None:
    """4.9.8's ``request(msg, mq, timeout)`` and ``request(msg, selector, arg, timeout)``, both
    the awaitable and the callback form, asyncio and blocking, and what they refuse."""
    p = await _requester(cluster)
    try:
        await _first_reply(p, b"echo warm-up queue")
        queues = (await p._publish_info(TOPIC)).queues
        for mq in queues:
            body = f"echo mq {mq.queue_id} {uuid.uuid4().hex}".encode()
            reply = await p.request(Message(TOPIC, body), timeout_ms=5000, mq=mq)
            assert reply.body == b"re: " + body and responder.queue_of[body] == mq.queue_id

        def last(qs: list[Any], _msg: Message, arg: object) -> Any:
            assert arg == "order-7"
            return qs[-1]
        body = f"echo selector {uuid.uuid4().hex}".encode()
        reply = await p.request(Message(TOPIC, body), timeout_ms=5000, selector=last, arg="order-7")
        assert reply.body == b"re: " + body and responder.queue_of[body] == queues[-1].queue_id
        got: list[tuple[Any, Any]] = []
        done = asyncio.Event()

        def cb(reply: MessageExt | None, error: BaseException | None) -> None:
            got.append((reply, error))
            if len(got) == 2:
                done.set()
        b1, b2 = (f"echo async {i} {uuid.uuid4().hex}".encode() for i in range(2))
        await p.request_async(Message(TOPIC, b1), cb, timeout_ms=5000, mq=queues[0])
        await p.request_async(Message(TOPIC, b2), cb, timeout_ms=5000, selector=last, arg="order-7")
        await asyncio.wait_for(done.wait(), 20)
        assert sorted(r.body for r, e in got if e is None) == sorted([b"re: " + b1, b"re: " + b2])
        assert (responder.queue_of[b1], responder.queue_of[b2]) == (queues[0].queue_id, queues[-1].queue_id)
        # refused before anything is sent, with the reason
        with pytest.raises(fastmq.MessageValidationError, match="not both"):
            await p.request(Message(TOPIC, b"none"), mq=queues[0], selector=last, arg="order-7")
        with pytest.raises(fastmq.MessageValidationError, match="topic not equal"):
            await p.request(Message("OtherTopic", b"none"), mq=queues[0])
        stranger = type(queues[0])(TOPIC, "no-such-broker", 0)
        with pytest.raises(fastmq.MessageValidationError, match="not a queue of the topic"):
            await p.request(Message(TOPIC, b"none"), selector=lambda qs, m, a: stranger)
        # a queue of a broker that is not there: the send fails, and the request says so
        with pytest.raises(RequestSendError):
            await p.request(Message(TOPIC, b"none gone"), timeout_ms=3000, mq=stranger)
    finally:
        await p.shutdown()

    def blocking() -> list[int]:
        with fastmq.Producer(f"PG_RPC_BLOCK_{uuid.uuid4().hex[:6]}", namesrv_addr=cluster.namesrv_addr) as bp:
            out = []
            for kw in ({"mq": queues[1]}, {"selector": last, "arg": "order-7"}):
                body = f"echo blocking {uuid.uuid4().hex}".encode()
                assert bp.request(fastmq.Message(TOPIC, body), timeout_ms=5000, **kw).body == b"re: " + body
                out.append(responder.queue_of[body])
            return out
    assert await asyncio.to_thread(blocking) == [queues[1].queue_id, queues[-1].queue_id]


# ------------------------------------------------------------------ the broker's side, raw


class _Pushes(RequestProcessor):
    """A raw requester's side: records PUSH_REPLY_MESSAGE_TO_CLIENT and answers ``code``."""

    def __init__(self) -> None:
        self.got: list[RemotingCommand] = []
        self.code = ResponseCode.SUCCESS

    def process_request(self, conn: Connection, request: RemotingCommand) -> Any:
        self.got.append(request)
        return response_for(request, self.code, None if self.code == ResponseCode.SUCCESS else "no thanks")


def _reply_request(code: int, props: dict[str, str], body: bytes = b"r", queue_id: int = -1) -> RemotingCommand:
    h = SendMessageRequestHeader(producerGroup="PG_RAW_REPLY", topic=REPLY_TOPIC, defaultTopic="TBW102",
                                 defaultTopicQueueNums=4, queueId=queue_id, sysFlag=0, bornTimestamp=1234, flag=7,
                                 properties=encode_properties(props).decode())
    fields = h.to_fields(SEND_V2_NAMES) if code == RequestCode.SEND_REPLY_MESSAGE_V2 else h.to_fields()
    return create_request(code, fields, body)


async def test_broker_pushes_to_the_heartbeat_connection(cluster: EmbeddedCluster) -> None:
    addr = cluster.broker_addr
    pushes = _Pushes()
    requester = RemotingClient(processor=pushes)
    responder = RemotingClient()
    client_id = f"10.0.0.1@raw-{uuid.uuid4().hex[:6]}"
    try:
        hb = HeartbeatData(client_id, [ProducerData("PG_RAW_REQ")], [])
        r = await requester.invoke(addr, create_request(RequestCode.HEART_BEAT, {}, hb.to_json()), 5)
        assert r.code == ResponseCode.SUCCESS
        props = {MessageConst.CORRELATION_ID: "c1", MessageConst.REPLY_TO_CLIENT: client_id,
                 MessageConst.MESSAGE_TTL: "3000", MessageConst.MESSAGE_TYPE: "reply"}
        for code in (RequestCode.SEND_REPLY_MESSAGE_V2, RequestCode.SEND_REPLY_MESSAGE):
            r = await responder.invoke(addr, _reply_request(code, props, b"body-%d" % code), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark
            f = r.ext_fields or {}
            assert f["queueId"] == "0" and f["msgId"] != "0"  # stored: the copy's id and offset
            assert f[MessageConst.MSG_REGION] == "DefaultRegion" and f[MessageConst.TRACE_SWITCH] == "true"
            push = pushes.got[-1]
            assert push.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and push.body == b"body-%d" % code
            pf = push.ext_fields or {}
            assert pf["topic"] == REPLY_TOPIC and pf["producerGroup"] == "PG_RAW_REPLY"
            assert pf["queueId"] == "-1" and pf["flag"] == "7" and pf["bornTimestamp"] == "1234"
            assert pf["storeHost"] == addr and pf["bornHost"].startswith("127.0.0.1:")
            assert int(pf["storeTimestamp"]) > 0
            assert MessageConst.PUSH_REPLY_TIME in pf["properties"] and "c1" in pf["properties"]
        # the requester refuses the push: SYSTEM_ERROR "push reply message to <id>fail."
        pushes.code = ResponseCode.SYSTEM_ERROR
        r = await responder.invoke(addr, _reply_request(RequestCode.SEND_REPLY_MESSAGE_V2, props), 5)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"push reply message to {client_id}fail.")
        # no REPLY_TO_CLIENT
        r = await responder.invoke(addr, _reply_request(RequestCode.SEND_REPLY_MESSAGE_V2,
                                                        {MessageConst.CORRELATION_ID: "c2"}), 5)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "reply message properties[REPLY_TO_CLIENT] is null")
        # an unknown client id
        r = await responder.invoke(addr, _reply_request(RequestCode.SEND_REPLY_MESSAGE_V2,
                                                        {**props, MessageConst.REPLY_TO_CLIENT: "nobody@x"}), 5)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                      "push reply message fail, channel of <nobody@x> not found.")
        # checked as a send: a queue id past the topic's queues
        r = await responder.invoke(addr, _reply_request(RequestCode.SEND_REPLY_MESSAGE_V2, props, queue_id=5), 5)
        assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[5] is illegal" in (r.remark or "")
        # storeReplyMessageEnable=false: pushed, not stored (msgId "0", offset 0)
        pushes.code = ResponseCode.SUCCESS
        await update_broker_config(responder, addr, storeReplyMessageEnable="false")
        try:
            r = await responder.invoke(addr, _reply_request(RequestCode.SEND_REPLY_MESSAGE_V2, props), 5)
            assert r.code == ResponseCode.SUCCESS
            assert (r.ext_fields or {})["msgId"] == "0" and (r.ext_fields or {})["queueOffset"] == "0"
        finally:
            await update_broker_config(responder, addr, storeReplyMessageEnable="true")
        # the requester's connection closes: its client id is forgotten
        await requester.close()
        assert await until(lambda: _reply_gone(responder, addr, props), 10)
    finally:
        await requester.close()
        await responder.close()


async def _reply_gone(client: RemotingClient, addr: str, props: dict[str, str]) -> bool:
    r = await client.invoke(addr, _reply_request(RequestCode.SEND_REPLY_MESSAGE_V2, props), 5)
    return r.code == ResponseCode.SYSTEM_ERROR and "not found" in (r.remark or "")


async def test_cluster_on_every_stored_send(cluster: EmbeddedCluster) -> None:
    """CLUSTER is the broker's, on a plain send, a batch, and a send that already carried one."""
    topic = "RpcClusterProp"
    async with Producer("PG_RPC_CLUSTER", namesrv_addr=cluster.namesrv_addr) as p:
        await p.send(Message(topic, b"plain"))
        await p.send_batch([Message(topic, b"batch-1"), Message(topic, b"batch-2")])
        await p.send(Message(topic, b"forged", properties={MessageConst.CLUSTER: "NotMine"}))
    got = await read_topic(cluster.namesrv_addr, topic, {b"plain", b"batch-1", b"batch-2", b"forged"}, 20, 0)
    assert {m.body: m.properties.get(MessageConst.CLUSTER) for m in got} == dict.fromkeys(
        (b"plain", b"batch-1", b"batch-2", b"forged"), CLUSTER)


async def _ready(value: Any) -> bool:
    return bool(value)
