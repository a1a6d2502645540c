"""The trace dispatcher's Pub record encoder: both twins give the same records and keys, and those
are what the object encoder (``encode_context`` of a Pub context, ``trace_keys``) gives."""
from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from fastmq.client.trace_data import (MessageType, TraceBean, TraceContext, TraceType, encode_context,
                                      trace_keys)

TWINS = [pytest.param("py", id="py"), pytest.param("c", id="c", marks=pytest.mark.c_ext)]
_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=12)
_row = st.tuples(st.integers(0, 2**62), st.integers(0, 10**6), st.sampled_from(["T", "Tb", "RMQ_SYS_TRACE_TOPIC"]),
                 _text, st.none() | _text, st.none() | st.text(" ak", max_size=8), st.sampled_from(["b1", "b2"]),
                 st.integers(0, 2**31), st.sampled_from([0, 1, 3]), st.none() | _text,
                 st.sampled_from(["SEND_OK", "FLUSH_DISK_TIMEOUT", "SLAVE_NOT_AVAILABLE"]), _text)


def _twin(kind: str) -> Any:
    return importlib.import_module(f"fastmq._ext.trace_encode_{kind}").encode_pub_rows


def _host(broker: str) -> str | None:
    return None if broker == "b2" else "10.0.0.1:10911"


def _want(row: tuple[Any, ...], group: str) -> tuple[str, list[str]]:
    begin, cost, topic, msg_id, tags, keys, broker, length, mtype, offset_id, status, region = row
    ctx = TraceContext(TraceType.Pub, begin, region, group, cost_time=cost, success=status == "SEND_OK",
                       beans=[TraceBean(topic=topic, msg_id=msg_id, tags=tags, keys=keys, store_host=_host(broker),
                                        body_length=length, msg_type=MessageType(mtype), offset_msg_id=offset_id)])
    return encode_context(ctx), trace_keys(ctx)


@pytest.mark.parametrize("kind", TWINS)
@settings(max_examples=40, deadline=None)
@given(rows=st.lists(_row, max_size=6), group=_text)
def test_both_twins_write_the_object_encoders_records(kind: str, rows: list[tuple[Any, ...]], group: str) -> None:
    flat: list[Any] = []
    for begin, cost, *rest in rows:
        flat.extend((begin, begin + cost, *rest))
    want = [_want(r, group) for r in rows if not r[2].startswith("RMQ_SYS_TRACE_TOPIC")]
    assert _twin(kind)(flat, "RMQ_SYS_TRACE_TOPIC", group, _host) == want
    assert _twin(kind)(tuple(flat) + (1, 2), "RMQ_SYS_TRACE_TOPIC", group, _host) == want  # (a part row: none)


@pytest.mark.parametrize("kind", TWINS)
def test_a_row_whose_text_is_not_text_is_refused_by_both(kind: str) -> None:
    row = [1, 2, "T", None, None, None, "b1", 3, 0, "O", "SEND_OK", "R"]  # (no msgId)
    with pytest.raises(TypeError):
        _twin(kind)(row, "RMQ_SYS_TRACE_TOPIC", "g", _host)
