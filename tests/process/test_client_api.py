"""The client API (fastmq/client/api.py, RocketMQ's MQClientAPIImpl): every request kind against a
real NameServer and broker, through the RPC hooks and the ACL signer; no request made anywhere
else in the client; the producer's compiled first try reading nothing of the producer but the
context it is handed, and writing no frame while a hook must see every request."""
from __future__ import annotations

import asyncio
import re
import time
import tokenize
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.acl import SessionCredentials, signature
from fastmq.client.api import ClientAPI, send_request
from fastmq.client.instance import ClientConfig, ClientInstance
from fastmq.client.pull_body import decode_pull_body
from fastmq.client.push_consumer import ConsumeStatus, PushConsumer
from fastmq.errors import BrokerError, SystemError_
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import RemotingCommand
from fastmq.protocol.headers import PullMessageRequestHeader
from fastmq.protocol.heartbeat import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from fastmq.protocol.message_queue import MessageQueue
from fastmq.remoting import RemotingClient
from fastmq.testing import EmbeddedCluster
from tests.support import wait_until
from tests.support import create_topic

ROOT = Path(__file__).resolve().parents[2]
CREDS = SessionCredentials("ak-api", "sk-api")


class Recorder:
    """An RPCHook that keeps what it saw; placed after the ACL signer, it checks each signature."""

    def __init__(self, secret: str | None = None) -> None:
        self.secret = secret
        self.before: list[tuple[str | None, int]] = []
        self.after: list[tuple[str | None, int, int]] = []
        self.bad_signatures: list[int] = []

    def before_request(self, addr: str | None, request: RemotingCommand) -> None:
        self.before.append((addr, request.code))
        if self.secret is not None:
            f = request.ext_fields or {}
            if f.get("AccessKey") != CREDS.access_key or f.get("Signature") != signature(
                    {k: v for k, v in f.items() if k != "Signature"}, request.body, self.secret):
                self.bad_signatures.append(request.code)

    def after_response(self, addr: str | None, request: RemotingCommand, response: RemotingCommand) -> None:
        self.after.append((addr, request.code, response.code))


# ----------------------------------------------------------------------------- where requests are made

#: what makes or sends a request; outside the client API only the remoting layer may do it
_REQUEST_MAKING = re.compile(r"create_request\(|RemotingCommand\(|\.invoke(_oneway|_async|_namesrv)?\("
                             r"|\.start_request\(|\.start_frame\(|\.open_connection\("
                             r"|\.remoting\.(?!namesrv_addrs|close)")


def _client_sources() -> list[Path]:
    return sorted([*(ROOT / "fastmq" / "client").glob("*.py"), ROOT / "fastmq" / "aio.py",
                   ROOT / "fastmq" / "blocking.py", ROOT / "fastmq" / "_blocking.py",
                   # the operator surface asks everything of Admin, which asks api.py
                   ROOT / "fastmq" / "admin_cli.py", *(ROOT / "fastmq" / "console").glob("*.py")])


def _code_lines(path: Path) -> dict[int, str]:
    """The code of each line of ``path``, its strings, comments and imports left out."""
    lines: dict[int, str] = {}
    with tokenize.open(path) as f:
        for tok in tokenize.generate_tokens(f.readline):
            if tok.type not in (tokenize.STRING, tokenize.COMMENT):
                lines[tok.start[0]] = lines.get(tok.start[0], "") + tok.string
    return {n: code for n, code in lines.items() if not code.startswith(("from", "import"))}


def test_requests_are_made_only_in_the_client_api() -> None:
    """Producer, consumers, instance, offset store, rebalance, pull and consume services: none
    builds a request or calls the remoting client; they call api.py (the instance only creates
    the remoting client, names its NameServers to the broker and closes it)."""
    found = [f"{path.relative_to(ROOT)}:{n}: {code}" for path in _client_sources() if path.name != "api.py"
             for n, code in _code_lines(path).items() if _REQUEST_MAKING.search(code)]
    assert found == []
    made = [code for code in _code_lines(ROOT / "fastmq" / "client" / "api.py").values()
            if _REQUEST_MAKING.search(code)]
    assert len(made) >= 14


def test_the_fast_path_reads_only_its_context() -> None:
    """Neither twin of the producer's first try reaches into another object's private
    attributes: what it reads of the producer comes through ``context`` (ProduceContextProto).
    The private reads left are of its own classes' instances (``entry``, ``other``) and the
    codec's C field that codec_c.pxd declares for modules that cimport it (``cmd._code``)."""
    allowed = {"entry._answered", "entry._loop", "entry._trace_rows", "entry._trace_mq", "entry._trace_broker",
               "other._fields", "cmd._code"}
    for name in ("produce_c.pyx", "produce_py.py"):
        text = (ROOT / "fastmq" / "_ext" / name).read_text()
        private = set(re.findall(r"(?<![\w.])(?!self\b|fastmq\b)([A-Za-z_]\w*\._[A-Za-z]\w*)", text))
        assert private <= allowed, (name, private - allowed)
        assert "owner" not in text, name
        assert not re.search(r"context\._", text), name


