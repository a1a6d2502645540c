"""The broker's plain ACL rules without processes: white-address patterns, permission strings, the
resources each request code names, the check's order and answers, and reloading a file that
stops parsing (tests/process/test_acl_broker.py runs them in a broker)."""
from __future__ import annotations

import json
import os
import time

import pytest

from fastmq.broker.acl import AclError, Permission, PlainPermissionManager, address_matcher, parse_perm, resources
from fastmq.client.acl import AclClientRPCHook, SessionCredentials
from fastmq.errors import ConfigError
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request

RULES = """\
globalWhiteRemoteAddresses: [10.10.103.*]
accounts:
  - accessKey: RocketMQUser
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.0.{1,2}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=PUB, topicB=SUB, RMQ_SYS_TRACE_TOPIC=DENY]
    groupPerms: [groupA=DENY]
  - accessKey: RocketMQAdmin
    secretKey: "12345678"
    admin: true
"""
USER = SessionCredentials("RocketMQUser", "12345678")


@pytest.mark.parametrize("pattern, yes, no", [
    ("*", ["1.2.3.4", "::1"], []),
    ("", [], ["1.2.3.4"]),
    ("192.168.0.*", ["192.168.0.9"], ["192.168.1.9"]),
    ("192.168.1-10.*", ["192.168.5.1"], ["192.168.11.1"]),
    ("192.168.0.{1,2}", ["192.168.0.2"], ["192.168.0.3"]),
    ("1.2.3.4,5.6.7.8", ["5.6.7.8"], ["1.2.3.5"]),
    ("::1", ["::1"], ["127.0.0.1"]),
])
def test_address_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    m = address_matcher(pattern)
    assert all(m(ip) for ip in yes) and not any(m(ip) for ip in no)


@pytest.mark.parametrize("bad", ["300.1.1.*", "1.2.3.{1,x}", "not-an-ip", "1.2.3.4.5.*"])
def test_bad_address_patterns(bad: str) -> None:
    with pytest.raises(ValueError):
        address_matcher(bad)


def test_permission_strings_and_check() -> None:
    assert parse_perm("PUB|SUB") == parse_perm(" SUB|PUB ") == Permission.PUB | Permission.SUB
    assert parse_perm("pub") == parse_perm(None) == parse_perm("ANY") == Permission.DENY
    assert Permission.check(Permission.PUB, Permission.PUB | Permission.SUB)
    assert not Permission.check(Permission.PUB, Permission.SUB)
    assert Permission.check(Permission.ANY, Permission.SUB) and not Permission.check(Permission.ANY, Permission.DENY)


def test_resources_per_request_code() -> None:
    send = create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T"})
    assert resources(send) == {"T": Permission.PUB}
    retry = create_request(RequestCode.SEND_MESSAGE, {"group": "G", "topic": "%RETRY%G"})
    assert resources(retry) == {"%RETRY%G": Permission.SUB}
    pull = create_request(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"})
    assert resources(pull) == {"T": Permission.SUB, "%RETRY%G": Permission.SUB}
    hb = create_request(RequestCode.HEART_BEAT, {}, json.dumps({"consumerDataSet": [
        {"groupName": "G", "subscriptionDataSet": [{"topic": "T1"}, {"topic": "T2"}]}]}).encode())
    assert resources(hb) == {"%RETRY%G": 8, "T1": 8, "T2": 8}
    assert resources(create_request(RequestCode.SEND_BATCH_MESSAGE, {"b": "T"})) is None
    with pytest.raises(AclError) as e:
        resources(create_request(RequestCode.HEART_BEAT, {}, b"{not json"))
    assert "PlainAccessValidator.parse(PlainAccessValidator.java:134)" in e.value.remark


@pytest.fixture
def manager(tmp_path):
    f = tmp_path / "plain_acl.yml"
    f.write_text(RULES)
    return PlainPermissionManager(str(tmp_path), str(f)), f


def _signed(code: int, fields: dict, creds: SessionCredentials = USER, body: bytes | None = None):
    req = create_request(code, fields, body)
    AclClientRPCHook(creds)(req)
    return req


def _refusal(m: PlainPermissionManager, addr: str, req) -> str | None:
    try:
        m.validate(addr, req)
    except AclError as exc:
        return str(exc)
    return None


def test_the_order_of_the_checks(manager) -> None:
    m, _ = manager
    send = lambda topic, creds=USER: _signed(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": topic}, creds)  # noqa: E731
    here = "127.0.0.1:5555"
    assert _refusal(m, here, send("topicA")) is None
    assert _refusal(m, "10.10.103.7:1", create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {})) is None  # global white
    assert _refusal(m, here, create_request(RequestCode.SEND_MESSAGE_V2, {"b": "topicA"})) == "No accessKey is configured"
    assert _refusal(m, here, send("topicA", SessionCredentials("Nobody123", "12345678"))) == "No acl config for Nobody123"
    unsigned_own_addr = create_request(RequestCode.SEND_MESSAGE_V2, {"b": "topicB", "AccessKey": "RocketMQUser"})
    assert _refusal(m, "192.168.0.1:9", unsigned_own_addr) is None  # the account's white address
    assert _refusal(m, here, unsigned_own_addr) == "Check signature failed for accessKey=RocketMQUser"
    assert _refusal(m, here, send("topicB")) == "No default permission for topic:topicB"
    assert _refusal(m, here, send("other")) == "No default permission for topic:other"
    assert _refusal(m, here, send("RMQ_SYS_TRACE_TOPIC")) is None  # traces are never refused
    pull = _signed(RequestCode.PULL_MESSAGE, {"topic": "topicB", "consumerGroup": "groupA"})
    assert _refusal(m, here, pull) == "No default permission for group:groupA"
    admin_only = _signed(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "topicA"})
    assert _refusal(m, here, admin_only) == ("Need admin permission for request code=215, "
                                             "but accessKey=RocketMQUser is not")
    admin = SessionCredentials("RocketMQAdmin", "12345678")
    assert _refusal(m, here, _signed(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "x"}, admin)) is None
    assert _refusal(m, here, send("anything", admin)) is None  # an admin with no perms: everything
    tampered = send("topicA")
    tampered.ext_fields["b"] = "topicB"
    assert _refusal(m, here, tampered) == "Check signature failed for accessKey=RocketMQUser"


