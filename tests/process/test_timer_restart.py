"""Timer messages survive kill -9: every acknowledged one is delivered once, at or after its time,
whether it fell due before the kill, while the broker was down, or after the restart."""
from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path

from fastmq.protocol.codes import ResponseCode
from fastmq.protocol.message import MessageConst, decode_records
from fastmq.remoting import RemotingClient
from fastmq.testing import broker_process, namesrv_process
from tests.process.helpers import create_topic, send_request
from tests.support import pull_request

TOPIC = "TimerCrash"


def now_ms() -> int:
    return int(time.time() * 1000)


async def _all(client: RemotingClient, addr: str) -> list:
    out: list = []
    off = 0
    for _ in range(200):  # bounded paging
        r = await client.invoke(addr, pull_request(TOPIC, 0, off, max_nums=32), 5)
        if r.code != ResponseCode.SUCCESS:
            break
        out += decode_records(r.body)
        off = int(r.ext_fields["nextBeginOffset"])
    return out


async def test_kill9_delivers_each_acknowledged_timer_message_once(tmp_path: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    conf = {"timerFlushIntervalMs": 200}
    broker = broker_process(tmp_path, ns.addr, **conf).start()
    port = broker.port
    client = RemotingClient(connect_timeout=2)
    due: dict[bytes, int] = {}
    try:
        a = broker.addr
        assert (await create_topic(client, a, TOPIC, queues=1)).code == ResponseCode.SUCCESS
        t0 = now_ms()
        # 120 due before the kill, 120 around it, 120 while down, 60 after the restart
        for i in range(360):
            at = t0 + (1000, 2600, 4500, 9000)[i // 120] + (i % 7) * 37 if i < 300 else t0 + 9000 + i
            body = f"t{i:04d}".encode()
            r = await client.invoke(a, send_request(TOPIC, body, {"TIMER_DELIVER_MS": str(at),
                                                                  "UNIQ_KEY": f"UK{i:06d}"}), 5)
            assert r.code == ResponseCode.SUCCESS, r.remark
            due[body] = at
        await asyncio.sleep(max(0.0, (t0 + 2700 - now_ms()) / 1000))
        before = len(await _all(client, a))
        broker.kill()  # SIGKILL, while the second group is being delivered
        await asyncio.sleep(max(0.0, (t0 + 5200 - now_ms()) / 1000))  # the third group falls due while down
        broker = broker_process(tmp_path, ns.addr, port=port, **conf).start()
        a = broker.addr

        msgs: list = []

        async def all_there() -> bool:
            nonlocal msgs
            msgs = await _all(client, a)
            return len({m.body for m in msgs}) >= len(due)

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not await all_there():
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # a repeat would come right after the last one
        msgs = await _all(client, a)
        counts = collections.Counter(m.body for m in msgs)
        assert before > 0
        assert set(counts) == set(due), f"lost: {sorted(set(due) - set(counts))[:5]}"
        assert all(n == 1 for n in counts.values()), [b for b, n in counts.items() if n > 1][:5]
        for m in msgs:
            assert int(m.properties[MessageConst.TIMER_DEQUEUE_MS]) >= due[m.body], m.body
    finally:
        await client.close()
        broker.stop()
        ns.stop()