# ----------------------------------------------------------------------------- the fast path's context


class _Conn:
    """The connection a context hands the fast path: records the frames written on it."""

    closed = True
    pending: dict[int, Any] = {}

    def __init__(self) -> None:
        self.frames: list[tuple[int, bytes, Any]] = []

    def start_frame(self, opaque: int, frame: bytes, entry: Any) -> None:
        self.frames.append((opaque, frame, entry))

    def entries(self) -> list[Any]:
        return [e for _, _, e in self.frames]


class _Context:
    """A ProduceContextProto with nothing else on it: what the fast path may use, and all of it."""

    def __init__(self, conn: _Conn | None, mq: MessageQueue) -> None:
        self.good_topics = {"T"}
        self.publish = {"T": SimpleNamespace(queues=[mq], masters={mq.broker_name: "127.0.0.1:1"})}
        self.permits = None
        self.conn, self.mq = conn, mq
        self.opened: list[str] = []
        self.selected = 0
        self.faults: list[tuple[str, int, bool]] = []
        self.answered: list[Any] = []
        self.failed: list[BaseException] = []

    def open_connection(self, addr: str) -> _Conn | None:
        self.opened.append(addr)
        return self.conn

    def select(self, info: Any) -> MessageQueue:
        self.selected += 1
        return self.mq

    def update_fault(self, broker_name: str, latency_ms: int, isolation: bool) -> None:
        self.faults.append((broker_name, latency_ms, isolation))

    def send_answered(self, entry: Any, resp: Any) -> None:
        self.answered.append(resp)

    def send_failed(self, entry: Any, exc: BaseException) -> None:
        self.failed.append(exc)


def _fast_path(produce: Any, context: _Context) -> Any:
    fast = produce.SendFastPath(context, produce.SendRequestWriter("PG", "TBW102", 4, 12, 409),
                                produce.UniqIds("7F00000104D2CAFEBABE"), iter(range(1, 100)).__next__)
    fast.max_message_size, fast.compress_over, fast.send_msg_timeout = 1024, 1024, 3000
    fast.send_latency_fault_enable = True  # the queue comes from context.select
    fast.loop = asyncio.get_running_loop()
    fast.running = True
    return fast


async def test_the_fast_path_writes_only_where_its_context_lets_it(produce, codec) -> None:
    mq = MessageQueue("T", "b", 1)
    refusing = _Context(None, mq)  # the client API gives no connection: a hook must see each request
    msg = Message("T", b"x")
    assert _fast_path(produce, refusing).start(msg, None, None) is None
    assert refusing.opened == ["127.0.0.1:1"] and refusing.selected == 1
    assert "UNIQ_KEY" not in msg.properties  # nothing given to a message the general path then sends

    conn = _Conn()
    ctx = _Context(conn, mq)
    entry = _fast_path(produce, ctx).start(msg, None, None)
    assert entry is not None and entry.context is ctx and [e for _, _, e in conn.frames] == [entry]
    decoded = codec.decode_frame(conn.frames[0][1])
    assert decoded.code == RequestCode.SEND_MESSAGE_V2 and decoded.ext_fields["e"] == "1"
    entry.on_response(codec.RemotingCommand(ResponseCode.SYSTEM_BUSY, flag=1, remark="busy"))
    assert len(ctx.answered) == 1 and not entry.done()  # not a plain SUCCESS: the producer's to judge
    entry.finish(None, None)
    second = _fast_path(produce, ctx).start(Message("T", b"y"), None, None)
    second.on_response(codec.RemotingCommand(0, flag=1, ext_fields={"msgId": "M", "queueId": "1",
                                                                    "queueOffset": "7"}))
    assert second.result().queue_offset == 7 and ctx.faults and ctx.faults[-1][::2] == ("b", False)
    third = _fast_path(produce, ctx).start(Message("T", b"z"), None, None)
    err = ConnectionError("gone")
    third.on_failure(err)
    assert ctx.failed == [err]
    third.finish(None, None)


# ----------------------------------------------------------------------------- every request kind


async def _route(api: Any, topic: str, seconds: float = 20) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        route = await api.get_route_info(topic)
        if route is not None:
            return route
        await asyncio.sleep(0.2)
    return None


