"""Import hygiene, checked in fresh interpreters: what each entry point loads, that every fastmq
module imports on its own, and that no circle runs through the package's import-time imports.

The servers and the protocol import ``fastmq`` as their parent package; if that parent pulled the
client in, a broker would start the client's machinery and every module would sit in one import
knot. These tests keep the floors of docs/ARCHITECTURE.md honest at import time.
"""
from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fastmq"
CLIENT_SIDE = ("fastmq.client", "fastmq._blocking", "fastmq.blocking", "fastmq.aio")
SERVER_SIDE = ("fastmq.client", "fastmq.broker", "fastmq.store", "fastmq.remoting", "fastmq.namesrv",
               "fastmq._blocking", "fastmq.blocking", "fastmq.aio")
TIMEOUT = 300

# Imports each module named on stdin in a forked child of an interpreter that has loaded nothing
# from fastmq, so every module starts from a clean slate without paying for a new interpreter.
# The standard library's heavy modules and numpy load once, before the forks: modules from outside
# fastmq cannot hide a fastmq circle. One child per core runs at a time; each child's report (at
# most 60,000 bytes) fits in its pipe, so a child never waits for the parent to read it.
_ISOLATED_IMPORTS = r'''
import json, os, sys, traceback
import argparse, asyncio, concurrent.futures, dataclasses, hashlib, hmac, logging, mmap, socket, struct, typing, zlib
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # no BLAS threads in the parent the children fork from
try:
    import numpy
except ImportError:
    pass
results = {}
running = {}

def reap():
    pid, status = os.waitpid(-1, 0)
    name, r = running.pop(pid)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    err = b"".join(chunks).decode(errors="replace")
    results[name] = err or ("" if status == 0 else f"child exited with status {status}")

for name in sys.stdin.read().split():
    if len(running) >= (os.cpu_count() or 1):
        reap()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            __import__(name)
            msg = ""
        except BaseException:
            msg = traceback.format_exc(limit=8)
        os.write(w, msg.encode()[:60000])
        os._exit(0)
    os.close(w)
    running[pid] = (name, r)
while running:
    reap()
print(json.dumps(results))
'''

_LOADED_BY = r'''
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules if m == "fastmq" or m.startswith("fastmq."))))
'''


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _all_modules() -> list[str]:
    names = set()
    for path in PACKAGE.rglob("*.py"):
        name, _ = _module_name(path)
        if not name.endswith("__main__"):  # running it is its job; `python -m` is tested elsewhere
            names.add(name)
    for path in PACKAGE.rglob("*.so"):
        names.add(".".join(path.relative_to(ROOT).parts[:-1] + (path.name.split(".")[0],)))
    return sorted(names)


def _loaded_by(module: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _LOADED_BY, module], capture_output=True, text=True,
                         timeout=TIMEOUT, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_import_fastmq_loads_only_the_package() -> None:
    assert _loaded_by("fastmq") == ["fastmq"]


