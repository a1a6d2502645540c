"""Each wire fact is declared once in ``fastmq/protocol``; these tests fail when a twin or a copy
drifts from its declaration (docs/ARCHITECTURE.md, "Where each wire fact is declared")."""
from __future__ import annotations

import pytest

from fastmq._ext import codec_py
from fastmq.errors import BrokerError
from fastmq.protocol.codes import LANGUAGE_NAMES, RETRY_RESPONSE_CODES, LanguageCode, ResponseCode

try:
    from fastmq._ext import codec_c
except ImportError:  # a pure install
    codec_c = None  # type: ignore[assignment]

CODECS = [codec_py] + ([codec_c] if codec_c is not None else [])


# -- codes and the retriable set --------------------------------------------------------------------

def test_retry_set_is_4_9_producers() -> None:
    # DefaultMQProducer.retryResponseCodes; SYSTEM_BUSY is left to the caller
    assert RETRY_RESPONSE_CODES == {17, 14, 1, 16, 204, 205}


@pytest.mark.parametrize("code", [int(c) for c in ResponseCode] + [999])
def test_error_retriable_reads_the_set(code: int) -> None:
    assert BrokerError.for_code(code, "r").retriable is (code in RETRY_RESPONSE_CODES)


# -- language table ---------------------------------------------------------------------------------

def test_language_names_are_the_enum() -> None:
    assert LANGUAGE_NAMES == tuple(m.name for m in sorted(LanguageCode))
    assert [LANGUAGE_NAMES.index(m.name) for m in LanguageCode] == [int(m) for m in LanguageCode]


@pytest.mark.parametrize("codec", CODECS, ids=lambda m: m.__name__.rsplit(".", 1)[1])
@pytest.mark.parametrize("lang", [int(m) for m in LanguageCode] + [len(LanguageCode), 120])
def test_codec_twins_spell_every_language_from_the_table(codec, lang: int) -> None:
    assert codec.LANGUAGE_NAMES is LANGUAGE_NAMES
    frame = codec.encode_frame(codec.RemotingCommand(10, language=lang, opaque=1))
    name = LANGUAGE_NAMES[lang] if lang < len(LANGUAGE_NAMES) else "OTHER"
    assert f'"language":"{name}"'.encode() in frame
    back = codec.decode_frame(frame)
    assert back.language == (lang if lang < len(LANGUAGE_NAMES) else int(LanguageCode.OTHER))
