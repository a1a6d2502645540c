"""Instructions per call of the hot paths, counted by valgrind: before and after, free of this VM's noise.

    python -m benchmarks.instructions compare BASE_REV [--base-tree DIR] [--kinds c py] [--only NAME ...]
    python -m benchmarks.instructions run KIND NAME=N ...   (what compare runs under valgrind)
    python -m benchmarks.instructions threads NAME [--kind c|py]   (per thread, this checkout)

On this shared 2-vCPU VM wall-clock benchmarks of unchanged code move by 20% and more between runs
(whole runs flip between two speeds), so a "no more than 5% slower" claim cannot be read from
them. The CPU's instruction count can: ``compare`` runs all the workloads below in one process
per tree and kind under ``valgrind --tool=callgrind``, in BASE_REV's tree (a temporary worktree,
extensions built in place, or ``--base-tree``) and in this checkout. Each workload's N calls run
inside a ctypes callback, and callgrind collects only inside it (``--toggle-collect`` and
``--dump-after`` on ctypes' ``_CallPythonObject``), one dump per workload: instructions per call
= the dump's total / N, with start-up, imports, set-up and other threads left out (two runs of
one tree agree within about 0.3%). Each kind runs in its own process: ``c`` the compiled twin,
``py`` the pure twin (``FASTMQ_NO_EXTENSIONS=1`` for the store, which picks its twin at import).

Instructions are not time (a cache miss costs more than an add), but for the same code path on the
same machine a change in them is a change in work. The results are written as one
pytest-benchmark-format file per commit (``benchmarks/results/pytest-<stamp>-<sha>-instructions.json``,
the count in ``extra_info``), so ``scripts/bench.sh --collate-only`` puts them in RESULTS.md beside
the timings. Every workload uses only API that both sides of the comparison have.
"""
from __future__ import annotations

import argparse
import asyncio
import ctypes
import datetime as _dt
import gc
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_700_000_000_000
CALLS = 300  # per workload (divided by its scale); counts do not need more


def _codec(kind: str) -> Any:
    return importlib.import_module(f"fastmq._ext.codec_{kind}")


_SEND_V2_EXT = {
    "a": "please_rename_unique_group_name", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "0",
    "g": "1700000000000", "h": "0",
    "i": "KEYS\x01OrderID188\x02UNIQ_KEY\x017F0000010B5C18B4AAC2512F4B6F0000\x02WAIT\x01true\x02TAGS\x01TagA\x02",
    "j": "0", "k": "false", "m": "false", "n": "broker-a"}
_RESPONSE_EXT = {"msgId": "7F00000100002A9F0000000000012D45", "queueId": "3", "queueOffset": "1234"}


def _send_v2(mod: Any) -> Any:
    return mod.RemotingCommand(310, language=0, version=409, opaque=1, ext_fields=dict(_SEND_V2_EXT), body=b"x" * 128)


def _response(mod: Any) -> Any:
    return mod.RemotingCommand(0, language=0, version=409, opaque=1, flag=1, ext_fields=dict(_RESPONSE_EXT))


def _decode_send_v2(kind: str) -> Callable[[], Any]:
    mod = _codec(kind)
    frame = mod.encode_frame(_send_v2(mod))
    return lambda: mod.decode_frame(frame)


def _encode_send_v2(kind: str) -> Callable[[], Any]:
    mod = _codec(kind)
    cmd = _send_v2(mod)
    return lambda: mod.encode_frame(cmd)


def _decode_send_response(kind: str) -> Callable[[], Any]:
    mod = _codec(kind)
    frame = mod.encode_frame(_response(mod))
    return lambda: mod.decode_frame(frame)


def _encode_responses_100(kind: str) -> Callable[[], Any]:
    mod = _codec(kind)
    cmds = [_response(mod) for _ in range(100)]
    return lambda: mod.encode_frames(cmds)


def _feed_send_v2_x100(kind: str) -> Callable[[], Any]:
    mod = _codec(kind)
    chunk = mod.encode_frame(_send_v2(mod)) * 100
    dec = mod.FrameDecoder()
    return lambda: dec.feed(chunk)


def _send_frame(kind: str) -> Callable[[], Any]:
    w = importlib.import_module(f"fastmq._ext.produce_{kind}").SendRequestWriter("PG_BENCH", "TBW102", 4, 3, 409)
    props = {"TAGS": "TagA", "UNIQ_KEY": "7F0000010B5C18B4AAC2512F4B6F0000", "WAIT": "true"}
    body = b"x" * 128
    return lambda: w.frame(42, "TopicTest", 3, 0, 1763900000000, 0, props, body, False)


def _select_fault(kind: str) -> Callable[[], Any]:
    import numpy as np
    sel = importlib.import_module(f"fastmq._ext.selector_{kind}")
    t = importlib.import_module(f"fastmq._ext.fault_{kind}").FaultTable(4)
    t.update(0, 5000, False, NOW)  # broker 0 in its penalty: the scan skips its queues
    t.update(1, 20, False, NOW)
    qt = sel.QueueTable(np.repeat(np.arange(4, dtype=np.int32), 4))
    return lambda: qt.select_fault(0, 1, t, NOW)


def _select(kind: str) -> Callable[[], Any]:
    import numpy as np
    qt = importlib.import_module(f"fastmq._ext.selector_{kind}").QueueTable(np.repeat(np.arange(4, dtype=np.int32), 4))
    return lambda: qt.select(12345, 2)


def _fault_update_and_check(kind: str) -> Callable[[], Any]:
    t = importlib.import_module(f"fastmq._ext.fault_{kind}").FaultTable(8)

    def step() -> bool:
        t.update(3, 120, False, NOW)
        return bool(t.is_available(3, NOW))
    return step


