"""fastmq.common.progress: a line on a terminal, rewritten and wiped; nothing when not a terminal."""
from __future__ import annotations

import io

from fastmq.common.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_one_line_rewritten_then_wiped() -> None:
    out = _Tty()
    with Progress("asking brokers", out, min_interval=0) as p:
        for i in range(3):
            p(i, 3)
        p(3, 3)
    text = out.getvalue()
    assert "asking brokers: 0/3" in text and "asking brokers: 3/3" in text
    assert "\n" not in text and text.endswith("\r")  # nothing left on the line, no new lines
    assert text.rsplit("\r", 2)[-2].strip() == ""


def test_redraws_are_throttled_but_the_last_is_drawn() -> None:
    out = _Tty()
    p = Progress("x", out, min_interval=60)
    for i in range(100):
        p(i, 100)
    p(100, 100)
    assert out.getvalue().count("\r") == 2  # the first and the last


def test_piped_output_stays_clean() -> None:
    out = io.StringIO()
    with Progress("asking brokers", out, min_interval=0) as p:
        for i in range(5):
            p(i, 5)
    assert out.getvalue() == "" and not p.enabled
