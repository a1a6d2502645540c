"""``python -m spark_bench``: the same program as ``fastmq-bench``."""
from .cli import main

raise SystemExit(main())
