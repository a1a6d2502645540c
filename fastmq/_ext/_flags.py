"""Read FASTMQ_NO_EXTENSIONS once; every selector module imports this."""
from __future__ import annotations

import os
import sys

#: True selects the pure-Python references everywhere (also forced off CPython,
#: where the compiled twins cannot load).
NO_EXTENSIONS: bool = bool(os.environ.get("FASTMQ_NO_EXTENSIONS")) or sys.implementation.name != "cpython"
