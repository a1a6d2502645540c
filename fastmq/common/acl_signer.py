"""RocketMQ's ACL signature (AclSigner, AclUtils.combineRequestContent): shared by the client,
which signs, and the broker, which checks. The compiled signer a client's hook uses is
:class:`fastmq.remoting.request_signer.RequestSigner`.

The content signed is the values of a request's header fields in key order (``Signature`` left
out), UTF-8, then the raw body; the signature is base64 of HMAC-SHA1 under the secret key.
"""
from __future__ import annotations

import base64
import hashlib
import hmac

__all__ = ["ACCESS_KEY", "SECRET_KEY", "SIGNATURE", "SECURITY_TOKEN", "UNIQUE_MSG_QUERY_FLAG",
           "combine_content", "cal_signature", "signature", "same_signature"]

ACCESS_KEY, SECRET_KEY, SIGNATURE, SECURITY_TOKEN = "AccessKey", "SecretKey", "Signature", "SecurityToken"
#: MixAll.UNIQUE_MSG_QUERY_FLAG: the broker leaves it out of the content it checks.
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


def combine_content(fields: dict[str, str], body: bytes | bytearray | memoryview | None,
                    skip: tuple[str, ...] = (SIGNATURE,)) -> bytes:
    """The bytes signed: ``fields``' values in key order (keys in ``skip`` left out), then ``body``."""
    d = dict(fields)
    for k in skip:
        d.pop(k, None)
    content = "".join(map(d.__getitem__, sorted(d))).encode("utf-8")
    if body:
        content += bytes(body)
    return content


def cal_signature(content: bytes, secret_key: str) -> str:
    """AclUtils.calSignature: base64 of HMAC-SHA1 of ``content`` under ``secret_key``."""
    return base64.b64encode(hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()).decode("ascii")


def signature(fields: dict[str, str], body: bytes | bytearray | memoryview | None, secret_key: str) -> str:
    """The signature a client puts in ``Signature`` for ``fields`` and ``body``."""
    return cal_signature(combine_content(fields, body), secret_key)


def same_signature(expected: str, given: str | None) -> bool:
    """Compare two signatures in constant time (a timing difference must not reveal a prefix)."""
    if given is None:
        return False
    return hmac.compare_digest(expected.encode("ascii", "replace"), given.encode("utf-8", "replace"))
