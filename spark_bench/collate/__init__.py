"""``fastmq-bench collate``: result directories and pytest-benchmark files in one report.

``load`` reads every input into rows of one figure each (``rocketmq_tools.result`` reads the
rocketmq-tools summaries), ``compare`` joins them in one Spark DataFrame (drivers of a run, twins,
peers, commits), ``report`` renders Markdown, HTML and plots with ``tools``'s table of the
rocketmq-tools summaries; ``command`` is the command. Spark and matplotlib load only inside
``run``.
"""
from .command import CollateError, add_arguments, main, run

__all__ = ["CollateError", "add_arguments", "main", "run"]
