"""Java .properties parsing and binding to RocketMQ-named config fields."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from fastmq.errors import ConfigError
from fastmq.common.properties import bind, format_config, load_properties, parse_properties


def test_java_properties_forms() -> None:
    text = ("# comment\n! also a comment\nlistenPort=10911\nbrokerName : broker-a\nflushDiskType SYNC_FLUSH\n"
            "  spaced   =   value with spaces  \npath=C:\\\\store\\\\x\nmulti=a,\\\n    b\nuni=\\u00e9t\\u00e9\nempty=\n")
    p = parse_properties(text)
    assert p == {"listenPort": "10911", "brokerName": "broker-a", "flushDiskType": "SYNC_FLUSH",
                 "spaced": "value with spaces  ", "path": "C:\\store\\x", "multi": "a,b", "uni": "été", "empty": ""}


@dataclass
class _Cfg:
    listenPort: int = 9876
    orderMessageEnable: bool = False
    kvConfigPath: str = "kv.json"


def test_bind_converts_and_reports(caplog: pytest.LogCaptureFixture) -> None:
    cfg = bind(_Cfg(), {"listenPort": " 1234 ", "orderMessageEnable": "TRUE", "typoKey": "x"})
    assert (cfg.listenPort, cfg.orderMessageEnable, cfg.kvConfigPath) == (1234, True, "kv.json")
    assert "typoKey" in caplog.text
    assert format_config(cfg) == "listenPort=1234\norderMessageEnable=true\nkvConfigPath=kv.json\n"


@pytest.mark.parametrize("values, msg", [({"listenPort": "12x"}, "listenPort='12x': expected an integer"),
                                         ({"orderMessageEnable": "yes"}, "expected true or false")])
def test_bad_values_are_config_errors(values: dict, msg: str) -> None:
    with pytest.raises(ConfigError, match=msg):
        bind(_Cfg(), values)


def test_missing_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_properties(tmp_path / "nope.properties")
    bad = tmp_path / "bad.properties"
    bad.write_bytes(b"k=\\u12G4\n")
    with pytest.raises(ConfigError, match=r"bad\.properties.*Malformed"):
        load_properties(bad)


# ------------------------------------------------------------ java.util.Properties, exactly

import re

import javaproperties
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fastmq.common.properties import check_storable, dump_properties, write_properties
from tests.support import examples

#: Pieces that exercise every rule of Properties.load: separators, escapes, continuations, comments,
#: the line ends Java knows (CR, LF) and characters Python would treat as line breaks or blanks.
_PIECES = st.sampled_from(list("\\=: \t\f\r\n#!au0Fx\u2028\u2029\x85\xa0\x0b\x1c\u00e9")
                          + ["\\u00", "\\u0041", "\\uD83D\\uDE00"])


def _java_edge(text: str, got: dict, want: dict) -> bool:
    """javaproperties drops a last line that is one lone backslash; Java's LineReader returns it
    as an empty line, so Properties ends with "" = "", over any earlier "" key (we follow Java)."""
    return got.get("") == "" and {k: v for k, v in got.items() if k} == {k: v for k, v in want.items() if k}


@settings(max_examples=examples(800), deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
@example("a=b\u2028c\nd=e\x85f\n")
@example("# comment \\\nkey=value")          # a comment never continues
@example("k=v\\\n   \\\n  w\r\nx:y\rz")    # continuations, CR and CRLF line ends
@example("=\\\\\r\\")                     # "" = "\\", then a lone backslash: "" = "" in Java
def test_parse_agrees_with_javaproperties(text: str) -> None:
    try:
        want = dict(javaproperties.loads(text))
    except ValueError:  # javaproperties' InvalidUEscapeError
        with pytest.raises(ConfigError, match="Malformed"):
            parse_properties(text)
        return
    got = parse_properties(text)
    assert got == want or _java_edge(text, got, want), (text, got, want)


def test_bind_trims_as_java_string_trim() -> None:
    @dataclass
    class _S:
        regionId: str = ""

    assert bind(_S(), {"regionId": " \t r\u2028\xa0 \x00"}).regionId == "r\u2028\xa0"


def test_unicode_line_breaks_are_not_line_ends() -> None:
    assert parse_properties("a=1\u20282=3\nb=\x85\x0b\x1c\n") == {"a": "1\u20282=3", "b": "\x85\x0b\x1c"}
    assert parse_properties("\xa0k=v") == {"\xa0k": "v"}  # NBSP is no blank to Java


def test_files_are_iso_8859_1_as_java_reads_them(tmp_path) -> None:
    p = tmp_path / "x.properties"
    p.write_bytes(b"latin=caf\xe9\nescaped=caf\\u00e9\nutf8=caf\xc3\xa9\n")
    assert load_properties(p) == {"latin": "caf\xe9", "escaped": "caf\xe9", "utf8": "caf\xc3\xa9"}


@settings(max_examples=examples(500), deadline=None)
@given(st.dictionaries(st.text(), st.text(), max_size=6))
@example({" lead": " v=:#!\\ \u2028\U0001F600", "k\n": "\r\n\t\f"})
def test_dump_is_what_java_stores_and_reads_back(items: dict[str, str]) -> None:
    out = dump_properties(items)
    out.encode("ascii")  # Properties.store(OutputStream): ISO-8859-1 with \\u escapes beyond ASCII
    ref = javaproperties.dumps(items, timestamp=False, sort_keys=False)
    # Java's Properties.store writes the hex digits in upper case; javaproperties in lower case
    assert out == re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), ref)
    assert parse_properties(out) == items and dict(javaproperties.loads(out)) == items


def test_write_properties_round_trip(tmp_path) -> None:
    p = tmp_path / "conf" / "broker.conf"
    items = {"storePathRootDir": "C:\\store\\x y", "regionId": "r\u2028\xe9:#=!", "empty": ""}
    write_properties(p, items)
    assert load_properties(p) == items and not p.with_name("broker.conf.tmp").exists()


@pytest.mark.parametrize("props", [{"k": "a\nb"}, {"k": "a\rb"}, {"k": "nul\x00"}, {"k\x7f": "v"}, {"k": "\x85"}])
def test_control_characters_are_refused(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="control character U\\+00"):
        check_storable(props)
    check_storable({"k": "tab-free, \u2028 and \xe9 are fine"})
