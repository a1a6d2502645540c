"""Helpers the process tests share (and the interop tests, which drive the same servers): brokers
set up for replication, for group commit with scripted disk faults, raw admin requests, listeners."""
from __future__ import annotations
import asyncio
import json
import os
import textwrap
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from fastmq.client.push_consumer import ConsumeStatus
from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.consumer_running_info import ConsumeMessageDirectlyResult, ConsumerRunningInfo
from fastmq.protocol.headers import SendMessageRequestHeader
from fastmq.protocol.message import decode_records, encode_properties
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, broker_process, free_port, namesrv_process
from tests import support
from tests.support import pull_request


# ------------------------------------------------ replication

def master_broker(tmp: Path, ns: str, *, port: int | None = None, ha_port: int | None = None,
                  role: str = "ASYNC_MASTER", **conf: Any) -> ServerProcess:
    """A master under ``tmp/master`` (not started), registering every second."""
    d = tmp / "master"
    d.mkdir(exist_ok=True)
    return broker_process(d, ns, port=port, brokerRole=role, haListenPort=ha_port or free_port(),
                          registerNameServerPeriod=1000, **conf)


def slave_broker(tmp: Path, ns: str, master_ha: int | None, **conf: Any) -> ServerProcess:
    """A slave under ``tmp/slave`` (not started) of the master whose HA port is ``master_ha``."""
    d = tmp / "slave"
    d.mkdir(exist_ok=True)
    extra = {"haMasterAddress": f"127.0.0.1:{master_ha}"} if master_ha else {}
    return broker_process(d, ns, brokerId=1, brokerRole="SLAVE", haListenPort=free_port(),
                          registerNameServerPeriod=1000, **extra, **conf)


def ha_port_of(b: ServerProcess) -> int:
    """The haListenPort of ``b``'s broker.conf."""
    conf = (b.workdir / "broker.conf").read_text()
    return int(next(line.split("=", 1)[1] for line in conf.splitlines() if line.startswith("haListenPort=")))


async def until(fn: Callable[[], Awaitable[bool]], seconds: float) -> bool:
    """Await ``fn()`` every 0.1 s for up to ``seconds`` (bounded); its last value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await fn():
            return True
        await asyncio.sleep(0.1)
    return await fn()


async def pull_all(client: RemotingClient, addr: str, topic: str, queues: int) -> list[bytes]:
    """Every body of ``topic``'s first ``queues`` queues on the broker at ``addr``, queue by queue."""
    bodies: list[bytes] = []
    for q in range(queues):
        off = 0
        for _ in range(100):
            p = await client.invoke(addr, pull_request(topic, q, off), 5)
            if p.code != ResponseCode.SUCCESS:
                break
            msgs = decode_records(p.body)
            bodies += [m.body for m in msgs]
            off = int(p.ext_fields["nextBeginOffset"])
    return bodies


# ------------------------------------------------ group commit, with disk faults a flag file scripts

BROKER_WITH_DISK_FAULTS = textwrap.dedent("""
    import os, sys, time
    flags = sys.argv.pop(1)
    real = os.fdatasync
    def fdatasync(fd):
        if "commitlog" in os.readlink(f"/proc/self/fd/{fd}"):
            if os.path.exists(os.path.join(flags, "fail")):
                raise OSError(5, "Input/output error (injected)")
            if os.path.exists(os.path.join(flags, "slow")):
                time.sleep(1.0)
        real(fd)
    os.fdatasync = fdatasync
    from fastmq._ext import sync_wait_py  # (the compiled wait-then-sync calls libc's fdatasync)
    from fastmq.store import group_commit
    group_commit.wait_and_sync = sync_wait_py.wait_and_sync
    from fastmq.broker.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def scripted_broker(tmp_path: Path, namesrv: str, script: str, flags: Path, **conf: object) -> ServerProcess:
    """A started ``fastmq-broker`` run through ``script`` (which patches it before its main), with
    the ``flags`` directory as the script's first argument."""
    port = broker_process(tmp_path, namesrv, **conf).port  # (writes broker.conf)
    return ServerProcess(["python", "-c", script, str(flags), "-c", str(tmp_path / "broker.conf")],
                         port, tmp_path, env={"HOME": str(tmp_path)}, ready_line="boot success").start()


async def send_until_ok(client: RemotingClient, addr: str, topic: str, body: bytes, tries: int = 20) -> None:
    """Send until the broker answers SUCCESS, at most ``tries`` times: after a disk fault clears,
    the sends of the rounds still under way are refused first."""
    r = None
    for _ in range(tries):
        r = await client.invoke(addr, support.send_request(topic, body), 5)
        if r.code == ResponseCode.SUCCESS:
            return
    assert r is not None and r.code == ResponseCode.SUCCESS, (r.code, r.remark) if r else None


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    r = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    table: dict[str, str] = json.loads(r.body)["table"]
    return table


# ------------------------------------------------ raw requests of the semantics tests (group PG_SEM)

def send_request(topic: str, body: bytes = b"x", props: dict[str, str] | None = None, *, queue_id: int = 0,
                 sys_flag: int = 0, group: str = "PG_SEM"):
    h = SendMessageRequestHeader(producerGroup=group, topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4,
                                 queueId=queue_id, sysFlag=sys_flag, bornTimestamp=int(time.time() * 1000), flag=0,
                                 properties=encode_properties(props or {}).decode())
    return create_request(RequestCode.SEND_MESSAGE_V2, h.to_v2_fields(), body)


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 4, perm: int = 6,
                       order: bool = False):
    return await client.invoke(addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
        "perm": perm, "topicFilterType": "SINGLE_TAG", "order": order}), 5)