async def test_every_request_kind_against_a_real_broker(fastmq_cluster: EmbeddedCluster) -> None:
    """Each method of the client API against fastmq-namesrv and fastmq-broker: its answer
    decoded, a refusal raised as the typed error of its code (the broker staying up), and every
    request signed by the ACL hook and seen by the RPC hooks, every answer too."""
    ns, broker = fastmq_cluster.namesrv, fastmq_cluster.brokers[0]
    rec = Recorder(secret=CREDS.secret_key)
    inst = ClientInstance(ClientConfig(namesrv_addr=ns.addr, credentials=CREDS, rpc_hooks=[rec]))
    api, addr, group = inst.api, broker.addr, "GID_API"
    admin = RemotingClient()
    try:
        await create_topic(admin, addr, "ApiTopic", queues=2)
        assert await api.get_route_info("NoSuchApiTopic") is None
        route = await _route(api, "ApiTopic")
        assert route is not None and addr in route.broker_datas[0].broker_addrs.values()
        mq = MessageQueue("ApiTopic", route.broker_datas[0].broker_name, 0)

        sent = await api.send_message(addr, send_request(Message("ApiTopic", b"one"), mq, "PG_API", 4, 4096),
                                      "ApiTopic", mq, "UNIQ-1")
        assert (sent.status, sent.msg_id, sent.queue_offset, sent.message_queue) == ("SEND_OK", "UNIQ-1", 0, mq)
        await api.send_message_oneway(addr, send_request(Message("ApiTopic", b"two"), mq, "PG_API", 4, 4096))
        assert not api.writes_frames and api.connection_for_frames(addr) is None  # hooks: no frame written ahead
        plain = ClientAPI(inst.remoting, 3.0)
        assert plain.writes_frames and plain.connection_for_frames(addr) is inst.remoting.open_connection(addr)
        assert plain.connection_for_frames(addr) is not None
        deadline = time.monotonic() + 10
        while await api.get_max_offset(addr, mq) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await api.get_max_offset(addr, mq) == 2
        assert await api.get_min_offset(addr, mq) == 0
        assert await api.search_offset(addr, mq, 0) == 0

        consumer = ConsumerData(group, subscriptions=[SubscriptionData("ApiTopic")])
        await api.send_heartbeat(addr, HeartbeatData(inst.client_id, [ProducerData("PG_API")], [consumer]).to_json())
        assert await api.get_consumer_id_list(addr, group) == [inst.client_id]
        fields = PullMessageRequestHeader(group, "ApiTopic", 0, 0, 32, 2, 0, 1000, 0, "*", "TAG").to_fields()
        fut, conn, opaque = api.pull_message(addr, fields, 5000)
        resp = await fut
        assert resp.code == ResponseCode.SUCCESS and opaque > 0
        pulled = decode_pull_body(resp.body or b"")
        assert [m.body for m in pulled] == [b"one", b"two"]

        # never committed, and the queue's first message still stored: 0, as a 4.9 broker answers
        # (QUERY_NOT_FOUND, a QueryNotFoundError, comes once the first messages are gone)
        assert await api.query_consumer_offset(addr, group, mq) == 0
        await api.update_consumer_offset_oneway(addr, group, mq, 1)
        deadline = time.monotonic() + 10
        while await api.query_consumer_offset(addr, group, mq) != 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await api.query_consumer_offset(addr, group, mq) == 1

        assert await api.lock_batch_mq(addr, group, inst.client_id, [mq]) == {mq}
        assert await api.lock_batch_mq(addr, group, "another-client", [mq]) == set()  # held by us
        await api.unlock_batch_mq(addr, group, inst.client_id, [mq])
        assert await api.lock_batch_mq(addr, group, "another-client", [mq]) == {mq}

        first = pulled[0]
        await api.consumer_send_message_back(addr, group=group, commit_log_offset=first.commit_log_offset,
                                             delay_level=0, origin_msg_id=first.msg_id, origin_topic="ApiTopic",
                                             max_reconsume_times=16)
        with pytest.raises(SystemError_) as refused:  # nothing stored there: SYSTEM_ERROR, with the broker's text
            await api.consumer_send_message_back(addr, group=group, commit_log_offset=1 << 40, delay_level=0,
                                                 origin_msg_id=first.msg_id, origin_topic="ApiTopic",
                                                 max_reconsume_times=16)
        assert refused.value.code == ResponseCode.SYSTEM_ERROR and str(1 << 40) in refused.value.remark
        assert refused.value.retriable  # the producer's set: SYSTEM_ERROR is retried

        await api.unregister_client(addr, inst.client_id, producer_group="PG_API", consumer_group=group)
        with pytest.raises(BrokerError) as gone:  # no consumer of the group left on that broker
            await api.get_consumer_id_list(addr, group)
        assert gone.value.code == ResponseCode.SYSTEM_ERROR
        assert await api.get_max_offset(addr, mq) == 2  # the broker answers on after the refusals

        class Refusing:
            def before_request(self, addr: str | None, request: RemotingCommand) -> None:
                raise PermissionError(f"request {request.code} not allowed here")

            def after_response(self, addr: str | None, request: RemotingCommand, response: RemotingCommand) -> None:
                raise AssertionError("never sent, never answered")

        refusing = ClientAPI(inst.remoting, 3.0, [Refusing()])
        with pytest.raises(PermissionError, match="request 30 not allowed"):  # the hook's error, nothing sent
            await refusing.get_max_offset(addr, mq)
        with pytest.raises(PermissionError):
            refusing.pull_message(addr, fields, 5000)
    finally:
        await admin.close()
        await inst.shutdown()

    kinds = {code for _, code in rec.before}
    assert kinds == {RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.SEND_MESSAGE_V2, RequestCode.GET_MAX_OFFSET,
                     RequestCode.GET_MIN_OFFSET, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, RequestCode.PULL_MESSAGE,
                     RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.HEART_BEAT, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                     RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ,
                     RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.UNREGISTER_CLIENT}
    assert rec.bad_signatures == []
    assert all(a is None for a, c in rec.before if c == RequestCode.GET_ROUTEINFO_BY_TOPIC)
    assert all(a == addr for a, c in rec.before if c != RequestCode.GET_ROUTEINFO_BY_TOPIC)
    # each answer seen after its request; the two oneways (a send, an offset update) have none
    unanswered = Counter({RequestCode.SEND_MESSAGE_V2: 1, RequestCode.UPDATE_CONSUMER_OFFSET: 1})
    assert Counter(c for _, c, _ in rec.after) == Counter(c for _, c in rec.before) - unanswered

