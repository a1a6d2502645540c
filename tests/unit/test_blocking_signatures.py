"""The blocking classes spell out the asyncio core's keyword arguments (for help() and type
checkers) and pass each on by name: the two signatures must not drift apart. A default changed in
the core only would give blocking users another client than asyncio users."""
from __future__ import annotations

import inspect
from typing import Any

import pytest

from fastmq import blocking
from fastmq.client import admin, producer, push_consumer, transaction_producer

PAIRS = [(blocking.Producer, producer.Producer), (blocking.TransactionProducer, transaction_producer.TransactionProducer),
         (blocking.PushConsumer, push_consumer.PushConsumer), (blocking.PullConsumer, push_consumer.PullConsumer),
         (blocking.Admin, admin.Admin)]


def _parameters(cls: type) -> tuple[dict[str, inspect.Parameter], bool]:
    """The keyword arguments ``cls(...)`` takes, following ``**kwargs`` into the bases' ``__init__``
    as the call does; and whether any still-open ``**kwargs`` takes the rest."""
    found: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        open_rest = False
        for name, p in inspect.signature(init).parameters.items():
            if name == "self" or p.kind is p.VAR_POSITIONAL:
                continue
            if p.kind is p.VAR_KEYWORD:
                open_rest = True
            else:
                found.setdefault(name, p)
        if not open_rest:
            return found, False
    return found, True


@pytest.mark.parametrize(("facade", "core"), PAIRS, ids=[f.__name__ for f, _ in PAIRS])
def test_blocking_takes_the_core_arguments_with_the_same_defaults(facade: type, core: type) -> None:
    ours, ours_open = _parameters(facade)
    theirs, _ = _parameters(core)
    missing = sorted(set(theirs) - set(ours))
    if not ours_open:
        assert not missing, f"blocking.{facade.__name__} lacks the core's {missing}"
    extra = sorted(set(ours) - set(theirs))
    assert not extra, f"blocking.{facade.__name__} takes {extra}, which the core does not"
    differ: list[tuple[str, Any, Any]] = [(n, p.default, theirs[n].default) for n, p in ours.items()
                                          if p.default != theirs[n].default]
    assert not differ, f"blocking.{facade.__name__}'s defaults differ from the core's: {differ}"