def test_public_names_resolve_lazily() -> None:
    code = ("import sys, fastmq; names = sorted(fastmq.__all__); assert set(names) <= set(dir(fastmq)); "
            "assert 'fastmq.client' not in sys.modules; "
            "values = [getattr(fastmq, n) for n in names]; "
            "from fastmq import Producer, Message, SendResult, FastMQError; "
            "import fastmq.blocking, fastmq.client.producer, fastmq.protocol.message, fastmq.errors; "
            "assert Producer is fastmq.blocking.Producer and SendResult is fastmq.client.producer.SendResult; "
            "assert Message is fastmq.protocol.message.Message and FastMQError is fastmq.errors.FastMQError; "
            "import fastmq.aio as aio; assert aio.Producer is fastmq.client.producer.Producer; "
            "assert set(aio.__all__) <= set(dir(aio)); [getattr(aio, n) for n in aio.__all__]; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_unknown_public_name_raises_attribute_error() -> None:
    import fastmq
    import fastmq.aio
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        getattr(fastmq, "NoSuchThing")
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        getattr(fastmq.aio, "NoSuchThing")


def test_aio_message_needs_no_client() -> None:
    code = ("import sys; from fastmq.aio import Message, MessageQueue; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('fastmq.client'))))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True,
                         timeout=TIMEOUT, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


PROTOCOL_MODULES = [m for m in _all_modules() if m == "fastmq.protocol" or m.startswith("fastmq.protocol.")]


@pytest.mark.parametrize("module", PROTOCOL_MODULES)
def test_protocol_loads_no_upper_floor(module: str) -> None:
    assert [m for m in _loaded_by(module) if m.startswith(SERVER_SIDE)] == []


@pytest.mark.parametrize("module", ["fastmq.namesrv.cli", "fastmq.broker.cli"])
def test_server_command_lines_load_no_client(module: str) -> None:
    loaded = _loaded_by(module)
    assert module in loaded
    assert [m for m in loaded if m.startswith(CLIENT_SIDE)] == []


@pytest.mark.parametrize("server", ["namesrv", "broker"])
def test_server_main_imports_only_its_cli(server: str) -> None:
    # importing a __main__ would run the server, so its imports are checked from the source
    assert import_graph()[f"fastmq.{server}.__main__"] == {f"fastmq.{server}.cli"}


@pytest.fixture(scope="module")
def isolated_imports() -> dict[str, str]:
    out = subprocess.run([sys.executable, "-c", _ISOLATED_IMPORTS], input="\n".join(_all_modules()),
                         capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("module", _all_modules())
def test_module_imports_on_its_own(module: str, isolated_imports: dict[str, str]) -> None:
    assert isolated_imports[module] == "", f"importing {module} alone failed:\n{isolated_imports[module]}"


# -- static import graph ---------------------------------------------------------------------------

def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(body: list[ast.stmt], with_annotations: bool) -> list[ast.Import | ast.ImportFrom]:
    """Imports that run when the module loads: not inside functions or classes, and (unless
    ``with_annotations``) not under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If):
            if with_annotations or not _is_type_checking(node.test):
                found += _runtime_imports(node.body, with_annotations)
            found += _runtime_imports(node.orelse, with_annotations)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                found += _runtime_imports(block, with_annotations)
        elif isinstance(node, ast.With):
            found += _runtime_imports(node.body, with_annotations)
    return found


def import_graph(with_annotations: bool = False,
                 find: Callable[[list[ast.stmt], bool], list[ast.Import | ast.ImportFrom]] = _runtime_imports,
                 ) -> dict[str, set[str]]:
    """fastmq module -> the fastmq modules it imports at load time (parents' implicit loads aside);
    ``find`` picks which of a module's import statements count. Built once per arguments (several
    tests ask for the same graph); each caller gets its own copy."""
    return {name: set(deps) for name, deps in _import_graph(with_annotations, find).items()}


@functools.lru_cache(maxsize=None)
def _import_graph(with_annotations: bool,
                  find: Callable[[list[ast.stmt], bool], list[ast.Import | ast.ImportFrom]]) -> dict[str, set[str]]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name, is_pkg = _module_name(path)
        modules[name] = (path, is_pkg)
    known = set(modules) | set(_all_modules())
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in modules.items():
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        deps: set[str] = set()
        for node in find(ast.parse(path.read_text()).body, with_annotations):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
                continue
            target = node.module or ""
            if node.level:
                target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            submodules = {f"{target}.{a.name}" for a in node.names} & known
            if len(submodules) < len(node.names):  # `from pkg import mod` alone runs only mod
                deps.add(target)
            deps.update(submodules)
        graph[name] = {d for d in deps if d in known and d != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_cycle_finder_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_graph_sees_relative_and_absolute_imports() -> None:
    graph = import_graph()
    assert "fastmq.broker.controller" in graph["fastmq.broker.cli"]
    assert "fastmq.protocol.codes" in graph["fastmq.protocol.command"]


def test_no_import_cycle_at_load_time() -> None:
    assert import_cycles(import_graph()) == []


def _every_import(body: list[ast.stmt], with_annotations: bool) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, those deferred into functions and annotations included."""
    return [n for stmt in body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_no_circle_through_annotations_or_deferred_imports() -> None:
    # A circle that only `if TYPE_CHECKING:` or an import inside a function closes does not break
    # an import, but it knots two rooms together for readers and type checkers all the same: a
    # room that needs the one that builds it names a narrow Protocol instead.
    assert import_cycles(import_graph(with_annotations=True)) == []
    assert import_cycles(import_graph(with_annotations=True, find=_every_import)) == []


# -- floors: docs/ARCHITECTURE.md's layer table is the rule ------------------------------------------



#: where the layer table puts a module: (floor, row); rooms named in one row may import each other
Place = tuple[int, int]


def architecture_places() -> dict[str, Place]:
    """Module or package name -> its place in the "Layers" table of docs/ARCHITECTURE.md."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text[text.index("## Layers"):]
    section = section[:section.index("\n## ", 1)]
    places: dict[str, Place] = {}
    for row, line in enumerate(section.splitlines()):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        for path in re.findall(r"`(fastmq/[^`]*)`", cells[1]):
            name = path.rstrip("/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            places[name] = (int(cells[0]), row)
    return places


def _place_of(module: str, places: dict[str, Place]) -> tuple[str, Place] | None:
    """The table's entry for ``module``: itself or the nearest package that holds it (the ``fastmq``
    package's own entry is its ``__init__``, which holds no other module)."""
    if module in places:
        return module, places[module]
    parts = module.split(".")
    for n in range(len(parts) - 1, 1, -1):
        owner = ".".join(parts[:n])
        if owner in places:
            return owner, places[owner]
    return None


def test_the_layer_table_places_every_module() -> None:
    places = architecture_places()
    assert {"fastmq.common", "fastmq.store", "fastmq.client", "fastmq.protocol", "fastmq.errors"} <= set(places)
    unplaced = [m for m in _all_modules() if _place_of(m, places) is None]
    assert unplaced == [], "modules docs/ARCHITECTURE.md's layer table does not place"


def floor_violations(graph: dict[str, set[str]], places: dict[str, Place]) -> list[str]:
    """The imports that do not go down: within one package or between the rooms of one table row
    anything goes (the public API's row is one room in several files); otherwise only to a lower
    floor, so two rows of one floor (client, NameServer, broker) never import each other."""
    wrong = []
    for module, deps in sorted(graph.items()):
        owner, (floor, row) = _place_of(module, places) or (module, (0, -1))
        for dep in sorted(deps):
            dep_owner, (dep_floor, dep_row) = _place_of(dep, places) or (dep, (0, -1))
            if dep_owner != owner and dep_row != row and not dep_floor < floor:
                wrong.append(f"{module} (floor {floor}) imports {dep} (floor {dep_floor})")
    return wrong


def test_imports_only_go_down_the_floors() -> None:
    # Load-time imports: an annotation-only import does not load anything, and the circle check
    # above already refuses one that knots two rooms together.
    assert floor_violations(import_graph(), architecture_places()) == []


def test_floor_check_sees_an_import_going_up_or_sideways() -> None:
    places = {"fastmq.low": (1, 9), "fastmq.a": (2, 8), "fastmq.b": (2, 7), "fastmq.api": (3, 6),
              "fastmq.api2": (3, 6), "fastmq.api3": (3, 5)}
    assert _place_of("fastmq.low.x", places) == ("fastmq.low", (1, 9))
    assert _place_of("fastmq.elsewhere", places) is None
    assert _place_of("fastmq.elsewhere", {"fastmq": (3, 1)}) is None
    assert _place_of("fastmq", {"fastmq": (3, 1)}) == ("fastmq", (3, 1))
    graph = {"fastmq.a.x": {"fastmq.a.y", "fastmq.low.z"}, "fastmq.low.z": {"fastmq.a.x"},
             "fastmq.b": {"fastmq.a.y"}, "fastmq.api": {"fastmq.api2", "fastmq.b", "fastmq.api3"}}
    assert floor_violations(graph, places) == ["fastmq.api (floor 3) imports fastmq.api3 (floor 3)",
                                               "fastmq.b (floor 2) imports fastmq.a.y (floor 2)",
                                               "fastmq.low.z (floor 1) imports fastmq.a.x (floor 2)"]


@pytest.mark.parametrize("side, foreign", [
    ("fastmq.client", ("fastmq.store", "fastmq.broker", "fastmq.namesrv")),
    ("fastmq.namesrv", ("fastmq.store", "fastmq.broker", "fastmq.client")),
    ("fastmq.broker", ("fastmq.client", "fastmq.namesrv")),
    ("fastmq.common", ("fastmq.client", "fastmq.broker", "fastmq.namesrv", "fastmq.store", "fastmq.remoting",
                       "fastmq.protocol", "fastmq._ext")),
])
def test_shared_things_come_from_common(side: str, foreign: tuple[str, ...]) -> None:
    # what they share (JSON config files, .properties, stats, the server commands' front) is in
    # fastmq.common, so none of them reaches into another's package for it
    graph = import_graph(with_annotations=True, find=_every_import)
    crossing = sorted(f"{m} -> {d}" for m, deps in graph.items() if m == side or m.startswith(side + ".")
                      for d in deps if d.startswith(foreign))
    assert crossing == []


def test_the_store_uses_only_its_own_send_stages() -> None:
    """The store's send path reads the column container and its own record writer, never the
    broker's send stage (``_ext.send``), in either twin."""
    store_stages = {"fastmq._ext.send_batch", "fastmq._ext.record_writer"}
    graph = import_graph(with_annotations=True)
    used = {d for mod, deps in graph.items() if mod.startswith("fastmq.store.") for d in deps
            if d.startswith("fastmq._ext.send") or d.startswith("fastmq._ext.record_writer")}
    assert used == store_stages
    for stem in ("send_batch", "record_writer"):
        assert not any(d.startswith("fastmq._ext.send") and d != "fastmq._ext.send_batch_py"
                       for d in graph[f"fastmq._ext.{stem}_py"]), stem
        pyx = (PACKAGE / "_ext" / f"{stem}_c.pyx").read_text()
        assert not re.search(r"^(from|cimport|import) \S*\bsend_c\b", pyx, re.M), stem
