"""The transactional producer's side of 4.9's protocol, against an in-process NameServer and a
recording stub broker: the half's send, END_TRANSACTION per local state, checks answered on the
connection they came on, coroutine listeners, and the blocking facade."""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import pytest

import fastmq
from fastmq import _blocking
from fastmq.aio import LocalTransactionState, Message, TransactionProducer, TransactionSendResult
from fastmq.errors import ClientError
from fastmq.namesrv.config import NamesrvConfig, NamesrvServerConfig
from fastmq.namesrv.controller import NamesrvController
from fastmq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq._ext._protocols import FLAG_ONEWAY
from fastmq.protocol.command import RemotingCommand, create_request
from fastmq.protocol.headers import (SEND_V2_NAMES, CheckTransactionStateRequestHeader, EndTransactionRequestHeader,
                                     SendMessageRequestHeader)
from fastmq.protocol.message import MessageConst, MessageSysFlag, decode_offset_msg_id, decode_properties, encode_record
from fastmq.remoting import Connection, RemotingClient, RemotingServer
from tests.stub_broker import RecordingBroker
from tests.support import wait_until

GROUP = "PG_TX"
TOPIC = "TxTopic"


class TxStub(RecordingBroker):
    """The stub broker, also taking END_TRANSACTION (oneway: no answer) and keeping each
    client's heartbeat connection, on which a test pushes CHECK_TRANSACTION_STATE."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[tuple[Connection, RemotingCommand]] = []
        self.heartbeats: list[Connection] = []
        #: send statuses (response codes with a full answer) for the next sends
        self.status_next: list[int] = []

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.END_TRANSACTION:
            self.requests.append(request)
            self.ends.append((conn, request))
            return None
        if request.code == RequestCode.HEART_BEAT and conn not in self.heartbeats:
            self.heartbeats.append(conn)
        resp = super().process_request(conn, request)
        if request.code == RequestCode.SEND_MESSAGE_V2 and self.status_next and resp is not None:
            resp.code = self.status_next.pop(0)
        return resp


async def start_cluster(tmp_path) -> tuple[str, TxStub, Any]:
    """An in-process NameServer and a TxStub registered with it as broker ``broker-tx`` (master);
    returns the NameServer's address, the stub and the coroutine function that stops them."""
    ns = NamesrvController(NamesrvConfig(kvConfigPath=str(tmp_path / "kv.json")),
                           NamesrvServerConfig(listenPort=0, bindAddress="127.0.0.1"))
    await ns.start()
    stub = TxStub()
    server = RemotingServer("127.0.0.1", 0)
    server.register_default_processor(stub)
    await server.start()
    registrar = RemotingClient()
    addr = f"127.0.0.1:{ns.port}"

    async def stop() -> None:
        await registrar.close()
        await server.close()
        await ns.shutdown()
    try:
        body = RegisterBrokerBody({TOPIC: TopicConfig(TOPIC, 2, 2), "TBW102": TopicConfig("TBW102", 8, 8)},
                                  DataVersion())
        await registrar.invoke(addr, create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": "broker-tx", "brokerAddr": f"127.0.0.1:{server.port}", "clusterName": "C",
            "brokerId": 0}, body.encode()), 5)
    except BaseException:
        await stop()
        raise
    return addr, stub, stop


@pytest.fixture
async def cluster(tmp_path):
    addr, stub, stop = await start_cluster(tmp_path)
    try:
        yield addr, stub, None
    finally:
        await stop()


class Listener:
    """Returns ``state`` (or raises it, when it is an exception) from both methods; records calls."""

    def __init__(self, state: Any = LocalTransactionState.COMMIT_MESSAGE, check: Any = None) -> None:
        self.state = state
        self.check = state if check is None else check
        self.executed: list[tuple[Message, Any, str]] = []
        self.checked: list[tuple[Any, str]] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        self.executed.append((msg, arg, threading.current_thread().name))
        if isinstance(self.state, BaseException):
            raise self.state
        return self.state

    def check_local_transaction(self, msg: Any) -> Any:
        self.checked.append((msg, threading.current_thread().name))
        if isinstance(self.check, BaseException):
            raise self.check
        return self.check


