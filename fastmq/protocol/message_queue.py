"""MessageQueue: one queue of a topic on one broker, ordered and printed as RocketMQ does."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .java_number import json_int

__all__ = ["MessageQueue"]


@dataclass(frozen=True, order=True)
class MessageQueue:
    """(topic, broker name, queue id); sorts like Java's MessageQueue.compareTo."""

    topic: str
    broker_name: str
    queue_id: int
    # (not a field: set by __hash__ on first use; ClassVar keeps it out of the dataclass's fields)
    _hash: ClassVar[int]

    def __hash__(self) -> int:
        # The fields' hash, as the dataclass would make it, computed once: a consumer's pull
        # round looks its queue up in a few dicts (offsets, the broker to pull from), and the
        # tuple made and hashed for each lookup cost ~1,700 instructions
        try:
            return self._hash
        except AttributeError:
            h = hash((self.topic, self.broker_name, self.queue_id))
            object.__setattr__(self, "_hash", h)
            return h

    def __reduce__(self) -> tuple[Any, ...]:
        # only the fields: a str's hash differs between processes, so the cached one stays behind
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
