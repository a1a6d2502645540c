"""The documents' code blocks marked ``<!-- runnable: cluster -->`` run against a real
``fastmq-namesrv`` and ``fastmq-broker`` (see tests/unit/test_docs.py for the marks)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from fastmq.testing import running_cluster
from tests.docs_blocks import Block, all_blocks, run_block

_BLOCKS = all_blocks("cluster")


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_cluster(tmp_path_factory.mktemp("docs-cluster")) as (ns, _broker):
        yield ns.addr


@pytest.mark.timeout(180)
@pytest.mark.parametrize("block", _BLOCKS, ids=[f"{b.document}:{b.line}" for b in _BLOCKS])
def test_cluster_block_runs(block: Block, namesrv: str, tmp_path: Path) -> None:
    code = block.code.replace("127.0.0.1:9876", namesrv)
    done = run_block(block._replace(code=code), timeout=120,
                     env={"NAMESRV_ADDR": namesrv, "HOME": str(tmp_path)})
    assert done.returncode == 0, f"{block.document}:{block.line} failed:\n{done.stdout}\n{done.stderr}"
