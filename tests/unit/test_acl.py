"""Client ACL (RocketMQ's AclClientRPCHook): the signature, checked against frames the official C++
client signed, and every request of a producer and a consumer carrying a signature that verifies.
Against a 4.9.8 broker with ``aclEnable=true`` see tests/interop/test_java_rocketmq.py (opt-in)."""
from __future__ import annotations

import asyncio

import pytest

from fastmq.aio import Message, Producer
from fastmq.client.acl import AclClientRPCHook, SessionCredentials, signature
from fastmq.client.api import ClientAPI
from fastmq.client.instance import ClientConfig
from fastmq.protocol.codes import RequestCode
from fastmq.protocol.command import create_request
from fastmq.remoting import RemotingClient
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


class _LoggingHook(AclClientRPCHook):
    """Signs, and may do more: the frame writer cannot do its work."""


def test_only_the_plain_signer_signs_frames() -> None:
    """The first try writes frames (signed) with no hook or the plain ACL hook alone; any other
    hook, beside it or in its place, sends every request through the API's general path."""
    plain = AclClientRPCHook(CREDS)
    for hooks, signer in (((), None), ((plain,), plain.signer), ((plain, plain), None),
                          ((_LoggingHook(CREDS),), None)):
        api = ClientAPI(RemotingClient(), 3.0, hooks)
        assert api.frame_signer is signer
        assert api.writes_frames is (not hooks or signer is not None)
        assert (api.connection_for_frames == api.remoting.open_connection) is api.writes_frames


async def test_every_request_is_signed(cluster) -> None:  # noqa: F811
    """A producer with credentials: its first try signs the frames it writes (the signer is the
    client's only hook), and everything it sends, sends of every style included, carries the
    access key and a signature that verifies under the secret."""
    addr, (b0, b1), _ = cluster
    async with Producer("PG_ACL", client_config=ClientConfig(namesrv_addr=addr, credentials=CREDS)) as p:
        assert p._fast.running and p._fast.writer.signer is p.instance.api.frame_signer is not None
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
