"""The send fast path under a broker permission changed at run time (UPDATE_BROKER_CONFIG).

A broker in this test process (its sockets real, a real ``fastmq-namesrv`` beside it) so the
processor's topic-cache refresh can be counted: while the broker may not be written the fast
path is off, and finding that out once must be enough -- it used to be asked again, with a
refresh of the topic cache, on every send until the permission changed.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from fastmq.broker.config import BrokerConfig
from fastmq.broker.controller import BrokerController
from fastmq.protocol.codes import ResponseCode
from fastmq.store.config import MessageStoreConfig
from fastmq.testing import free_port, namesrv_process
from tests.process.helpers import create_topic, send_request, update_broker_config

SENDS = 20
FORBIDDEN = "the broker[127.0.0.1] sending message is forbidden"


@pytest.fixture
async def broker(tmp_path: Path):
    ns = namesrv_process(tmp_path).start()
    try:
        port = free_port()
        cfg = BrokerConfig(brokerName="broker-perm", namesrvAddr=ns.addr, listenPort=port, brokerIP1="127.0.0.1")
        store = MessageStoreConfig(storePathRootDir=str(tmp_path / "store"), haListenPort=free_port(),
                                   mappedFileSizeCommitLog=4 * 1024 * 1024)
        b = BrokerController(cfg, store)
        await b.start()
        try:
            yield b
        finally:
            await b.shutdown()
    finally:
        ns.stop()


async def test_read_only_broker_refuses_without_refreshing_per_send(broker, client) -> None:
    a = f"127.0.0.1:{broker.config.listenPort}"
    sp = broker.send_processor
    refreshes = 0
    real_refresh = sp._refresh_fast_topics

    def counted() -> None:
        nonlocal refreshes
        refreshes += 1
        real_refresh()

    sp._refresh_fast_topics = counted
    assert (await create_topic(client, a, "PermOrder", order=True)).code == ResponseCode.SUCCESS
    for _ in range(3):  # the later ones take the fast path
        assert (await client.invoke(a, send_request("PermOrder", b"before"), 5)).code == ResponseCode.SUCCESS

    await update_broker_config(client, a, brokerPermission=4)
    try:
        before = refreshes
        for i in range(SENDS):
            r = await client.invoke(a, send_request("PermOrder", b"refused %d" % i), 5)
            # 4.9's msgCheck: no write permission refuses an order topic's sends
            assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, FORBIDDEN)
        # the permission change is heard once, not once per send
        assert refreshes - before <= 1, refreshes - before
        assert sp._fast_state() is None
    finally:
        await update_broker_config(client, a, brokerPermission=6)

    before = refreshes
    for i in range(SENDS):
        r = await client.invoke(a, send_request("PermOrder", b"after %d" % i), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
    assert sp._fast_state() is not None  # the fast path is back
    # one refresh for the permission, one when the topic is learned again after it
    assert refreshes - before <= 2, refreshes - before
    # nothing refused was stored: 3 before, SENDS after, spread over the order topic's queues
    offsets = [broker.store.max_offset_in_queue("PermOrder", q) for q in range(4)]
    assert sum(offsets) == 3 + SENDS, offsets
