"""The two ACL check twins agree with each other and with the signer the client uses (Hypothesis):
random header fields, keys, bodies and permission tables, signed right, signed wrong or tampered."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._ext import acl_check_py
from fastmq._ext.codec import RemotingCommand
from fastmq.common.acl_signer import SIGNATURE, UNIQUE_MSG_QUERY_FLAG, cal_signature, combine_content
from fastmq.remoting.acl import PlainPermissionManager

acl_check_c = pytest.importorskip("fastmq._ext.acl_check_c", reason="the compiled twin is not built")
pytestmark = pytest.mark.c_ext

KEYS = ["a", "b", "c", "topic", "consumerGroup", "AccessKey", "Signature", "_UNIQUE_KEY_QUERY", "B", "é", "zz", "k"]
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
fields_st = st.dictionaries(st.sampled_from(KEYS), TEXT, max_size=len(KEYS))
secrets = st.binary(min_size=0, max_size=100)  # past 64 bytes HMAC hashes the key first
bodies = st.one_of(st.none(), st.binary(max_size=300))


def _reference(fields: dict[str, str], body: bytes | None, secret: bytes, broker_side: bool) -> str:
    """What the client's signer computes (``fastmq.common.acl_signer``), for a secret of any bytes."""
    skip = (SIGNATURE, UNIQUE_MSG_QUERY_FLAG) if broker_side else (SIGNATURE,)
    return base64.b64encode(hmac.new(secret, combine_content(fields, body, skip), hashlib.sha1).digest()).decode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields_st, bodies, secrets, st.booleans())
def test_both_twins_sign_as_the_client_signer(fields, body, secret, broker_side) -> None:
    want = _reference(fields, body, secret, broker_side)
    for mod in (acl_check_c, acl_check_py):
        key = mod.HmacKey(secret)
        assert key.sign(fields, body, broker_side) == want
        assert key.sign(dict(fields), memoryview(body) if body is not None else None, broker_side) == want
    if not broker_side and secret.isascii():
        assert cal_signature(combine_content(fields, body), secret.decode()) == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields_st, bodies, secrets, st.sampled_from(["right", "wrong", "absent", "odd"]))
def test_both_twins_check_a_signature_alike(fields, body, secret, how) -> None:
    fields = dict(fields)
    if how == "right":
        fields[SIGNATURE] = _reference(fields, body, secret, True)
    elif how == "wrong":
        fields[SIGNATURE] = _reference(fields, (body or b"") + b"!", secret, True)
    elif how == "absent":
        fields.pop(SIGNATURE, None)
    got = {mod.__name__: mod.signed(mod.HmacKey(secret), fields, body) for mod in (acl_check_c, acl_check_py)}
    assert len(set(got.values())) == 1, got
    if how == "right":
        assert all(got.values())
    elif how in ("wrong", "absent"):
        assert not any(got.values())


PERMS = st.sampled_from([1, 2, 4, 8, 12, 0])
TOPICS = st.sampled_from(["T1", "T2", "%RETRY%G1", "RMQ_SYS_TRACE_TOPIC"])


@st.composite
def scenario(draw):
    accounts: dict[str, tuple] = {}
    secrets_of = {}
    for ak in ("UserOne1", "UserTwo2"):
        secret = draw(st.binary(min_size=7, max_size=20))
        perms = draw(st.one_of(st.none(), st.dictionaries(st.sampled_from(["T1", "T2", "%RETRY%G1", "%RETRY%G2"]),
                                                          PERMS, max_size=3)))
        white = draw(st.sampled_from([None, lambda ip: ip == "10.0.0.1", lambda ip: False]))
        accounts[ak] = (None, white, draw(st.booleans()), draw(PERMS), draw(PERMS), perms)
        secrets_of[ak] = secret
    reqs = []
    for _ in range(draw(st.integers(1, 6))):
        code = draw(st.sampled_from([310, 320, 11, 10]))
        ak = draw(st.sampled_from(["UserOne1", "UserTwo2", "Nobody99", None]))
        if code == 11:
            fields = {"topic": draw(TOPICS), "consumerGroup": draw(st.sampled_from(["G1", "G2"])), "queueId": "0"}
        else:
            fields = {"a": "PG", "b": draw(TOPICS), "c": "TBW102"}
        if draw(st.booleans()):
            fields.pop(draw(st.sampled_from(sorted(fields))))
        if ak is not None:
            fields["AccessKey"] = ak
        body = draw(bodies)
        how = draw(st.sampled_from(["right", "right", "wrong", "none"]))
        if how != "none":
            secret = secrets_of.get(ak or "", b"unknown-secret")
            fields[SIGNATURE] = _reference(fields, body if how == "right" else b"tampered", secret, True)
        reqs.append(RemotingCommand(code, ext_fields=fields, body=body))
    ip = draw(st.sampled_from(["127.0.0.1", "10.0.0.1"]))
    return accounts, secrets_of, reqs, ip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_both_twins_pass_the_same_requests(s) -> None:
    accounts, secrets_of, reqs, ip = s
    got = []
    for mod in (acl_check_c, acl_check_py):
        table = {ak: (mod.HmacKey(secrets_of[ak]),) + acc[1:] for ak, acc in accounts.items()}
        got.append([mod.fast_pass(reqs, start, ip, table) for start in range(len(reqs) + 1)])
    assert got[0] == got[1]


