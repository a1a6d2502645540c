"""ACL: a broker that checks every request, a producer with the right keys and one without.

RocketMQ's example.simple.AclClient, with the secured cluster included: the program writes a
plain_acl.yml, starts a NameServer and a broker with ``aclEnable=true`` (fastmq.testing's
EmbeddedCluster, in a temporary directory), then

- creates the topic as the admin account (creating topics is an admin's right),
- sends with an account that may publish to it: SEND_OK,
- sends with a wrong secret: refused, with the broker's AclException text.

To try your own secured cluster instead, set ACL_NAMESRV_ADDR, ACL_ACCESS_KEY and ACL_SECRET_KEY
(and create the topic ExampleAclTopic first):

    ACL_NAMESRV_ADDR=127.0.0.1:9876 ACL_ACCESS_KEY=RocketMQ ACL_SECRET_KEY=12345678 python examples/acl.py

Exits 0 when the right keys were taken and the wrong ones refused, 1 otherwise.
"""
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from fastmq import ClientConfig, Message, Producer, SessionCredentials
from fastmq.errors import FastMQError

TOPIC = "ExampleAclTopic"
PLAIN_ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [ExampleAclTopic=PUB|SUB]
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
"""


def send_once(namesrv, credentials):
    config = ClientConfig(namesrv_addr=namesrv, credentials=credentials)
    with Producer("ExampleAclProducer", client_config=config) as producer:
        deadline = time.monotonic() + 20
        while True:  # a topic just created reaches the NameServer's route within a moment
            try:
                return producer.send(Message(TOPIC, b"Hello ACL"))
            except FastMQError as exc:
                if "No route info" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.3)


async def create_topic(broker_addr, admin_keys):
    """UPDATE_AND_CREATE_TOPIC (what ``mqadmin updateTopic`` sends), signed by the admin account."""
    from fastmq.client.acl import AclClientRPCHook
    from fastmq.protocol.codes import RequestCode
    from fastmq.protocol.command import create_request
    from fastmq.remoting import RemotingClient
    client = RemotingClient(rpc_hook=AclClientRPCHook(admin_keys))
    try:
        r = await client.invoke(broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
            "topicFilterType": "SINGLE_TAG"}), 5)
        print(f"create {TOPIC} as {admin_keys.access_key}: code {r.code}")
    finally:
        await client.close()


def check(namesrv, good, bad):
    result = send_once(namesrv, good)
    print(f"{good.access_key}: {result.status} {result.msg_id}")
    try:
        send_once(namesrv, bad)
    except FastMQError as exc:  # the broker's answer is the cause of "Send [N] times, still failed"
        cause = exc.__cause__ or exc
        print(f"wrong secret refused: {cause}")
        return "Check signature failed" in str(cause)
    print("wrong secret was accepted")
    return False


def main():
    if os.environ.get("ACL_NAMESRV_ADDR"):
        good = SessionCredentials(os.environ["ACL_ACCESS_KEY"], os.environ["ACL_SECRET_KEY"])
        return check(os.environ["ACL_NAMESRV_ADDR"], good, SessionCredentials(good.access_key, "not-the-secret"))
    from fastmq.testing import EmbeddedCluster
    with tempfile.TemporaryDirectory() as work:
        acl_file = Path(work) / "plain_acl.yml"
        acl_file.write_text(PLAIN_ACL_YML)
        with EmbeddedCluster(work, broker_conf={"aclEnable": "true", "aclFile": acl_file}) as cluster:
            asyncio.run(create_topic(cluster.broker_addr, SessionCredentials("rocketmq2", "12345678")))
            return check(cluster.namesrv_addr, SessionCredentials("RocketMQ", "12345678"),
                         SessionCredentials("RocketMQ", "not-the-secret"))


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
