"""The compiled twins' ``.pyi`` stubs match the modules (mypy.stubtest), and Cython warnings stay errors.

Both checks need the compiled modules or the Cython compiler, so they are ``c_ext`` and a pure run
(``--no-extensions``) skips them. The stubtests and the Cython compiler's runs (one process per
``.pyx``, each on one core) start together when the first of their tests asks, side by side in a
pool of one per core; each test then waits for its own.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "fastmq" / "_ext"
ALLOWLIST = Path(__file__).with_name("stubtest_allowlist.txt")
COMPILED = sorted(f"fastmq._ext.{p.stem}" for p in EXT.glob("*_c.pyx"))
PYX = sorted(p.name for p in EXT.glob("*_c.pyx"))
# The flags setup.py builds with (Options.warning_errors and its directives), as the cython command line has them.
CYTHON_FLAGS = ["-3", "-Werror", "-X", "embedsignature=True", "-X", "warn.unused=True", "-X", "warn.unreachable=True",
                "-X", "warn.maybe_uninitialized=True"]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def _drifted_copy(root: Path) -> Path | None:
    """``root``/drift: a package holding a copy of batch_c whose stub gains a parameter the module
    does not have (None when batch_c is not built as a .so)."""
    so = next(EXT.glob("batch_c.*.so"), None)
    if so is None:
        return None
    pkg = root / "drift"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / so.name).write_bytes(so.read_bytes())
    stub = (EXT / "batch_c.pyi").read_text().replace("(messages: Iterable[Any])", "(messages: Iterable[Any], extra: int)")
    (pkg / "batch_c.pyi").write_text(stub)
    return root


@pytest.fixture(scope="module")
def checks(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """The slow checks' processes, started at once: the stubtest (the longest, first), the one
    on a drifted stub and one Cython run per ``.pyx``, by key ("stubtest", "drift" or the .pyx's
    name); only those whose tests this session runs."""
    chosen = {item.name for item in request.session.items}
    out = tmp_path_factory.mktemp("cython")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        runs = {}
        if "test_stubtest_passes_on_the_compiled_modules" in chosen:
            runs["stubtest"] = pool.submit(_run, ["-m", "mypy.stubtest", "--allowlist", str(ALLOWLIST), *COMPILED],
                                           ROOT)
        drift = _drifted_copy(tmp_path_factory.mktemp("drift"))
        if drift is not None and "test_stubtest_catches_a_stub_that_drifted" in chosen:
            runs["drift"] = pool.submit(_run, ["-m", "mypy.stubtest", "drift.batch_c"], drift)
        for pyx in PYX:
            if f"test_cython_compiles_without_a_warning[{pyx}]" in chosen:
                runs[pyx] = pool.submit(_run, ["-m", "cython", *CYTHON_FLAGS, "-o", str(out / f"{pyx}.c"),
                                               f"fastmq/_ext/{pyx}"], ROOT)
        try:
            yield runs
        finally:
            for f in runs.values():  # (those not yet started, when a test stopped the module)
                f.cancel()


@pytest.mark.c_ext
def test_every_compiled_module_has_a_stub() -> None:
    missing = [m for m in COMPILED if not (ROOT / (m.replace(".", "/") + ".pyi")).is_file()]
    assert COMPILED and not missing


@pytest.mark.c_ext
@pytest.mark.slow
def test_stubtest_passes_on_the_compiled_modules(checks: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    pytest.importorskip("mypy.stubtest")
    res = checks["stubtest"].result()
    assert res.returncode == 0, res.stdout[-8000:] + res.stderr[-2000:]


@pytest.mark.c_ext
def test_stubtest_catches_a_stub_that_drifted(checks: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    """A copy of one module whose stub lies about a signature must fail, so a pass above means something."""
    pytest.importorskip("mypy.stubtest")
    if "drift" not in checks:  # (chosen, as this test runs: no copy was made)
        pytest.skip("batch_c is not built as a .so here")
    res = checks["drift"].result()
    assert res.returncode != 0 and 'runtime does not have parameter "extra"' in res.stdout, res.stdout[-4000:]


@pytest.mark.c_ext
@pytest.mark.slow
@pytest.mark.parametrize("pyx", PYX)
def test_cython_compiles_without_a_warning(pyx: str, checks: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    pytest.importorskip("Cython")
    res = checks[pyx].result()
    assert res.returncode == 0 and "warning:" not in res.stderr, res.stderr[-4000:]


@pytest.mark.c_ext
def test_a_cython_warning_fails_the_build(tmp_path: Path) -> None:
    pytest.importorskip("Cython")
    src = tmp_path / "slip.pyx"
    src.write_text("def f(n):\n    cdef Py_ssize_t i\n    return [i for i in range(n)]\n")
    res = _run(["-m", "cython", *CYTHON_FLAGS, "-o", str(tmp_path / "slip.c"), str(src)], tmp_path)
    assert res.returncode != 0 and "Unused entry 'i'" in res.stderr
    src.write_text("def g(bint c):\n    cdef int x\n    if c:\n        x = 1\n    return x\n")
    res = _run(["-m", "cython", *CYTHON_FLAGS, "-o", str(tmp_path / "slip.c"), str(src)], tmp_path)
    assert res.returncode != 0 and "'x' might be referenced before assignment" in res.stderr


def test_setup_py_makes_warnings_errors() -> None:
    """setup.py and the flags above must not drift apart (the build is what CI and scripts/_venv.sh run)."""
    text = (ROOT / "setup.py").read_text()
    assert "Options.warning_errors = True" in text
    for flag in ("warn.unused", "warn.unreachable", "warn.maybe_uninitialized"):
        assert f'"{flag}": True' in text