class AsyncListener(Listener):
    async def execute_local_transaction(self, msg: Message, arg: Any) -> Any:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().execute_local_transaction(msg, arg)

    async def check_local_transaction(self, msg: Any) -> Any:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().check_local_transaction(msg)


def _end(stub: TxStub, i: int = -1) -> tuple[Connection, EndTransactionRequestHeader, RemotingCommand]:
    conn, req = stub.ends[i]
    return conn, EndTransactionRequestHeader.decode(req), req


async def test_half_send_and_commit(cluster) -> None:
    addr, stub, server = cluster
    listener = Listener()
    async with TransactionProducer(GROUP, namesrv_addr=addr, listener=listener) as p:
        # registered with the broker at start as a producer of its group (the broker finds the
        # channel to check by it): a check can reach this producer before any send
        assert await wait_until(lambda: bool(stub.heartbeats), 5)
        beats = [json.loads(r.body) for r in stub.requests if r.code == RequestCode.HEART_BEAT]
        assert {"groupName": GROUP} in beats[0]["producerDataSet"]
        msg = Message(TOPIC, b"tx-body", properties={MessageConst.DELAY_TIME_LEVEL: "3", "KEYS": "k1"})
        r = await p.send_message_in_transaction(msg, arg={"order": 42})
        assert isinstance(r, TransactionSendResult)
        assert r.status == r.send_status == "SEND_OK"
        assert r.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
        assert r.transaction_id == r.msg_id == msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        assert listener.executed[0][1] == {"order": 42}
        assert await wait_until(lambda: bool(stub.ends), 5)

    (send,) = stub.sends()
    h = SendMessageRequestHeader.from_fields(send.ext_fields, SEND_V2_NAMES)
    assert h.sysFlag & MessageSysFlag.TRANSACTION_PREPARED_TYPE
    props = decode_properties(h.properties)
    assert props[MessageConst.TRANSACTION_PREPARED] == "true"
    assert props[MessageConst.PRODUCER_GROUP] == GROUP
    assert MessageConst.DELAY_TIME_LEVEL not in props  # a half is never delayed
    assert props["KEYS"] == "k1"

    conn, end, req = _end(stub)
    assert req.flag & FLAG_ONEWAY
    assert end.producerGroup == GROUP
    assert end.commitOrRollback == MessageSysFlag.TRANSACTION_COMMIT_TYPE
    assert end.fromTransactionCheck is False
    assert end.tranStateTableOffset == r.queue_offset
    assert end.commitLogOffset == decode_offset_msg_id(r.offset_msg_id)[2]
    assert end.msgId == r.msg_id
    assert end.transactionId is None  # 4.9.8: the send answer's, which its broker never sets
    assert end.bname == "broker-tx"
    assert req.remark is None


@pytest.mark.parametrize("returned, expected", [
    (LocalTransactionState.ROLLBACK_MESSAGE, (LocalTransactionState.ROLLBACK_MESSAGE, 0xC)),
    (LocalTransactionState.UNKNOW, (LocalTransactionState.UNKNOW, 0)),
    (LocalTransactionState.UNKNOWN, (LocalTransactionState.UNKNOW, 0)),
    ("COMMIT_MESSAGE", (LocalTransactionState.COMMIT_MESSAGE, 0x8)),
    (None, (LocalTransactionState.UNKNOW, 0)),
    (42, (LocalTransactionState.UNKNOW, 0)),
])
async def test_end_transaction_per_state(cluster, returned, expected) -> None:
    addr, stub, _ = cluster
    async with TransactionProducer(GROUP, namesrv_addr=addr, listener=Listener(returned)) as p:
        r = await p.send_message_in_transaction(Message(TOPIC, b"x"))
        assert r.local_transaction_state is expected[0]
        assert await wait_until(lambda: bool(stub.ends), 5)
    assert _end(stub)[1].commitOrRollback == expected[1]


async def test_listener_exception_is_unknow_and_logged(cluster, caplog) -> None:
    addr, stub, _ = cluster
    caplog.set_level(logging.WARNING, "fastmq.client")
    async with TransactionProducer(GROUP, namesrv_addr=addr, listener=Listener(RuntimeError("db down"))) as p:
        r = await p.send_message_in_transaction(Message(TOPIC, b"x"))
        assert r.local_transaction_state is LocalTransactionState.UNKNOW
        assert await wait_until(lambda: bool(stub.ends), 5)
    _, end, req = _end(stub)
    assert end.commitOrRollback == 0
    assert req.remark == "executeLocalTransactionBranch exception: RuntimeError: db down"
    logged = [rec for rec in caplog.records if "executeLocalTransactionBranch exception" in rec.getMessage()]
    assert logged and logged[0].exc_info is not None and "db down" in str(logged[0].exc_info[1])


