"""Master-slave replication (RocketMQ 4.9's classic HA) with real broker processes."""
from __future__ import annotations

import asyncio
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastmq.protocol.codes import RequestCode, ResponseCode
from fastmq.protocol.command import create_request
from fastmq.protocol.message import decode_records
from fastmq.remoting import RemotingClient
from fastmq.testing import ServerProcess, broker_process, free_port, namesrv_process
from tests.support import create_topic, pull_request, send_request
from tests.process.helpers import ha_port_of as _ha_port
from tests.process.helpers import master_broker as _master
from tests.process.helpers import pull_all as _pull_all
from tests.process.helpers import slave_broker as _slave
from tests.process.helpers import until as _until

pytestmark = pytest.mark.slow


def _check_store(b: ServerProcess) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).with_name("fastmq-broker")), "-c", str(b.workdir / "broker.conf"),
                           "--check-store", str(b.workdir / "store")],
                          capture_output=True, text=True, timeout=60, env={"HOME": str(b.workdir)})


async def test_slave_copies_the_masters_log_and_serves_pulls(tmp_path: Path, client: RemotingClient) -> None:
    ns = namesrv_process(tmp_path).start()
    master = _master(tmp_path, ns.addr).start()
    slave = None
    try:
        await create_topic(client, master.addr, "ReplTopic", queues=4)
        sent = []
        for i in range(40):  # some before the slave exists: it starts from the master's last file
            body = f"repl-{i:03d}".encode() + b"y" * (i * 37)
            r = await client.invoke(master.addr, send_request("ReplTopic", body, {"KEYS": f"k{i}"}, queue_id=i % 4), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark
            sent.append(body)
            if i == 19:
                slave = _slave(tmp_path, ns.addr, _ha_port(master)).start()
        assert slave is not None

        async def complete() -> bool:
            return sorted(await _pull_all(client, slave.addr, "ReplTopic", 4)) == sorted(sent)
        assert await _until(complete, 20), slave.output()[-3000:]

        # the slave's records are the master's, byte for byte
        p_master = await client.invoke(master.addr, pull_request("ReplTopic", 1, 0), 5)
        p_slave = await client.invoke(slave.addr, pull_request("ReplTopic", 1, 0), 5)
        assert p_slave.code == ResponseCode.SUCCESS and p_slave.body == p_master.body
        # the slave knows the topic from the master's config (slave sync)
        r = await client.invoke(slave.addr, create_request(RequestCode.GET_ALL_TOPIC_CONFIG), 5)
        assert b"ReplTopic" in r.body
        # the route lists both: brokerAddrs {0: master, 1: slave}
        route = await client.invoke(ns.addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ReplTopic"}), 5)
        assert route.code == ResponseCode.SUCCESS
        assert master.addr.encode() in route.body and slave.addr.encode() in route.body

        assert slave.stop() == 0, slave.output()[-3000:]
        check = _check_store(slave)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        if slave is not None:
            slave.stop()
        master.stop()
        ns.stop()


async def test_sync_master_answers_slave_not_available_then_success(tmp_path: Path, client: RemotingClient) -> None:
    ns = namesrv_process(tmp_path).start()
    master = _master(tmp_path, ns.addr, role="SYNC_MASTER").start()
    slave = None
    try:
        await create_topic(client, master.addr, "SyncTopic", queues=2)
        r = await client.invoke(master.addr, send_request("SyncTopic", b"alone"), 5)
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE, r.remark
        # stored on the master all the same, and answered with where it went
        assert len(r.ext_fields["msgId"]) == 32 and r.ext_fields["queueOffset"] == "0"
        r = await client.invoke(master.addr, send_request("SyncTopic", b"alone, fast path"), 5)
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE, r.remark
        assert len(r.ext_fields["msgId"]) == 32 and r.ext_fields["queueOffset"] == "1"

        slave = _slave(tmp_path, ns.addr, _ha_port(master)).start()
        codes: list[int] = []

        async def replicated() -> bool:
            r = await client.invoke(master.addr, send_request("SyncTopic", b"with a slave"), 5)
            codes.append(r.code)
            return r.code == ResponseCode.SUCCESS
        assert await _until(replicated, 20), (codes, slave.output()[-3000:])
        # and what the master acknowledged is on the slave already
        bodies = await _pull_all(client, slave.addr, "SyncTopic", 2)
        assert b"with a slave" in bodies and b"alone" in bodies
    finally:
        if slave is not None:
            slave.stop()
        master.stop()
        ns.stop()


async def test_sync_master_stops_waiting_when_its_slave_dies(tmp_path: Path, client: RemotingClient) -> None:
    """4.9 keeps such a send waiting its whole syncFlushTimeout (5 s) though no ack can come, and
    the client, 3 s by default, retries a message that is stored; fastmq answers
    SLAVE_NOT_AVAILABLE (stored here, not there) as the last slave's connection closes."""
    ns = namesrv_process(tmp_path).start()
    master = _master(tmp_path, ns.addr, role="SYNC_MASTER", syncFlushTimeout=30000).start()
    slave = _slave(tmp_path, ns.addr, _ha_port(master)).start()
    try:
        await create_topic(client, master.addr, "SyncTopic", queues=1)

        async def replicated() -> bool:
            r = await client.invoke(master.addr, send_request("SyncTopic", b"with a slave"), 5)
            return r.code == ResponseCode.SUCCESS
        assert await _until(replicated, 20), slave.output()[-3000:]
        assert slave.proc is not None
        slave.proc.send_signal(signal.SIGSTOP)  # connected, but acks nothing
        t0 = time.monotonic()
        pending = asyncio.ensure_future(client.invoke(master.addr, send_request("SyncTopic", b"waits"), 40))
        await asyncio.sleep(1.0)
        assert not pending.done()  # waiting for the frozen slave's ack
        slave.kill()
        r = await pending
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE, r.remark
        assert time.monotonic() - t0 < 20  # the connection's end, not the 30 s wait
        bodies = await _pull_all(client, master.addr, "SyncTopic", 1)
        assert b"waits" in bodies
    finally:
        slave.stop()
        master.stop()
        ns.stop()


async def test_slave_refuses_sends(tmp_path: Path, client: RemotingClient) -> None:
    ns = namesrv_process(tmp_path).start()
    master = _master(tmp_path, ns.addr).start()
    slave = _slave(tmp_path, ns.addr, _ha_port(master)).start()
    try:
        await create_topic(client, master.addr, "SlaveSendTopic", queues=2)
        for _ in range(2):  # the slow path (topic unknown to the slave), then the fast one
            r = await client.invoke(slave.addr, send_request("SlaveSendTopic", b"nope"), 5)
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert r.remark.startswith("service not available now. It may be caused by one of the following reasons:")
            assert "messages are put to the slave" in r.remark
        r = await client.invoke(master.addr, send_request("SlaveSendTopic", b"yes"), 5)
        assert r.code == ResponseCode.SUCCESS
    finally:
        slave.stop()
        master.stop()
        ns.stop()


def _closed_by_peer(s: socket.socket, seconds: float = 10.0) -> bool:
    s.settimeout(seconds)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


async def test_garbage_on_the_ha_ports(tmp_path: Path, client: RemotingClient) -> None:
    ns = namesrv_process(tmp_path).start()
    master = _master(tmp_path, ns.addr).start()
    ha = _ha_port(master)
    # a fake master: its first transfer does not follow the slave's log; the slave must hang up
    fake = socket.socket()
    fake.bind(("127.0.0.1", 0))
    fake.listen(4)
    slave = _slave(tmp_path, ns.addr, fake.getsockname()[1]).start()
    try:
        await create_topic(client, master.addr, "GarbageTopic", queues=1)
        loop = asyncio.get_running_loop()
        # master side: an offset past the master's log, a negative one, and a short report
        for junk in (b"garbage! and more", struct.pack(">q", -5), b"\x00\x01\x02"):
            s = socket.create_connection(("127.0.0.1", ha), timeout=5)
            s.sendall(junk)
            if len(junk) < 8:
                s.shutdown(socket.SHUT_WR)
            assert await loop.run_in_executor(None, _closed_by_peer, s)
            s.close()
        r = await client.invoke(master.addr, send_request("GarbageTopic", b"still serving"), 5)
        assert r.code == ResponseCode.SUCCESS

        # slave side: the fake master sends a transfer at the wrong offset, then a bogus size
        fake.settimeout(15)
        for header in (struct.pack(">qi", 12345, 4) + b"abcd", struct.pack(">qi", 0, -7)):
            conn, _ = await loop.run_in_executor(None, fake.accept)
            conn.settimeout(5)
            assert len(conn.recv(8)) == 8   # the slave's report
            conn.sendall(header)
            assert await loop.run_in_executor(None, _closed_by_peer, conn)
            conn.close()
        conn, _ = await loop.run_in_executor(None, fake.accept)   # and it comes back
        conn.close()
        r = await client.invoke(slave.addr, pull_request("GarbageTopic", 0, 0), 5)
        assert r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUCCESS)
    finally:
        fake.close()
        assert slave.stop() == 0, slave.output()[-3000:]
        assert master.stop() == 0, master.output()[-3000:]
        ns.stop()


async def test_push_consumer_follows_the_slave_and_back(tmp_path: Path, client: RemotingClient) -> None:
    from fastmq.aio import ConsumeStatus, Message, Producer, PushConsumer

    ns = namesrv_process(tmp_path).start()
    ha = free_port()
    master = _master(tmp_path, ns.addr, ha_port=ha).start()
    slave = _slave(tmp_path, ns.addr, ha).start()
    consumer = None
    try:
        await create_topic(client, master.addr, "FollowTopic", queues=1)
        first = [f"before-{i:02d}".encode() for i in range(30)]
        for body in first:
            r = await client.invoke(master.addr, send_request("FollowTopic", body), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark

        async def on_slave() -> bool:   # replicated, and the route lists the slave
            route = await client.invoke(ns.addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                {"topic": "FollowTopic"}), 5)
            return (slave.addr.encode() in (route.body or b"") and
                    len(await _pull_all(client, slave.addr, "FollowTopic", 1)) == len(first))
        assert await _until(on_slave, 20), slave.output()[-3000:]

        got: list[bytes] = []
        gate = asyncio.Event()

        async def listener(msgs):
            for m in msgs:
                if len(got) >= 5:
                    await gate.wait()   # hold consumption: what is left must be pulled later
                got.append(m.body)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("GID_FOLLOW", namesrv_addr=ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                pull_batch_size=1, pull_threshold_for_queue=1)
        consumer.subscribe("FollowTopic")
        consumer.register_message_listener(listener)
        await consumer.start()

        async def held() -> bool:
            return len(got) >= 5
        assert await _until(held, 20)
        master.kill()                     # SIGKILL
        gate.set()

        async def all_first() -> bool:
            return set(first) <= set(got)
        assert await _until(all_first, 30), (len(got), slave.output()[-2000:])
        [pq] = [q for mq, q in consumer.process_queues.items() if mq.topic == "FollowTopic"]  # (and %RETRY%)
        assert pq.pulling_from == slave.addr

        master = _master(tmp_path, ns.addr, port=master.port, ha_port=ha).start()

        async def back_on_master() -> bool:
            return pq.pulling_from == master.addr
        assert await _until(back_on_master, 20), pq.pulling_from
        later = [f"after-{i:02d}".encode() for i in range(5)]
        async with Producer("PG_FOLLOW", namesrv_addr=ns.addr) as producer:
            for body in later:
                await producer.send(Message("FollowTopic", body))

        async def all_later() -> bool:
            return set(later) <= set(got)
        assert await _until(all_later, 30), len(got)
        assert pq.pulling_from == master.addr
    finally:
        if consumer is not None:
            await consumer.shutdown()
        slave.stop()
        master.stop()
        ns.stop()


async def test_pull_suggests_the_slave_only_with_slave_read_enable(tmp_path: Path, client: RemotingClient) -> None:
    ns = namesrv_process(tmp_path).start()
    # a ratio of 0: any backlog counts as "more than fits in memory"
    master = _master(tmp_path, ns.addr, slaveReadEnable="true", accessMessageInMemoryMaxRatio=0).start()
    (tmp_path / "other").mkdir()
    other = broker_process(tmp_path / "other", ns.addr, brokerName="broker-b", accessMessageInMemoryMaxRatio=0,
                           haListenPort=free_port()).start()
    try:
        for b in (master, other):
            await create_topic(client, b.addr, "SuggestTopic", queues=1)
            for i in range(3):
                r = await client.invoke(b.addr, send_request("SuggestTopic", b"s%d" % i), 5)
                assert r.code == ResponseCode.SUCCESS
        p = await client.invoke(master.addr, pull_request("SuggestTopic", 0, 0, max_nums=1), 5)
        assert p.code == ResponseCode.SUCCESS and p.ext_fields["suggestWhichBrokerId"] == "1"  # whichBrokerWhenConsumeSlowly
        p = await client.invoke(other.addr, pull_request("SuggestTopic", 0, 0, max_nums=1), 5)
        assert p.code == ResponseCode.SUCCESS and p.ext_fields["suggestWhichBrokerId"] == "0"  # slaveReadEnable off
    finally:
        other.stop()
        master.stop()
        ns.stop()


async def test_a_new_slave_starts_at_the_masters_last_file(tmp_path: Path, client: RemotingClient) -> None:
    ns = namesrv_process(tmp_path).start()
    file_size = 64 * 1024
    master = _master(tmp_path, ns.addr, mappedFileSizeCommitLog=file_size).start()
    slave = None
    try:
        await create_topic(client, master.addr, "LastFileTopic", queues=1)
        for i in range(200):  # ~3 files of 1 KiB records
            r = await client.invoke(master.addr, send_request("LastFileTopic", b"%04d" % i + b"z" * 1000), 5)
            assert r.code == ResponseCode.SUCCESS
        slave = _slave(tmp_path, ns.addr, _ha_port(master), mappedFileSizeCommitLog=file_size).start()

        async def caught_up() -> bool:
            r = await client.invoke(slave.addr, create_request(RequestCode.GET_MAX_OFFSET,
                                                               {"topic": "LastFileTopic", "queueId": 0}), 5)
            return r.code == ResponseCode.SUCCESS and r.ext_fields.get("offset") == "200"
        assert await _until(caught_up, 20), slave.output()[-3000:]
        r = await client.invoke(slave.addr, create_request(RequestCode.GET_MIN_OFFSET,
                                                           {"topic": "LastFileTopic", "queueId": 0}), 5)
        first = int(r.ext_fields["offset"])
        assert 0 < first < 200    # only the master's last file came over
        p = await client.invoke(slave.addr, pull_request("LastFileTopic", 0, first, max_nums=32), 5)
        assert p.code == ResponseCode.SUCCESS, p.remark
        msgs = decode_records(p.body)
        assert [m.queue_offset for m in msgs] == list(range(first, first + len(msgs)))
        assert msgs[0].body.startswith(b"%04d" % first)
        # below the slave's min, or past its max: a slave does not move the offset (offsetCheckInSlave
        # off) but sends the consumer back to the group's broker at once, as 4.9.8 does
        for off in (0, 500):
            p = await client.invoke(slave.addr, pull_request("LastFileTopic", 0, off), 5)
            assert p.code == ResponseCode.PULL_RETRY_IMMEDIATELY, (off, p.code, p.remark)
            assert (p.ext_fields["nextBeginOffset"], p.ext_fields["suggestWhichBrokerId"]) == (str(off), "0")
        assert slave.stop() == 0
        check = _check_store(slave)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        if slave is not None:
            slave.stop()
        master.stop()
        ns.stop()
