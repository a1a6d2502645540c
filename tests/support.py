"""Helpers the tests share beyond the embedded cluster (that one is :mod:`fastmq.testing`)."""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import MessageExt, decode_records, encode_properties, encode_record, tags_code
from fastmq.store.commit_log import AppendRequest
from fastmq.store.config import MessageStoreConfig
from fastmq.store.message_store import GetStatus, MessageStore

if TYPE_CHECKING:
    from fastmq.remoting import RemotingClient, RemotingServer


#: ``scripts/test.sh --quick`` sets FASTMQ_TEST_QUICK=1: a quick run of the unit layer.
QUICK = os.environ.get("FASTMQ_TEST_QUICK") == "1"


def examples(n: int) -> int:
    """A property test's hypothesis ``max_examples``: ``n``, or a fifth of it (at least 10) in a
    quick run, which is there to answer in under a minute; the full run tries all ``n``."""
    return max(10, n // 5) if QUICK else n


#: Frames the official C++ client sent or accepted, recorded (tests/interop/wire_vectors/cpp-client/
#: README.md says how); FASTMQ_WIRE_VECTORS points at another recording.
WIRE_VECTORS = Path(os.environ.get("FASTMQ_WIRE_VECTORS",
                                   Path(__file__).resolve().parent / "interop" / "wire_vectors" / "cpp-client"))
WIRE_VECTOR_FILES = ("producer", "push-consumer", "pull-consumer")


def wire_vector_records(direction: str | None = None) -> list[dict]:
    """The recorded frames (not the notes), each with ``_id`` = ``<file>#<seq>``; ``direction``
    keeps one way only."""
    out = []
    for name in WIRE_VECTOR_FILES:
        for line in (WIRE_VECTORS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r["kind"] != "note" and (direction is None or r["direction"] == direction):
                r["_id"] = f"{name}#{r['seq']}"
                out.append(r)
    return out


def ext_text(v: object) -> str:
    """An ext value as the codec hands it over: a str whatever JSON type it arrived as."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def addr_of(srv: "RemotingServer") -> str:
    """The ``host:port`` a client dials to reach an in-process server listening on loopback."""
    return f"127.0.0.1:{srv.port}"


async def wait_until(pred: Callable[[], bool], seconds: float, every: float = 0.05) -> bool:
    """Poll ``pred`` for up to ``seconds`` (bounded); its last value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(every)
    return pred()


async def consume_positions(namesrv: str, group: str, topic: str, wanted: Iterable[bytes],
                            seconds: float) -> dict[bytes, tuple[int, int]]:
    """Consume ``topic`` from its first offset with a lite pull consumer until every body in
    ``wanted`` arrived or ``seconds`` passed (bounded); each body's ``(queue id, queue offset)``."""
    from fastmq.client.push_consumer import PullConsumer

    want = set(wanted)
    consumer = PullConsumer(group, namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    await consumer.start()
    got: dict[bytes, tuple[int, int]] = {}
    try:
        deadline = time.monotonic() + seconds
        while not want <= got.keys() and time.monotonic() < deadline:
            for m in await consumer.poll(1.0):
                got[m.body] = (m.queue_id, m.queue_offset)
    finally:
        await consumer.shutdown()
    return got


# ------------------------------------------------ raw requests, for tests that talk to a broker directly

def send_request(topic: str, body: bytes, props: dict[str, str] | None = None, *, queue_id: int = 0,
                 code: int = RequestCode.SEND_MESSAGE_V2, batch: bool = False):
    """A producer's send request (SEND_MESSAGE_V2 unless ``code`` says otherwise), group PG_TEST."""
    h = SendMessageRequestHeader(producerGroup="PG_TEST", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4,
                                 queueId=queue_id, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
                                 properties=encode_properties(props or {}).decode(), batch=batch)
    fields = h.to_v2_fields() if code != RequestCode.SEND_MESSAGE else h.to_fields()
    return create_request(code, fields, body)


def pull_request(topic: str, queue_id: int, offset: int, *, group: str = "CG_TEST", expr: str = "*",
                 suspend_ms: int = 0, max_nums: int = 32):
    """A PULL_MESSAGE request; ``suspend_ms`` makes it a long poll."""
    sys_flag = 0x4 | (0x2 if suspend_ms else 0)
    return create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": max_nums,
        "sysFlag": sys_flag, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms, "subVersion": 0,
        "subscription": expr})


async def create_topic(client: "RemotingClient", addr: str, topic: str, *, queues: int = 4, perm: int = 6,
                       routed_by: str | None = None) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker at ``addr``; asserts it succeeded. With ``routed_by``
    (a NameServer), also waits (30 s at most) until that NameServer has the topic's route."""
    r = await client.invoke(addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
        "perm": perm, "topicFilterType": "SINGLE_TAG"}), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    if routed_by is None:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = await client.invoke(routed_by, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)
        if r.code == ResponseCode.SUCCESS:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the topic {topic} never got a route")


# ------------------------------------------------ a message store in the test's own process (unit and process tests)

CL_FILE = 8192
CQ_FILE = 20 * 8
HOST = "127.0.0.1:10911"


