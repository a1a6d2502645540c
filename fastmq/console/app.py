"""The console's web server: aiohttp (asyncio, like the rest of fastmq) serving the pages in
``static/`` and a JSON API over :class:`Admin`, with a lag sampler on the same loop.

    GET  /api/session                       token for writes, refresh period, whether writes may run
    GET  /api/cluster                       brokers: health, TPS, disk
    GET  /api/topics, /api/topics/{topic}   topic list; one topic's route and queue offsets
    GET  /api/groups, /api/groups/{group}   groups with lag; one group's queues, clients, lag history
    GET  /api/message?id=&topic=&key=       messages by id or key, each with its trace
    GET  /api/messages?topic=&begin=&end=   messages stored between two times (ms), newest first, bounded
    GET  /api/producers?topic=&group=       a producer group's connections
    GET  /api/dlq/{group}                   the group's dead letters and clients
    GET  /api/brokers/{addr}/config         a broker's configuration
    POST /api/dlq/{group}/resend            {msgId, clientId, confirm: msgId}
    POST /api/groups/{group}/reset-offset   {topic, timestamp, confirm: group}
    POST /api/topics                        create/update: {topic, cluster | brokerAddr, readQueueNums,
                                            writeQueueNums, perm, order, confirm: topic}
    DELETE /api/topics/{topic}              {cluster, confirm: topic}
    POST /api/groups                        create/update: {groupName, cluster | brokerAddr, the group's
                                            settings as SubscriptionGroupConfig's JSON, confirm: groupName}
    DELETE /api/groups/{group}              {cluster | brokerAddr, removeOffset, confirm: group}
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from aiohttp import web

from ..client.acl import SessionCredentials
from ..client.admin import Admin, TopicNotFoundError
from ..errors import BrokerError, ClientError, RemotingCommandError, RemotingError, TopicNotExistError
from ..protocol.bodies import SubscriptionGroupConfig
from . import views
from .guard import SECURITY_HEADERS, Guard, Refusal
from .history import LagHistory

__all__ = ["ConsoleSettings", "create_app", "serve", "STATIC"]

log = logging.getLogger("fastmq.console")

#: The pages, shipped as package data.
STATIC = Path(__file__).resolve().parent / "static"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConsoleSettings:
    """What ``fastmq-admin console`` was started with."""

    def __init__(self, namesrv: str, *, host: str = "127.0.0.1", port: int = 8080,
                 credentials: SessionCredentials | None = None, timeout: float = 5.0,
                 refresh_s: float = 5.0, sample_s: float = 10.0, history_s: float = 30 * 60,
                 trace_topic: str | None = None) -> None:
        if refresh_s <= 0 or sample_s <= 0 or history_s <= 0:
            raise ValueError("refresh, sample and history periods must be positive")
        self.namesrv, self.host, self.port = namesrv, host, port
        self.credentials, self.timeout = credentials, timeout
        self.refresh_s, self.sample_s, self.history_s = refresh_s, sample_s, history_s
        self.trace_topic = trace_topic


class _Console:
    """The state one app holds: its Admin, guard, lag history and the latest group list."""

    def __init__(self, settings: ConsoleSettings, guard: Guard) -> None:
        self.settings = settings
        self.guard = guard
        self.admin = Admin(settings.namesrv, timeout=settings.timeout, credentials=settings.credentials)
        points = max(2, int(settings.history_s / settings.sample_s) + 1)
        self.history = LagHistory(settings.history_s, points=min(points, 3600))
        self.groups: list[dict[str, Any]] = []
        self.groups_ms = 0
        self.sampled = asyncio.Event()

    async def sample(self) -> None:
        """Every group's lag now, into the history (the groups page shows the latest)."""
        groups = await self.admin.consumer_groups()
        now = int(time.time() * 1000)
        for g in groups:
            self.history.add(g["group"], int(g["diffTotal"]), now)
        self.groups, self.groups_ms = groups, now
        self.sampled.set()

    async def sampler(self) -> None:
        while True:
            try:
                await self.sample()
            except (RemotingError, BrokerError, ClientError, asyncio.TimeoutError) as exc:
                log.warning("console: lag sample failed: %s", exc)
            await asyncio.sleep(self.settings.sample_s)


_CONSOLE = web.AppKey("console", _Console)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(data, sort_keys=True, default=str), status=status,
                        content_type="application/json")