def _store_put_send_batch(kind: str) -> Callable[[], Any]:
    """encode_sends of 100 SEND_MESSAGE_V2 requests and one put_batch: the broker's path into the store."""
    from fastmq._ext.send import encode_sends
    from fastmq.protocol.codes import RequestCode
    from fastmq.protocol.command import create_request
    from fastmq.protocol.headers import SendMessageRequestHeader
    from fastmq.protocol.message import pack_host
    from fastmq.store.config import ASYNC_FLUSH, MessageStoreConfig
    from fastmq.store.message_store import MessageStore
    root = tempfile.mkdtemp(prefix="fastmq-instr-")
    cfg = MessageStoreConfig(storePathRootDir=root,
                             mappedFileSizeCommitLog=512 * 1024 * 1024, mappedFileSizeConsumeQueue=300_000 * 20,
                             flushDiskType=ASYNC_FLUSH)
    store = MessageStore(cfg, "127.0.0.1:10911")
    store.load()
    store.start()
    reqs = [create_request(RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeader(
        "PG", "BenchTopic", "TBW102", 4, i % 4, 0, NOW, 0, f"TAGS\x01tagA\x02UNIQ_KEY\x01{i:032X}\x02",
        0).to_v2_fields(), b"x" * 128) for i in range(100)]
    born, host = pack_host("127.0.0.1", 50000), pack_host("127.0.0.1", 10911)
    topics = {"BenchTopic": (4, 4, 0)}
    loop = asyncio.new_event_loop()

    def once() -> Any:
        return loop.run_until_complete(store.put_batch(encode_sends(reqs, topics, born, host,
                                                                    b"CLUSTER\x01DefaultCluster\x02", 4 << 20)))

    def close() -> None:
        store.shutdown()
        loop.close()
        shutil.rmtree(root, ignore_errors=True)
    once.close = close  # type: ignore[attr-defined]
    return once


class _NullTransport:
    """What a broker Connection writes to in the broker workloads: a socket that takes everything."""

    def __init__(self, port: int) -> None:
        self.port = port

    def write(self, data: bytes) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", self.port) if name == "peername" else ("127.0.0.1", 10911)

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


_ACL_YML = """\
accounts:
  - accessKey: BenchUser1
    secretKey: BenchSecret1
    defaultTopicPerm: DENY
    topicPerms: [TopicTest=PUB]
"""


def _trace_send() -> tuple[dict[str, str], bytes]:
    """A trace message as a traced producer's dispatcher sends it: 300 Pub records (zlib level 1,
    sysFlag compressed) to RMQ_SYS_TRACE_TOPIC, its KEYS the 300 message ids, and its own UNIQ_KEY."""
    import zlib
    ids = [f"7F0000010B5C18B4AAC2512F{i:08X}" for i in range(300)]
    text = "".join(f"Pub\x011700000000000\x01DefaultRegion\x01PG_BENCH\x01TopicTest\x01{m}\x01null\x01null"
                   f"\x01127.0.0.1:10911\x01128\x011\x010\x017F00000100002A9F{i:016X}\x01true\x02"
                   for i, m in enumerate(ids))
    props = (f"KEYS\x01{' '.join(ids)}\x02UNIQ_KEY\x017F0000010B5C18B4AAC2512FFFFFFFFF\x02WAIT\x01true\x02"
             f"TRACE_ON\x01true\x02")
    ext = dict(_SEND_V2_EXT, a="_INNER_TRACE_PRODUCER-PG_BENCH-PRODUCER-1", b="RMQ_SYS_TRACE_TOPIC", d="1", e="0",
               f="1", i=props)
    return ext, zlib.compress(text.encode(), 1)


def _broker_sends(kind: str, conns: int, turns: int, acl: bool = False, trace: bool = False) -> Callable[[], Any]:
    """A BrokerController (ASYNC_FLUSH) in this process; each call, ``turns`` times: one
    SEND_MESSAGE_V2 (binary header, 128 B) read on each of ``conns`` connections, then one turn
    of the loop, which stores and answers them. What the broker's Python does for a send, but
    the sockets (and the event loop's own polling). With ``acl`` the broker has ``aclEnable=true``
    and every send is signed (AclClientRPCHook) by an account that may send to the topic. With
    ``trace`` (``traceTopicEnable=true``) each send is :func:`_trace_send`'s trace message."""
    from fastmq._ext.codec import RemotingCommand, encode_frame
    from fastmq.broker.config import BrokerConfig
    from fastmq.broker.controller import BrokerController
    from fastmq.remoting.connection import Connection
    from fastmq.remoting.loop import new_event_loop
    from fastmq.store.config import ASYNC_FLUSH, MessageStoreConfig
    from fastmq.testing import free_port
    root = tempfile.mkdtemp(prefix="fastmq-instr-")
    loop = new_event_loop()
    acl_keys: dict[str, Any] = {}
    if acl:
        Path(root, "plain_acl.yml").write_text(_ACL_YML)
        acl_keys = {"aclEnable": True, "aclFile": str(Path(root, "plain_acl.yml"))}
    if trace:
        acl_keys["traceTopicEnable"] = True
    broker = BrokerController(BrokerConfig(brokerName="bench", listenPort=0, namesrvAddr="", brokerIP1="127.0.0.1",
                                           **acl_keys),
                              MessageStoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=1 << 30,
                                                 flushDiskType=ASYNC_FLUSH, haListenPort=free_port(),
                                                 # no flush round inside the counted calls (valgrind
                                                 # makes them long): the count is the sends'
                                                 flushIntervalCommitLog=600_000, flushIntervalConsumeQueue=600_000,
                                                 preloadMappedFile=False))
    loop.run_until_complete(broker.start())
    # nor a timer's round (register, stats, idle scan, retention): under valgrind more of them
    # fire the slower it runs, which made the counts depend on the machine's load
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    ext, body = dict(_SEND_V2_EXT, n="bench"), b"x" * 128
    if trace:
        ext, body = _trace_send()
        ext["n"] = "bench"
    peers = []

    async def connect(k: int) -> Any:
        # what the server hands each connection (its ACL gate when one is on; older trees: the dispatcher)
        conn = Connection(getattr(broker.server, "handler", broker.server.dispatcher.dispatch))
        conn.connection_made(_NullTransport(40000 + k))  # type: ignore[arg-type]
        return conn
    for k in range(conns):
        cmd = RemotingCommand(310, language=0, version=409, opaque=1,
                              ext_fields=dict(ext, e=str(k % 4)) if not trace else dict(ext),
                              body=body, serialize_type=1)
        if acl:
            from fastmq.client.acl import AclClientRPCHook, SessionCredentials
            AclClientRPCHook(SessionCredentials("BenchUser1", "BenchSecret1"))(cmd)
        frame = encode_frame(cmd)
        peers.append((loop.run_until_complete(connect(k)), frame))

    async def turn() -> None:
        for _ in range(turns):
            for conn, frame in peers:
                conn.data_received(frame)
            await asyncio.sleep(0)

    once = _looped(loop, turn, broker.shutdown, lambda: shutil.rmtree(root, ignore_errors=True))
    once()  # the topic is created on the long way; the fast path takes the sends after it
    once.loop, once.broker, once.conn = loop, broker, peers[0][0] if peers else None  # type: ignore[attr-defined]
    once.cleanup = lambda: shutil.rmtree(root, ignore_errors=True)  # type: ignore[attr-defined]
    return once


