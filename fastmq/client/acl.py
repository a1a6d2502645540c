"""Client credentials for a cluster with ACL on (RocketMQ's AclClientRPCHook and SessionCredentials).

Every request the client sends carries ``AccessKey`` (and ``SecurityToken`` when there is one)
and a ``Signature``: HMAC-SHA1 under the secret key, base64, of the values of every other header
field in key order, then the body. A 4.9 broker or NameServer with ``aclEnable=true`` recomputes
it from what arrived (PlainAccessValidator) and refuses a request whose signature or permissions
do not match.

The client API (fastmq/client/api.py) gives this hook every request the client makes. The
producer's first try encodes its frames in advance, with no request for a hook to see: when this
hook is the client's only one, the frame writer signs them itself with the hook's
:class:`RequestSigner` (the same fields, byte for byte); with any other hook every send takes the
API's ``send_message``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..common.acl_signer import ACCESS_KEY, SECRET_KEY, SECURITY_TOKEN, SIGNATURE, signature
from ..remoting.request_signer import RequestSigner
from ..protocol.command import RemotingCommand

__all__ = ["SessionCredentials", "AclClientRPCHook", "signature", "ACCESS_KEY", "SECRET_KEY", "SIGNATURE",
           "SECURITY_TOKEN"]


@dataclass(frozen=True)
class SessionCredentials:
    """An access key and its secret (and a security token for temporary credentials)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("ACL credentials need both an access key and a secret key")

    def __repr__(self) -> str:  # never print the secret
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key=***)"


class AclClientRPCHook:
    """The request hook that signs: an :class:`fastmq.client.api.RPCHook`, and a plain callable
    of the request for :class:`fastmq.remoting.RemotingClient`'s ``rpc_hook``."""

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials
        #: signs each request; the producer's frame writer signs its frames with it too
        self.signer = RequestSigner(credentials.access_key, credentials.secret_key, credentials.security_token)

    def before_request(self, addr: str | None, request: RemotingCommand) -> None:
        self(request)

    def after_response(self, addr: str | None, request: RemotingCommand, response: RemotingCommand) -> None:
        pass  # an answer carries nothing to check (the Java hook does nothing here either)

    def __call__(self, request: RemotingCommand) -> None:
        self.signer(request)