def test_a_file_that_stops_parsing_keeps_its_rules(manager) -> None:
    m, f = manager
    f.write_text("accounts: [ {broken\n")
    os.utime(f, (time.time() + 5, time.time() + 5))
    assert m.reload() is False
    assert "RocketMQUser" in m.accounts
    f.write_text(RULES.replace("RocketMQUser", "RocketMQOther"))
    os.utime(f, (time.time() + 10, time.time() + 10))
    assert m.reload() is True
    assert "RocketMQOther" in m.accounts and "RocketMQUser" not in m.accounts


def test_a_broken_file_at_start_and_no_home(tmp_path) -> None:
    f = tmp_path / "plain_acl.yml"
    f.write_text("accounts:\n  - accessKey: short\n    secretKey: x\n")
    with pytest.raises(ConfigError, match="length should longer than 6"):
        PlainPermissionManager(str(tmp_path), str(f))
    f.write_text("!!python/object/apply:os.system ['true']\n")  # safe_load builds no objects
    with pytest.raises(ConfigError):
        PlainPermissionManager(str(tmp_path), str(f))
    # aliases nesting lists 9 deep: 9^9 entries if anything expanded them into a string
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{n}: &{n} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, n in zip("abcdefgh", "bcdefghi"))
    f.write_text(bomb + "globalWhiteRemoteAddresses: [*i]\naccounts:\n  - {accessKey: *i, secretKey: *i, topicPerms: [*i]}\n")
    with pytest.raises(ConfigError, match="plain value"):
        PlainPermissionManager(str(tmp_path), str(f))
    with pytest.raises(ConfigError, match="rocketmqHome"):
        PlainPermissionManager("", "")


def test_conf_acl_directory_is_read(tmp_path) -> None:
    (tmp_path / "conf" / "acl" / "team").mkdir(parents=True)
    (tmp_path / "conf" / "acl" / "team" / "a.yaml").write_text(RULES)
    (tmp_path / "conf" / "acl" / "notes.txt").write_text("not yaml: [")
    m = PlainPermissionManager(str(tmp_path))
    assert (tmp_path / "conf" / "plain_acl.yml").exists()  # created, empty, as 4.9.8 does
    assert set(m.accounts) == {"RocketMQUser", "RocketMQAdmin"}


def _recording_gate(m):
    """An AccessGate over ``m`` whose passed requests and sent answers are recorded, and the
    connection class it is handed."""
    from fastmq.broker.acl import AccessGate

    passed: list = []
    sent: list = []

    class Conn:
        remote_addr = "127.0.0.1:4000"

        def send_many(self, cmds):
            sent.extend(cmds)

    return AccessGate(m, lambda conn, reqs: passed.extend(reqs)), Conn, passed, sent


def test_the_gate_answers_refusals_drops_oneway_and_passes_the_rest(manager) -> None:
    m, _ = manager
    gate, Conn, passed, sent = _recording_gate(m)
    good = _signed(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "topicA"})
    bad = create_request(RequestCode.SEND_MESSAGE_V2, {"b": "topicA"})
    oneway = create_request(RequestCode.SEND_MESSAGE_V2, {"b": "topicA"})
    oneway.flag |= 2
    odd = _signed(RequestCode.HEART_BEAT, {}, body=b"[1, 2]")  # JSON, but not an object
    gate(Conn(), [good, bad, oneway, odd, good])
    assert passed == [good, good]
    assert [(r.code, r.opaque) for r in sent] == [(1, bad.opaque), (1, odd.opaque)]
    assert sent[0].remark.startswith("org.apache.rocketmq.acl.common.AclException: No accessKey is configured, ")
    assert gate.refused == 3