@pytest.mark.parametrize("code", [ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                                  ResponseCode.SLAVE_NOT_AVAILABLE])
async def test_flush_or_slave_timeout_rolls_back_unexecuted(cluster, code) -> None:
    addr, stub, _ = cluster
    listener = Listener()
    async with TransactionProducer(GROUP, namesrv_addr=addr, listener=listener) as p:
        stub.status_next.append(code)
        r = await p.send_message_in_transaction(Message(TOPIC, b"x"))
        assert r.status != "SEND_OK"
        assert r.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
        assert await wait_until(lambda: bool(stub.ends), 5)
    assert not listener.executed
    assert _end(stub)[1].commitOrRollback == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


async def test_no_listener_refused_before_sending(cluster) -> None:
    addr, stub, _ = cluster
    async with TransactionProducer(GROUP, namesrv_addr=addr) as p:
        with pytest.raises(ClientError, match="TransactionListener is null"):
            await p.send_message_in_transaction(Message(TOPIC, b"x"))
    assert not stub.sends()


def _check_request(group: str | None, uniq: str, *, offset: int = 777, queue_offset: int = 5,
                   body: bytes = b"half-body") -> RemotingCommand:
    """CHECK_TRANSACTION_STATE as a 4.9 broker sends it: the half as a stored record, real topic."""
    props = {MessageConst.TRANSACTION_PREPARED: "true", MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
             MessageConst.REAL_TOPIC: TOPIC, MessageConst.REAL_QUEUE_ID: "1", "TRANSACTION_CHECK_TIMES": "1"}
    if group is not None:
        props[MessageConst.PRODUCER_GROUP] = group
    record = encode_record(topic=TOPIC, body=body, properties=props, queue_id=1, queue_offset=queue_offset,
                           phys_offset=offset, born_timestamp=1, store_timestamp=2,
                           store_host=("127.0.0.1", 10911))
    header = CheckTransactionStateRequestHeader(tranStateTableOffset=queue_offset, commitLogOffset=offset,
                                                msgId=uniq, transactionId=uniq, offsetMsgId="ABC",
                                                bname="broker-tx")
    req = create_request(RequestCode.CHECK_TRANSACTION_STATE, header.to_fields(), bytes(record))
    req.flag |= FLAG_ONEWAY
    return req


@pytest.mark.parametrize("listener_cls", [Listener, AsyncListener], ids=["plain", "coroutine"])
async def test_check_answered_on_its_connection(cluster, listener_cls) -> None:
    addr, stub, _ = cluster
    listener = listener_cls(LocalTransactionState.UNKNOW, check=LocalTransactionState.COMMIT_MESSAGE)
    async with TransactionProducer(GROUP, namesrv_addr=addr, listener=listener) as p:
        r = await p.send_message_in_transaction(Message(TOPIC, b"x"))
        assert r.local_transaction_state is LocalTransactionState.UNKNOW
        assert await wait_until(lambda: len(stub.ends) == 1 and bool(stub.heartbeats), 5)
        conn = stub.heartbeats[0]
        conn.send_oneway(_check_request(GROUP, r.transaction_id))
        assert await wait_until(lambda: len(stub.ends) == 2, 5)
    end_conn, end, req = _end(stub)
    assert end_conn is conn and req.flag & FLAG_ONEWAY
    assert end.fromTransactionCheck is True
    assert end.commitOrRollback == MessageSysFlag.TRANSACTION_COMMIT_TYPE
    assert (end.tranStateTableOffset, end.commitLogOffset) == (5, 777)  # the check's, not the send's
    assert end.msgId == end.transactionId == r.transaction_id
    assert end.producerGroup == GROUP and end.bname == "broker-tx"
    checked, thread = listener.checked[0]
    assert checked.topic == TOPIC and checked.body == b"half-body" and checked.queue_id == 1
    assert checked.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == r.transaction_id
    if listener_cls is Listener:
        assert thread.startswith(f"TransactionCheck_{GROUP}")  # the check executor, not the loop
    else:
        assert thread == threading.current_thread().name