async def update_broker_config(client: RemotingClient, addr: str, **props: object) -> None:
    body = "".join(f"{k}={v}\n" for k, v in props.items()).encode()
    r = await client.invoke(addr, create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, body), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark


# ------------------------------------------------ consumers

def orderly_listener(log: dict[int, list[int]], refused: set[tuple[int, int]], refuse: tuple[int, int] = (2, 3)):
    """A listener of "order:step" bodies that logs each order's steps and refuses ``refuse`` once."""
    def listener(msgs):
        for m in msgs:
            order, step = (int(x) for x in m.body.decode().split(":"))
            if (order, step) == refuse and (order, step) not in refused:
                refused.add((order, step))
                return ConsumeStatus.RECONSUME_LATER       # suspends the queue; the same message comes next
            log.setdefault(order, []).append(step)
        return ConsumeStatus.CONSUME_SUCCESS
    return listener


async def ask_consumer(broker: str, group: str, topic: str, msg_id: str,
                       seconds: float = 30) -> tuple[ConsumerRunningInfo, ConsumeMessageDirectlyResult]:
    """What ``mqadmin consumerStatus`` and ``queryMsgById -g -d`` ask a broker of a group's one
    member, once it holds every queue of ``topic`` (bounded by ``seconds``)."""
    admin = RemotingClient()
    try:
        deadline = time.monotonic() + seconds
        while True:
            r = await admin.invoke(broker, admin_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, consumerGroup=group), 5)
            ids = json.loads(r.body).get("consumerIdList", []) if r.code == 0 and r.body else []
            info = None
            if ids:
                r = await admin.invoke(broker, admin_request(RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup=group,
                                                    clientId=ids[0]), 15)
                assert r.code == ResponseCode.SUCCESS, r.remark
                info = ConsumerRunningInfo.from_json(r.body)
                if len([mq for mq in info.mq_table if mq.topic == topic]) == 4:
                    break
            assert time.monotonic() < deadline, f"no member of {group} holds {topic}'s queues: {info}"
            await asyncio.sleep(0.2)
        r = await admin.invoke(broker, admin_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, consumerGroup=group,
                                            clientId=ids[0], msgId=msg_id), 20)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return info, ConsumeMessageDirectlyResult.from_json(r.body)
    finally:
        await admin.close()


# ------------------------------------------------ transactions

#: Transaction checks and offset flushes every second, so the transaction tests wait seconds, not minutes.
FAST = {"transactionCheckInterval": 1000, "transactionTimeOut": 1000, "flushConsumerOffsetInterval": 500}


class Cluster:
    """A NameServer and one broker (FAST plus ``conf``) under ``tmp``; :meth:`start` again restarts the
    broker, on ``port`` to keep its address."""

    def __init__(self, tmp: Path, **conf: Any) -> None:
        self.tmp = tmp
        self.conf = {**FAST, **conf}
        self.ns: ServerProcess | None = None
        self.broker: ServerProcess | None = None

    def start(self, port: int | None = None) -> ServerProcess:
        if self.ns is None:
            self.ns = namesrv_process(self.tmp).start()
        self.broker = broker_process(self.tmp, self.ns.addr, port=port, **self.conf).start()
        return self.broker

    @property
    def addr(self) -> str:
        assert self.broker is not None
        return f"127.0.0.1:{self.broker.port}"

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
        if self.ns is not None:
            self.ns.stop()


def admin_request(code: int, **fields: object):
    """A request of ``code`` with the ``fields`` that are not None."""
    return create_request(code, {k: v for k, v in fields.items() if v is not None})


# ------------------------------------------------ a small disk (the small_disk fixture of conftest.py)

MiB = 1 << 20
FS_SIZE = 100 * MiB


def fill_to(mnt: Path, free_bytes: int) -> Path:
    """A ballast file that leaves about ``free_bytes`` free on the file system."""
    st = os.statvfs(mnt)
    ballast = mnt / "ballast"
    grow = st.f_bavail * st.f_frsize - free_bytes
    assert grow > 0
    with open(ballast, "ab") as f:
        os.posix_fallocate(f.fileno(), os.fstat(f.fileno()).st_size, grow)
    return ballast
