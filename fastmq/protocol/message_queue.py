"""MessageQueue: one queue of a topic on one broker, ordered and printed as RocketMQ does."""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any

from .java_number import json_int

__all__ = ["MessageQueue"]


@dataclass(frozen=True, order=True)
class MessageQueue:
    """(topic, broker name, queue id); sorts like Java's MessageQueue.compareTo."""

    topic: str
    broker_name: str
    queue_id: int

    def __post_init__(self) -> None:
        # The fields' hash, as the dataclass would make it, computed once here: a consumer's pull
        # round looks its queue up in a few dicts (offsets, the broker to pull from), and a
        # tuple made and hashed per lookup cost ~1,700 instructions, a Python __hash__ returning
        # a cached value still ~550 (its frame). Kept as a C callable returning it (not a field:
        # equality, order, repr and replace() see the three fields only)
        h = hash((self.topic, self.broker_name, self.queue_id))
        object.__setattr__(self, "_hash_of", itertools.repeat(h).__next__)

    # hash(mq) with no Python frame: the type's hash slot gets this descriptor, calls what it
    # returns (the instance's _hash_of, a C method) with no arguments, and that returns the hash
    __hash__ = property(operator.attrgetter("_hash_of"))

    def __reduce__(self) -> tuple[Any, ...]:
        # only the fields: a str's hash differs between processes, so the cached one stays behind
        # (__init__ computes this process's)
        return (type(self), (self.topic, self.broker_name, self.queue_id))

    def __str__(self) -> str:
        # The exact text matters: the consistent-hash allocator hashes it, as Java does.
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"

    def to_obj(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> "MessageQueue":
        """From a JSON body's object; ``queueId`` as fastjson binds a Java ``int``.

        Raises:
            KeyError: a field is missing.
            JavaNumberFormatError: ``queueId`` is not a Java ``int`` (a ValueError).
        """
        return cls(str(obj["topic"]), str(obj["brokerName"]), json_int(obj["queueId"]))