async def test_check_exception_and_strays(cluster, caplog) -> None:
    addr, stub, _ = cluster
    caplog.set_level(logging.WARNING, "fastmq.client")
    listener = Listener(LocalTransactionState.UNKNOW, check=ValueError("no such order"))
    async with TransactionProducer(GROUP, namesrv_addr=addr, listener=listener):
        assert await wait_until(lambda: bool(stub.heartbeats), 5)
        conn = stub.heartbeats[0]
        conn.send_oneway(_check_request("OTHER_GROUP", "AAAA"))  # no producer of it here: dropped
        conn.send_oneway(_check_request(None, "BBBB"))  # no PGROUP: dropped
        conn.send_oneway(_check_request(GROUP, "CCCC"))
        assert await wait_until(lambda: len(stub.ends) == 1, 5)
        await asyncio.sleep(0.2)
    assert len(stub.ends) == 1
    _, end, req = _end(stub)
    assert end.msgId == "CCCC" and end.commitOrRollback == 0 and end.fromTransactionCheck is True
    assert req.remark == "checkLocalTransactionState Exception: ValueError: no such order"
    text = caplog.text
    assert "pick producer by group[OTHER_GROUP] failed" in text and "pick producer by group[None] failed" in text
    assert any(rec.exc_info and "no such order" in str(rec.exc_info[1]) for rec in caplog.records)


async def test_check_hold_limit(cluster, caplog) -> None:
    """Beyond check_request_hold_max checks held, a check is dropped with a warning."""
    addr, stub, _ = cluster
    caplog.set_level(logging.WARNING, "fastmq.client")
    gate = threading.Event()

    class Slow(Listener):
        def check_local_transaction(self, msg: Any) -> Any:
            gate.wait(10)
            return super().check_local_transaction(msg)

    async with TransactionProducer(GROUP, namesrv_addr=addr, listener=Slow(check=LocalTransactionState.ROLLBACK_MESSAGE),
                                   check_request_hold_max=2) as p:
        assert await wait_until(lambda: bool(stub.heartbeats), 5)
        for i in range(3):
            stub.heartbeats[0].send_oneway(_check_request(GROUP, f"U{i}"))
        assert await wait_until(lambda: "check_request_hold_max" in caplog.text, 5)
        gate.set()
        assert await wait_until(lambda: len(stub.ends) == 2, 5)
        assert p._checks == 0
    assert sorted(EndTransactionRequestHeader.decode(r).msgId for _, r in stub.ends) == ["U0", "U1"]
    assert all(EndTransactionRequestHeader.decode(r).commitOrRollback == 0xC for _, r in stub.ends)


async def test_async_execute(cluster) -> None:
    addr, stub, _ = cluster
    async with TransactionProducer(GROUP, namesrv_addr=addr,
                                   listener=AsyncListener(LocalTransactionState.ROLLBACK_MESSAGE)) as p:
        r = await p.send_message_in_transaction(Message(TOPIC, b"x"))
        assert r.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
        assert await wait_until(lambda: bool(stub.ends), 5)
    assert _end(stub)[1].commitOrRollback == 0xC


