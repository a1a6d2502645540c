"""The runnable code blocks and relative links of the user's documents, for tests/unit/test_docs.py
and tests/process/test_docs_runnable.py (which runs the blocks that need a cluster)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]

#: The documents a reader walks through; each may link to any file of the repository.
DOCUMENTS = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "examples/README.md",
             *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```+|~~~+)(.*)$")
_MARK = re.compile(r"^<!--\s*runnable(?::\s*(\w+))?\s*-->\s*$")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+(\S+)")


class Block(NamedTuple):
    document: str
    line: int  # of the opening fence, 1-based
    kind: str  # "local" or "cluster"
    language: str
    code: str


def present(documents: list[str]) -> list[str]:
    return [d for d in documents if (ROOT / d).is_file()]


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line.strip())
        if fence is None and m:
            fence = m.group(1)[0] * 3
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        out.append((n, line))
    return out


def relative_links(document: str) -> list[tuple[int, str]]:
    """(line, target) of every link in ``document`` that names a file of the repository."""
    text = (ROOT / document).read_text(encoding="utf-8")
    found: list[tuple[int, str]] = []
    for n, line in _prose_lines(text):
        line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        targets = [a or b for a, b in _LINK.findall(line)]
        ref = _REF_DEF.match(line)
        if ref:
            targets.append(ref.group(1))
        for t in targets:
            t = t.strip("<>")
            if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I) or t.startswith("#"):
                continue  # a URL, mailto:, or an anchor in the same page
            found.append((n, t))
    return found


def runnable_blocks(document: str) -> list[Block]:
    """The code blocks of ``document`` marked ``<!-- runnable -->`` or ``<!-- runnable: cluster -->``."""
    lines = (ROOT / document).read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        mark = _MARK.match(lines[i].strip())
        if mark:
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            fence = _FENCE.match(lines[j].strip()) if j < len(lines) else None
            assert fence, f"{document}:{i + 1}: a runnable mark must come right before a code fence"
            body: list[str] = []
            k = j + 1
            while k < len(lines) and not lines[k].strip().startswith(fence.group(1)):
                body.append(lines[k])
                k += 1
            kind = mark.group(1) or "local"
            assert kind in ("local", "cluster"), f"{document}:{i + 1}: unknown runnable kind {kind!r}"
            blocks.append(Block(document, j + 1, kind, fence.group(2).strip().split(" ")[0], "\n".join(body) + "\n"))
            i = k
        i += 1
    return blocks


def all_blocks(kind: str) -> list[Block]:
    return [b for d in present(DOCUMENTS) for b in runnable_blocks(d) if b.kind == kind]


def run_block(block: Block, *, env: dict[str, str] | None = None, timeout: float = 60.0,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a python or bash block in a fresh process from the repository root (bounded in time)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    if block.language in ("python", "py"):
        argv = [sys.executable, "-c", block.code]
    elif block.language in ("bash", "sh", "shell"):
        argv = ["bash", "-euo", "pipefail", "-c", block.code]
    else:
        raise AssertionError(f"{block.document}:{block.line}: cannot run a {block.language!r} block")
    return subprocess.run(argv, cwd=cwd or ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)
