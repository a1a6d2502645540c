"""Client ACL (RocketMQ's AclClientRPCHook): the signature, checked against frames the official C++
client signed, and every request of a producer and a consumer carrying a signature that verifies.
Against a 4.9.8 broker with ``aclEnable=true`` see tests/interop/test_java_rocketmq.py (opt-in)."""
from __future__ import annotations

import asyncio

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.acl import AclClientRPCHook, SessionCredentials, signature
from fastmq.client.instance import ClientConfig
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from tests.support import ext_text as _ext_text, wire_vector_records as _records

CREDS = SessionCredentials("ak-fastmq", "sk-secret")


def test_signature_matches_the_cpp_clients() -> None:
    """Its frames are signed with an empty secret: values in key order, then the body."""
    signed = [r for r in _records("client->server")
              if r["kind"] == "request" and "Signature" in (r["header"].get("extFields") or {})]
    assert len(signed) > 30
    for r in signed:
        fields = {k: _ext_text(v) for k, v in r["header"]["extFields"].items()}
        body = bytes.fromhex(r["frame_hex"])[8 + r["header_len"]:] if r["body_len"] else b""
        assert signature(fields, body, "") == fields["Signature"], r["_id"]


def test_hook_signs_what_goes_on_the_wire() -> None:
    hook = AclClientRPCHook(SessionCredentials("ak", "sk", security_token="tok"))
    req = create_request(RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "G", "e": 3}, b"body")
    req.ext_fields["Signature"] = "stale"
    hook(req)
    f = req.ext_fields
    assert (f["AccessKey"], f["SecurityToken"]) == ("ak", "tok") and all(type(v) is str for v in f.values())
    expected = signature({k: v for k, v in f.items() if k != "Signature"}, b"body", "sk")
    assert f["Signature"] == expected != "stale"
    assert signature({"a": "1"}, b"", "sk") != signature({"a": "1"}, b"x", "sk")  # the body counts
    with pytest.raises(ValueError):
        SessionCredentials("ak", "")
    assert "sk" not in repr(SessionCredentials("ak", "sk"))


async def test_every_request_is_signed(cluster) -> None:  # noqa: F811
    """A producer with credentials: its first try takes the general path (the compiled one writes
    frames with nothing left to sign), and everything it sends, sends of every style included,
    carries the access key and a signature that verifies under the secret."""
    addr, (b0, b1), _ = cluster
    async with Producer("PG_ACL", client_config=ClientConfig(namesrv_addr=addr, credentials=CREDS)) as p:
        assert not p._fast.running
        await p.send(Message("T", b"sync"))
        await asyncio.gather(*[await p.send_async(Message("T", b"async")) for _ in range(4)])
        await p.send_batch([Message("T", b"batch") for _ in range(3)])
        await p.send_oneway(Message("T", b"oneway"))
        await asyncio.sleep(0.1)
    requests = b0.requests + b1.requests
    assert len([r for r in requests if r.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)]) == 7
    for r in requests:
        f = r.ext_fields
        assert f["AccessKey"] == "ak-fastmq", r
        assert f["Signature"] == signature({k: v for k, v in f.items() if k != "Signature"}, r.body, "sk-secret")
