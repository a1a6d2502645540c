"""Workload files: what one benchmark run puts on the cluster, read from YAML and checked.

A workload names its shape (topics, queues, producers, consumer groups, consumers), the load
(message size or payload file, target rate, send mode, messages in flight) and the phases
(warm-up, measured duration, a backlog to build before consumers start). Unknown keys and bad
values raise :class:`WorkloadError` naming the key and the file, before anything starts.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["Workload", "WorkloadError", "load_workload", "shipped_workloads", "SEND_MODES", "CONSUMER_KINDS",
           "LISTENERS"]

SEND_MODES = ("sync", "async", "oneway", "batch")
CONSUMER_KINDS = ("push", "pull")
LISTENERS = ("async", "plain")


class WorkloadError(ValueError):
    """A workload file that cannot be run: its text names the file and the key."""


@dataclass(frozen=True)
class Workload:
    """One parsed workload. ``producer_rate`` is msgs/s summed over all producers (0: as fast as
    they go); ``in_flight`` is per producer; ``backlog`` is messages (over all topics) stored
    before the consumers start, which then drain it."""

    name: str
    file: str = ""
    topics: int = 1
    queues_per_topic: int = 4
    message_size: int = 128
    payload_file: str | None = None
    producers_per_topic: int = 1
    consumer_groups_per_topic: int = 1
    consumers_per_group: int = 1
    producer_rate: float = 0.0
    send_mode: str = "async"
    batch_size: int = 1
    in_flight: int = 128
    warmup_s: float = 2.0
    duration_s: float = 10.0
    backlog: int = 0
    consumer_kind: str = "push"
    listener: str = "async"   # a push consumer's listener: an ``async def``, or a plain function (on its threads)
    # Spark tasks the clients are dealt over; None: every slot of the cluster. Pinned where the
    # figures depend on it, so that a bigger cluster does not silently run another shape.
    tasks: int | None = None
    payload: bytes = field(default=b"", repr=False, compare=False)

    @property
    def producers(self) -> int:
        return self.topics * self.producers_per_topic

    @property
    def consumers(self) -> int:
        return self.topics * self.consumer_groups_per_topic * self.consumers_per_group

    def to_json(self) -> dict[str, Any]:
        """Every parsed key (the payload itself left out), as result.json's ``workload``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "payload"}


_INT_KEYS = {"topics": 1, "queues_per_topic": 1, "message_size": 1, "producers_per_topic": 1,
             "consumer_groups_per_topic": 0, "consumers_per_group": 1, "batch_size": 1, "in_flight": 1,
             "backlog": 0, "tasks": 1}
_FLOAT_KEYS = {"producer_rate": 0.0, "warmup_s": 0.0, "duration_s": 0.1}
_CHOICES = {"send_mode": SEND_MODES, "consumer_kind": CONSUMER_KINDS, "listener": LISTENERS}
_MAX_MESSAGE = 4 * 1024 * 1024


def _check(data: dict[str, Any], where: str) -> dict[str, Any]:
    known = {f.name for f in dataclasses.fields(Workload)} - {"file", "payload"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise WorkloadError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in _INT_KEYS:
            if isinstance(value, bool) or not isinstance(value, int) or value < _INT_KEYS[key]:
                raise WorkloadError(f"{where}: {key} must be an integer >= {_INT_KEYS[key]}, not {value!r}")
        elif key in _FLOAT_KEYS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < _FLOAT_KEYS[key]:
                raise WorkloadError(f"{where}: {key} must be a number >= {_FLOAT_KEYS[key]}, not {value!r}")
            value = float(value)
        elif key in _CHOICES:
            if value not in _CHOICES[key]:
                raise WorkloadError(f"{where}: {key} must be one of {', '.join(_CHOICES[key])}, not {value!r}")
        elif key in ("name", "payload_file"):
            if not isinstance(value, str) or not value:
                raise WorkloadError(f"{where}: {key} must be a non-empty string, not {value!r}")
        out[key] = value
    if "name" not in out:
        raise WorkloadError(f"{where}: missing key 'name'")
    if not all(c.isalnum() or c in "-_" for c in out["name"]):
        raise WorkloadError(f"{where}: name may hold letters, digits, '-' and '_' only, not {out['name']!r}")
    if out.get("message_size", 1) > _MAX_MESSAGE:
        raise WorkloadError(f"{where}: message_size must be at most {_MAX_MESSAGE}, not {out['message_size']}")
    return out


def load_workload(path: str | Path) -> Workload:
    """Read and check one workload file (a path, or the name of a shipped workload).

    Raises:
        WorkloadError: unreadable file, not a YAML mapping, unknown key, bad value.
    """
    import yaml

    p = Path(path)
    if not p.exists() and not p.suffix:
        shipped = shipped_workloads().get(str(path))
        if shipped is not None:
            p = shipped
    where = str(p)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise WorkloadError(f"{where}: cannot read the workload file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise WorkloadError(f"{where}: a workload file is a YAML mapping of keys to values")
    values = _check(data, where)
    payload = b""
    if "payload_file" in values:
        pf = (p.parent / values["payload_file"]).resolve()
        try:
            payload = pf.read_bytes()
        except OSError as exc:
            raise WorkloadError(f"{where}: payload_file {values['payload_file']!r}: {exc.strerror or exc}") from None
        if "message_size" in values and values["message_size"] != len(payload):
            raise WorkloadError(f"{where}: message_size {values['message_size']} does not match payload_file "
                                f"length {len(payload)}")
        if not payload or len(payload) > _MAX_MESSAGE:
            raise WorkloadError(f"{where}: payload_file must hold 1 to {_MAX_MESSAGE} bytes")
        values["message_size"] = len(payload)
    w = Workload(file=where, payload=payload, **values)
    if w.send_mode != "batch" and "batch_size" in values and w.batch_size != 1:
        raise WorkloadError(f"{where}: batch_size applies to send_mode batch only")
    if w.send_mode == "sync" and "in_flight" in values and w.in_flight != 1:
        raise WorkloadError(f"{where}: in_flight is 1 for send_mode sync (one message awaited at a time)")
    if w.consumer_kind != "push" and "listener" in values and w.listener != "async":
        raise WorkloadError(f"{where}: listener applies to consumer_kind push only")
    if w.backlog and w.consumers == 0:
        raise WorkloadError(f"{where}: backlog needs consumers to drain it (consumer_groups_per_topic > 0)")
    return w


def shipped_workloads() -> dict[str, Path]:
    """The workloads in ``spark_bench/run/workloads/`` by name (file name without ``.yaml``)."""
    root = resources.files("spark_bench.run") / "workloads"
    return {Path(str(f)).stem: Path(str(f)) for f in root.iterdir() if str(f).endswith(".yaml")}
