"""Text for a person's terminal: the one place that makes CLI data safe to show.

Whatever the CLI wrote (its answer, tool names, stderr, session ids) may hold
escape sequences: an OSC 52 clipboard write, a title change, a screen clear.
:func:`printable` removes every C0 and C1 control character except newline
and tab (ESC, BEL, CR, backspace, DEL, U+0080-U+009F, ...), so no byte from a
run can drive the terminal.  Every command that shows text to a person passes
it through here; the JSON outputs (``--json``, ``--events``) are exact and
escaped instead.
"""

from __future__ import annotations

import signal

__all__ = ["printable", "signal_name"]

_CONTROL: dict[int, None] = {
    code: None for code in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if code not in (0x09, 0x0A)
}


def signal_name(signum: int) -> str:
    """A signal's name (``SIGTERM``), or ``signal N`` for a number no signal has."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def printable(text: object) -> str:
    """``text`` (made a string) without C0/C1 control characters, newline and
    tab kept."""
    value = text if isinstance(text, str) else str(text)
    return value.translate(_CONTROL)