def test_blocking_facade(tmp_path) -> None:
    """fastmq.TransactionProducer from a plain thread: execute runs in the caller's thread, a
    check on the check thread, and both reach the stub (which runs on the background loop)."""
    holder: dict[str, Any] = {}

    async def setup() -> None:
        holder["addr"], holder["stub"], holder["stop"] = await start_cluster(tmp_path)

    async def teardown() -> None:
        await holder["stop"]()

    _blocking.call(setup(), 20)
    try:
        stub: TxStub = holder["stub"]
        listener = Listener(LocalTransactionState.UNKNOW, check=LocalTransactionState.COMMIT_MESSAGE)
        with fastmq.TransactionProducer(GROUP, namesrv_addr=holder["addr"], listener=listener) as p:
            r = p.send_message_in_transaction(fastmq.Message(TOPIC, b"blocking"), "arg")
            assert isinstance(r, fastmq.TransactionSendResult)
            assert r.local_transaction_state is fastmq.LocalTransactionState.UNKNOW
            assert listener.executed[0][1:] == ("arg", threading.current_thread().name)
            assert _blocking.call(wait_until(lambda: len(stub.ends) == 1 and bool(stub.heartbeats), 5), 10)
            stub_conn = stub.heartbeats[0]
            _blocking.call(_push(stub_conn, _check_request(GROUP, r.transaction_id)), 5)
            assert _blocking.call(wait_until(lambda: len(stub.ends) == 2, 5), 10)
            # an ordinary send works too (TransactionMQProducer is a DefaultMQProducer)
            assert p.send(fastmq.Message(TOPIC, b"plain")).status == "SEND_OK"
        end = EndTransactionRequestHeader.decode(stub.ends[1][1])
        assert end.fromTransactionCheck and end.commitOrRollback == 0x8 and end.msgId == r.transaction_id
        assert listener.checked[0][1].startswith(f"TransactionCheck_{GROUP}")
        plain = stub.sends()[-1]
        assert not SendMessageRequestHeader.from_fields(plain.ext_fields, SEND_V2_NAMES).sysFlag & 0x4
    finally:
        _blocking.call(teardown(), 20)


async def _push(conn: Connection, req: RemotingCommand) -> None:
    conn.send_oneway(req)


def test_public_names() -> None:
    import fastmq.aio
    assert fastmq.TransactionProducer.__module__ == "fastmq.blocking"
    assert fastmq.aio.TransactionProducer is TransactionProducer
    assert fastmq.LocalTransactionState is LocalTransactionState is fastmq.aio.LocalTransactionState
    assert LocalTransactionState.UNKNOWN is LocalTransactionState.UNKNOW
    assert fastmq.TransactionListener is fastmq.aio.TransactionListener
    assert isinstance(Listener(), fastmq.TransactionListener)


def test_blocking_facade_coroutine_listener(tmp_path) -> None:
    """A coroutine execute_local_transaction from the blocking API is awaited on the producer's loop."""
    holder: dict[str, Any] = {}

    async def setup() -> None:
        holder["addr"], holder["stub"], holder["stop"] = await start_cluster(tmp_path)

    _blocking.call(setup(), 20)
    try:
        stub: TxStub = holder["stub"]
        listener = AsyncListener(LocalTransactionState.ROLLBACK_MESSAGE)
        with fastmq.TransactionProducer(GROUP, namesrv_addr=holder["addr"], listener=listener) as p:
            r = p.send_message_in_transaction(fastmq.Message(TOPIC, b"async"), 7)
            assert r.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
            assert listener.executed[0][1] == 7
            assert _blocking.call(wait_until(lambda: bool(stub.ends), 5), 10)
        assert EndTransactionRequestHeader.decode(stub.ends[0][1]).commitOrRollback == 0xC
    finally:
        _blocking.call(holder["stop"](), 20)


class _Hook:
    def __init__(self) -> None:
        self.seen: list[tuple[str | None, int]] = []

    def before_request(self, addr: str | None, request: RemotingCommand) -> None:
        self.seen.append((addr, request.code))

    def after_response(self, addr: str | None, request: RemotingCommand, response: RemotingCommand) -> None:
        pass


async def test_rpc_hooks_see_end_transaction(cluster) -> None:
    """END_TRANSACTION goes through the client API's hooks (the ACL signer among them), both from
    a send and from a check answered on the check's connection."""
    from fastmq.client.instance import ClientConfig
    addr, stub, _ = cluster
    hook = _Hook()
    listener = Listener(LocalTransactionState.COMMIT_MESSAGE)
    async with TransactionProducer(GROUP, listener=listener,
                                   client_config=ClientConfig(namesrv_addr=addr, rpc_hooks=[hook])) as p:
        r = await p.send_message_in_transaction(Message(TOPIC, b"x"))
        assert await wait_until(lambda: bool(stub.ends) and bool(stub.heartbeats), 5)
        stub.heartbeats[0].send_oneway(_check_request(GROUP, r.transaction_id))
        assert await wait_until(lambda: len(stub.ends) == 2, 5)
    ends = [a for a, code in hook.seen if code == RequestCode.END_TRANSACTION]
    assert len(ends) == 2 and all(a and a.startswith("127.0.0.1:") for a in ends)
