"""The systems a run can load: one sender and one receiver class per driver.

``fastmq``: the public asyncio client (``fastmq.aio.Producer``, ``PushConsumer``, the lite
``PullConsumer``), the API users call; it works against any RocketMQ 4.x cluster.
``fastmq-raw``: SEND_MESSAGE_V2 frames written straight to the topic's master broker (broker-only
stress, no client logic), consumed with the fastmq consumers. ``redis-streams``: redis-py (hiredis
parsing when installed): XADD, and XREADGROUP BLOCK + XACK per consumer group.

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

__all__ = ["DRIVERS", "make_sender", "make_receiver", "peer_info", "redis_peer", "xreadgroup_count"]

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

    def _done(self, seqs: range, t0: int, ok: bool, kind: str = "", now: int | None = None) -> None:
        """``now``: the answer's time when it was taken elsewhere (a client thread); else now."""
        now = _now() if now is None else now
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


def redis_peer(r: Any) -> dict[str, str]:
    """Who the Redis peer is, for a result's metadata: redis-py's version and the reply parser
    ``r``'s connections use (hiredis whenever it is installed, unless a parser was forced), the
    server's version and its durability (AOF and its fsync policy). ``r`` is a sync
    ``redis.Redis`` (it is asked INFO and CONFIG GET); redis.asyncio picks its parser by the same
    rule."""
    import redis
    parser = r.connection_pool.connection_kwargs.get("parser_class")
    if parser is None:
        from redis.connection import DefaultParser as parser
    info = r.info("server")
    conf = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in r.config_get("append*").items()}
    aof = conf.get("appendonly") == "yes"
    return {"client": f"redis-py {redis.__version__}",
            "parser": "hiredis" if "Hiredis" in parser.__name__ else "python",
            "server": f"redis {info.get('redis_version')}",
            "durability": f"AOF appendfsync {conf.get('appendfsync')}" if aof else "no AOF (memory only)"}


def peer_info(driver: str, admin: Any) -> dict[str, Any]:
    """The peer a run measures (its ``peer`` field in result.json): client, version, parser and
    the server's durability. ``admin``: the run's RedisAdmin or RocketAdmin (cluster.py). Never
    raises: what cannot be asked is said."""
    try:
        if driver == "redis-streams":
            out: dict[str, Any] = redis_peer(admin.r)
            out["api"] = ("blocking client on threads: XADD (lone) / pipelined XADD (several queued); "
                          "XREADGROUP BLOCK + XACK")
            return out
        import fastmq
        from fastmq._ext import USING_EXTENSIONS
        from fastmq.protocol.codes import RequestCode, ResponseCode

        from .cluster import _run
        out = {"client": f"fastmq {fastmq.__version__} ({'compiled' if USING_EXTENSIONS else 'pure'})"}
        flush = set()
        for addr in admin.masters.values():
            r = _run(admin._ask(addr, RequestCode.GET_BROKER_CONFIG, {}))
            if r.code == ResponseCode.SUCCESS:
                conf = dict(line.split("=", 1) for line in (r.body or b"").decode().splitlines() if "=" in line)
                flush.add(conf.get("flushDiskType", "?"))
        out["durability"] = ", ".join(sorted(flush)) if flush else "unknown (GET_BROKER_CONFIG refused)"
        return out
    except Exception as exc:  # metadata only: a run is not failed for it
        return {"error": f"{type(exc).__name__}: {exc}"}