def _broker_transactions(kind: str, turns: int) -> Callable[[], Any]:
    """:func:`_broker_sends`' broker and connection; each call, ``turns`` times: a half (the lone
    send's request with TRAN_MSG=true, PGROUP and the prepared sysFlag) read and stored in one
    turn of the loop, then its END_TRANSACTION commit (oneway, as the Java client sends it) in
    another. Beside ``broker lone_send_x10``: what a committed transactional message costs the
    broker against a plain send (issue: at most about twice).

    The commits' frames are made before the count (only the broker's work is counted): their
    offsets follow from the store's, as every transaction appends the same three records but for
    the op message's body (the half's queue offset in decimal). Two rounds whose frames are made
    from the store's offsets give those sizes; ``close`` fails when a commit was not stored."""
    from fastmq._ext.codec import RemotingCommand, encode_frame
    from fastmq.protocol.headers import EndTransactionRequestHeader
    from fastmq.protocol.topic import TRANS_HALF_TOPIC
    once = _broker_sends(kind, 1, 0)  # the broker and its connection, no sends of its own
    loop, broker, conn = once.loop, once.broker, once.conn  # type: ignore[attr-defined]
    group = _SEND_V2_EXT["a"]
    props = _SEND_V2_EXT["i"] + f"TRAN_MSG\x01true\x02PGROUP\x01{group}"
    ext = dict(_SEND_V2_EXT, n="bench", e="1", f="4", i=props)
    half = encode_frame(RemotingCommand(310, language=0, version=409, opaque=1, ext_fields=ext, body=b"x" * 128,
                                        serialize_type=1))
    store = broker.store

    def commit_frame(phys: int, qoff: int) -> bytes:
        end = EndTransactionRequestHeader(producerGroup=group, tranStateTableOffset=qoff, commitLogOffset=phys,
                                          commitOrRollback=8, msgId="7F00000100002A9F0000000000000000")
        return encode_frame(RemotingCommand(37, language=0, version=409, opaque=2, flag=2, ext_fields=end.to_fields()))

    def where() -> tuple[int, int]:  # the next half's commit-log offset and half queue offset
        return store.commit_log_max_offset, max(0, store.max_offset_in_queue(TRANS_HALF_TOPIC, 0))

    seen: list[tuple[int, int]] = []

    async def from_the_store() -> None:
        for _ in range(turns):
            seen.append(where())
            conn.data_received(half)
            await asyncio.sleep(0)
            conn.data_received(commit_frame(*seen[-1]))
            await asyncio.sleep(0)
    for _ in range(2):  # the first creates the half topic on the long way
        loop.run_until_complete(from_the_store())
    (p0, q0), (p1, _) = seen[-2], seen[-1]
    step = p1 - p0 - len(str(q0))  # a transaction's records but the op message's body
    phys, qoff = where()
    frames = []
    for _ in range(turns * (CALLS + 2)):
        frames.append(commit_frame(phys, qoff))
        phys, qoff = phys + step + len(str(qoff)), qoff + 1
    made = iter(frames)
    used = [0]

    async def turn() -> None:
        for _ in range(turns):
            conn.data_received(half)
            await asyncio.sleep(0)
            conn.data_received(next(made))
            await asyncio.sleep(0)
        used[0] += turns

    def committed() -> int:
        return store.max_offset_in_queue(ext["b"], 1)

    def check() -> None:  # each commit must have stored its message, or the count is of refusals
        if committed() != 2 * turns + used[0]:
            raise RuntimeError(f"{committed() - 2 * turns} of {used[0]} transactions committed")

    def shutdown() -> Any:
        check()
        return broker.shutdown()

    tx = _looped(loop, turn, shutdown, once.cleanup)  # type: ignore[attr-defined]
    tx()
    check()
    return tx