def store_config(root: Path, **kw: object) -> MessageStoreConfig:
    """A small store's config under ``root`` (8 KiB commit-log files); ``kw`` overrides fields."""
    c = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=CL_FILE,
                           mappedFileSizeConsumeQueue=CQ_FILE, preloadMappedFile=False,
                           flushIntervalConsumeQueue=50, flushIntervalCommitLog=50)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def msg(topic: str = "T", body: bytes = b"hello", qid: int = 0, tags: str | None = "A",
        **props: str) -> MessageExt:
    p = dict(props)
    if tags is not None:
        p["TAGS"] = tags
    return MessageExt(topic=topic, body=body, queue_id=qid, properties=p,
                      born_timestamp=int(time.time() * 1000), born_host=("10.0.0.7", 5555))


def open_store(root: Path, arrivals: list | None = None, **kw: object) -> MessageStore:
    """A started store under ``root`` (:func:`store_config` with ``kw``); each arrival appended to ``arrivals``."""
    cb = (lambda *a: arrivals.append(a)) if arrivals is not None else None
    s = MessageStore(store_config(root, **kw), HOST, on_arrival=cb)
    s.load()
    s.start()
    return s


def bodies(res) -> list[bytes]:
    return [m.body for m in decode_records(b"".join(res.buffers))]


def send_batch(sends: list[tuple[int, str, str]], wait: bool = True):
    """A compiled-path SendBatch (the selected twin) of SEND_MESSAGE_V2 requests to topic T:
    ``(queue id, TAGS, KEYS)`` each."""
    from fastmq._ext.send import encode_sends
    from fastmq.protocol.codes import RequestCode
    from fastmq.protocol.command import create_request
    from fastmq.protocol.headers import SendMessageRequestHeader
    from fastmq.protocol.message import pack_host

    reqs = [create_request(RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeader(
        "PG", "T", "TBW102", 4, qid, 0, int(time.time() * 1000), 0,
        f"TAGS\x01{tag}\x02KEYS\x01{key}\x02WAIT\x01{str(wait).lower()}").to_v2_fields(), f"{key}".encode())
        for qid, tag, key in sends]
    return encode_sends(reqs, {"T": (64, 64, 0)}, pack_host("10.0.0.7", 5555), pack_host("127.0.0.1", 10911),
                        b"CLUSTER\x01C\x02", 1 << 20)


def queue_bodies(s: MessageStore, qid: int, most_pulls: int = 100, topic: str = "T") -> list[bytes]:
    """Every body of queue ``qid``, in queue order: pulls of 32 from offset 0 until one finds
    nothing (at most ``most_pulls``)."""
    got: list[bytes] = []
    off = 0
    for _ in range(most_pulls):
        g = s.get_message("g", topic, qid, off, 32)
        if g.status is not GetStatus.FOUND:
            break
        got += bodies(g)
        off = g.next_begin_offset
    return got


def rss_kib_by_file(directory: Path) -> dict[str, int]:
    """Resident KiB of each mapping of a file under ``directory``, from /proc/self/smaps.

    Per mapping, not the process's RssFile: that total also moves with the interpreter's own
    mapped files and the VM's page reclaim, which made a process-wide figure flaky here."""
    out: dict[str, int] = {}
    current = None
    prefix = str(directory)
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:  # a mapping's first line
            current = head[5] if len(head) >= 6 and head[5].startswith(prefix) else None
        elif current is not None and line.startswith("Rss:"):
            out[current] = out.get(current, 0) + int(head[1])
    return out


# ------------------------------------------------ a commit log alone (unit and process tests)

COMMIT_LOG_FILE = 4096


def commit_log_config(tmp_path: Path, **kw: object) -> MessageStoreConfig:
    """A commit log's config under ``tmp_path/store`` (4 KiB files); ``kw`` overrides fields."""
    c = MessageStoreConfig(storePathRootDir=str(tmp_path / "store"), mappedFileSizeCommitLog=COMMIT_LOG_FILE,
                           mappedFileSizeConsumeQueue=20 * 16)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def req(topic: str = "T", qid: int = 0, body: bytes = b"x" * 100, tags: str | None = "TagA") -> AppendRequest:
    """An append of one encoded record to the commit log."""
    props = {"TAGS": tags} if tags else {}
    rec = encode_record(topic=topic, body=body, properties=props, queue_id=qid,
                        born_host=("127.0.0.1", 5000), store_host=("127.0.0.1", 10911))
    return AppendRequest(rec, topic, qid, tags_code(tags))


async def read_topic(namesrv: str, topic: str, wanted: set[bytes], seconds: float,
                     linger: float) -> list:
    """Every message of ``topic`` from its first offset, read by a lite PullConsumer of a new group
    until each body of ``wanted`` came (bounded by ``seconds``), then ``linger`` s more for what
    must not come."""
    import uuid

    from fastmq.aio import PullConsumer
    consumer = PullConsumer(f"CG_{uuid.uuid4().hex[:8]}", namesrv_addr=namesrv,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    await consumer.start()
    got: list = []
    try:
        deadline = time.monotonic() + seconds
        while not wanted <= {m.body for m in got} and time.monotonic() < deadline:
            got.extend(await consumer.poll(0.5))
        end = time.monotonic() + linger
        while time.monotonic() < end:
            got.extend(await consumer.poll(0.5))
    finally:
        await consumer.shutdown()
    return got
