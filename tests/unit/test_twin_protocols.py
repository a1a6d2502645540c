"""Both twins of every compiled module against the Protocols in ``fastmq/_ext/_protocols.py``.

A runtime structural check: each name a protocol declares exists in the twin, and each callable's
parameters (names, kinds, defaults) are the protocol's. Cython functions carry their signatures
(``embedsignature`` and binding), so ``inspect.signature`` reads both twins alike. What inspect
cannot read (a cdef class's ``__init__``, methods asyncio's C Future provides) is left to stubtest.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
import types
from typing import Any

import pytest

from fastmq._ext import _protocols
from fastmq._ext._protocols import TWINS

# What typing.Protocol itself puts into a protocol class's namespace.
_PROTOCOL_PLUMBING = {
    "__module__", "__doc__", "__dict__", "__weakref__", "__parameters__", "__init__", "__subclasshook__",
    "__abstractmethods__", "__annotations__", "__qualname__", "__orig_bases__", "__slots__",
    "__protocol_attrs__", "__non_callable_proto_members__", "_is_protocol", "_is_runtime_protocol", "_abc_impl",
}
_UNJUDGEABLE = object()


def _members(proto: type) -> dict[str, Any]:
    """name -> the protocol's function or property, or None for a plain (annotated) attribute."""
    out: dict[str, Any] = {name: None for name in getattr(proto, "__annotations__", {})}
    for name, value in vars(proto).items():
        if name not in _PROTOCOL_PLUMBING:
            out[name] = value
    return out


def _params(fn: Any, bound: bool) -> Any:
    """(name, kind, default) per parameter, ``self`` dropped; positional-only counts as positional."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return _UNJUDGEABLE
    params = list(sig.parameters.values())
    if bound and params and params[0].name == "self":
        params = params[1:]
    if [p.kind for p in params] == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]:
        return _UNJUDGEABLE  # a cdef class's slot wrapper shows (*args, **kwargs)
    kinds = {inspect.Parameter.POSITIONAL_ONLY: inspect.Parameter.POSITIONAL_OR_KEYWORD}
    return [(p.name, kinds.get(p.kind, p.kind).name, p.default) for p in params]


def _instance_attrs(cls: type) -> set[str]:
    """Attributes a pure class gives its instances: ``__slots__`` and ``self.x = ...`` in its methods."""
    names: set[str] = set()
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__", ())
        names.update([slots] if isinstance(slots, str) else slots)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
    return names


def _check(owner: Any, proto: type, where: str, is_class: bool) -> list[str]:
    problems = []
    attrs = _instance_attrs(owner) if is_class and not _is_compiled(owner) else set()
    for name, want in _members(proto).items():
        have = getattr(owner, name, _UNJUDGEABLE)
        if have is _UNJUDGEABLE:
            if name not in attrs:
                problems.append(f"{where}.{name} is missing")
            continue
        if want is None or isinstance(want, property):
            continue
        if not callable(have):
            problems.append(f"{where}.{name} is not callable")
            continue
        expected, actual = _params(want, True), _params(have, is_class)
        if actual is not _UNJUDGEABLE and expected != actual:
            problems.append(f"{where}.{name} parameters {actual} differ from the protocol's {expected}")
    return problems


def _is_compiled(cls: type) -> bool:
    return cls.__module__.endswith("_c")


def mismatches(module: Any, stem: str) -> list[str]:
    """Every way ``module`` (a twin of ``stem``) departs from its protocols; empty when it keeps them."""
    module_proto, class_protos = TWINS[stem]
    problems = _check(module, module_proto, module.__name__, False)
    for cls_name, proto in class_protos.items():
        cls = getattr(module, cls_name, None)
        if not isinstance(cls, type):
            problems.append(f"{module.__name__}.{cls_name} is not a class")
            continue
        problems += _check(cls, proto, f"{module.__name__}.{cls_name}", True)
    return problems


def _twins() -> list[Any]:
    return [pytest.param(f"fastmq._ext.{stem}_{kind}", stem, id=f"{stem}-{kind}",
                         marks=[pytest.mark.c_ext] if kind == "c" else [])
            for stem in sorted(TWINS) for kind in ("py", "c")]


def test_every_compiled_module_has_protocols() -> None:
    from pathlib import Path
    stems = {p.stem[:-2] for p in Path(_protocols.__file__).parent.glob("*_c.pyx")}
    assert stems == set(TWINS)


@pytest.mark.parametrize(("name", "stem"), _twins())
def test_twin_keeps_its_protocols(name: str, stem: str) -> None:
    assert mismatches(importlib.import_module(name), stem) == []


def test_the_check_catches_a_twin_that_drifted() -> None:
    """A twin whose function gained a parameter, or whose class lost a method, must be reported."""
    real = importlib.import_module("fastmq._ext.fault_py")

    def not_available_duration(latency_ms: int, extra: int = 0) -> int:
        return 0

    class FaultTable(real.FaultTable):  # type: ignore[misc, name-defined]
        remove = None  # type: ignore[assignment]

    fake = types.SimpleNamespace(**{n: getattr(real, n) for n in real.__all__})
    fake.__name__ = "fake"
    fake.not_available_duration = not_available_duration
    fake.FaultTable = FaultTable
    found = mismatches(fake, "fault")
    assert any("not_available_duration parameters" in p and "extra" in p for p in found), found
    assert "fake.FaultTable.remove is not callable" in found, found
    del fake.LATENCY_MAX
    assert "fake.LATENCY_MAX is missing" in mismatches(fake, "fault")


def test_a_default_that_drifted_is_reported() -> None:
    real = importlib.import_module("fastmq._ext.selector_py")
    fake = types.SimpleNamespace(**{n: getattr(real, n) for n in real.__all__}, __name__="fake")
    fake.select_queue = lambda queue_broker, counter, last_broker=0: 0
    assert any("select_queue parameters" in p for p in mismatches(fake, "selector"))
