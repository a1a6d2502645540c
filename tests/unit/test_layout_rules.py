"""The layout rule of floor 8 (docs/LAYOUT, issue 25): tests and benchmarks share ``fastmq.testing``
and helper modules, not each other's modules.

- no module under tests/ imports a test module (``test_*.py``): what two test modules share lives
  in tests/support.py, a helper module beside the tests (tests/process/helpers.py, ...) or a
  layer's conftest.py (fixtures);
- no module under benchmarks/ imports from tests/.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Benchmark modules allowed to import from tests/ for now: none (issue 25 moved what they used to
#: fastmq.testing). Keep it empty.
BENCHMARKS_STILL_IMPORTING_TESTS: set[str] = set()


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every module ``path`` imports, at any depth (function-level too);
    ``from pkg import name`` counts as ``pkg.name`` as well, since ``name`` may be a module."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


#: An import of a test module in any text, the scripts a test hands to a child interpreter too.
_TEST_MODULE_IMPORT = re.compile(r"^\s*(?:from|import)\s+tests\.(?:\w+\.)*test_\w+", re.M)


def _py_files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_test_module_imports_another() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line}: imports {name}"
           for p in _py_files("tests") for line, name in _imported_modules(p)
           if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")]
    bad += [f"{p.relative_to(ROOT)}: a script in it imports {m.group(0).strip()}"
            for p in _py_files("tests") if p.name != Path(__file__).name
            for m in _TEST_MODULE_IMPORT.finditer(p.read_text(encoding="utf-8"))]
    assert not bad, ("a test module imports another; move what they share to tests/support.py, a helper "
                     "module or a conftest.py:\n" + "\n".join(bad))


def test_no_benchmark_imports_from_tests() -> None:
    if not (ROOT / "benchmarks").is_dir():
        pytest.skip("no benchmarks/ in this tree")
    found: dict[str, list[str]] = {}
    for p in _py_files("benchmarks"):
        for line, name in _imported_modules(p):
            if name == "tests" or name.startswith("tests."):
                found.setdefault(p.relative_to(ROOT).as_posix(), []).append(f"{line}: {name}")
    new = {f: v for f, v in found.items() if f not in BENCHMARKS_STILL_IMPORTING_TESTS}
    assert not new, ("benchmarks import from tests/; share fastmq.testing instead:\n"
                     + "\n".join(f"{f}:{x}" for f, v in new.items() for x in v))
    fixed = BENCHMARKS_STILL_IMPORTING_TESTS - found.keys()
    assert not fixed, f"no longer importing from tests/, take them off BENCHMARKS_STILL_IMPORTING_TESTS: {fixed}"


def test_the_rules_see_an_import_inside_a_function(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from tests.process.test_x import y\n    import tests.support\n")
    assert (2, "tests.process.test_x") in _imported_modules(f)
    assert (3, "tests.support") in _imported_modules(f)