class _KeepingTransport(_NullTransport):
    """A :class:`_NullTransport` that keeps what is written (to check a workload's answers)."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data


def _broker_pulls(kind: str, pulls: int, batch: int = 32) -> Callable[[], Any]:
    """:func:`_broker_sends`' broker and connection, its consumer group registered on that
    connection (as benchmarks/pull_round_instructions.py registers its consumer) and one queue
    filled once with ``pulls * batch`` messages by sends through it. Each call: ``pulls``
    PULL_MESSAGE requests (a push consumer's: JSON header, commit offset and suspend flags, no
    subscription), one per loop turn, reading the queue from its start ``batch`` messages at a
    time: each answered at once from the store (FOUND, ``batch`` messages). The set-up checks
    every answer of one call; ``close`` fails when the queue's content was lost."""
    from fastmq._ext.codec import FrameDecoder, RemotingCommand, encode_frame, encode_frames
    from fastmq.broker.consumer_manager import ClientChannelInfo
    from fastmq.protocol.heartbeat import ConsumerData, SubscriptionData
    once = _broker_sends(kind, 1, 0)  # the broker and its connection, no sends of its own
    loop, broker, conn = once.loop, once.broker, once.conn  # type: ignore[attr-defined]
    topic, queue, group, total = _SEND_V2_EXT["b"], 0, "PullBenchGroup", pulls * batch
    broker.consumer_manager.register(ClientChannelInfo(conn, "pull-bench"),
                                     ConsumerData(group, subscriptions=[SubscriptionData(topic)]))
    send = RemotingCommand(310, language=0, version=409, opaque=1, ext_fields=dict(_SEND_V2_EXT, n="bench",
                                                                                   e=str(queue)),
                           body=b"x" * 128, serialize_type=1)
    store = broker.store

    async def fill() -> None:
        for _ in range(total // batch):
            conn.data_received(encode_frames([send] * batch))
            await asyncio.sleep(0)
        for _ in range(500):  # the consume queue is built behind the commit log: bounded wait
            if store.max_offset_in_queue(topic, queue) >= total:
                return
            await asyncio.sleep(0.01)
        raise RuntimeError(f"{store.max_offset_in_queue(topic, queue)} of {total} messages stored")
    loop.run_until_complete(fill())
    frames = [encode_frame(RemotingCommand(11, language=0, version=409, opaque=1000 + k, ext_fields={
        "consumerGroup": group, "topic": topic, "queueId": str(queue), "queueOffset": str(k * batch),
        "maxMsgNums": str(batch), "sysFlag": "3", "commitOffset": str(k * batch), "suspendTimeoutMillis": "15000",
        "subVersion": "0", "expressionType": "TAG"})) for k in range(pulls)]

    async def turn() -> None:
        for frame in frames:
            conn.data_received(frame)
            await asyncio.sleep(0)

    def check() -> None:  # one call's answers: every pull FOUND its batch, where it asked
        null, conn.transport = conn.transport, _KeepingTransport(40000)
        try:
            loop.run_until_complete(turn())
            answers = FrameDecoder().feed(bytes(conn.transport.data))
        finally:
            conn.transport = null
        if len(answers) != pulls:
            raise RuntimeError(f"{len(answers)} answers to {pulls} pulls")
        for k, r in enumerate(answers):
            f = r.ext_fields or {}
            if r.code != 0 or f.get("nextBeginOffset") != str((k + 1) * batch) or len(r.body or b"") < batch * 128:
                raise RuntimeError(f"pull {k}: code {r.code} {r.remark!r} {f}")

    def shutdown() -> Any:
        if store.max_offset_in_queue(topic, queue) < total:
            raise RuntimeError("the pulled queue lost messages")
        return broker.shutdown()

    pull = _looped(loop, turn, shutdown, once.cleanup)  # type: ignore[attr-defined]
    check()
    return pull


def _looped(loop: asyncio.AbstractEventLoop, go: Callable[[], Any], shutdown: Callable[[], Any],
            cleanup: Callable[[], Any]) -> Callable[[], Any]:
    """A workload's call: ``go()`` run on ``loop``; its ``close``: ``shutdown()`` run there, the
    loop closed, then ``cleanup()``."""
    def once() -> Any:
        return loop.run_until_complete(go())

    def close() -> None:
        loop.run_until_complete(shutdown())
        loop.close()
        cleanup()
    once.close = close  # type: ignore[attr-defined]
    return once


def _answerer_codec() -> Any:
    """The compiled codec for the answerer whichever twin the client runs (its share of the
    pure twin's counts stays small), the pure one where nothing is built."""
    try:
        return importlib.import_module("fastmq._ext.codec_c")
    except ImportError:
        return _codec("py")


class _AnsweringTransport:
    """A client connection's transport whose every write is answered before it returns: the
    request frames are read off the socket pair's far end and a SEND_OK answer per request
    (a broker's fields, the request's queue id) is written back, so the loop's next poll finds
    the answers readable, as from a broker that answers at once. Deterministic: no other thread
    or process is involved. Its own Python runs in the counted thread; ``client answerer_x100``
    counts it alone."""

    def __init__(self, transport: Any, peer: Any) -> None:
        self._t = transport
        self._peer = peer
        self._codec = _answerer_codec()
        self._dec = self._codec.FrameDecoder()
        self._offset = 0

    def write(self, data: Any) -> None:
        self._t.write(data)
        self.answer(len(data))

    def answer(self, n: int) -> None:
        codec = self._codec
        reqs: list[Any] = []
        while n > 0:
            chunk = self._peer.recv(n)
            n -= len(chunk)
            reqs += self._dec.feed(chunk)
        out = []
        for req in reqs:
            self._offset += 1
            ext = {"msgId": "7F00000100002A9F%016X" % self._offset, "queueId": (req.ext_fields or {}).get("e", "0"),
                   "queueOffset": str(self._offset), "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
            out.append(codec.RemotingCommand(0, language=0, version=409, opaque=req.opaque, flag=1, ext_fields=ext))
        if out:
            self._peer.sendall(codec.encode_frames(out))

    # what a Connection calls besides write, bound once (a __getattr__ would be reached only
    # after a failed lookup, an AttributeError formatted per call, in the counts)
    def get_write_buffer_size(self) -> int:
        return self._t.get_write_buffer_size()  # type: ignore[no-any-return]

    def is_closing(self) -> bool:
        return self._t.is_closing()  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._t, name)


_CLIENT_TOPIC = "InstrTopic"
_CLIENT_BROKER = "127.0.0.1:10911"


async def _routed_producer(core: Any, addr: str = _CLIENT_BROKER, topic: str = _CLIENT_TOPIC) -> tuple[Any, Any]:
    """Give a started core Producer (on the running loop) a route of 4 queues of ``topic`` on one
    broker at ``addr`` and an open connection to it that is a socket pair's near end; stop its
    instance's timers (a round of them would land in the counts as the machine's load decides).
    Returns the connection and the pair's far end (the broker's side). tests/process/test_driven_lone.py
    uses it too."""
    import socket
    from fastmq.client.publish_info import TopicPublishInfo
    from fastmq.protocol.bodies import BrokerData, QueueData, TopicRouteData
    from fastmq.remoting.connection import Connection
    loop = asyncio.get_running_loop()
    remoting = core.instance.remoting
    near, far = socket.socketpair()

    def factory() -> Any:  # as RemotingClient._connect makes its connections
        return Connection(remoting._dispatcher.dispatch, listener=remoting.listener,
                          max_frame_size=remoting.max_frame_size, on_lost=lambda c: remoting._forget(addr, c),
                          rpc_hook=remoting.rpc_hook, keep_reading=True)
    _, conn = await loop.create_connection(factory, sock=near)
    remoting._conns[addr] = conn
    route = TopicRouteData([QueueData("broker-a", 4, 4, 6)], [BrokerData("DefaultCluster", "broker-a", {0: addr})])
    core._publish[topic] = TopicPublishInfo.from_route(topic, route, core._numbers)
    for task in core.instance._tasks:
        task.cancel()
    await asyncio.sleep(0)
    return conn, far


async def _answered_producer(core: Any) -> Callable[[], None]:
    """:func:`_routed_producer`, its connection's transport answering every request
    (:class:`_AnsweringTransport`). Returns what closes the socket pair's far end."""
    conn, far = await _routed_producer(core)
    conn.transport = _AnsweringTransport(conn.transport, far)
    return far.close  # type: ignore[no-any-return]


_BODY = b"x" * 128


def _client_messages() -> Callable[[], Any]:
    """A new Message per send, as a caller makes them (the class looked up once, not per call)."""
    from fastmq.protocol.message import Message
    return lambda: Message(_CLIENT_TOPIC, _BODY)


def _acks() -> tuple[list[int], Callable[[Any, BaseException | None], None]]:
    """A send callback counting the sends it was told of (and failing loudly on an error)."""
    acked = [0]

    def on_sent(result: Any, error: BaseException | None) -> None:
        acked[0] += 1
        if error is not None:
            raise error
    return acked, on_sent


def _client_blocking(kind: str, asyncs: int) -> Callable[[], Any]:
    """A blocking ``fastmq.Producer`` (its loop run by the caller's thread, fastmq._driven) whose
    broker is an :class:`_AnsweringTransport`. Each call: ``asyncs`` send_async with a callback,
    then one send (which returns once every earlier callback has run); 0: the lone send."""
    import fastmq
    p = fastmq.Producer("PG_INSTR", namesrv_addr="127.0.0.1:9")
    # this producer's background thread never takes its loop during the counts (it would
    # whenever valgrind's slowness let GRACE_S pass between two calls), nor wakes to look; set
    # on this loop only: the harness test runs the workloads in the suite's own process, where
    # the module's values once changed stalled every later blocking producer's send_async
    p._driven.grace_s = p._driven.poll_max_s = 3600.0
    p.start()
    close_far = p._driven.run(_answered_producer(p._core), 10)
    message = _client_messages()
    _, on_sent = _acks()

    def once() -> Any:
        for _ in range(asyncs):
            p.send_async(message(), on_sent)
        return p.send(message())

    def close() -> None:
        p.shutdown()
        close_far()
    once.close = close  # type: ignore[attr-defined]
    once()  # the topic's checks and the first send's lazy work on the general path
    return once


def _client_aio(kind: str, asyncs: int, sends: int, signed: bool = False) -> Callable[[], Any]:
    """The asyncio Producer on asyncio's own loop (what ``asyncio.run`` gives), its broker an
    :class:`_AnsweringTransport`. Each call: ``sends`` awaited sends, or ``asyncs`` send_async
    with a callback and a wait until every callback ran. ``signed``: the producer has ACL
    credentials, so every request it sends is signed (the answerer checks nothing)."""
    loop = asyncio.new_event_loop()
    p = loop.run_until_complete(_make_aio_producer(signed=signed))
    close_far = loop.run_until_complete(_answered_producer(p))
    message = _client_messages()
    acked, on_sent = _acks()

    async def go() -> None:
        for _ in range(sends):
            await p.send(message())
        target = acked[0] + asyncs
        for _ in range(asyncs):
            await p.send_async(message(), on_sent)
        while acked[0] < target:
            await asyncio.sleep(0)

    once = _looped(loop, go, p.shutdown, close_far)
    once()
    return once


async def _make_aio_producer(enable_trace: bool = False, signed: bool = False) -> Any:
    from fastmq.client.acl import SessionCredentials
    from fastmq.client.instance import ClientConfig
    from fastmq.client.producer import Producer
    creds = SessionCredentials("RocketMQUser", "12345678user") if signed else None
    p = Producer("PG_INSTR", client_config=ClientConfig(namesrv_addr="127.0.0.1:9", credentials=creds),
                 enable_trace=enable_trace)
    await p.start()
    return p


def _client_aio_traced(kind: str, asyncs: int) -> Callable[[], Any]:
    """:func:`_client_aio`'s ``asyncs`` send_async with a callback, the producer's trace on: the
    sends, then its dispatcher's drain (the records made, batched into one trace message and sent
    by its inner producer, whose broker answers as the producer's does), awaited. The
    dispatcher's timer task is stopped: its drains happen here, once per call."""
    loop = asyncio.new_event_loop()
    p = loop.run_until_complete(_make_aio_producer(enable_trace=True))
    close_far = loop.run_until_complete(_answered_producer(p))
    d = p.trace_dispatcher
    d._task.cancel()
    inner_conn, inner_far = loop.run_until_complete(_routed_producer(d._producer, topic=d.trace_topic))
    inner_conn.transport = _AnsweringTransport(inner_conn.transport, inner_far)
    message = _client_messages()
    acked, on_sent = _acks()

    async def go() -> None:
        target = acked[0] + asyncs
        for _ in range(asyncs):
            await p.send_async(message(), on_sent)
        while acked[0] < target:
            await asyncio.sleep(0)
        await d.flush()

    def cleanup() -> None:
        close_far()
        inner_far.close()

    once = _looped(loop, go, p.shutdown, cleanup)
    once()
    return once


def _client_push_consume(kind: str, pulls: int) -> Callable[[], Any]:
    """The asyncio PushConsumer's pull loop for one queue with a plain listener (on its consume
    threads), its broker a stand-in whose pulls are answered at once with one 128 B message each,
    as a consumer keeping up with a steady rate is mostly answered. Each call: ``pulls`` answers
    decoded, handed to the consume threads, settled back on the loop and their offsets committed.
    Only the loop thread's instructions are counted (callgrind collects in the calling thread):
    the consume threads' own work (the listener call, the hand-back) is outside the count, the
    loop's side of each hand-off (the submit, the wake, the settling) inside it."""
    from fastmq.client.process_queue import ProcessQueue
    from fastmq.client.push_consumer import ConsumeStatus, PushConsumer
    from fastmq.protocol.codes import ResponseCode
    from fastmq.protocol.command import RemotingCommand
    from fastmq.protocol.message import encode_record
    from fastmq.protocol.message_queue import MessageQueue
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    c = PushConsumer("CG_INSTR", namesrv_addr="127.0.0.1:9")
    c.register_message_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    c.subscribe(_CLIENT_TOPIC, "*")
    mq = MessageQueue(_CLIENT_TOPIC, "broker-a", 0)
    # answers made before the counted region: one per pull of every call (and the warm one)
    total = pulls * (CALLS + 2)
    answers = [RemotingCommand(int(ResponseCode.SUCCESS), opaque=0, flag=1,
                               ext_fields={"nextBeginOffset": str(i + 1), "suggestWhichBrokerId": "0",
                                           "minOffset": "0", "maxOffset": str(i + 1)},
                               body=encode_record(topic=_CLIENT_TOPIC, body=_BODY, queue_offset=i,
                                                  phys_offset=i * 200, born_timestamp=NOW, store_timestamp=NOW))
               for i in range(total)]
    state = {"next": 0, "limit": 0, "done": None}
    held: list[Any] = []

    def pull_message(addr: str, fields: dict[str, str], timeout_ms: int) -> tuple[Any, Any, int]:
        fut = loop.create_future()
        if state["next"] < state["limit"]:
            fut.set_result(answers[state["next"]])
            state["next"] += 1
        else:
            held.append(fut)  # the call's last pull: held, as the broker holds a pull at the queue's end
        return fut, None, 0

    c.instance.api.pull_message = pull_message  # type: ignore[method-assign]
    c.instance.find_broker_addr_in_subscribe = lambda name, broker_id: (_CLIENT_BROKER, False)  # type: ignore[method-assign]
    for task in c.instance._tasks:
        task.cancel()
    commit = c._commit

    def committed(pq: Any, msgs: Any) -> None:
        commit(pq, msgs)
        done = state["done"]
        if done is not None and not pq.msgs and pq.max_seen + 1 >= state["limit"]:
            state["done"] = None
            done.set_result(None)
    c._commit = committed  # type: ignore[method-assign]
    c._running = True
    c._workers.prestart()
    pq = ProcessQueue(mq)
    c.process_queues[mq] = pq

    async def go() -> None:
        state["limit"] = state["next"] + pulls
        state["done"] = loop.create_future()
        task = loop.create_task(c._pull_loop(pq))
        await state["done"]
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        held.clear()

    async def shutdown() -> None:
        c._running = False
        c._workers.shutdown()
        await c.instance.shutdown()
    once = _looped(loop, go, shutdown, lambda: None)
    once()
    return once


def _client_answerer(kind: str) -> Callable[[], Any]:
    """What :class:`_AnsweringTransport` itself costs per 100 requests (the client workloads' counts include it)."""
    import socket
    mod = _codec(kind)
    frames = b"".join(mod.encode_frame(_send_v2(mod)) for _ in range(100))
    near, far = socket.socketpair()
    near.setblocking(False)

    class _Sink:
        def write(self, data: Any) -> None:
            near.sendall(data)

    t = _AnsweringTransport(_Sink(), far)

    def once() -> Any:
        t.write(frames)
        while True:  # take the answers, so the pair's buffers never fill
            try:
                near.recv(1 << 20)
            except BlockingIOError:
                return

    def close() -> None:
        near.close()
        far.close()
    once.close = close  # type: ignore[attr-defined]
    return once


def _remoting_round_trips(kind: str, sends: int, tls: bool, fastmq_loop: bool) -> Callable[[], Any]:
    """A RemotingServer (``tls.server.mode=permissive``, a certificate made by ``openssl`` at
    set-up) and a RemotingClient on one loop in this process, over loopback TCP; each call:
    ``sends`` awaited requests (100-byte body) answered SUCCESS by a processor that does nothing
    else. Plaintext or TLS (TLS 1.3, the client's ``client_context()``), on fastmq's loop (uvloop
    when installed) or asyncio's: beside each other, what TLS adds to a one-in-flight round trip, both ends' share of it
    (issue 29)."""
    from fastmq.protocol.command import RemotingCommand, create_request
    from fastmq.remoting import RemotingClient, RemotingServer
    from fastmq.remoting.loop import new_event_loop
    from fastmq.remoting.processor import RequestProcessor

    class Echo(RequestProcessor):
        def process_request(self, conn: Any, request: Any) -> Any:
            return RemotingCommand(0, opaque=request.opaque, flag=1)
    from fastmq.remoting.tls import TlsConfig, client_context, make_self_signed
    root = tempfile.mkdtemp(prefix="fastmq-instr-")
    loop = new_event_loop() if fastmq_loop else asyncio.new_event_loop()
    cert, key = make_self_signed(root)
    server = RemotingServer("127.0.0.1", 0, tls=TlsConfig(server_cert_path=cert, server_key_path=key,
                                                          config_file=str(Path(root, "absent"))))
    server.register_default_processor(Echo())
    loop.run_until_complete(server.start())
    client = RemotingClient(ssl=client_context() if tls else None)
    addr = f"127.0.0.1:{server.port}"

    async def go() -> None:
        for _ in range(sends):
            r = await client.invoke(addr, create_request(14, {}, _BODY[:100]), 10)
            assert r.code == 0, r.remark

    async def shutdown() -> None:
        await client.close()
        await server.close()
    once = _looped(loop, go, shutdown, lambda: shutil.rmtree(root, ignore_errors=True))
    loop.run_until_complete(go())  # the connection and its handshake, outside the counts
    return once


#: name -> (set-up returning the call, calls per unit it counts). The store's calls are fewer: each
#: is 100 messages; a broker call is 10 lone sends, or 16 gathered ones, or 10 pulls of 32 messages
#: (or 10 trace messages of 300 keys each).
WORKLOADS: dict[str, tuple[Callable[[str], Callable[[], Any]], int]] = {
    "codec decode_send_v2": (_decode_send_v2, 1),
    "codec encode_send_v2": (_encode_send_v2, 1),
    "codec decode_send_response": (_decode_send_response, 1),
    "codec encode_frames_100_responses": (_encode_responses_100, 1),
    "codec feed_100_send_v2": (_feed_send_v2_x100, 1),
    "produce send_frame": (_send_frame, 1),
    "selector select": (_select, 1),
    "selector select_fault": (_select_fault, 1),
    "fault update_and_check": (_fault_update_and_check, 1),
    "store put_send_batch_100": (_store_put_send_batch, 10),
    "broker lone_send_x10": (lambda kind: _broker_sends(kind, 1, 10), 10),
    "broker gathered_16_sends": (lambda kind: _broker_sends(kind, 16, 1), 16),
    "broker half_and_commit_x10": (lambda kind: _broker_transactions(kind, 10), 10),
    "broker acl_lone_send_x10": (lambda kind: _broker_sends(kind, 1, 10, acl=True), 10),
    "broker acl_gathered_16_sends": (lambda kind: _broker_sends(kind, 16, 1, acl=True), 16),
    "broker pull_x10": (lambda kind: _broker_pulls(kind, 10), 10),
    "broker trace_send_x10": (lambda kind: _broker_sends(kind, 1, 10, trace=True), 10),
    "client blocking_send": (lambda kind: _client_blocking(kind, 0), 1),
    "client blocking_send_async_x100": (lambda kind: _client_blocking(kind, 100), 30),
    "client aio_send_x10": (lambda kind: _client_aio(kind, 0, 10), 10),
    "client aio_send_async_x100": (lambda kind: _client_aio(kind, 100, 0), 30),
    "client aio_traced_send_async_x100": (lambda kind: _client_aio_traced(kind, 100), 30),
    "client aio_signed_send_async_x100": (lambda kind: _client_aio(kind, 100, 0, signed=True), 30),
    "client answerer_x100": (_client_answerer, 10),
    "client push_consume_x10": (lambda kind: _client_push_consume(kind, 10), 10),
    "remoting plain_round_trip_x10": (lambda kind: _remoting_round_trips(kind, 10, False, True), 10),
    "remoting tls_round_trip_x10": (lambda kind: _remoting_round_trips(kind, 10, True, True), 10),
    "remoting asyncio_plain_round_trip_x10": (lambda kind: _remoting_round_trips(kind, 10, False, False), 10),
    "remoting asyncio_tls_round_trip_x10": (lambda kind: _remoting_round_trips(kind, 10, True, False), 10),
}
KINDS = ("c", "py")


def run(kind: str, counts: dict[str, int]) -> None:
    """Set each workload up for ``kind`` and call it its count of times inside one ctypes callback
    (the region callgrind collects; one warm call first, outside it, so lazy work is not counted)."""
    for name, n in counts.items():
        once = WORKLOADS[name][0](kind)
        try:
            once()

            def calls() -> None:
                for _ in range(n):
                    once()
            # what the process holds is frozen, as the server commands freeze it after start
            # (fastmq.common.gc_pauses): a collection inside the region then scans only what the
            # calls made, not every object some unrelated module loaded
            gc.collect()
            gc.freeze()
            try:
                ctypes.CFUNCTYPE(None)(calls)()
            finally:
                gc.unfreeze()
        finally:
            close = getattr(once, "close", None)  # the store's threads and files
            if close is not None:
                close()


def _tree_env(tree: Path, kind: str) -> dict[str, str]:
    """The environment a workload process of ``tree`` runs in: that tree's code, fixed hashing,
    and the pure twins for ``py``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    env.pop("FASTMQ_NO_EXTENSIONS", None)
    if kind == "py":
        env["FASTMQ_NO_EXTENSIONS"] = "1"
    return env


def per_call(tree: Path, kind: str, names: list[str], python: str) -> dict[str, float]:
    """Instructions per call of each of ``names`` in ``tree``, from one callgrind process."""
    counts = {n: CALLS // WORKLOADS[n][1] for n in names}
    env = _tree_env(tree, kind)
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                               f"--toggle-collect={_REGION}", f"--dump-after={_REGION}",
                               f"--callgrind-out-file={d}/cg.out", python, "-m", "benchmarks.instructions", "run",
                               kind, *(f"{k}={v}" for k, v in counts.items())],
                              cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"[{kind}] in {tree} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        dumps = sorted(Path(d).glob("cg.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
        if len(dumps) != len(names):
            raise RuntimeError(f"expected {len(names)} callgrind dumps, found {len(dumps)}:\n{proc.stderr[-2000:]}")
        got = {}
        for name, dump in zip(names, dumps):
            m = re.search(r"^totals:\s+(\d+)", dump.read_text(), re.M)
            if m is None:
                raise RuntimeError(f"{dump}: no totals line")
            got[name] = int(m.group(1)) / counts[name]
        return got


#: ctypes calls a Python callback through this C function: the only region callgrind collects
_REGION = "_CallPythonObject"


def per_thread(tree: Path, kind: str, name: str, python: str, n: int = 10) -> dict[int, float]:
    """Instructions per call of ``name`` in each thread (callgrind's thread number: 1 is the one
    that calls, the loop's; a workload's own threads, a trace dispatcher's, come after). ``compare``
    counts the calling thread only (callgrind's collection is toggled per thread). Here every
    thread collects from the start: the calling thread's count is its dump of the region, each
    other thread's is the difference of its whole-run counts between a run of ``2n`` calls and one
    of ``n``, divided by ``n`` (so its start, its shutdown and the warm call fall out)."""
    # (numpy's OpenBLAS starts idle threads of its own, whose spinning is no workload's)
    env = {**_tree_env(tree, kind), "OPENBLAS_NUM_THREADS": "1"}
    totals: list[dict[int, int]] = []
    region: dict[int, int] = {}
    for calls in (n, 2 * n):
        with tempfile.TemporaryDirectory() as d:
            proc = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--dump-before={_REGION}",
                                   f"--dump-after={_REGION}", f"--callgrind-out-file={d}/cg.out", python, "-m",
                                   "benchmarks.instructions", "run", kind, f"{name}={calls}"],
                                  cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                raise RuntimeError(f"[{kind}] in {tree} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
            whole: dict[int, int] = {}
            for dump in Path(d).glob("cg.out*"):
                text = dump.read_text()
                m, t, part = (re.search(rf"^{k}:\s+(\d+)", text, re.M) for k in ("totals", "thread", "part"))
                if m is None or t is None or part is None:
                    continue
                whole[int(t.group(1))] = whole.get(int(t.group(1)), 0) + int(m.group(1))
                if int(t.group(1)) == 1 and int(part.group(1)) == 2:  # (part 1: up to the region)
                    region[calls] = int(m.group(1))
            totals.append(whole)
    got = {1: region[2 * n] / (2 * n)}
    for t in sorted(set(totals[1]) - {1}):
        got[t] = max(0.0, (totals[1][t] - totals[0].get(t, 0)) / n)
    return got


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _pytest_format(sha: str, when: str, figures: dict[tuple[str, str], float]) -> dict[str, Any]:
    """One commit's counts as a pytest-benchmark file (no timings; the count in extra_info)."""
    benches = []
    for (name, kind), value in sorted(figures.items()):
        group, case = name.split(" ", 1)
        benches.append({"group": f"instructions {group}", "name": f"instructions_{case}[{kind}]",
                        "fullname": f"benchmarks/instructions.py::instructions_{case}[{kind}]",
                        "params": {"kind": kind}, "stats": {"rounds": 1},
                        "extra_info": {"instructions": round(value, 1)}})
    return {"machine_info": {"python_implementation": "CPython", "python_version": sys.version.split()[0],
                             "node": "valgrind cachegrind"},
            "commit_info": {"id": sha, "dirty": False}, "datetime": when, "version": "instructions",
            "benchmarks": benches}


def compare(base_rev: str, out_dir: Path, only: list[str], kinds: list[str], base_tree: Path | None) -> int:
    if _git("status", "--porcelain", "--untracked-files=no"):
        print("instructions: commit your changes first (this checkout is the after side)", file=sys.stderr)
        return 2
    names = [n for n in WORKLOADS if not only or any(o in n for o in only)]
    base_sha, head_sha = _git("rev-parse", f"{base_rev}^{{commit}}"), _git("rev-parse", "HEAD")
    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        made = base_tree is None
        base = Path(scratch) / "base" if base_tree is None else base_tree.resolve()
        if made:
            _git("worktree", "add", "--detach", "-q", str(base), base_sha)
        elif _git("rev-parse", "HEAD", cwd=base) != base_sha:
            print(f"instructions: {base} is not at {base_rev}", file=sys.stderr)
            return 2
        # a --base-tree's own copy of the harness (a checkout someone works in) is put back after
        harness = base / "benchmarks" / "instructions.py"
        own = harness.read_bytes() if harness.exists() and not made else None
        try:
            for tree in (base, ROOT):
                subprocess.run([python, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, check=True,
                               capture_output=True, timeout=1800)
            # the harness is this checkout's, run from the tree under test
            harness.write_bytes(Path(__file__).read_bytes())
            figures: dict[str, dict[tuple[str, str], float]] = {base_sha: {}, head_sha: {}}
            for kind in kinds:
                for sha, tree in ((base_sha, base), (head_sha, ROOT)):
                    for name, value in per_call(tree, kind, names, python).items():
                        figures[sha][(name, kind)] = value
                for name in names:
                    b, h = figures[base_sha][(name, kind)], figures[head_sha][(name, kind)]
                    print(f"{name} [{kind}]: {b:,.0f} -> {h:,.0f} instructions per call ({(h / b - 1) * 100:+.1f}%)",
                          file=sys.stderr)
        finally:
            if made:
                _git("worktree", "remove", "--force", str(base))
            elif own is None:
                harness.unlink(missing_ok=True)
            else:
                harness.write_bytes(own)
    stamp = _dt.datetime.now(_dt.timezone.utc)
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, sha in enumerate((base_sha, head_sha)):
        # the base first by a second, so "before" and "after" read in order
        when = (stamp + _dt.timedelta(seconds=i)).isoformat()
        path = out_dir / f"pytest-{stamp:%Y%m%dT%H%M%SZ}-{sha[:7]}-instructions.json"
        path.write_text(json.dumps(_pytest_format(sha, when, figures[sha]), indent=1) + "\n")
        print(f"instructions: kept {path}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare", help="count BASE_REV's and this checkout's instructions per call")
    c.add_argument("base_rev")
    c.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    c.add_argument("--only", nargs="*", default=[], help="workloads whose name contains one of these")
    c.add_argument("--kinds", nargs="*", default=list(KINDS), choices=KINDS)
    c.add_argument("--base-tree", type=Path, help="a checkout of BASE_REV to use instead of a new worktree")
    r = sub.add_parser("run", help="workloads with their call counts (run under valgrind by compare)")
    r.add_argument("kind", choices=KINDS)
    r.add_argument("counts", nargs="+", metavar="NAME=N")
    t = sub.add_parser("threads", help="one workload's instructions per call in each thread, this checkout")
    t.add_argument("name")
    t.add_argument("--kind", default="c", choices=KINDS)
    args = p.parse_args(argv)
    if args.command == "threads":
        if args.name not in WORKLOADS:
            p.error(f"{args.name!r}: expected one of {sorted(WORKLOADS)}")
        n = max(1, CALLS // WORKLOADS[args.name][1])
        for thread, value in per_thread(ROOT, args.kind, args.name, sys.executable, n).items():
            print(f"{args.name} [{args.kind}] thread {thread}{' (the caller: the loop)' if thread == 1 else ''}: "
                  f"{value:,.0f} instructions per call")
        return 0
    if args.command == "run":
        counts = {}
        for spec in args.counts:
            name, _, n = spec.rpartition("=")
            if name not in WORKLOADS or not n.isdigit():
                p.error(f"{spec!r}: expected NAME=N with NAME one of {sorted(WORKLOADS)}")
            counts[name] = int(n)
        run(args.kind, counts)
        return 0
    return compare(args.base_rev, args.out, args.only, args.kinds, args.base_tree)


if __name__ == "__main__":
    sys.exit(main())