# The Redis peer is redis-py's blocking client, hiredis parsing: what a Python user picking Redis
# for speed writes (issue 33), and what benchmarks/redis_reference.py runs (a producer thread
# calling xadd, a consumer thread blocking on XREADGROUP). Measured on this 2-core VM (04:2x-04:3x
# UTC, 2 Dec 2026, load 2-3, alternated): redis.asyncio's XADD round trip p50 154-166 µs against the
# blocking client's 122-138; at 1,000 msgs/s the driver's e2e p50 was 2.1x the script's with
# redis.asyncio, and still 2.1x with each lone XADD handed from the loop to a sender thread (the
# thread's wake-up cost ~250 µs); with the lone XADD made on the loop's own thread it was 1.28x
# and then 1.15x (tests/spark/test_redis_reference.py: the rest is the lateness of the schedule
# both drivers share, see there), and a one-process harness doing that measured 269-295 µs
# against the script's 266-287. So: a task's only producer (the loop is then its producer
# thread) makes a lone send that is on schedule there, blocking for its round trip as the script's
# thread does; sends that queue up (a window of several in flight, a schedule faster than one
# round trip at a time, or several producers sharing the loop) go to the sender's own thread,
# which pipelines what is queued. (Inline only, e2e-latency-10k reached 4,360 of 10,000 msgs/s.)


class RedisSender(Sender):
    """XADD on the blocking client: a lone send of a task's only producer on the loop's thread,
    the others from one thread per producer. A lone send is one ``xadd`` (no pipeline object);
    when several sends are queued as the thread comes back for more (``async``
    with a window, ``oneway``), they go as one pipeline (no MULTI), as a user pipelines for
    throughput; ``batch``: ``batch_size`` XADDs per pipeline. ``sync``: ``send`` returns once
    answered. ``oneway`` runs as ``async`` (Redis always answers). The answer's time is taken on
    the thread; the recorder (not thread-safe) is fed on the loop."""

    live = 0   # RedisSenders started in this process (a task's producers share its loop)
    BEHIND_NS = 1_000_000   # a send this late is behind schedule: it does not block the loop

    def __init__(self, rec: Recorder, pid: int, topic: str, w: dict[str, Any], payload: bytes,
                 target: dict[str, Any]) -> None:
        super().__init__(rec, pid, topic, w, payload)
        import queue

        import redis
        host, _, port = target["redis"].rpartition(":")
        self.r = redis.Redis(host=host, port=int(port))
        self.q: queue.SimpleQueue[tuple[range, int, Any] | None] = queue.SimpleQueue()
        self._thread: Any = None
        self._started = False

    async def start(self) -> None:
        import threading
        self.r.ping()
        RedisSender.live += 1
        self._started = True
        self._thread = threading.Thread(target=self._run, args=(asyncio.get_running_loop(),),
                                        name=f"redis-producer-p{self.pid}", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        if self._started:
            self._started = False
            RedisSender.live -= 1
        if self._thread is not None:
            self.q.put(None)
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 30)
        self.r.close()

    def _fields(self, s: int, t0: int) -> dict[str, Any]:
        return {"b": self.payload, "i": f"{self.pid}.{s}", "t": t0}

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        import queue
        while True:   # ends at stop()'s None; each get is answered by one XADD or one pipeline
            item = self.q.get()
            if item is None:
                return
            work = [item]
            try:
                while len(work) < self.window.size:
                    more = self.q.get_nowait()
                    if more is None:
                        self.q.put(None)
                        break
                    work.append(more)
            except queue.Empty:
                pass
            answers: list[Any]
            try:
                if len(work) == 1 and len(work[0][0]) == 1:
                    seqs, t0, _ = work[0]
                    answers = [self.r.xadd(self.topic, self._fields(seqs[0], t0))]
                else:
                    pipe = self.r.pipeline(transaction=False)
                    for seqs, t0, _ in work:
                        for s in seqs:
                            pipe.xadd(self.topic, self._fields(s, t0))
                    answers = pipe.execute(raise_on_error=False)
            except Exception as exc:  # redis-py's errors and the connection's OSErrors alike
                answers = [exc] * sum(len(seqs) for seqs, _, _ in work)
            loop.call_soon_threadsafe(self._answered, work, answers, _now())

    def _answered(self, work: list[tuple[range, int, Any]], answers: list[Any], now: int) -> None:
        k = 0
        for seqs, t0, fut in work:
            bad = [a for a in answers[k:k + len(seqs)] if isinstance(a, Exception)]
            k += len(seqs)
            self.window.give()
            self._done(seqs, t0, not bad, _kind(bad[0]) if bad else "", now)
            if fut is not None and not fut.done():
                fut.set_result(None)

    async def send(self, seqs: range, intended_ns: int | None) -> None:
        await self.window.take()
        t0 = intended_ns if intended_ns is not None else _now()
        if len(seqs) == 1 and self.window.out == 1 and RedisSender.live == 1 and _now() - t0 < self.BEHIND_NS:
            # a lone send of the task's only producer, on schedule: one xadd on this thread (see
            # above). Behind schedule (a rate above what one round trip at a time can give, such
            # as e2e-latency-10k's), the sends go to the thread, which pipelines what queues up.
            try:
                self.r.xadd(self.topic, self._fields(seqs[0], t0))
                ok, kind = True, ""
            except Exception as exc:  # redis-py's errors and the connection's OSErrors alike
                ok, kind = False, _kind(exc)
            now = _now()
            self.window.give()
            self._done(seqs, t0, ok, kind, now)
            return
        if self.mode == "sync":
            fut = asyncio.get_running_loop().create_future()
            self.q.put((seqs, t0, fut))
            await fut
        else:
            self.q.put((seqs, t0, None))


