"""Text for a person's terminal: the one place that makes CLI data safe to show.

Whatever the CLI wrote (its answer, tool names, stderr, session ids) may hold
escape sequences: an OSC 52 clipboard write, a title change, a screen clear.
:func:`printable` removes every C0 and C1 control character except newline
and tab (ESC, BEL, CR, backspace, DEL, U+0080-U+009F, ...), so no byte from a
run can drive the terminal, and every bidirectional override, isolate and mark
(U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C), so no text can show
itself in another order than it is (a ``rm -rf`` that reads as something else).
Every command that shows text to a person passes it through here.

The JSON outputs (``--json``, ``--events``) are exact: JSON escapes C0
controls but not C1 ones nor bidi controls, so on a terminal they go through
:func:`json_for_terminal`, which writes those characters as ``\\u`` escapes
(the same JSON value); into a pipe or a file they are written unchanged.
"""

from __future__ import annotations

import re
import signal

__all__ = ["BIDI_CONTROLS", "json_for_terminal", "printable", "signal_name"]

#: The bidirectional formatting characters: embeddings and overrides, isolates,
#: the left-to-right, right-to-left and Arabic letter marks.
BIDI_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)

_CONTROL: dict[int, None] = {
    code: None
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0), *BIDI_CONTROLS)
    if code not in (0x09, 0x0A)
}

#: The UTF-8 forms of the C1 controls and the bidi controls.  In valid UTF-8
#: (orjson's output) each of these lead bytes starts a character, so a match
#: is always a whole character; and in JSON text such a character can only be
#: inside a string, where ``\\u`` escaping it keeps the value.
_TERMINAL_UNSAFE = re.compile(
    rb"\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]|\xd8\x9c"
)


def signal_name(signum: int) -> str:
    """A signal's name (``SIGTERM``), or ``signal N`` for a number no signal has."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def printable(text: object) -> str:
    """``text`` (made a string) without C0/C1 control characters and bidi
    controls, newline and tab kept."""
    value = text if isinstance(text, str) else str(text)
    return value.translate(_CONTROL)


def _escape(match: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(match.group().decode("utf-8"))


def json_for_terminal(data: bytes) -> bytes:
    """JSON text (UTF-8) with its C1 and bidi controls written as ``\\uXXXX``:
    the same JSON, but nothing a terminal acts on (C0 controls are escaped
    by every JSON writer already)."""
    return _TERMINAL_UNSAFE.sub(_escape, data)