def test_remembered_key_orders_stay_right_as_field_sets_alternate() -> None:
    """More field sets than the compiled twin remembers, in turn and reordered (each hit moves its
    order to the front): every signature still agrees with the reference."""
    base = {k: f"v{i}" for i, k in enumerate(["a", "b", "c", "d", "AccessKey", "_UNIQUE_KEY_QUERY"])}
    sets = []
    for n in range(12):
        keys = sorted(base, key=lambda k: hash((k, n)))[: 3 + n % 4] + [f"x{n}"]
        sets.append({k: base.get(k, "extra") for k in keys})
    key = acl_check_c.HmacKey(b"SecretKey9")
    for turn in range(3):
        for fields in sets[:: 1 if turn % 2 == 0 else -1] + sets[:3]:
            for broker_side in (True, False):
                assert key.sign(fields, b"body", broker_side) == _reference(fields, b"body", b"SecretKey9", broker_side)


def _gate_class(mod):
    class Recording(mod.Gate):
        """A gate whose general check only records where the fast pass stopped."""

        def __init__(self, manager, handler) -> None:
            super().__init__(manager, handler)
            self.seen: list = []
            self.normalised: list = []

        def peer_ip(self, remote_addr):
            self.normalised.append(remote_addr)
            return remote_addr.rpartition(":")[0]

        def general(self, conn, requests, start, ip):
            self.seen.append(("general", start, ip, len(requests)))
    return Recording


def _manager(mod, fast, white):
    """A manager of ``mod``'s Rules whose white_listed is the real manager's own (it reads only
    global_white)."""
    class Manager(mod.Rules):
        white_listed = PlainPermissionManager.white_listed
    m = Manager()
    m.fast, m.global_white = fast, white
    return m


class _Conn:
    def __init__(self, addr: str) -> None:
        self.remote_addr = addr


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario(), st.sampled_from([[], [lambda ip: False], [lambda ip: ip == "10.0.0.1"]]))
def test_both_gates_hand_a_read_on_alike(s, white) -> None:
    """The per-read gate: a globally white peer goes straight to the handler; else the fast pass
    decides, the whole read to the handler or the rest to ``general`` from the same index."""
    accounts, secrets_of, reqs, ip = s
    got = []
    for mod in (acl_check_c, acl_check_py):
        table = {ak: (mod.HmacKey(secrets_of[ak]),) + acc[1:] for ak, acc in accounts.items()}
        handed: list = []
        gate = _gate_class(mod)(_manager(mod, table, white), lambda conn, r: handed.append(("handler", len(r))))
        for _ in range(2):  # the second read finds the peer's IP remembered
            gate(_Conn(f"{ip}:4000"), reqs)
        assert gate.normalised == [f"{ip}:4000"]
        got.append((handed, gate.seen))
    assert got[0] == got[1]
    handed, seen = got[0]
    white_listed = any(m(ip) for m in white)
    want = len(reqs) if white_listed else acl_check_py.fast_pass(reqs, 0, ip, {
        ak: (acl_check_py.HmacKey(secrets_of[ak]),) + acc[1:] for ak, acc in accounts.items()})
    if want == len(reqs):
        assert handed == [("handler", len(reqs))] * 2 and seen == []
    else:
        assert handed == [] and seen == [("general", want, ip, len(reqs))] * 2


@pytest.mark.parametrize("mod", [acl_check_c, acl_check_py], ids=["c", "py"])
def test_a_gate_needs_its_subclass(mod) -> None:
    gate = mod.Gate(_manager(mod, {}, []), lambda conn, r: None)
    with pytest.raises(NotImplementedError):
        gate(_Conn("127.0.0.1:1"), [])