def test_the_compiled_fast_pass_agrees_with_the_general_check(manager) -> None:
    """Sends, batch sends and pulls are passed a run at a time by the compiled check; through the
    gate, alone and all in one read, every request must get the verdict the general check gives."""
    from fastmq.broker.acl import AccessGate

    m, _ = manager
    admin = SessionCredentials("RocketMQAdmin", "12345678")
    cases = []
    for creds in (USER, admin, SessionCredentials("RocketMQUser", "wrong-secret"), SessionCredentials("Nobody123", "x")):
        for topic in ("topicA", "topicB", "other", "RMQ_SYS_TRACE_TOPIC", "%RETRY%groupA", "%RETRY%G2"):
            cases.append(_signed(RequestCode.SEND_MESSAGE_V2, {"a": "G2", "b": topic}, creds, b"body"))
            cases.append(_signed(RequestCode.PULL_MESSAGE, {"topic": topic, "consumerGroup": "G2"}, creds))
            cases.append(_signed(RequestCode.PULL_MESSAGE, {"topic": topic, "consumerGroup": "groupA"}, creds))
        cases.append(_signed(RequestCode.SEND_BATCH_MESSAGE, {"b": "other"}, creds, b"batch"))
    tampered = _signed(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "topicA"}, USER, b"body")
    tampered.body = b"other"
    unique = _signed(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "topicA"}, USER, b"body")
    unique.ext_fields["_UNIQUE_KEY_QUERY"] = "true"  # the broker leaves it out of what it checks
    unhashable = _signed(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "topicA"}, USER, b"body")
    unhashable.ext_fields["k"] = "\udc80"  # cannot be UTF-8: the gate refuses what it cannot check
    cases += [tampered, unique, unhashable,
              create_request(RequestCode.SEND_MESSAGE_V2, {"b": "topicA", "AccessKey": "RocketMQUser"})]

    def verdict(addr: str, r) -> str | None:
        try:
            return _refusal(m, addr, r)
        except UnicodeEncodeError as exc:
            return str(exc)
    for addr in ("127.0.0.1:1", "192.168.0.2:1", "10.10.103.1:1"):
        general = [verdict(addr, r) for r in cases]
        passed: list = []
        sent: list = []

        class Conn:
            remote_addr = addr

            def send_many(self, cmds):
                sent.extend(cmds)

        gate = AccessGate(m, lambda conn, reqs: passed.extend(reqs))
        for r in cases:
            gate(Conn(), [r])
        alone = [r for r in passed]
        passed.clear()
        gate(Conn(), cases)
        assert alone == passed == [r for r, g in zip(cases, general) if g is None], addr
        assert len(sent) == 2 * sum(g is not None for g in general)
    assert _refusal(m, "127.0.0.1:1", cases[0]) is None
    assert _refusal(m, "127.0.0.1:1", unique) is None
    assert "Check signature failed" in _refusal(m, "127.0.0.1:1", tampered)


def test_a_permission_change_takes_effect_at_the_next_read_after_a_reload(tmp_path) -> None:
    """The compiled fast pass remembers lately allowed (account, topic, group, code) by identity;
    a reload replaces the accounts table, so the same request objects read after a permission
    change get the new answer (sends, pulls and batch sends; an account's removal too)."""
    rules = """\
accounts:
  - accessKey: PlainUser9
    secretKey: "12345678"
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [topicA={topic}]
    groupPerms: [groupA={group}]
"""
    f = tmp_path / "plain_acl.yml"
    f.write_text(rules.format(topic="PUB|SUB", group="SUB"))
    m = PlainPermissionManager(str(tmp_path), str(f))
    creds = SessionCredentials("PlainUser9", "12345678")
    gate, Conn, passed, sent = _recording_gate(m)
    send = _signed(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "topicA"}, creds)
    pull = _signed(RequestCode.PULL_MESSAGE, {"consumerGroup": "groupA", "topic": "topicA", "queueId": "0"}, creds)
    batch = _signed(RequestCode.SEND_BATCH_MESSAGE, {"a": "PG", "b": "topicA"}, creds, body=b"")

    def verdicts() -> list[bool]:
        out = []
        for req in (send, pull, batch):
            passed.clear()
            sent.clear()
            for _ in range(3):  # the later reads find the answer remembered
                gate(Conn(), [req])
            assert len(passed) + len(sent) == 3
            out.append(len(passed) == 3)
        return out

    def change(text: str) -> None:
        f.write_text(text)
        os.utime(f, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new stamp even within one tick
        assert m.reload() is True

    assert verdicts() == [True, True, True]
    change(rules.format(topic="SUB", group="SUB"))
    assert verdicts() == [False, True, True]
    change(rules.format(topic="PUB|SUB", group="DENY"))
    assert verdicts() == [True, False, True]
    change(rules.format(topic="PUB|SUB", group="SUB"))
    assert verdicts() == [True, True, True]
    change("accounts: []\n")
    assert verdicts() == [False, False, False]
    assert "No acl config for PlainUser9" in sent[0].remark
