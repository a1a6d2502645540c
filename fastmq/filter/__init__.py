"""SQL92 property filters (RocketMQ's ``MessageSelector.bySql``): the parser and its compiler.

``compile_expression(text)`` parses a selector with 4.9.8's grammar and checks and returns the
program that ``fastmq._ext.sql_filter`` evaluates against stored records.
"""
from .compiler import compile_expression
from .parser import MAX_DEPTH, MAX_EXPRESSION_LENGTH, MAX_NODES, parse

__all__ = ["compile_expression", "parse", "MAX_EXPRESSION_LENGTH", "MAX_DEPTH", "MAX_NODES"]
