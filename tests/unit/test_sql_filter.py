"""The SQL92 selector: 4.9.8's ParserTest and ExpressionTest vectors, its checks and texts, and
the size limits, on both evaluator twins.

4.9.8's ExpressionTest also puts Integer values into its contexts; a broker only ever evaluates
strings (a message's properties), so those vectors are written with the strings here, as the
test's own "use string" halves do. testEvaluate_now builds a NOW node the grammar cannot express.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastmq._ext import sql_filter_py
from fastmq._ext.sql_filter_py import ERROR, FALSE, NULL, TRUE
from fastmq.errors import FilterExpressionError
from fastmq.filter import MAX_DEPTH, MAX_EXPRESSION_LENGTH, compile_expression, parse
from fastmq.filter.compiler import compile_tree

try:
    from fastmq._ext import sql_filter_c
except ImportError:  # (conftest refuses a silent fallback; FASTMQ_NO_EXTENSIONS runs the pure twin)
    sql_filter_c = None  # type: ignore[assignment]

TWINS = [pytest.param(sql_filter_py, id="py")]
if sql_filter_c is not None:
    TWINS.append(pytest.param(sql_filter_c, id="c", marks=pytest.mark.c_ext))


def program(impl, text):
    prog = compile_expression(text)
    return impl.SqlProgram(prog.nodes, prog.consts, prog.props, prog.sets)


def props_bytes(values: dict[str, str]) -> bytes:
    return "".join(f"{k}\x01{v}\x02" for k, v in values.items()).encode()


def ev(impl, text, **values):
    return program(impl, text).evaluate(props_bytes(values))


AND = "a=3 and b<>4 And c>5 AND d<=4"
OR = "a=3 or b<>4 Or c>5 OR d<=4"
IN = "a in ('3', '4', '5')"
NOT_IN = "a not in ('3', '4', '5')"
BETWEEN = "a between 2 and 10"
NOT_BETWEEN = "a not between 2 and 10"


# ------------------------------------------------------------------ ParserTest
@pytest.mark.parametrize("text", [
    AND, OR, IN, "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
    "(a between 2 and 10) AND (b not between 6 and 9)", "a is null", "a is not null", "a <= now",
])
def test_parser_test_valid(text):
    assert parse(text) is not None


@pytest.mark.parametrize("text", [
    "a and between 2 and 10",  # testParse_invalid
    "a > 100000000000000000000000",  # testParse_decimalOverFlow
    "a > " + "1" + "1" * 51 * 2048 + "." + "1" * 51 * 2048,  # testParse_floatOverFlow (also over our limit)
    " a between 10 and 0",  # testParse_illegalBetween
])
def test_parser_test_invalid(text):
    with pytest.raises(FilterExpressionError):
        parse(text)


def test_parser_test_equals():
    assert parse(AND) == parse("a=3  and    b<>4 And c>5 AND d<=4")
    assert parse(AND) != parse(OR)


# ------------------------------------------------------------------ ExpressionTest
@pytest.mark.parametrize("impl", TWINS)
class TestExpressionVectors:
    def test_string_has_string(self, impl):
        assert ev(impl, "TAGS is not null and TAGS='''''tag'''''", TAGS="''tag''") == TRUE

    def test_string_compare(self, impl):
        # every case of testEvaluate_stringCompare, up to the one that throws (an error: no match)
        assert ev(impl, "a between up and low", a="3.14") == NULL
        assert ev(impl, "a between up and low", a="3.14", up="up", low="low") == ERROR
        assert ev(impl, "key is not null and key between 0 and 100", key="con") == ERROR
        assert ev(impl, "a between 0 and 100", a="abc") == ERROR
        assert ev(impl, "a=b", a="3.14", b="3.14") == TRUE
        assert ev(impl, "a<>b", a="3.14", b="3.14") == FALSE
        assert ev(impl, "a<>b", a="3.14", b="3.141") == TRUE

    def test_exponent_and_float(self, impl):
        assert ev(impl, "a > 3.1E10", a=repr(3.1415 * 10 ** 10)) == TRUE
        assert ev(impl, "a > 3.1E10", a="3.1415E10") == TRUE
        assert ev(impl, "a > 3.14", a="3.1415") == TRUE

    def test_two_variables(self, impl):
        assert ev(impl, "a > b", a="10", b="20") == FALSE
        assert ev(impl, "a > b", a="20", b="10") == TRUE

    def test_null_or(self, impl):
        e = "a is null OR a='hello'"
        assert ev(impl, e) == TRUE
        assert ev(impl, e, a="hello") == TRUE
        assert ev(impl, e, a="abc") == FALSE

    def test_boolean(self, impl):
        e = "a=TRUE OR b=FALSE"
        assert ev(impl, e, a="true", b="false") == TRUE
        assert ev(impl, e, a="false", b="true") == FALSE

    def test_equal(self, impl):
        e = "a is not null and a='hello'"
        assert ev(impl, e, a="hello") == TRUE
        assert ev(impl, e) == FALSE

    def test_and(self, impl):
        assert ev(impl, AND, a="3", b="5", c="6", d="1") == TRUE
        assert ev(impl, AND, a="4", b="5", c="6", d="1") == FALSE

    def test_or(self, impl):
        assert ev(impl, OR, a="3") == TRUE
        assert ev(impl, OR, a="4", b="5") == TRUE
        assert ev(impl, OR, a="4", b="4", c="6") == TRUE
        assert ev(impl, OR, a="4", b="4", c="3", d="2") == TRUE
        assert ev(impl, OR, a="4", b="4", c="3", d="10") == FALSE

    def test_in(self, impl):
        for v in "345":
            assert ev(impl, IN, a=v) == TRUE
            assert ev(impl, NOT_IN, a=v) == FALSE
        assert ev(impl, IN, a="8") == FALSE
        assert ev(impl, NOT_IN, a="8") == TRUE

    def test_between(self, impl):
        for v in ("2", "10", "3"):
            assert ev(impl, BETWEEN, a=v) == TRUE
            assert ev(impl, NOT_BETWEEN, a=v) == FALSE
        for v in ("1", "11"):
            assert ev(impl, BETWEEN, a=v) == FALSE
            assert ev(impl, NOT_BETWEEN, a=v) == TRUE

    def test_is_null(self, impl):
        assert ev(impl, "a is null", abc="2") == TRUE
        assert ev(impl, "a is null", a="2") == FALSE
        assert ev(impl, "a is not null", a="2") == TRUE
        assert ev(impl, "a is not null", abc="2") == FALSE

    def test_sql_filter_example(self, impl):
        # 4.9.8's example SqlFilterConsumer (no blank before "and")
        e = "(TAGS is not null and TAGS in ('TagA', 'TagB'))and (a is not null and a between 0 and 3)"
        assert ev(impl, e, TAGS="TagA", a="2") == TRUE
        assert ev(impl, e, TAGS="TagC", a="2") == FALSE
        assert ev(impl, e, TAGS="TagB", a="4") == FALSE


# ------------------------------------------------------------------ 4.9.8's semantics, beyond the vectors
@pytest.mark.parametrize("impl", TWINS)
class TestSemantics:
    def test_conversion_to_the_literal_type(self, impl):
        assert ev(impl, "a > 3", a="3.5") == ERROR  # Integer.valueOf("3.5") throws: no match
        assert ev(impl, "a > 3 OR b = 'x'", a="3.5", b="x") == ERROR  # the error ends it all
        assert ev(impl, "a > 3.0", a="3.5") == TRUE
        assert ev(impl, "a = 3", a="+3") == TRUE
        assert ev(impl, "a = 3", a=" 3") == ERROR
        assert ev(impl, "a = 5000000000", a="5000000000") == TRUE
        assert ev(impl, "a = 5", a="5000000000") == ERROR
        assert ev(impl, "a = 1.5", a=" 1.5d ") == TRUE
        assert ev(impl, "a > 1.5", a="NaN") == TRUE  # Double.compare puts NaN above all
        assert ev(impl, "a < 0.5", a="-0.0") == TRUE
        assert ev(impl, "a = TRUE", a="TrUe") == TRUE
        assert ev(impl, "a = TRUE", a="yes") == FALSE
        assert ev(impl, "TRUE = a", a="true") == ERROR  # 4.9.8 casts the Boolean to a String
        assert ev(impl, "a = -3", a="-3") == TRUE
        assert ev(impl, "a > -2147483648", a="-2147483647") == TRUE

    def test_three_valued_logic(self, impl):
        assert ev(impl, "a = 'x' OR b = 'y'", b="y") == TRUE
        assert ev(impl, "a = 'x' OR b = 'y'", b="z") == NULL
        assert ev(impl, "a = 'x' AND b = 'y'", b="z") == FALSE
        assert ev(impl, "a = 'x' AND b = 'y'", b="y") == NULL
        assert ev(impl, "NOT (a = 'x')") == NULL
        assert ev(impl, "'x' = a") == FALSE  # a null right side of '=' gives FALSE, a null left NULL
        assert ev(impl, "'x' <> a") == TRUE
        assert ev(impl, "a = b") == TRUE  # two missing properties are equal
        assert ev(impl, "a in ('x')") == NULL
        assert ev(impl, "a", a="true") == FALSE  # a property as a condition: a string is not TRUE
        assert ev(impl, "TRUE") == TRUE
        assert ev(impl, "NOT NULL") == NULL

    def test_property_names_are_case_sensitive(self, impl):
        assert ev(impl, "A = 'x'", a="x") == NULL
        assert ev(impl, "a = 'x' aNd b is NULL", a="x") == TRUE

    def test_odd_properties(self, impl):
        p = program(impl, "a = 'é' and b > 1")
        assert p.evaluate("a\x01é\x02b\x012\x02".encode()) == TRUE
        assert p.evaluate(b"") == NULL
        assert p.evaluate(b"a") == NULL
        # MessageDecoder keeps no pair with an empty name or value: an empty property is missing
        assert program(impl, "a IS NULL").evaluate(b"a\x01\x02") == TRUE
        assert program(impl, "a = 'x'").evaluate(b"a\x01x\x02a\x01\x02\x01y\x02") == TRUE
        assert p.evaluate(b"a\x01x\x02a\x01\xc3\xa9\x02b\x01\xd9\xa3") == TRUE  # the last a wins; Arabic 3
        assert p.evaluate("a\x01é\x02b\x01١".encode()) == FALSE  # Arabic-Indic 1: Integer.valueOf takes it
        assert program(impl, "a = 1.5").evaluate(b"a\x010x1.8p0") == TRUE  # Java reads hex doubles


@pytest.mark.parametrize("text, message", [
    ("a = NULL", "java.lang.RuntimeException: 'NULL' cannot be compared."),
    ("a > 'x'", "java.lang.RuntimeException: Value ''x'' cannot be compared."),
    ("a > TRUE", "java.lang.RuntimeException: Value 'TRUE' cannot be compared."),
    ("(a = 1) > 2", "java.lang.RuntimeException: Value '(a == 1)' cannot be compared."),
    ("TRUE = 1", "java.lang.RuntimeException: 'TRUE' cannot be compared with '1'"),
    ("'a' in ('x')", "java.lang.RuntimeException: Expected a property for In expression, got: 'a'"),
    ("a between 10 and 0", "java.lang.RuntimeException: Illegal values of between, left value(10) must less "
                           "than or equal to right value(0)"),
    ("a between NULL and 1", "java.lang.RuntimeException: Illegal values of between, values can not be null!"),
    ("1", "org.apache.rocketmq.filter.parser.ParseException: Expression will not result in a boolean value: 1"),
    ("a and -1", "org.apache.rocketmq.filter.parser.ParseException: Expression will not result in a boolean "
                 "value: (- 1)"),
    ("a > 0.0", "java.lang.RuntimeException: 0.0 is less than 4.9E-324"),
    ("a > 1e999", "java.lang.RuntimeException: 1e999 is greater than 1.7976931348623157E308"),
    ("a > 9223372036854775808", 'java.lang.NumberFormatException: For input string: "9223372036854775808"'),
    ("a != 1", 'org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line 1, column 3.  '
               'Encountered: "!" (33), after : ""'),
])
def test_refusals_say_what_4_9_8_says(text, message):
    with pytest.raises(FilterExpressionError) as info:
        compile_expression(text)
    assert str(info.value) == message


def test_syntax_error_names_the_token_and_place():
    with pytest.raises(FilterExpressionError) as info:
        compile_expression("a and between 2 and 10")
    assert str(info.value).startswith('org.apache.rocketmq.filter.parser.ParseException: Encountered " "BETWEEN" '
                                      '"between "" at line 1, column 7.\nWas expecting one of:\n')
    with pytest.raises(FilterExpressionError, match='line 2, column 3'):
        compile_expression("a = -- note\n  ) ")


def test_what_follows_the_expression_is_not_read():
    # 4.9.8's grammar does not end in <EOF>: after a whole expression the parser looks at one
    # more token (for an operator) and stops, so trailing words pass and a bad character there fails
    assert ev(sql_filter_py, "a = 1 2 and then some", a="1") == TRUE
    assert ev(sql_filter_py, "(a = 1)) !", a="1") == TRUE
    with pytest.raises(FilterExpressionError, match="Lexical error"):
        compile_expression("a = 1 !")


def test_comments_are_skipped():
    assert ev(sql_filter_py, "/* who */ a = 1 -- which\n AND b = 2", a="1", b="2") == TRUE


def test_size_limits_refuse_with_a_clear_error():
    with pytest.raises(FilterExpressionError, match=f"over the limit of {MAX_EXPRESSION_LENGTH}"):
        compile_expression("a = 1 OR " * 2000 + "a = 1")
    with pytest.raises(FilterExpressionError, match=f"deeper than {MAX_DEPTH}"):
        compile_expression("(" * 100 + "a = 1" + ")" * 100)
    with pytest.raises(FilterExpressionError, match="more than"):
        compile_expression(" OR ".join("a=1" for _ in range(700)))
    compile_expression(" OR ".join(f"a{i} = {i}" for i in range(100)))  # a large but fair one passes


def test_programs_name_each_property_once():
    prog = compile_tree(parse("a = 1 or a = 2 or b in ('x', 'y')"))
    assert prog.props == ("a", "b")
    assert prog.sets == (frozenset({"x", "y"}),)


# ------------------------------------------------------------------ recorded from Apache RocketMQ 4.9.8
APACHE = json.loads((Path(__file__).with_name("sql92_apache_vectors.json")).read_text(encoding="utf-8"))


@pytest.mark.parametrize("text, code, remark", APACHE["check_client_config"],
                         ids=[repr(t)[:40] for t, _, _ in APACHE["check_client_config"]])
def test_check_client_config_answers_as_apache_4_9_8(text, code, remark):
    """Each expression compiles, or fails with the very remark, as a 4.9.8 broker answers it."""
    try:
        compile_expression(text)
        got = (0, None)
    except FilterExpressionError as exc:
        got = (23, str(exc))
    assert got == (code, remark)


@pytest.mark.parametrize("impl", TWINS)
@pytest.mark.parametrize("text", sorted(APACHE["pulls"]))
def test_pulls_match_what_apache_4_9_8_delivered(impl, text):
    """Messages whose property ``a`` is each recorded value: the ones the expression takes are the
    ones a 4.9.8 broker delivered."""
    prog = program(impl, text)
    got = []
    for i, v in enumerate(APACHE["values"]):
        props = {} if v is None else {"a": v}
        if str(i) in APACHE["b_of"]:
            props["b"] = APACHE["b_of"][str(i)]
        if prog.evaluate(props_bytes(props)) == TRUE:
            got.append(i)
    assert got == APACHE["pulls"][text]
