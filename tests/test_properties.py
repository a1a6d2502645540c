"""Java .properties parsing and binding to RocketMQ-named config fields."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from fastmq.errors import ConfigError
from fastmq.properties import bind, format_config, load_properties, parse_properties


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
    bad.write_bytes(b"k=\xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_properties(bad)