@web.middleware
async def _guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Host check first, errors as JSON, the security headers on every answer."""
    console = request.app[_CONSOLE]
    try:
        console.guard.check_host(request.headers.get("Host"))
        response = await handler(request)
    except Refusal as exc:
        response = _json({"error": exc.reason}, exc.status)
    except (TopicNotFoundError, TopicNotExistError) as exc:
        response = _json({"error": str(exc)}, 404)
    except web.HTTPException as exc:
        response = _json({"error": exc.reason}, exc.status)
    except RemotingCommandError as exc:  # a write's fields the protocol cannot carry
        response = _json({"error": str(exc)}, 400)
    except RemotingError as exc:
        response = _json({"error": f"cannot reach the NameServer or a broker: {exc}"}, 502)
    except (BrokerError, ClientError) as exc:
        response = _json({"error": str(exc)}, 400 if isinstance(exc, ClientError) else 502)
    except asyncio.TimeoutError:
        response = _json({"error": "the cluster did not answer in time"}, 504)
    for k, v in SECURITY_HEADERS.items():
        response.headers.setdefault(k, v)
    return response


# ------------------------------------------------------------------ pages

async def index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Content-Type": "text/html; charset=utf-8"})


_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".svg": "image/svg+xml", ".png": "image/png"}


async def static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    path = STATIC / name
    # one level of plain names: nothing outside the folder, nothing it does not ship
    if "/" in name or name.startswith(".") or path.suffix not in _TYPES or not path.is_file():
        raise Refusal(404, "no such file")
    return web.FileResponse(path, headers={"Content-Type": _TYPES[path.suffix]})


# ------------------------------------------------------------------ reads

async def session(request: web.Request) -> web.StreamResponse:
    c = request.app[_CONSOLE]
    acl = await views.acl_enabled(c.admin)
    writes = c.settings.credentials is not None or not acl
    return _json({"token": c.guard.token, "namesrv": c.settings.namesrv, "refreshMs": int(c.settings.refresh_s * 1000),
                  "acl": acl, "writes": writes,
                  "writesWhy": "" if writes else ("this cluster has ACL: start the console with --access-key and "
                                                  "--secret-key of an admin account to resend or reset")})


async def cluster(request: web.Request) -> web.StreamResponse:
    return _json(await views.cluster(request.app[_CONSOLE].admin))


async def topics(request: web.Request) -> web.StreamResponse:
    return _json(await views.topics(request.app[_CONSOLE].admin))


async def topic(request: web.Request) -> web.StreamResponse:
    return _json(await views.topic(request.app[_CONSOLE].admin, request.match_info["topic"]))


async def groups(request: web.Request) -> web.StreamResponse:
    c = request.app[_CONSOLE]
    if not c.sampled.is_set():
        await c.sample()
    return _json({"groups": c.groups, "time": c.groups_ms})


async def group(request: web.Request) -> web.StreamResponse:
    c = request.app[_CONSOLE]
    name = request.match_info["group"]
    data = await views.group(c.admin, name)
    data["history"] = c.history.series(name)
    data["historyWindowMs"] = c.history.window_ms
    return _json(data)


async def message(request: web.Request) -> web.StreamResponse:
    q = request.query
    c = request.app[_CONSOLE]
    return _json(await views.message_lookup(c.admin, msg_id=q.get("id", "").strip(), topic=q.get("topic", "").strip(),
                                            key=q.get("key", "").strip(), trace_topic=c.settings.trace_topic))


def _ms(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise Refusal(400, f"{what}: ms since the epoch") from None


async def messages(request: web.Request) -> web.StreamResponse:
    q = request.query
    now = int(time.time() * 1000)
    begin = _ms(q.get("begin", "").strip() or str(now - 3600_000), "begin")
    end = _ms(q.get("end", "").strip() or str(now), "end")
    limit = _ms(q.get("max", "").strip() or str(views.TIME_QUERY_MAX), "max")
    return _json(await views.messages_by_time(request.app[_CONSOLE].admin, q.get("topic", "").strip(), begin, end,
                                              limit))


async def producers(request: web.Request) -> web.StreamResponse:
    q = request.query
    return _json(await views.producers(request.app[_CONSOLE].admin, q.get("topic", "").strip(),
                                       q.get("group", "").strip()))


async def dlq(request: web.Request) -> web.StreamResponse:
    return _json(await views.dlq(request.app[_CONSOLE].admin, request.match_info["group"]))


async def broker_config(request: web.Request) -> web.StreamResponse:
    c = request.app[_CONSOLE]
    addr = request.match_info["addr"]
    known = await views.broker_addrs(c.admin)
    if addr not in known:  # the console talks only to this cluster's brokers
        raise Refusal(404, f"{addr} is not a broker of this cluster")
    return _json({"addr": addr, **known[addr], "config": await c.admin.broker_config(addr)})


# ------------------------------------------------------------------ writes

async def _write_body(request: web.Request, target: str | None, field: str = "msgId") -> dict[str, Any]:
    """The checked JSON of a write: same origin, token, confirmation naming ``target`` (None: the
    body's ``field``); and writes allowed on this cluster."""
    c = request.app[_CONSOLE]
    try:
        body = await request.json() if request.content_type == "application/json" else None
    except ValueError:
        body = None
    want = target if target is not None else str(body.get(field) or "") if isinstance(body, dict) else ""
    c.guard.check_write(request.headers, request.content_type, body, want)
    assert isinstance(body, dict)
    if c.settings.credentials is None and await views.acl_enabled(c.admin):
        raise Refusal(403, "this cluster has ACL: start the console with --access-key and --secret-key "
                           "of an admin account to write")
    return body


async def resend(request: web.Request) -> web.StreamResponse:
    """DLQ resend, as rocketmq-dashboard's: CONSUME_MESSAGE_DIRECTLY of the dead letter to one
    connected client of the group, which consumes it at once with its listener."""
    c = request.app[_CONSOLE]
    name = request.match_info["group"]
    body = await _write_body(request, None)
    msg_id, client = str(body.get("msgId") or ""), str(body.get("clientId") or "")
    if not msg_id or not client:
        raise Refusal(400, "a resend names msgId and clientId")
    addr = views._store_addr(msg_id)
    if addr is None or addr not in await views.broker_addrs(c.admin):
        raise Refusal(400, f"{msg_id} is not an offset message id of this cluster")
    log.warning("console: resend %s of %%DLQ%%%s to %s", msg_id, name, client)
    return _json(await c.admin.consume_message_directly(msg_id, name, client))


async def reset_offset(request: web.Request) -> web.StreamResponse:
    """resetOffsetByTime from the group page: every queue of the topic to the first message
    stored at or after ``timestamp`` (ms; -1 = the end)."""
    c = request.app[_CONSOLE]
    name = request.match_info["group"]
    body = await _write_body(request, name)
    topic_name = str(body.get("topic") or "")
    try:
        ts = int(body.get("timestamp"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise Refusal(400, "timestamp: ms since the epoch, or -1 for the end") from None
    if not topic_name:
        raise Refusal(400, "a reset names its topic")
    log.warning("console: reset offsets of %s on %s to %d", name, topic_name, ts)
    table = await c.admin.reset_offset_by_time(name, topic_name, ts)
    return _json({"group": name, "topic": topic_name, "offsets": [
        {"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off} for mq, off in table]})


def _int(body: dict[str, Any], key: str, default: int) -> int:
    v = body.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise Refusal(400, f"{key}: a whole number")
    return v


async def _where(c: _Console, body: dict[str, Any]) -> dict[str, str | None]:
    """The brokers a write goes to: a cluster's masters, or one broker of this cluster."""
    cluster_name, addr = str(body.get("cluster") or "").strip(), str(body.get("brokerAddr") or "").strip()
    if bool(cluster_name) == bool(addr):
        raise Refusal(400, "name a cluster or a broker address (one of the two)")
    if addr and addr not in await views.broker_addrs(c.admin):
        raise Refusal(400, f"{addr} is not a broker of this cluster")
    return {"cluster": cluster_name or None, "broker_addr": addr or None}


async def update_topic(request: web.Request) -> web.StreamResponse:
    """updateTopic from the topics page: create or change a topic on a cluster's masters or one
    broker; the broker's refusal (a reserved or malformed name, too many queues) comes back as is."""
    c = request.app[_CONSOLE]
    body = await _write_body(request, None, "topic")
    name = str(body["topic"])
    perm = _int(body, "perm", 6)
    if perm not in (2, 4, 6):
        raise Refusal(400, "perm: 2 (write), 4 (read) or 6 (read and write)")
    where = await _where(c, body)
    log.warning("console: update topic %s on %s", name, where)
    addrs = await c.admin.update_topic(name, read_queue_nums=_int(body, "readQueueNums", 8),
                                       write_queue_nums=_int(body, "writeQueueNums", 8), perm=perm,
                                       order=body.get("order") is True, **where)
    return _json({"topic": name, "brokers": addrs})


async def delete_topic(request: web.Request) -> web.StreamResponse:
    """deleteTopic: off every master of the cluster, then off the NameServer."""
    c = request.app[_CONSOLE]
    name = request.match_info["topic"]
    body = await _write_body(request, name)
    cluster_name = str(body.get("cluster") or "").strip()
    if not cluster_name:
        raise Refusal(400, "a delete names the cluster")
    log.warning("console: delete topic %s from %s", name, cluster_name)
    return _json({"topic": name, "brokers": await c.admin.delete_topic(name, cluster_name)})


#: SubscriptionGroupConfig's JSON names (what a group write may set).
_GROUP_FIELDS = frozenset(SubscriptionGroupConfig("-").to_obj())


async def update_group(request: web.Request) -> web.StreamResponse:
    """updateSubGroup from the groups page: the group's settings (4.9.8's defaults for the ones
    not given) to a cluster's masters or one broker."""
    c = request.app[_CONSOLE]
    body = await _write_body(request, None, "groupName")
    # the settings the page sends, by SubscriptionGroupConfig's JSON names; its checks refuse bad types
    config = SubscriptionGroupConfig.from_obj({k: v for k, v in body.items() if k in _GROUP_FIELDS})
    where = await _where(c, body)
    log.warning("console: update group %s on %s", config.group_name, where)
    addrs = await c.admin.update_sub_group(config, **where)
    return _json({"group": config.to_obj(), "brokers": addrs})


async def delete_group(request: web.Request) -> web.StreamResponse:
    """deleteSubGroup: the group's subscription config (and its offsets with ``removeOffset``)."""
    c = request.app[_CONSOLE]
    name = request.match_info["group"]
    body = await _write_body(request, name)
    where = await _where(c, body)
    log.warning("console: delete group %s on %s", name, where)
    addrs = await c.admin.delete_sub_group(name, remove_offset=body.get("removeOffset") is True, **where)
    return _json({"group": name, "brokers": addrs})


# ------------------------------------------------------------------ the app

def create_app(settings: ConsoleSettings, guard: Guard | None = None) -> web.Application:
    """The console as an aiohttp application (its Admin and sampler live as long as it runs)."""
    app = web.Application(middlewares=[_guarded], client_max_size=64 * 1024)
    console = _Console(settings, guard or Guard(settings.host, settings.port))
    app[_CONSOLE] = console

    async def lifetime(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.get_running_loop().create_task(console.sampler())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await console.admin.close()

    app.cleanup_ctx.append(lifetime)
    r = app.router
    r.add_get("/", index)
    r.add_get("/static/{name}", static)
    r.add_get("/api/session", session)
    r.add_get("/api/cluster", cluster)
    r.add_get("/api/topics", topics)
    r.add_get("/api/topics/{topic}", topic)
    r.add_get("/api/groups", groups)
    r.add_get("/api/groups/{group}", group)
    r.add_get("/api/message", message)
    r.add_get("/api/dlq/{group}", dlq)
    r.add_get("/api/brokers/{addr}/config", broker_config)
    r.add_post("/api/dlq/{group}/resend", resend)
    r.add_post("/api/groups/{group}/reset-offset", reset_offset)
    r.add_get("/api/messages", messages)
    r.add_get("/api/producers", producers)
    r.add_post("/api/topics", update_topic)
    r.add_delete("/api/topics/{topic}", delete_topic)
    r.add_post("/api/groups", update_group)
    r.add_delete("/api/groups/{group}", delete_group)
    return app


async def serve(settings: ConsoleSettings, *, ready: Callable[[str], None] | None = None) -> None:
    """Run the console until cancelled; ``ready`` gets its URL once it listens."""
    app = create_app(settings)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        url = f"http://{host}:{settings.port}/"
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(signal.SIGTERM, stop.set)
        if ready is not None:
            ready(url)
        await stop.wait()
    finally:
        await runner.cleanup()
