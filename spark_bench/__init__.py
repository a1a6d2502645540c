"""fastmq-bench: distributed load tests on Spark (``fastmq-bench run``, ``python -m spark_bench``).

Workloads are YAML files; producers and consumers run as the tasks of one Spark barrier stage and
are measured over a common window, checked against the broker's own counters. See README.md here.
"""
