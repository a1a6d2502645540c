"""The systems a run can load: one sender and one receiver class per driver.

``fastmq``: the public asyncio client (``fastmq.aio.Producer``, ``PushConsumer``, the lite
``PullConsumer``), the API users call; it works against any RocketMQ 4.x cluster.
``fastmq-raw``: SEND_MESSAGE_V2 frames written straight to the topic's master broker (broker-only
stress, no client logic), consumed with the fastmq consumers. ``redis-streams``: redis-py's
XADD, and XREADGROUP + XACK per consumer group.

Every message carries its producer id and sequence number and its intended send time (epoch
ns) as properties (fields for Redis), so a receiver measures end-to-end latency at µs resolution
from the intended send time and the driver can account for each message.
"""
from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Callable

from .recorder import Recorder

__all__ = ["DRIVERS", "make_sender", "make_receiver"]

DRIVERS = ("fastmq", "fastmq-raw", "redis-streams")

ID_KEY = "bench_id"       # "<producer>.<sequence>"
T_KEY = "bench_t"         # intended send time, epoch ns

_now = time.time_ns


def _kind(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return f"{type(exc).__name__} code {code}" if isinstance(code, int) else type(exc).__name__


class _Window:
    """``in_flight`` sends outstanding at most; ``drain`` waits (bounded) for the last answers."""

    def __init__(self, size: int) -> None:
        self.sem = asyncio.Semaphore(size)
        self.size = size
        self.out = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def take(self) -> None:
        await self.sem.acquire()
        self.out += 1
        self.idle.clear()

    def give(self) -> None:
        self.out -= 1
        self.sem.release()
        if self.out == 0:
            self.idle.set()

    async def drain(self, timeout_s: float) -> int:
        try:
            await asyncio.wait_for(self.idle.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass
        return self.out


class Sender:
    """One producer. ``send(seqs, intended_ns)``: sync mode returns once answered, the others once
    the send is under way (at most ``in_flight`` outstanding); ``intended_ns`` None means "now,
    once a slot in the window is free" (as fast as possible)."""

    def __init__(self, rec: Recorder, pid: int, topic: str, w: dict[str, Any], payload: bytes) -> None:
        self.rec, self.pid, self.topic, self.w, self.payload = rec, pid, topic, w, payload
        self.mode = w["send_mode"]
        self.window = _Window(1 if self.mode == "sync" else w["in_flight"])

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def _done(self, seqs: range, t0: int, ok: bool, kind: str = "") -> None:
        now = _now()
        if ok:
            for s in seqs:
                self.rec.acked_one(self.pid, s, t0, now, timed=self.mode != "oneway")
        else:
            self.rec.error(kind, now, len(seqs))

    async def send(self, seqs: range, intended_ns: int | None) -> None:
        raise NotImplementedError


class Receiver:
    """One consumer of one group; counts what arrives through ``_got``."""

    def __init__(self, rec: Recorder, cid: int, topic: str, group: str, w: dict[str, Any]) -> None:
        self.rec, self.cid, self.topic, self.group, self.w = rec, cid, topic, group, w
        self.last_ns = 0

    def _got(self, bench_id: str | bytes | None, bench_t: str | bytes | None, now: int) -> None:
        if bench_id is None or bench_t is None:
            return   # not a benchmark message (a probe or another writer's): not counted
        pid, _, seq = (bench_id.decode() if isinstance(bench_id, bytes) else bench_id).partition(".")
        self.rec.received_one(self.group, int(pid), int(seq), int(bench_t), now)
        self.last_ns = now

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


# ------------------------------------------------------------------ fastmq


class FastmqSender(Sender):
    def __init__(self, rec: Recorder, pid: int, topic: str, w: dict[str, Any], payload: bytes,
                 target: dict[str, Any]) -> None:
        super().__init__(rec, pid, topic, w, payload)
        from fastmq.aio import Producer
        from fastmq.client.instance import ClientConfig
        config = ClientConfig(namesrv_addr=target["namesrv"], instance_name=f"{os.getpid()}_p{pid}")
        self.producer = Producer(f"bench_{target['run']}_p{pid}", client_config=config, max_in_flight=0)

    async def start(self) -> None:
        await self.producer.start()

    async def stop(self) -> None:
        await self.producer.shutdown()

    def _msg(self, seq: int, t: int) -> Any:
        from fastmq.aio import Message
        return Message(self.topic, self.payload, properties={ID_KEY: f"{self.pid}.{seq}", T_KEY: str(t)})

    async def send(self, seqs: range, intended_ns: int | None) -> None:
        from fastmq.aio import SendStatus
        from fastmq.errors import FastMQError
        await self.window.take()
        t0 = intended_ns if intended_ns is not None else _now()

        def answered(result: Any, error: BaseException | None) -> None:
            self.window.give()
            if error is not None:
                self._done(seqs, t0, False, _kind(error))
            elif result.status != SendStatus.SEND_OK:
                self._done(seqs, t0, False, str(result.status))
            else:
                self._done(seqs, t0, True)
        try:
            if self.mode == "sync":
                try:
                    r = await self.producer.send(self._msg(seqs[0], t0))
                except FastMQError as exc:
                    answered(None, exc)
                else:
                    answered(r, None)
            elif self.mode == "oneway":
                await self.producer.send_oneway(self._msg(seqs[0], t0))
                self.window.give()
                self._done(seqs, t0, True)
            elif self.mode == "batch":
                await self.producer.send_batch_async([self._msg(s, t0) for s in seqs], answered)
            else:
                await self.producer.send_async(self._msg(seqs[0], t0), answered)
        except FastMQError as exc:
            self.window.give()
            self._done(seqs, t0, False, _kind(exc))


class FastmqReceiver(Receiver):
    def __init__(self, rec: Recorder, cid: int, topic: str, group: str, w: dict[str, Any],
                 target: dict[str, Any]) -> None:
        super().__init__(rec, cid, topic, group, w)
        from fastmq.aio import PullConsumer, PushConsumer
        from fastmq.client.instance import ClientConfig
        # one client id per consumer: two consumers of a group in one process must not share one
        # (RocketMQ's client id is ip@instanceName, the instance name the pid by default)
        config = ClientConfig(namesrv_addr=target["namesrv"], instance_name=f"{os.getpid()}_c{cid}")
        common = {"client_config": config, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}
        self.push = w["consumer_kind"] == "push"
        self.plain = w.get("listener", "async") == "plain"
        self.consumer = (PushConsumer(group, consume_message_batch_max_size=32, **common) if self.push
                         else PullConsumer(group, pull_batch_size=64, **common))
        self.consumer.subscribe(topic)
        self._loop: asyncio.Task[None] | None = None

    def _take(self, msgs: list[Any]) -> None:
        now = _now()
        for m in msgs:
            p = m.properties
            self._got(p.get(ID_KEY), p.get(T_KEY), now)

    def _took(self, seen: list[tuple[Any, Any]], now: int) -> None:
        for bench_id, bench_t in seen:
            self._got(bench_id, bench_t, now)

    async def start(self) -> None:
        if self.push and self.plain:
            from fastmq.aio import ConsumeStatus
            loop = asyncio.get_running_loop()

            def plain(msgs: list[Any]) -> str:
                # on a consume thread, as a blocking PushConsumer's listener runs: the receipt time
                # is taken here, and the recorder (not thread-safe) is fed on the loop
                now = _now()
                loop.call_soon_threadsafe(self._took, [(m.properties.get(ID_KEY), m.properties.get(T_KEY))
                                                       for m in msgs], now)
                return ConsumeStatus.CONSUME_SUCCESS
            self.consumer.register_message_listener(plain)
            await self.consumer.start()
        elif self.push:
            from fastmq.aio import ConsumeStatus

            async def listener(msgs: list[Any]) -> str:
                self._take(msgs)
                return ConsumeStatus.CONSUME_SUCCESS
            self.consumer.register_message_listener(listener)
            await self.consumer.start()
        else:
            await self.consumer.start()
            self._loop = asyncio.ensure_future(self._poll())

    async def _poll(self) -> None:
        while True:
            self._take(await self.consumer.poll(0.2))

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
            self.consumer.commit()
        await self.consumer.shutdown()


# ------------------------------------------------------------------ fastmq-raw


class RawSender(Sender):
    """SEND_MESSAGE_V2 frames on one connection to the master of the topic's first broker,
    queues taken round-robin; no retries, no client-side routing or fault handling."""

    def __init__(self, rec: Recorder, pid: int, topic: str, w: dict[str, Any], payload: bytes,
                 target: dict[str, Any]) -> None:
        super().__init__(rec, pid, topic, w, payload)
        self.target = target
        self.pending: dict[int, tuple[range, int]] = {}
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task[None] | None = None
        self.outbox: list[Any] = []
        self.n = 0

    async def start(self) -> None:
        from fastmq.protocol.bodies import TopicRouteData
        from fastmq.protocol.codes import RequestCode, ResponseCode
        from fastmq.protocol.command import create_request
        from fastmq.remoting import RemotingClient
        c = RemotingClient()
        try:
            r = await c.invoke(self.target["namesrv"].split(";")[0],
                               create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": self.topic}), 5)
        finally:
            await c.close()
        if r.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"no route for {self.topic}: code {r.code} {r.remark}")
        route = TopicRouteData.from_json(r.body or b"{}")
        bd = sorted(route.broker_datas, key=lambda b: b.broker_name)[0]
        qd = next(q for q in route.queue_datas if q.broker_name == bd.broker_name)
        self.queues = qd.write_queue_nums
        from fastmq.protocol.codes import LanguageCode
        from fastmq.protocol.command import VERSION, RemotingCommand
        from fastmq.protocol.headers import SendMessageRequestHeader
        group = f"bench_{self.target['run']}_p{self.pid}"
        self.headers = [SendMessageRequestHeader(group, self.topic, "TBW102", self.queues, q, 0, 0, 0, "", 0, False,
                                                 16, False).to_v2_fields() for q in range(self.queues)]
        self.command, self.request_code = RemotingCommand, RequestCode.SEND_MESSAGE_V2
        self.language, self.version = int(LanguageCode.PYTHON), VERSION
        host, _, port = bd.broker_addrs[0].rpartition(":")
        reader, self.writer = await asyncio.open_connection(host, int(port))
        self.reader_task = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        from fastmq._ext.codec import FrameDecoder
        from fastmq.protocol.codes import ResponseCode
        decoder = FrameDecoder()
        while True:
            chunk = await reader.read(1 << 20)
            if not chunk:
                break
            for resp in decoder.feed(chunk):
                entry = self.pending.pop(resp.opaque, None)
                if entry is None:
                    continue
                self.window.give()
                ok = resp.code == ResponseCode.SUCCESS
                self._done(entry[0], entry[1], ok, "" if ok else f"code {resp.code}")
        for seqs, t0 in self.pending.values():
            self.window.give()
            self._done(seqs, t0, False, "ConnectionResetError")
        self.pending.clear()

    async def send(self, seqs: range, intended_ns: int | None) -> None:
        # batch mode: one frame per message (SEND_BATCH_MESSAGE bodies are the client's business)
        for seq in seqs:
            await self._send_one(range(seq, seq + 1), intended_ns)

    async def _send_one(self, seqs: range, intended_ns: int | None) -> None:
        await self.window.take()
        t0 = intended_ns if intended_ns is not None else _now()
        if self.writer is None or self.writer.is_closing():
            self.window.give()
            self._done(seqs, t0, False, "ConnectionResetError")
            return
        self.n += 1
        opaque = self.n & 0x7FFFFFFF
        # the header of each queue is built once; a message changes only its properties and born time
        fields = dict(self.headers[self.n % self.queues])
        fields["i"] = f"{ID_KEY}\x01{self.pid}.{seqs[0]}\x02{T_KEY}\x01{t0}\x02WAIT\x01true\x02"
        fields["g"] = str(t0 // 1_000_000)
        self.pending[opaque] = (seqs, t0)
        self.outbox.append(self.command(self.request_code, language=self.language, version=self.version,
                                        opaque=opaque, ext_fields=fields, body=self.payload))
        if len(self.outbox) == 1:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Every frame queued in this loop turn leaves in one write."""
        from fastmq._ext.codec import encode_frames
        out, self.outbox = self.outbox, []
        if out and self.writer is not None and not self.writer.is_closing():
            self.writer.write(encode_frames(out))

    async def stop(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.reader_task is not None:
            await asyncio.gather(self.reader_task, return_exceptions=True)


# ------------------------------------------------------------------ redis-streams


class RedisSender(Sender):
    """XADD. ``sync``: one XADD awaited at a time. ``async``: the XADDs started in one loop turn
    go as one pipeline; ``batch``: ``batch_size`` XADDs per pipeline; ``oneway`` is sent as
    ``async`` (Redis always answers)."""

    def __init__(self, rec: Recorder, pid: int, topic: str, w: dict[str, Any], payload: bytes,
                 target: dict[str, Any]) -> None:
        super().__init__(rec, pid, topic, w, payload)
        import redis.asyncio as aioredis
        host, _, port = target["redis"].rpartition(":")
        self.r = aioredis.Redis(host=host, port=int(port), max_connections=max(1, min(64, self.window.size)))
        self.tasks: set[asyncio.Task[None]] = set()
        self.outbox: list[tuple[range, int]] = []

    async def start(self) -> None:
        await self.r.ping()

    async def stop(self) -> None:
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.r.aclose()

    async def _pipe(self, work: list[tuple[range, int]]) -> None:
        """One pipeline (no MULTI) of XADDs: everything queued in one loop turn, as a redis-py
        user pipelines for throughput; each message is acknowledged by the pipeline's answer."""
        try:
            pipe = self.r.pipeline(transaction=False)
            for seqs, t0 in work:
                for s in seqs:
                    pipe.xadd(self.topic, {"b": self.payload, "i": f"{self.pid}.{s}", "t": t0})
            answers = await pipe.execute(raise_on_error=False)
        except Exception as exc:  # redis-py's errors and the connection's OSErrors alike
            for seqs, t0 in work:
                self.window.give()
                self._done(seqs, t0, False, _kind(exc))
            return
        k = 0
        for seqs, t0 in work:
            bad = [a for a in answers[k:k + len(seqs)] if isinstance(a, Exception)]
            k += len(seqs)
            self.window.give()
            self._done(seqs, t0, not bad, _kind(bad[0]) if bad else "")

    def _flush(self) -> None:
        work, self.outbox = self.outbox, []
        if work:
            task = asyncio.ensure_future(self._pipe(work))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def send(self, seqs: range, intended_ns: int | None) -> None:
        await self.window.take()
        t0 = intended_ns if intended_ns is not None else _now()
        if self.mode == "sync":
            await self._pipe([(seqs, t0)])
            return
        self.outbox.append((seqs, t0))
        if len(self.outbox) == 1:
            asyncio.get_running_loop().call_soon(self._flush)


class RedisReceiver(Receiver):
    def __init__(self, rec: Recorder, cid: int, topic: str, group: str, w: dict[str, Any],
                 target: dict[str, Any]) -> None:
        super().__init__(rec, cid, topic, group, w)
        import redis.asyncio as aioredis
        host, _, port = target["redis"].rpartition(":")
        self.r = aioredis.Redis(host=host, port=int(port))
        self._loop: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.r.ping()
        self._loop = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        name = f"c{self.cid}"
        while True:
            got = await self.r.xreadgroup(self.group, name, {self.topic: ">"}, count=256, block=200)
            now = _now()
            for _stream, entries in got or []:
                for _id, fields in entries:
                    self._got(fields.get(b"i"), fields.get(b"t"), now)
                if entries:
                    await self.r.xack(self.topic, self.group, *[e[0] for e in entries])

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
        await self.r.aclose()


_SENDERS: dict[str, Callable[..., Sender]] = {"fastmq": FastmqSender, "fastmq-raw": RawSender,
                                              "redis-streams": RedisSender}
_RECEIVERS: dict[str, Callable[..., Receiver]] = {"fastmq": FastmqReceiver, "fastmq-raw": FastmqReceiver,
                                                  "redis-streams": RedisReceiver}


def make_sender(driver: str, rec: Recorder, pid: int, topic: str, w: dict[str, Any], payload: bytes,
                target: dict[str, Any]) -> Sender:
    return _SENDERS[driver](rec, pid, topic, w, payload, target)


def make_receiver(driver: str, rec: Recorder, cid: int, topic: str, group: str, w: dict[str, Any],
                  target: dict[str, Any]) -> Receiver:
    return _RECEIVERS[driver](rec, cid, topic, group, w, target)
