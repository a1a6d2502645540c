"""The broker's plain ACL: which request codes only an admin may send and the resources each
request names (RocketMQ 4.9.8's PlainAccessValidator). The files, accounts, signature check and
the gate are the server-side plain ACL in :mod:`fastmq.remoting.acl`, shared with the NameServer.
"""
from __future__ import annotations

import json

from ..protocol import topic as tv
from ..protocol.codes import RequestCode
from ..protocol.command import RemotingCommand
from ..remoting.acl import AT_PARSE, AccessGate, AclError, Permission, address_matcher, parse_perm
from ..remoting.acl import PlainPermissionManager as _ServerAcl

__all__ = ["AclError", "PlainPermissionManager", "AccessGate", "Permission", "resources", "parse_perm",
           "address_matcher", "ADMIN_CODES"]

#: Codes only an admin account may send to a broker (4.9.8's PlainAccessValidator).
ADMIN_CODES = frozenset({RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG,
                         RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                         RequestCode.DELETE_SUBSCRIPTIONGROUP})


def resources(request: RemotingCommand) -> dict[str, int] | None:
    """The resources a request names and the permission each needs (PlainAccessValidator.parse).
    Raises AclError when a body or header it reads is malformed."""
    ext = request.ext_fields
    code = request.code
    res: dict[str, int] = {}
    sub = Permission.SUB

    def put(name: str | None, perm: int) -> None:
        if name is not None:
            res[name] = perm
    try:
        if code == RequestCode.SEND_MESSAGE_V2 or code == RequestCode.SEND_MESSAGE:
            t, g = ("b", "a") if code == RequestCode.SEND_MESSAGE_V2 else ("topic", "group")
            topic = ext.get(t) if ext else None
            if topic is not None and topic.startswith(tv.RETRY_GROUP_TOPIC_PREFIX):
                put(tv.retry_topic(ext.get(g, "null")) if ext else None, sub)
            else:
                put(topic, Permission.PUB)
        elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
            put(tv.retry_topic(str(ext.get("group"))) if ext else None, sub)
        elif code == RequestCode.PULL_MESSAGE:
            if ext:
                put(ext.get("topic"), sub)
                put(tv.retry_topic(str(ext.get("consumerGroup"))), sub)
        elif code == RequestCode.QUERY_MESSAGE:
            put(ext.get("topic") if ext else None, sub)
        elif code == RequestCode.HEART_BEAT:
            body = json.loads(request.body or b"{}")
            for data in body.get("consumerDataSet") or ():
                put(tv.retry_topic(str(data.get("groupName"))), sub)
                for s in data.get("subscriptionDataSet") or ():
                    put(s.get("topic"), sub)
        elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
            put(tv.retry_topic(str(ext.get("consumerGroup"))) if ext else None, sub)
        elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
            if ext:
                put(tv.retry_topic(str(ext.get("consumerGroup"))), sub)
                put(ext.get("topic"), sub)
        else:
            return None
    except Exception as exc:  # a malformed body: refused, as 4.9.8 wraps the parse error
        raise AclError(str(exc) or type(exc).__name__, AT_PARSE) from exc
    return res


class PlainPermissionManager(_ServerAcl):
    """The broker's ACL files and rules: :class:`fastmq.remoting.acl.PlainPermissionManager` with
    the broker's admin-only codes and resources.

    Args:
        home: ``rocketmqHome`` (``$ROCKETMQ_HOME``).
        acl_file: the ``aclFile`` broker key ('' for ``conf/plain_acl.yml``).
    """

    def __init__(self, home: str, acl_file: str = "") -> None:
        super().__init__(home, acl_file, ADMIN_CODES, resources)
