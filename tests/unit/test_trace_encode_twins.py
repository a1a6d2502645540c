"""A traced producer's Pub record buffer (``PubRows``), a trace message's keys (``join_keys``) and
the dispatcher's packer (``TracePacker``): both twins give the same text, keys and messages, and
those are what the object encoder (``encode_context`` of a Pub context, ``trace_keys``) gives."""
from __future__ import annotations

import importlib
import zlib
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
TOPIC = "RMQ_SYS_TRACE_TOPIC"


def _mod(kind: str) -> Any:
    return importlib.import_module(f"fastmq._ext.trace_encode_{kind}")


def _host(broker: str) -> str | None:
    return None if broker == "b2" else "10.0.0.1:10911"


def _want(row: tuple[Any, ...], group: str) -> tuple[str, list[str]]:
    begin, cost, topic, msg_id, tags, keys, broker, length, mtype, offset_id, status, region = row
    ctx = TraceContext(TraceType.Pub, begin, region, group, cost_time=cost, success=status == "SEND_OK",
                       beans=[TraceBean(topic=topic, msg_id=msg_id, tags=tags, keys=keys, store_host=_host(broker),
                                        body_length=length, msg_type=MessageType(mtype), offset_msg_id=offset_id)])
    return encode_context(ctx), trace_keys(ctx)


def _add(rows: Any, row: tuple[Any, ...]) -> int:
    begin, cost, topic, msg_id, tags, keys, broker, length, mtype, offset_id, status, region = row
    return rows.add(begin, begin + cost, topic, msg_id, tags, keys, broker, length, mtype, offset_id,
                    status == "SEND_OK", region)  # type: ignore[no-any-return]


def _words(keys: list[str]) -> str:
    """What a broker indexes of a trace message's keys: its space-separated words, each once."""
    return " ".join(dict.fromkeys(w for k in keys for w in k.split(" ") if w))


@pytest.mark.parametrize("kind", TWINS)
@settings(max_examples=40, deadline=None)
@given(rows=st.lists(_row, max_size=8), group=_text, room=st.integers(1, 400))
def test_both_twins_write_the_object_encoders_records(kind: str, rows: list[tuple[Any, ...]], group: str,
                                                      room: int) -> None:
    buf = _mod(kind).PubRows(TOPIC, group, _host, 1024, 3)
    codes = [_add(buf, r) for r in rows]
    kept = [r for r in rows if not r[2].startswith(TOPIC)]
    want = [_want(r, group) for r in kept]
    assert codes.count(1) == (1 if len(kept) >= 3 else 0) and set(codes) <= {0, 1} and len(buf) == len(kept)
    text, keys, end = buf.chunk(0, 1 << 40)
    assert end == len(kept) and text == "".join(d for d, _ in want).encode()
    assert _mod(kind).join_keys(keys) == _words([k for _, ks in want for k in ks])
    # cut at ``room`` bytes: each piece reaches it with its last record only (the last piece may not)
    i, pieces = 0, []
    while i < len(kept):
        piece, _, j = buf.chunk(i, room)
        assert j > i and piece == "".join(d for d, _ in want[i:j]).encode()
        assert len(piece) - len(want[j - 1][0].encode()) < room and (len(piece) >= room or j == len(kept))
        pieces.append(piece)
        i = j
    assert b"".join(pieces) == text and buf.chunk(len(kept), room) == (b"", b"", len(kept))
    # cut at ``room`` bytes of keys too (text unbounded): the same rule on the keys
    i, cut_keys = 0, []
    while i < len(kept):
        piece, piece_keys, j = buf.chunk(i, 1 << 40, room)
        assert j > i and piece == "".join(d for d, _ in want[i:j]).encode()
        msg_id, row_keys = kept[j - 1][3], kept[j - 1][5]  # (each record's keys: its id, then its KEYS)
        last = len(msg_id.encode()) + 1 + (len(row_keys.encode()) + 1 if row_keys else 0)
        assert len(piece_keys) - last < room and (len(piece_keys) >= room or j == len(kept))
        cut_keys.append(piece_keys)
        i = j
    assert b"".join(cut_keys) == keys


