"""``python -m spark_bench.collate``: the same program as ``fastmq-bench collate``."""
from .command import main

raise SystemExit(main())
