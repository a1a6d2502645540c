"""``fastmq-bench rocketmq-tools``: Apache RocketMQ's own benchmark Producer and Consumer against
fastmq's broker and Apache's Java broker, alternately, with no Spark.

``command`` runs it (the two systems, one Producer run, the alternation, the summary); ``shapes``
runs the backlog-drain and Spark-workload shapes; both stand on ``peer`` (a system under test,
a run's plan, the /proc and broker-counter samples); ``process`` starts, waits for and stops
processes; ``result`` parses the tools' lines and makes per-run figures and medians, which
``spark_bench.collate`` also reads. Imports go down that list, never back up.
"""
from .command import DEFAULT_SHAPES, ToolsError, add_arguments, run

__all__ = ["DEFAULT_SHAPES", "ToolsError", "add_arguments", "run"]