async def test_a_hooked_client_sends_every_style_through_the_api(fastmq_cluster: EmbeddedCluster) -> None:
    """With credentials and a hook, the producer's first try writes no frame of its own: every
    send, of every style, reaches the broker signed and seen by the hook, and so does every
    request of a push consumer (routes, heartbeats, pulls, offsets); without them the compiled
    first try takes the sends."""
    ns, broker = fastmq_cluster.namesrv, fastmq_cluster.brokers[0]
    rec = Recorder(secret=CREDS.secret_key)
    config = ClientConfig(namesrv_addr=ns.addr, credentials=CREDS, rpc_hooks=[rec], instance_name="hooked")
    got: list[bytes] = []

    def listener(msgs: list[Any]) -> str:
        got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    admin = RemotingClient()
    try:
        await create_topic(admin, broker.addr, "HookTopic", queues=2)
    finally:
        await admin.close()
    async with Producer("PG_HOOK", client_config=config) as p:
        assert not p._fast.running
        await _route(p.instance.api, "HookTopic")
        await p.send(Message("HookTopic", b"sync"))
        await asyncio.gather(*[await p.send_async(Message("HookTopic", b"async")) for _ in range(4)])
        await p.send_batch([Message("HookTopic", b"batch") for _ in range(3)])
        await p.send_oneway(Message("HookTopic", b"oneway"))
        last = await p.send_async(Message("HookTopic", b"a2"))
        assert type(last).__name__ != "AsyncSend"  # a task on the general path, not a compiled entry
        assert (await last).status == "SEND_OK"
    c = PushConsumer("GID_HOOK", client_config=ClientConfig(namesrv_addr=ns.addr, credentials=CREDS,
                                                            rpc_hooks=[rec], instance_name="hooked-c"),
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe("HookTopic")
    c.register_message_listener(listener)
    await c.start()
    try:
        assert await wait_until(lambda: len(got) >= 10, 30), got
    finally:
        await c.shutdown()
    assert sorted(got) == sorted([b"sync", *[b"async"] * 4, *[b"batch"] * 3, b"oneway", b"a2"])
    sends = [code for _, code in rec.before if code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)]
    assert len(sends) == 8
    kinds = {code for _, code in rec.before}
    assert {RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.HEART_BEAT, RequestCode.PULL_MESSAGE,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.QUERY_CONSUMER_OFFSET,
            RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.UNREGISTER_CLIENT} <= kinds
    assert rec.bad_signatures == []

    async with Producer("PG_PLAIN", namesrv_addr=ns.addr) as plain:  # no hook: the compiled first try
        assert plain._fast.running
        await plain.send(Message("HookTopic", b"warm"))  # route cached, connection open
        fut = await plain.send_async(Message("HookTopic", b"fast"))
        assert type(fut).__name__ == "AsyncSend" and (await fut).status == "SEND_OK"
