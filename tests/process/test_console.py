"""``fastmq-admin console`` in a real browser: one cluster, the console as a user starts it, and
Debian's headless Chromium driven over the DevTools protocol through every page, checking what
the page's JavaScript rendered: brokers, topics, groups with their lag chart, a message and its
trace, the DLQ with a resend, the broker's configuration; a reset of offsets confirmed by typing
the group's name. A message whose body, key and property hold markup shows as text and runs
nothing. The JSON API refuses a foreign Host, writes without the page's token, from another
origin or without the confirmation.

Screenshots of each page go to ``$FASTMQ_CONSOLE_SCREENSHOTS`` when set (docs/console/ is made
so), else to a temporary folder.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from fastmq.blocking import Admin, Producer, PushConsumer
from fastmq.client.producer import Producer as AsyncProducer
from fastmq.client.push_consumer import ConsumeStatus
from fastmq.protocol.message import Message
from fastmq.testing import EmbeddedCluster, free_port

from .browser import Browser, find_chromium

pytest.importorskip("aiohttp", reason="the console needs aiohttp (the test extra installs it)")

ROOT = Path(__file__).resolve().parents[2]
TOPIC, DLQ_TOPIC = "ConsoleTopic", "ConsoleDlqTopic"
LAG_GROUP, DLQ_GROUP = "ConsoleLagGroup", "ConsoleDlqGroup"
EVIL = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
EVIL_KEY = "<b>k1</b><img/src=y/onerror=window.__pwned=3>"  # KEYS splits at spaces: one key, no space
LAGGING = 3
CHROMIUM, NO_CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)


class Console:
    """The cluster, the console process and what the tests sent."""

    def __init__(self, cluster: EmbeddedCluster, url: str, proc: subprocess.Popen[str]) -> None:
        self.cluster, self.url, self.proc = cluster, url, proc
        self.evil_id = ""
        self.resent: list[str] = []
        self.accept = threading.Event()


def _until(fn: Any, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / 0.1) + 1):
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    raise AssertionError(f"not in {seconds} s: {what}")


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with EmbeddedCluster(tmp_path_factory.mktemp("console"), broker_conf={"traceTopicEnable": "true"}) as cluster:
        ns = cluster.namesrv_addr
        with Admin(ns) as admin:
            for t in (TOPIC, DLQ_TOPIC):
                admin.update_topic(t, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
            _until(lambda: {TOPIC, DLQ_TOPIC} <= set(admin.topic_list()), 20, "the topics routed")
        port = free_port()
        log = cluster.workdir / "console.log"  # a file, not a pipe: a full pipe would stall the console
        with open(log, "w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "fastmq.admin_cli", "console", "-n", ns, "--port",
                                     str(port), "--refresh", "0.5", "--sample", "0.5"], cwd=ROOT, text=True,
                                    stdout=subprocess.PIPE, stderr=err, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # the console says where it listens once it does
            assert line.startswith("fastmq console on http://127.0.0.1:"), (line, log.read_text())
            c = Console(cluster, f"http://127.0.0.1:{port}/", proc)
            _fill(c)
            yield c
        finally:
            proc.terminate()
            try:
                assert proc.wait(15) == 0, log.read_text()[-3000:]  # SIGTERM: a clean stop
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise
            finally:
                assert proc.stdout is not None
                proc.stdout.close()


def _fill(c: Console) -> None:
    """Traced messages (one full of markup), a group behind by LAGGING, a group with dead letters
    whose client stays online."""
    ns = c.cluster.namesrv_addr
    with Producer("ConsolePG", namesrv_addr=ns, enable_trace=True) as p:
        for i in range(4):
            p.send(Message(TOPIC, b"order %d" % i, properties={"KEYS": f"order-{i}", "TAGS": "tA"}))
        c.evil_id = p.send(Message(TOPIC, EVIL.encode(), properties={"KEYS": EVIL_KEY, "note": EVIL})).msg_id
    seen: list[bytes] = []
    lag = PushConsumer(LAG_GROUP, namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    lag.subscribe(TOPIC, "*")
    lag.register_message_listener(lambda msgs: seen.extend(bytes(m.body) for m in msgs) or ConsumeStatus.CONSUME_SUCCESS)
    lag.start()
    try:
        _until(lambda: len(seen) >= 5, 30, "the lag group consumed the topic")
    finally:
        lag.shutdown()  # commits its offsets: the group is offline from here
    with Producer("ConsolePG2", namesrv_addr=ns) as p:
        for i in range(LAGGING):
            p.send(Message(TOPIC, b"late %d" % i))

    def dlq_listener(msgs: list[Any]) -> str:
        if c.accept.is_set():
            c.resent.extend(m.msg_id for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS
        return ConsumeStatus.RECONSUME_LATER
    dead = PushConsumer(DLQ_GROUP, namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                        max_reconsume_times=0)
    dead.subscribe(DLQ_TOPIC, "*")
    dead.register_message_listener(dlq_listener)
    dead.start()
    c.dlq_consumer = dead  # type: ignore[attr-defined]
    with Producer("ConsolePG3", namesrv_addr=ns) as p:
        p.send(Message(DLQ_TOPIC, b"dead letter one", properties={"KEYS": "dead-1"}))
        p.send(Message(DLQ_TOPIC, EVIL.encode(), properties={"KEYS": "dead-2"}))
    with Admin(ns) as admin:
        _until(lambda: len(admin.dlq_messages(DLQ_GROUP)) >= 2, 30, "two dead letters")
    c.accept.set()


@pytest.fixture(scope="module", autouse=True)
def _stop_dlq_consumer(console: Console) -> Iterator[None]:
    yield
    console.dlq_consumer.shutdown()  # type: ignore[attr-defined]


def _shots() -> Path:
    return Path(os.environ.get("FASTMQ_CONSOLE_SCREENSHOTS") or Path(os.environ.get("TMPDIR", "/tmp")) / "fastmq-console")


def _http(url: str, *, data: Any = None, headers: dict[str, str] | None = None,
          method: str | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(),
                                 headers={"Content-Type": "application/json", **(headers or {})},
                                 method=method or ("GET" if data is None else "POST"))
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


# ------------------------------------------------------------------ the API's guards (no browser)

def test_api_refuses_foreign_hosts_and_unconfirmed_writes(console: Console) -> None:
    status, s = _http(console.url + "api/session")
    assert status == 200 and s["writes"] and not s["acl"] and len(s["token"]) >= 32
    status, body = _http(console.url + "api/topics", headers={"Host": "attacker.example:80"})
    assert status == 421 and "answers only" in body["error"]
    url = console.url + f"api/groups/{LAG_GROUP}/reset-offset"
    write = {"topic": TOPIC, "timestamp": -1, "confirm": LAG_GROUP}
    assert _http(url, data=write)[0] == 403  # no token
    origin = {"X-Fastmq-Token": s["token"], "Origin": "http://attacker.example"}
    assert _http(url, data=write, headers=origin) == (403, {"error": "cross-origin write refused"})
    token = {"X-Fastmq-Token": s["token"]}
    status, body = _http(url, data={**write, "confirm": "yes"}, headers=token)
    assert status == 400 and "not confirmed" in body["error"]
    status, body = _http(url, data=write, headers={"X-Fastmq-Token": "x" * 43})
    assert status == 403
    # nothing moved: the group is still behind
    assert _http(console.url + f"api/groups/{LAG_GROUP}")[1]["diffTotal"] == LAGGING
    status, body = _http(console.url + "api/brokers/10.1.2.3:10911/config")
    assert status == 404  # the console talks only to the cluster's own brokers
    status, body = _http(console.url + "api/message?id=" + "0" * 32)
    assert status == 400 and "give its topic" in body["error"]
    status, body = _http(console.url + "api/topics/NoSuchConsoleTopic")
    assert status == 404
    # the dead letters' topic is readable and writable (perm 6), as 4.9.8 makes it
    status, body = _http(console.url + f"api/topics/%25DLQ%25{DLQ_GROUP}")
    assert status == 200 and [q["perm"] for q in body["route"]["queueDatas"]] == [6] and body["kind"] == "dlq"
    # every answer carries the page's policy: only its own scripts run
    with urllib.request.urlopen(console.url, timeout=15) as r:
        assert "script-src 'self'" in r.headers["Content-Security-Policy"] and r.headers["X-Frame-Options"] == "DENY"


# ------------------------------------------------------------------ the pages in Chromium

async def _open(b: Browser, url: str, page: str) -> None:
    """Go to ``url`` and wait until its own view (not the one before it) has drawn its data."""
    await b.goto(url)
    route = json.dumps("#" + url.split("#", 1)[1])
    await b.wait(f"(p => p && p.getAttribute('data-page') === '{page}' && p.hasAttribute('data-loaded')"
                 f" && decodeURIComponent(p.getAttribute('data-route')) === {route})(document.querySelector('.page'))")


@needs_chromium
async def test_cluster_topics_and_config_pages(console: Console) -> None:
    assert CHROMIUM is not None
    broker = console.cluster.broker_addr
    async with Browser(CHROMIUM) as b:
        await _open(b, console.url + "#/cluster", "cluster")
        text = await b.text("table.brokers")
        assert broker in text and "broker-a" in text and "up" in text and "V4_9_8" in text
        assert await b.text("#brokers-up") == "1 / 1"
        assert "%" in text  # the disk column
        await b.screenshot(_shots() / "cluster.png")

        await _open(b, console.url + "#/topics", "topics")
        await b.wait(f"document.querySelector('table.topics').innerText.includes('{TOPIC}')")
        assert "TBW102" not in await b.text("table.topics")  # system topics are filtered out by default
        await b.screenshot(_shots() / "topics.png")
        await b.click(f"table.topics a[href='#/topic/{TOPIC}']")
        await b.wait("document.querySelector('.page[data-page=topic][data-loaded]')")
        await b.wait("document.querySelectorAll('table.queues tbody tr').length === 2")
        assert "broker-a" in await b.text("table.route")
        cards = await b.text(".cards")
        assert str(5 + LAGGING) in cards  # messages stored over both queues
        await b.screenshot(_shots() / "topic.png")

        await _open(b, console.url + "#/config", "config")
        await b.wait("document.querySelectorAll('table.config tbody tr').length > 20")
        await b.type("input[type=search]", "brokerName")
        assert "broker-a" in await b.text("table.config")
        await b.type("input[type=search]", "Dis")  # (a page of keys for the screenshot, not all of them)
        assert "diskMaxUsedSpaceRatio" in await b.text("table.config")
        await b.screenshot(_shots() / "config.png")
        assert b.console_errors == []


@needs_chromium
async def test_groups_lag_chart_and_reset_offset(console: Console) -> None:
    assert CHROMIUM is not None
    async with Browser(CHROMIUM) as b:
        await _open(b, console.url + "#/groups", "groups")
        await b.wait(f"document.querySelector('table.groups').innerText.includes('{LAG_GROUP}')")
        row = await b.eval(f"Array.from(document.querySelectorAll('table.groups tr'))"
                           f".map(r => r.innerText).find(t => t.includes('{LAG_GROUP}'))")
        assert "offline" in row and str(LAGGING) in row
        await b.screenshot(_shots() / "groups.png")

        await _open(b, console.url + f"#/group/{DLQ_GROUP}", "group")
        await b.wait("document.querySelectorAll('table.clients tbody tr td').length >= 4")  # its client online
        assert DLQ_TOPIC in await b.text("table.subscriptions")

        await _open(b, console.url + f"#/group/{LAG_GROUP}", "group")
        assert await b.text("#lag-total") == str(LAGGING)
        # the chart, drawn from the samples the console keeps (one each half second here)
        await b.wait("Number((document.querySelector('#lag-chart svg') || {getAttribute: () => 0})"
                     ".getAttribute('data-points')) >= 3", 20)
        assert await b.eval("document.querySelectorAll('#lag-chart svg path.line').length") == 1
        await b.screenshot(_shots() / "group.png")

        # reset to the end: the confirmation needs the group's name typed
        await b.eval(f"document.querySelector('select.reset-topic').value = '{TOPIC}'")
        await b.click("button.reset-open")
        await b.wait("document.querySelector('.confirm-go')")
        assert await b.eval("document.querySelector('.confirm-go').disabled") is True
        await b.type(".confirm-input", LAG_GROUP[:-1])
        assert await b.eval("document.querySelector('.confirm-go').disabled") is True
        await b.type(".confirm-input", LAG_GROUP)
        await b.screenshot(_shots() / "reset-offset.png")
        await b.click(".confirm-go")
        await b.wait("document.querySelector('.confirm .result pre')")
        assert '"offsets"' in await b.text(".confirm .result pre")
        await b.wait("document.querySelector('#lag-total').innerText === '0'", 15)
        assert b.console_errors == []


@needs_chromium
async def test_message_lookup_shows_markup_as_text_with_its_trace(console: Console) -> None:
    assert CHROMIUM is not None
    async with Browser(CHROMIUM) as b:
        await b.goto(console.url + "#/message")
        await b.wait("document.querySelector('.page[data-page=message] form')")
        await b.type("input[name=topic]", TOPIC)
        await b.type("input[name=key]", EVIL_KEY)
        # the trace is written by the producer's dispatcher a moment after the send: look again until it is in
        for _ in range(30):
            await b.eval("document.querySelector('#data').removeAttribute('data-done');"
                         "document.querySelector('form button').click()")
            await b.wait("document.querySelector('#data').getAttribute('data-done')")
            if "Pub" in await b.text("table.trace"):
                break
            await b.eval("new Promise(r => setTimeout(r, 300))")
        assert "Pub" in await b.text("table.trace") and "ConsolePG" in await b.text("table.trace")
        assert await b.eval("document.querySelector('pre.body').textContent") == EVIL
        assert EVIL_KEY in await b.text("table.fields")
        assert EVIL in await b.text("table.properties")
        # the markup stayed text: no element made from it, no handler ran
        assert await b.eval("document.querySelectorAll('#main img, #main script, #main b').length") == 0
        assert await b.eval("window.__pwned === undefined") is True
        await b.screenshot(_shots() / "message.png")

        # by the producer's message id (its UNIQ_KEY) within the topic, and by offset message id alone
        await b.type("input[name=key]", "")
        await b.type("input[name=id]", console.evil_id)
        await b.eval("document.querySelector('#data').removeAttribute('data-done');"
                     "document.querySelector('form button').click()")
        await b.wait("document.querySelector('#data').getAttribute('data-done')")
        offset_id = await b.text("code.msg-id")
        assert len(offset_id) == 32 and await b.eval("document.querySelector('pre.body').textContent") == EVIL
        await b.type("input[name=topic]", "")
        await b.type("input[name=id]", offset_id)
        await b.eval("document.querySelector('#data').removeAttribute('data-done');"
                     "document.querySelector('form button').click()")
        await b.wait("document.querySelector('#data').getAttribute('data-done')")
        assert await b.text("code.msg-id") == offset_id
        assert await b.eval("window.__pwned === undefined") is True
        assert b.console_errors == []


@needs_chromium
async def test_dlq_lists_dead_letters_and_resends_one(console: Console) -> None:
    assert CHROMIUM is not None
    async with Browser(CHROMIUM) as b:
        await _open(b, console.url + f"#/dlq/{DLQ_GROUP}", "dlq")
        await b.wait("document.querySelectorAll('table.dlq tbody tr').length === 2")
        bodies = await b.eval("Array.from(document.querySelectorAll('.dlq-body')).map(e => e.textContent)")
        assert sorted(bodies) == sorted(["dead letter one", EVIL])
        assert await b.eval("document.querySelectorAll('#main img').length") == 0
        assert DLQ_TOPIC in await b.text("table.dlq")  # the original topic (RETRY_TOPIC)
        await b.screenshot(_shots() / "dlq.png")
        msg_id = await b.eval("document.querySelector('table.dlq tbody tr code').textContent")
        await b.click("table.dlq tbody tr button.resend-open")
        await b.wait("document.querySelector('.confirm-go')")
        await b.type(".confirm-input", msg_id)
        await b.click(".confirm-go")
        await b.wait("document.querySelector('.confirm .result pre')", 20)
        assert "CR_SUCCESS" in await b.text(".confirm .result pre")
        await b.screenshot(_shots() / "dlq-resend.png")
        assert b.console_errors == []
    assert console.resent  # the group's client consumed it


MADE_TOPIC, MADE_GROUP, LIVE_PG = "ConsoleMadeTopic", "ConsoleMadeGroup", "ConsoleLivePG"


async def _confirm(b: Browser, scope: str, name: str) -> str:
    """Type ``name`` into the open confirmation under ``scope``, send it, return what it shows."""
    await b.wait(f"document.querySelector('{scope} .confirm-go')")
    await b.type(f"{scope} .confirm-input", name)
    await b.click(f"{scope} .confirm-go")
    await b.wait(f"document.querySelector('{scope} .confirm .result pre, {scope} .confirm .result .error')", 20)
    return await b.text(f"{scope} .confirm .result")


def test_api_writes_of_topics_and_groups_are_guarded(console: Console) -> None:
    token = {"X-Fastmq-Token": _http(console.url + "api/session")[1]["token"]}
    make = {"topic": MADE_TOPIC, "cluster": "DefaultCluster", "confirm": MADE_TOPIC}
    assert _http(console.url + "api/topics", data=make)[0] == 403  # no token
    status, body = _http(console.url + "api/topics", data={**make, "confirm": "x"}, headers=token)
    assert status == 400 and "not confirmed" in body["error"]
    status, body = _http(console.url + "api/topics", data={**make, "brokerAddr": "10.1.2.3:10911"}, headers=token)
    assert status == 400 and "one of the two" in body["error"]
    status, body = _http(console.url + "api/topics", data={**make, "perm": 7}, headers=token)
    assert status == 400 and "perm" in body["error"]
    group = {"groupName": MADE_GROUP, "cluster": "DefaultCluster", "retryMaxTimes": "many", "confirm": MADE_GROUP}
    status, body = _http(console.url + "api/groups", data=group, headers=token)
    assert status == 400 and "retryMaxTimes" in body["error"]
    gone = {"cluster": "DefaultCluster", "confirm": TOPIC}
    assert _http(console.url + f"api/topics/{TOPIC}", data=gone, method="DELETE")[0] == 403  # no token
    status, body = _http(console.url + f"api/groups/{LAG_GROUP}", data={**gone, "confirm": TOPIC}, headers=token,
                         method="DELETE")
    assert status == 400 and "not confirmed" in body["error"]
    topics = [t["topic"] for t in _http(console.url + "api/topics")[1]["topics"]]
    assert TOPIC in topics and MADE_TOPIC not in topics
    # the query by time is bounded, and says when the bound cut it
    status, body = _http(console.url + f"api/messages?topic={TOPIC}&begin=0&end={int(time.time() * 1000)}&max=3")
    assert status == 200 and len(body["messages"]) == 3 and body["more"] is True
    status, body = _http(console.url + f"api/messages?topic={TOPIC}&begin=10&end=5")
    assert status == 400 and "before the begin" in body["error"]


@needs_chromium
async def test_topic_and_group_writes_producers_and_query_by_time(console: Console) -> None:
    assert CHROMIUM is not None
    async with Browser(CHROMIUM) as b:
        # create a topic from the topics page; a name the broker refuses shows its refusal as text
        await _open(b, console.url + "#/topics", "topics")
        await b.wait("document.querySelector('.topic-cluster option')")
        await b.type(".topic-create .topic-name", "DefaultCluster")
        await b.click(".topic-create .topic-save")
        shown = await _confirm(b, ".topic-create", "DefaultCluster")
        assert "the topic[DefaultCluster] is conflict with system reserved words." in shown
        await b.screenshot(_shots() / "topic-refused.png")
        await b.type(".topic-create .topic-name", MADE_TOPIC)
        await b.type(".topic-create .topic-read", "3")
        await b.type(".topic-create .topic-write", "3")
        await b.click(".topic-create .topic-save")
        assert console.cluster.broker_addr in await _confirm(b, ".topic-create", MADE_TOPIC)
        await b.wait(f"document.querySelector('table.topics').innerText.includes('{MADE_TOPIC}')")
        # its page: three queues; then deleted from it
        await _open(b, console.url + f"#/topic/{MADE_TOPIC}", "topic")
        await b.wait("document.querySelectorAll('table.queues tbody tr').length === 3")
        await b.wait("document.querySelector('.topic-writes .delete-cluster option')")
        await b.click(".topic-writes .delete-open")
        assert MADE_TOPIC in await _confirm(b, ".topic-writes", MADE_TOPIC)
        await _open(b, console.url + "#/topics", "topics")
        await b.wait(f"!document.querySelector('table.topics').innerText.includes('{MADE_TOPIC}')")

        # a consumer group made with its settings, then deleted from its page
        await _open(b, console.url + "#/groups", "groups")
        await b.wait("document.querySelector('.group-cluster option')")
        await b.type(".group-create .group-name", MADE_GROUP)
        await b.type(".group-create .group-retry-max", "3")
        await b.click(".group-create .group-save")
        made = json.loads(await _confirm(b, ".group-create", MADE_GROUP))
        assert made["group"]["groupName"] == MADE_GROUP and made["group"]["retryMaxTimes"] == 3
        await b.screenshot(_shots() / "group-create.png")
        await b.goto(console.url + f"#/group/{MADE_GROUP}")
        await b.wait("document.querySelector('.page[data-page=group] .delete-cluster option')")
        await b.click(".page .delete-open")
        assert MADE_GROUP in await _confirm(b, ".page", MADE_GROUP)

        # messages by topic and time: every message of the last hour, bodies as text, each a link to its lookup
        await b.goto(console.url + "#/message")
        await b.wait("document.querySelector('.time-form')")
        await b.type("input[name=time-topic]", TOPIC)
        await b.click(".time-form button")
        await b.wait("document.querySelector('#time-data').getAttribute('data-done')", 20)
        assert await b.eval("document.querySelectorAll('table.by-time tbody tr').length") == 5 + LAGGING
        bodies = await b.eval("Array.from(document.querySelectorAll('.time-body')).map(e => e.textContent)")
        assert EVIL in bodies and "late 2" in bodies
        assert "At most 2000" in await b.text(".time-count")
        assert await b.eval("document.querySelectorAll('#main img, #main script').length") == 0
        await b.screenshot(_shots() / "message-time.png")
        await b.eval("Array.from(document.querySelectorAll('table.by-time tr')).find("
                     "r => r.innerText.includes('late 2')).querySelector('a.msg-link').click()")
        await b.wait("document.querySelector('#data pre.body') && "
                     "document.querySelector('#data pre.body').textContent === 'late 2'")
        assert await b.eval("window.__pwned === undefined") is True

        # producers of a group online on a broker of the topic
        async with AsyncProducer(LIVE_PG, namesrv_addr=console.cluster.namesrv_addr) as p:
            await p.send(Message(TOPIC, b"from a live producer"))
            await b.goto(console.url + "#/producer")
            await b.wait("document.querySelector('.page[data-page=producer] form')")
            await b.type("input[name=topic]", TOPIC)
            await b.type("input[name=group]", LIVE_PG)
            await b.click("form button")
            await b.wait("document.querySelectorAll('table.producers tbody tr td').length >= 4")
            row = await b.text("table.producers tbody")
            assert "PYTHON" in row.upper() or "JAVA" in row.upper()
            await b.screenshot(_shots() / "producer.png")
        assert b.console_errors == []
