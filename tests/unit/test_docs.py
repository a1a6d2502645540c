"""The user's documents hold together: every relative link resolves, the configuration reference
is what the config classes generate, and every code block marked runnable runs.

A block is marked by an HTML comment on the line before its opening fence (invisible on GitHub):

    <!-- runnable -->          runs here, with no cluster (a few seconds at most)
    <!-- runnable: cluster --> runs in tests/process/test_docs_runnable.py against a cluster it
                               starts; ``127.0.0.1:9876`` in the block is replaced by its address

Unmarked blocks are shown, not run (shell sessions, fragments, output).
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from tests import docs_blocks
from tests.docs_blocks import DOCUMENTS, ROOT, Block, all_blocks, relative_links, run_block, runnable_blocks
from tests.docs_blocks import present as _present


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("document", _present(DOCUMENTS))
def test_relative_links_resolve(document: str) -> None:
    base = (ROOT / document).parent
    missing = []
    for line, target in relative_links(document):
        path = target.split("#", 1)[0].split("?", 1)[0]
        if not path:
            continue
        resolved = (ROOT / path.lstrip("/")) if path.startswith("/") else (base / path)
        if not resolved.exists():
            missing.append(f"{document}:{line}: {target}")
    assert not missing, "links to nothing:\n" + "\n".join(missing)


def test_the_readme_and_the_guide_exist() -> None:
    assert (ROOT / "README.md").is_file() and (ROOT / "docs" / "README.md").is_file()
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").count("Apache License") >= 1


def test_readme_opens_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:6]
    assert any(line.startswith("./scripts/demo.sh") for line in head), head
    assert any(line.startswith("./scripts/test.sh") for line in head), head


def test_configuration_reference_is_generated() -> None:
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts" / "config_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == module.render(), "docs/configuration.md is out of date: run python scripts/config_reference.py"


def test_mark_parser_finds_marked_blocks_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("text\n```python\nshown = 1\n```\n<!-- runnable -->\n```python\nran = 1\n```\n"
                   "<!-- runnable: cluster -->\n\n```bash\necho hi\n```\n", encoding="utf-8")
    monkeypatch.setattr(docs_blocks, "ROOT", tmp_path)
    blocks = runnable_blocks("x.md")
    assert [(b.kind, b.language, b.code) for b in blocks] == [("local", "python", "ran = 1\n"),
                                                              ("cluster", "bash", "echo hi\n")]


_LOCAL = all_blocks("local")


@pytest.mark.parametrize("block", _LOCAL, ids=[f"{b.document}:{b.line}" for b in _LOCAL])
def test_runnable_block_runs(block: Block, tmp_path: Path) -> None:
    done = run_block(block, timeout=60, env={"HOME": str(tmp_path)})
    assert done.returncode == 0, f"{block.document}:{block.line} failed:\n{done.stdout}\n{done.stderr}"


def test_configuration_generator_refuses_an_undocumented_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses as dc
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts" / "config_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876")  # a machine's own value never reaches the page

    @dc.dataclass
    class Documented:
        #: The answer.
        answer: int = 42
        ratio: float = 0.5  # a trailing comment counts too

    @dc.dataclass
    class Undocumented:
        #: Documented.
        fine: int = 1
        silent: str = "x"

    assert module.class_table(Documented)[2:] == ["| `answer` | `42` | The answer. |",
                                                  "| `ratio` | `0.5` | a trailing comment counts too |"]
    with pytest.raises(module.MissingDoc, match="silent"):
        module.class_table(Undocumented)
    assert "10.0.0.1" not in module.render()


#: The archive of past measurement notes, on its way out of docs/.
_ARCHIVES = {"docs/benchmark-history.md"}
_DIARY = [(re.compile(r"\bsessions? \d+", re.I), "a session number"),
          # A kept run's file (its name carries the UTC stamp); the folder itself may be named.
          (re.compile(r"benchmarks/results/\S*\d{8}T\d{4,6}Z"), "a result file's path"),
          (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"), "a commit id")]


@pytest.mark.parametrize("document", [d for d in _present(DOCUMENTS) if d not in _ARCHIVES])
def test_documents_keep_no_diary(document: str) -> None:
    """The guide says what is true now: figures live in benchmarks/RESULTS.md, generated; no
    document names sessions, commits or kept result files."""
    found = [f"{document}:{n}: {what}: {m.group(0)!r}"
             for n, line in enumerate((ROOT / document).read_text(encoding="utf-8").splitlines(), 1)
             for pattern, what in _DIARY for m in pattern.finditer(line)]
    assert not found, "\n".join(found)