def xreadgroup_count(w: dict[str, Any]) -> int:
    """XREADGROUP's COUNT: what fastmq's consumer of the same workload pulls per request (the
    driver's PushConsumer keeps its default pull_batch_size, the PullConsumer asks 64)."""
    if w["consumer_kind"] == "push":
        import inspect

        from fastmq.aio import PushConsumer
        for cls in PushConsumer.__mro__:   # the keyword is the consumers' base class's
            if "__init__" in vars(cls):
                p = inspect.signature(cls.__init__).parameters.get("pull_batch_size")
                if p is not None:
                    return int(p.default)
        raise RuntimeError("fastmq's PushConsumer has no pull_batch_size default")
    return 64   # the PullConsumer above asks for 64


class RedisReceiver(Receiver):
    """One consumer of a Redis consumer group, a thread on the blocking client (see above):
    ``XREADGROUP BLOCK`` with fastmq's pull batch as COUNT, then one ``XACK`` of what it read, as
    benchmarks/redis_reference.py's consumer does. The receipt time is taken on that thread (as
    fastmq's plain listener takes it on its consume thread) and the recorder is fed on the loop."""

    BLOCK_MS = 200

    def __init__(self, rec: Recorder, cid: int, topic: str, group: str, w: dict[str, Any],
                 target: dict[str, Any]) -> None:
        super().__init__(rec, cid, topic, group, w)
        import redis
        host, _, port = target["redis"].rpartition(":")
        self.r = redis.Redis(host=host, port=int(port))
        self.count = xreadgroup_count(w)
        self._thread: Any = None
        self._stop = False

    async def start(self) -> None:
        import threading
        self.r.ping()
        self._thread = threading.Thread(target=self._read, args=(asyncio.get_running_loop(),),
                                        name=f"redis-consumer-c{self.cid}", daemon=True)
        self._thread.start()

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        name = f"c{self.cid}"
        while not self._stop:   # bounded: each XREADGROUP blocks BLOCK_MS at most
            try:
                got = self.r.xreadgroup(self.group, name, {self.topic: ">"}, count=self.count, block=self.BLOCK_MS)
                now = _now()
                for _stream, entries in got or []:
                    if entries:
                        loop.call_soon_threadsafe(self._took, [(f.get(b"i"), f.get(b"t")) for _id, f in entries], now)
                        self.r.xack(self.topic, self.group, *[e[0] for e in entries])
            except Exception:  # Redis gone: the run's counts say so; retried until stopped
                if self._stop:
                    return
                time.sleep(0.1)

    def _took(self, seen: list[tuple[Any, Any]], now: int) -> None:
        for bench_id, bench_t in seen:
            self._got(bench_id, bench_t, now)

    async def stop(self) -> None:
        if self._thread is not None:
            self._stop = True
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 2 * self.BLOCK_MS / 1000 + 30)
            await asyncio.sleep(0)   # the thread's last call_soon_threadsafe runs before the counts are read
        self.r.close()


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
