"""Signing a request as 4.9.8's AclClientRPCHook does, with the secret's HMAC key prepared once
in the compiled :mod:`fastmq._ext.acl_check`: the client's ACL hook and the broker's own requests
(``innerClientAuthenticationCredentials``) use it. The signature's definition is
:mod:`fastmq.common.acl_signer`'s."""
from __future__ import annotations

from typing import Any

from .._ext.acl_check import HmacKey
from ..common.acl_signer import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE

__all__ = ["RequestSigner"]


class RequestSigner:
    """Signs requests as 4.9.8's AclClientRPCHook: ``AccessKey`` (and ``SecurityToken``) added,
    every value made a string, ``Signature`` computed over the rest and the body. The secret's
    HMAC key is prepared once (the compiled ``fastmq._ext.acl_check``)."""

    __slots__ = ("access_key", "security_token", "key")

    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        self.access_key = access_key
        self.security_token = security_token
        #: the secret's prepared HMAC key (the producer's frame writer signs its frames with it)
        self.key = HmacKey(secret_key.encode("utf-8"))

    def __call__(self, request: Any) -> None:
        fields = {k: str(v) for k, v in (request.ext_fields or {}).items() if k != SIGNATURE}
        fields[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            fields[SECURITY_TOKEN] = self.security_token
        fields[SIGNATURE] = self.key.sign(fields, request.body)
        request.ext_fields = fields
