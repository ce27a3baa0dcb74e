"""The commands in a shell command line, best effort: what
:func:`coding_genesis.approval.deny_commands` matches its patterns against.

The line is split on ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines;
``$(...)``, ``<(...)``, backticks and ``bash -lc '...'`` are looked into;
leading ``VAR=value`` assignments and wrappers (``sudo``, ``env``...) are
tried with and without.  Not a shell parser: a command can be spelled in
ways no splitting foresees (a script, an alias, ``eval``).
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from collections.abc import Iterator

__all__ = ["command_parts"]

#: Where one command ends and the next begins.
_SEPARATORS = re.compile(r"\|\||&&|[;|&\n]")
#: ``$(``, ``<(``, ``>(``: substitutions whose inside is a command of its own.
_OPENING = re.compile(r"[$<>]\(|`")
#: A shell's ``-c`` flag (``-c``, ``-lc``, ``-ec``): the next word is a command.
_SHELL_C = re.compile(r"-[a-zA-Z]*c[a-zA-Z]*")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
#: Leading ``VAR=value`` assignments.
_ASSIGNMENTS = re.compile(r"""^(?:[A-Za-z_]\w*=(?:'[^']*'|"[^"]*"|\S*)\s+)+""")
#: Words that run the command after them.
_WRAPPERS = frozenset(
    {"sudo", "env", "nohup", "exec", "command", "builtin", "time", "nice", "xargs"}
    | {"if", "then", "else", "elif", "do", "while", "until", "!"}
)


def command_parts(command: str) -> list[str]:
    """``command`` and every command in it, best effort (see
    :func:`coding_genesis.approval.deny_commands`)."""
    parts = [command]
    for piece in _simple_commands(command):
        for variant in _variants(piece):
            if variant not in parts:
                parts.append(variant)
    return parts


def _simple_commands(text: str, depth: int = 0) -> Iterator[str]:
    outer, inner = _substitutions(text)
    for raw in _SEPARATORS.split(outer):
        piece = raw.strip().lstrip("({").strip()
        for opening, closing in ("()", "{}"):
            while piece.endswith(closing) and piece.count(closing) > piece.count(opening):
                piece = piece[:-1].rstrip()
        if piece:
            yield piece
    if depth < 8:  # deeper nesting than any real command
        for found in inner:
            yield from _simple_commands(found, depth + 1)
        for script in _shell_scripts(outer):
            yield from _simple_commands(script, depth + 1)


def _shell_scripts(text: str) -> Iterator[str]:
    """The commands given to a shell with ``-c`` (codex runs ``/bin/bash -lc '...'``)."""
    try:
        words = shlex.split(text)
    except ValueError:  # unbalanced quotes: no script can be told apart
        return
    shell = False
    for word, after in itertools.pairwise(words):
        shell = shell or os.path.basename(word) in _SHELLS
        if shell and _SHELL_C.fullmatch(word):
            yield after


def _substitutions(text: str) -> tuple[str, list[str]]:
    """``text`` with each substitution replaced by ``$(...)``, and their insides."""
    outer: list[str] = []
    inner: list[str] = []
    at = 0
    while (match := _OPENING.search(text, at)) is not None:
        outer.append(text[at : match.start()])
        start = match.end()
        if match.group() == "`":
            end = text.find("`", start)
            end = len(text) if end < 0 else end
            close = end + 1
        else:
            level, end = 1, start
            while end < len(text) and level:
                level += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            close, end = end, end - 1 if level == 0 else end
        inner.append(text[start:end])
        outer.append("$(...)")
        at = close
    outer.append(text[at:])
    return "".join(outer), inner


def _variants(piece: str) -> Iterator[str]:
    """``piece`` as written, then without its assignments and wrappers, one by one."""
    yield piece
    while True:
        bare = _ASSIGNMENTS.sub("", piece)
        if bare == piece:
            word, _, rest = piece.partition(" ")
            bare = rest.strip() if word in _WRAPPERS else piece
        if not bare or bare == piece:
            return
        yield bare
        piece = bare
