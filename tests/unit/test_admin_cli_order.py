"""fastmq-admin's Java orders: the HashMap order mqadmin prints a message's properties in and the
HashSet order it walks a topic's queues in (orders seen from mqadmin 4.9.8 on Java 17)."""
from __future__ import annotations

from fastmq.admin_cli import _java_hash_order, _java_queue_order
from fastmq.protocol.message import java_string_hash
from fastmq.protocol.message_queue import MessageQueue


def test_properties_in_hash_map_order() -> None:
    keys = ["KEYS", "TAGS", "UNIQ_KEY", "CLUSTER", "MIN_OFFSET", "MAX_OFFSET"]  # as decoded, then the pull's two
    assert _java_hash_order(keys, [java_string_hash(k) for k in keys]) == \
        ["MIN_OFFSET", "MAX_OFFSET", "KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]


def test_a_bucket_keeps_insertion_order_and_the_table_grows() -> None:
    assert _java_hash_order(["b", "a", "c"], [16, 0, 32]) == ["b", "a", "c"]  # one bucket of 16
    assert _java_hash_order(list(range(13)), [16 * i for i in range(13)])[:2] == [0, 2]  # 13 entries: 32 buckets


def test_queues_in_hash_set_order() -> None:
    qs = [MessageQueue("AdmP_35c4c5", "broker-a", i) for i in range(2)]
    assert [q.queue_id for q in _java_queue_order(qs)] == [1, 0]
