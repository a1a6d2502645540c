"""Distributed load generation for fastmq with PySpark: executors drive load, the driver collates.

``python -m spark_bench.job --help``; ``local[*]`` is the embedded default, ``--master spark://...``
scales it out over a real cluster (every worker needs this checkout and fastmq installed).
"""
