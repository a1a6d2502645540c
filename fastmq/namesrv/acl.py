"""The NameServer's ACL (``aclEnable``): beyond RocketMQ 4.9.8, whose NameServer checks nothing.

The same plain ACL files, signature and refusal as the broker's (:mod:`fastmq.remoting.acl`); on a
NameServer every request that changes its state needs a signed admin account, while route and KV
reads stay open, so clients need no credentials to find brokers.
"""
from __future__ import annotations

from ..protocol.codes import RequestCode
from ..remoting.acl import PlainPermissionManager

__all__ = ["ADMIN_CODES", "namesrv_acl"]

#: The NameServer's state-changing codes: a registration (QUERY_DATA_VERSION keeps a registered
#: broker alive, so it counts), the KV writes, a broker's write permission, a topic's removal and
#: the configuration.
ADMIN_CODES = frozenset({RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER, RequestCode.QUERY_DATA_VERSION,
                         RequestCode.PUT_KV_CONFIG, RequestCode.DELETE_KV_CONFIG,
                         RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                         RequestCode.DELETE_TOPIC_IN_NAMESRV, RequestCode.UPDATE_NAMESRV_CONFIG})


def namesrv_acl(home: str, acl_file: str) -> PlainPermissionManager:
    """The NameServer's ACL rules read from ``acl_file`` (absolute, or relative to ``home``; ''
    for ``<home>/conf/plain_acl.yml``) and ``<home>/conf/acl``. Raises ConfigError when they
    cannot be read."""
    return PlainPermissionManager(home, acl_file, ADMIN_CODES, open_codes=True)