@pytest.mark.parametrize("kind", TWINS)
def test_take_moves_the_records_and_asks_the_host_again(kind: str) -> None:
    asked: list[str] = []

    def host(broker: str) -> str:
        asked.append(broker)
        return "h:1"
    buf = _mod(kind).PubRows(TOPIC, "g", host, 2, 2)
    row = (5, 2, "T", "M", "t", "k1 k1 k2", "b1", 3, 0, "O", "SEND_OK", "R")
    assert [_add(buf, row), _add(buf, row), _add(buf, row)] == [0, 1, -1]  # (the third: full, dropped)
    taken = buf.take()
    assert len(buf) == 0 and len(taken) == 2 and asked == ["b1"]
    text, keys, end = taken.chunk(0, 1 << 20)
    one = "\x01".join(["Pub", "5", "R", "g", "T", "M", "t", "k1 k1 k2", "h:1", "3", "2", "0", "O", "true"]) + "\x02"
    assert end == 2 and text == 2 * one.encode() and _mod(kind).join_keys(keys) == "M k1 k2"
    assert _add(buf, row) == 0 and asked == ["b1", "b1"] and buf.chunk(0, 1 << 20)[0] == text[:len(text) // 2]


@pytest.mark.parametrize("kind", TWINS)
def test_a_row_whose_text_is_not_text_is_refused_by_both(kind: str) -> None:
    buf = _mod(kind).PubRows(TOPIC, "g", _host, 8, 4)
    with pytest.raises(TypeError):
        buf.add(1, 2, "T", None, None, None, "b1", 3, 0, "O", True, "R")  # (no msgId)
    with pytest.raises(ValueError):
        buf.add(1, 2, "T", "M", None, None, "b1", 3, 7, "O", True, "R")  # (no such message type)
    assert len(buf) == 0 and buf.chunk(0, 10) == (b"", b"", 0)


@pytest.mark.parametrize("kind", TWINS)
def test_text_utf8_cannot_hold_is_written_as_java_writes_it(kind: str) -> None:
    buf = _mod(kind).PubRows(TOPIC, "gé", _host, 8, 4)
    buf.add(1, 3, "T", "M\ud800", "ü", None, "b2", 3, 3, None, False, "R")
    text, keys, _ = buf.chunk(0, 1 << 20)
    assert text == "\x01".join(["Pub", "1", "R", "gé", "T", "M?", "ü", "null", "null", "3", "2", "3", "null",
                                "false"]).encode() + b"\x02"
    assert keys == b"M? " and _mod(kind).join_keys(b"  a b  a \xc3\xbc ") == "a b ü"


@pytest.mark.parametrize("kind", TWINS)
def test_join_keys_of_a_full_message_s_ids(kind: str) -> None:
    # hundreds of ids that differ only in their last bytes (the compiled set hashes eight bytes a
    # step), repeated, with words of every length around a step and runs of spaces
    ids = [f"7F0000010B5C18B4AAC2512F{i:08X}" for i in range(900)]
    words = ids + ids[::3] + ["k" * n for n in range(1, 20)] + ["k" * 5, "é" * 7, "x"]
    raw = "  ".join(words).encode() + b" "
    assert _mod(kind).join_keys(raw) == " ".join(dict.fromkeys(words))
    assert _mod(kind).join_keys(b"") == "" and _mod(kind).join_keys(b"   ") == ""


def _packed(kind: str, batches: list[list[tuple[Any, ...]]], fill: int, keys_fill: int, keys_max: int,
            compress_over: int) -> list[Any]:
    """What a packer of ``kind`` makes of ``batches`` (each handed over as one PubRows), then of a
    flush (token 7) and a stop: its messages with their bodies inflated, and the tokens."""
    mod = _mod(kind)
    packer = mod.TracePacker(fill, keys_fill, keys_max, compress_over, 1, 60.0, 64)
    rows = mod.PubRows(TOPIC, "pg", _host, 1024, 1024)
    for batch in batches:
        for r in batch:
            _add(rows, r)
        assert packer.submit(rows) and len(rows) == 0
    assert packer.submit(rows, 7) and packer.submit(rows, -1) and packer.jobs_waiting == len(batches) + 2
    packer.run()  # (on this thread: it returns after the stop)
    out = []
    for item in packer.take_ready():
        if isinstance(item, int):
            out.append(item)
            continue
        body, compressed, keys, head = item
        text = zlib.decompress(body) if compressed else body
        assert compressed == (len(text) >= compress_over) and head == text[:500]
        out.append((text, keys))
    assert packer.lost == 0 and packer.take_ready() == []
    return out


@pytest.mark.c_ext
@settings(max_examples=40, deadline=None)
@given(batches=st.lists(st.lists(_row, max_size=6), max_size=5), fill=st.integers(1, 600),
       keys_fill=st.integers(1, 200), keys_max=st.integers(1, 120), compress_over=st.sampled_from([0, 300, 1 << 20]))
def test_both_packers_cut_the_same_messages(batches: list[list[tuple[Any, ...]]], fill: int, keys_fill: int,
                                            keys_max: int, compress_over: int) -> None:
    got = _packed("c", batches, fill, keys_fill, keys_max, compress_over)
    assert got == _packed("py", batches, fill, keys_fill, keys_max, compress_over)
    kept = [r for b in batches for r in b if not r[2].startswith(TOPIC)]
    assert got[-2:] == [7, -1] and b"".join(t for t, _ in got[:-2]) == "".join(_want(r, "pg")[0] for r in kept).encode()
    for text, keys in got[:-2]:  # a message's records stop at the one that reaches either fill
        raw = keys.encode()
        assert len(raw) <= keys_max and (not raw or raw[-1:] != b" ")
        assert len(text) < fill + max(len(_want(r, "pg")[0].encode()) for r in kept)


@pytest.mark.parametrize("kind", TWINS)
def test_a_packer_sends_a_message_whose_first_record_waited_and_tells_the_loop(kind: str) -> None:
    import os
    import threading
    import time
    mod = _mod(kind)
    r, w = os.pipe()
    os.set_blocking(r, False)
    packer = mod.TracePacker(1 << 20, 1 << 20, 1 << 20, 1 << 20, 1, 0.05, 2, w)
    rows = mod.PubRows(TOPIC, "pg", _host, 1024, 1024)
    thread = threading.Thread(target=packer.run)
    thread.start()
    try:
        _add(rows, (1, 2, "T", "M1", None, "k", "b1", 3, 0, None, "SEND_OK", "R"))
        assert packer.submit(rows)
        deadline = time.monotonic() + 10
        got: list[Any] = []
        while not got and time.monotonic() < deadline:  # (no flush: the record's age makes it)
            time.sleep(0.01)
            got = packer.take_ready()
        assert [(keys, body.startswith(b"Pub\x011\x01R\x01pg\x01T\x01M1")) for body, _c, keys, _h in got] == [("M1 k", True)]
        assert os.read(r, 16) == b"x"  # (told once: nothing was waiting before)
    finally:
        packer.submit(rows, -1)
        thread.join(10)
        os.close(r)
        os.close(w)
    assert not thread.is_alive() and packer.take_ready() == [-1]


@pytest.mark.parametrize("kind", TWINS)
def test_a_packer_refuses_a_batch_beyond_its_bound_but_never_a_flush(kind: str) -> None:
    mod = _mod(kind)
    packer = mod.TracePacker(1 << 20, 1 << 20, 1 << 20, 1 << 20, 1, 60.0, 2)
    rows = mod.PubRows(TOPIC, "pg", _host, 1024, 1024)
    for i in range(3):
        _add(rows, (1, 2, "T", f"M{i}", None, None, "b1", 3, 0, None, "SEND_OK", "R"))
        assert packer.submit(rows) == (i < 2)
    assert len(rows) == 1 and packer.jobs_waiting == 2  # (refused: the rows keep their record)
    assert packer.submit(rows, 3) and packer.submit(rows, -1) and packer.jobs_waiting == 4
    packer.run()
    got = packer.take_ready()
    assert got[-2:] == [3, -1] and [k for _b, _c, k, _h in got[:-2]] == ["M0 M1 M2"]


@pytest.mark.parametrize("kind", TWINS)
def test_text_that_is_not_bytes_is_refused(kind: str) -> None:
    mod = _mod(kind)
    rows = mod.PubRows(TOPIC, "pg", _host, 4, 4)
    for text, keys in ((None, b"k "), (b"Pub\x02", None)):
        with pytest.raises(TypeError):
            rows.add_text(text, keys)
    with pytest.raises((TypeError, AttributeError)):
        mod.join_keys(None)
    assert len(rows) == 0 and rows.add_text(b"Pub\x02", b"k ") == 0
    assert rows.chunk(0, 1 << 20) == (b"Pub\x02", b"k ", 1)  # (nothing of the refused ones left)
