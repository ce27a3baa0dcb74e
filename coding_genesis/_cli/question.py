"""The question a person is asked at the terminal about one tool call, and
the answers it offers: the one place both live (``genesis chat``, ``genesis
run --ask``).

What the call does comes from the CLI, so from the model: it may be made to
deceive.  The question shows it truthfully on a screen of a given size
(:meth:`Question.render`):

- escapes and bidirectional controls removed (:func:`printable`);
- a run of whitespace shown as a mark with its size (``⟨6000 spaces⟩``,
  ``⟨58 blank lines⟩``) instead of pushing the rest off the screen;
- a line wider than the terminal cut in its middle with a mark (``…⟨4,000
  characters⟩…``): its head and its tail both shown;
- a block taller than the screen: its first and last lines, with a mark
  saying how many are not shown between them;

so the whole question fits the screen, and whatever is left out is said.

The answers are data (:class:`Choice`: the words a person types, the label
shown, the decision made), so a new answer is one more entry of
:func:`choices`, not one more branch of the asker.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, get_character_cell_size

from coding_genesis._observers.progress import tool_summary
from coding_genesis._util.display import printable
from coding_genesis.approval import (
    AlwaysScope,
    ApprovalOption,
    ApprovalRequest,
    Decision,
    always_covers,
)
from coding_genesis.questions import UserAnswer, UserQuestion

__all__ = [
    "Choice",
    "Question",
    "choices",
    "describe",
    "one_line",
    "user_answer",
    "user_question",
]

#: The longest detail shown inside the question's own line.
INLINE = 100
#: The fewest columns and rows a question is laid out for.
_MIN_COLUMNS = 40
_MIN_ROWS = 10
#: What starts a row of the detail: a line of it, the rest of a wrapped
#: line, a mark of what is not shown.
_LINE, _WRAPPED, _MARK = "  │ ", "  ↪ ", "  ┊ "
#: A run of this much horizontal whitespace, or more, is shown as a mark.
_RUN = re.compile(r"[^\S\n]{4,}")


@dataclass(frozen=True, slots=True)
class Choice:
    """One answer the question offers: what a person types (``words``; the
    first is the one the hint names), how the question shows it
    (``label``: with its scope), the decision it makes and the reason kept in
    the result.  ``told``: a refusal whose words after the choice are what
    the model is told, this when none are typed (empty: the words are not
    read).  ``always``: for the rest of the session, and how widely."""

    words: tuple[str, ...]
    label: str
    option: ApprovalOption
    reason: str
    told: str = ""
    always: AlwaysScope | None = None

    def decision(self, said: str) -> Decision:
        """The decision of this choice, ``said`` typed after it."""
        always: bool | AlwaysScope = self.always or False
        if self.option in (ApprovalOption.ALLOW_ONCE, ApprovalOption.ALLOW_ALWAYS):
            return Decision.allow(always=always, reason=self.reason)
        message = (said.strip() if self.told else "") or self.told or "refused at the terminal"
        return Decision.deny(message, always=always, reason=self.reason)


def choices(scope: str, request: ApprovalRequest | None = None) -> tuple[Choice, ...]:
    """The answers to a question about ``request``, each saying its scope:
    this call once; this exact command (or a write of exactly these paths)
    for the rest of ``scope`` (``session``, ``run``), where the session can
    remember it (:func:`~coding_genesis.approval.always_covers`); every call
    of this tool for the rest of ``scope``; refuse, with a reason."""
    once = "this call" if request is None or request.kind != "command" else "this command"
    offered = [
        Choice(
            ("y", "yes"),
            f"[y]es ({once} once)",
            ApprovalOption.ALLOW_ONCE,
            "allowed at the terminal",
        )
    ]
    covers = always_covers(request) if request is not None else None
    if covers is not None:
        offered.append(
            Choice(
                ("a", "always"),
                f"[a]lways ({_short(covers)})",
                ApprovalOption.ALLOW_ALWAYS,
                f"allowed at the terminal for this {scope}: {covers}",
                always="exact",
            )
        )
    if request is not None:
        every = always_covers(request, "tool") or "this tool"
        offered.append(
            Choice(
                ("t", "tool"),
                f"[t]ool ({every})",
                ApprovalOption.ALLOW_ALWAYS,
                f"allowed at the terminal for this {scope}: {every}",
                always="tool",
            )
        )
    offered.append(
        Choice(
            ("n", "no"),
            "[n]o",
            ApprovalOption.REJECT_ONCE,
            "refused at the terminal",
            told="the user refused this tool call",
        )
    )
    return tuple(offered)


def _short(covers: str) -> str:
    """What an "always" covers, short enough for the question's line (the
    paths it names are shown above the question)."""
    return "these paths" if " writing exactly " in covers else covers


def describe(request: ApprovalRequest) -> str:
    """What a tool call does, as the question shows it: the command; the
    paths a write touches, one a line, a move as ``source → destination``;
    else the input's telling field."""
    if request.kind == "command" and request.command:
        return request.command
    if request.paths:
        moved = dict(request.moves)
        destinations = set(moved.values())
        shown = [
            f"{path} → {moved[path]}" if path in moved else path
            for path in request.paths
            if path in moved or path not in destinations
        ]
        return "\n".join(shown)
    summary = tool_summary(request.tool, request.input, limit=100_000)
    prefix = f"{request.tool}: "
    return summary[len(prefix) :] if summary.startswith(prefix) else ""


@dataclass(frozen=True, slots=True)
class Question:
    """The question about ``request``, offering ``choices``."""

    request: ApprovalRequest
    choices: Sequence[Choice]

    @property
    def hint(self) -> str:
        """What to answer, said after an answer that is none of the choices."""
        named = [
            f"{c.words[0]} ({c.words[0]} <why> tells the model why)" if c.told else c.words[0]
            for c in self.choices
        ]
        listed = ", ".join(named[:-1]) + f" or {named[-1]}" if len(named) > 1 else named[0]
        return f"  answer {listed}"

    def choice(self, typed: str) -> tuple[Choice, str] | None:
        """The choice a typed line makes and the words after it; None when
        it makes none."""
        word, _, rest = typed.strip().partition(" ")
        word = word.lower()
        for choice in self.choices:
            if word in choice.words:
                return choice, rest
        return None

    def render(self, columns: int, rows: int) -> tuple[list[str], str]:
        """The lines shown above the question and the question itself (the
        answer is typed after it), laid out to fit ``columns`` × ``rows``."""
        columns, rows = max(columns, _MIN_COLUMNS), max(rows, _MIN_ROWS)
        request = self.request
        tool = one_line(request.tool, max(columns // 3, 12))
        labels = " / ".join(choice.label for choice in self.choices)
        tail = f"? {labels}: "
        detail = _lines(describe(request))
        above: list[str] = []
        if request.reason:
            above.append("  why: " + one_line(request.reason, columns - 8))
        if len(detail) == 1 and cell_len(detail[0]) <= INLINE:
            inline = f"Allow {tool} `{detail[0]}`{tail}"
            if cell_len(inline) + 8 <= 2 * columns:  # two rows at most, the answer's room kept
                return above, inline
        if detail:
            verb = {"command": " wants to run", "write": " wants to write"}.get(request.kind, "")
            # Rows left for the detail: the screen less its heading, the reason,
            # the question (it may take two rows) and one row for what was above.
            budget = rows - 1 - len(above) - 2 - 1
            above = [f"{tool}{verb}:", *_fit(detail, columns - len(_LINE) - 1, budget), *above]
        return above, f"Allow {tool}{tail}"


def user_question(question: UserQuestion, columns: int, rows: int) -> tuple[list[str], str]:
    """A question of the CLI to the user (``asker=``), laid out as an
    approval's is: the lines shown above it (who asks, the question, its
    options numbered) and the prompt; all of it from the model, so made
    printable and fitted to ``columns`` × ``rows`` with what is left out said."""
    columns, rows = max(columns, _MIN_COLUMNS), max(rows, _MIN_ROWS)
    who = "The CLI asks"
    if question.server:
        who += " for the MCP server " + one_line(question.server, columns // 3)
    if question.header:
        who += " (" + one_line(question.header, columns // 3) + ")"
    options = [
        f"{_LINE}{i}. {one_line(option, columns - len(_LINE) - 6)}"
        for i, option in enumerate(question.options[:9], 1)
    ]
    if len(question.options) > 9:
        options.append(f"{_MARK}⟨{len(question.options) - 9} more options not shown⟩")
    budget = rows - 1 - len(options) - 2 - 1
    text = _fit(_lines(question.text), columns - len(_LINE) - 1, budget)
    if question.multiple:
        how = "numbers with commas, or your words"
    elif question.options:
        how = "a number or your words"
    else:
        how = "your words"
    return [f"{who}:", *text, *options], f"Answer ({how}; empty declines): "


def user_answer(question: UserQuestion, typed: str) -> UserAnswer:
    """What a line typed at :func:`user_question`'s prompt answers: the
    options it numbers, else its words; empty, a refusal to answer."""
    said = typed.strip()
    if not said:
        return UserAnswer(declined=True)
    numbers = [part.strip() for part in said.split(",")]
    if question.options and all(n.isdigit() for n in numbers):
        picked = [int(n) for n in numbers]
        if all(1 <= n <= len(question.options) for n in picked) and (
            question.multiple or len(picked) == 1
        ):
            return UserAnswer(choices=tuple(question.options[n - 1] for n in picked))
    return UserAnswer(text=said)


def one_line(text: str, width: int) -> str:
    """``text`` on one row of ``width`` cells: made printable, its whitespace
    (newlines included) one space, cut in its middle with a mark."""
    return _cut(" ".join(printable(text).split()), width)


def _lines(text: str) -> list[str]:
    """``text`` made printable, as lines: a run of whitespace within a line
    and a run of blank lines each shown as a mark with its size."""
    lines: list[str] = []
    blank = 0
    for line in printable(text).split("\n"):
        if not line or line.isspace():
            blank += 1
            continue
        if blank:
            lines.append("" if blank == 1 else f"⟨{blank} blank lines⟩")
            blank = 0
        lines.append(_RUN.sub(_run_mark, line).replace("\t", " "))
    return lines  # blank lines at the end: nothing to show


def _run_mark(match: re.Match[str]) -> str:
    run = match.group()
    what = "spaces" if run.count(" ") == len(run) else "blank characters"
    return f" ⟨{len(run):,} {what}⟩ "


def _fit(lines: list[str], width: int, budget: int) -> list[str]:
    """The rows of ``lines`` within ``width`` cells and ``budget`` rows.
    Each line gets one row at least, and the rows left are shared among the
    lines wider than a row: a line given all the rows it needs is wrapped
    whole, one given fewer shows its head and its tail around a mark.  With
    more lines than rows: the first and the last lines around a mark."""
    budget = max(budget, 3)
    if len(lines) > budget:
        head = budget // 2
        tail = budget - 1 - head
        hidden = len(lines) - head - tail
        mark = f"… {hidden:,} more lines not shown"
        mark = _MARK + (f"{mark}: answer n if unsure" if len(mark) + 22 <= width else mark)
        return [
            *(_LINE + _cut(line, width) for line in lines[:head]),
            mark,
            *(_LINE + _cut(line, width) for line in lines[len(lines) - tail :]),
        ]
    needs = [max(1, -(-cell_len(line) // width)) for line in lines]
    given = [1] * len(lines)
    spare = budget - len(lines)
    while spare > 0 and given != needs:
        for index, need in enumerate(needs):
            if spare > 0 and given[index] < need:
                given[index] += 1
                spare -= 1
    rows: list[str] = []
    for line, need, room in zip(lines, needs, given, strict=True):
        # A row may lose a cell to a wide character that does not fit at its end.
        pieces = _wrap(line if room >= need else _cut(line, room * (width - 1)), width)
        rows.append(_LINE + pieces[0])
        rows.extend(_WRAPPED + piece for piece in pieces[1:])
    return rows


def _wrap(line: str, width: int) -> list[str]:
    pieces: list[str] = []
    while line:
        piece = _head(line, width)
        pieces.append(piece)
        line = line[len(piece) :]
    return pieces


def _cut(line: str, width: int) -> str:
    """``line`` within ``width`` cells: as it is, or its head and its tail
    around a mark saying how much of its middle is not shown."""
    if cell_len(line) <= width:
        return line
    room = width - len(f"…⟨{len(line):,} characters⟩…")
    head = _head(line, max(room - room // 2, 1))
    tail = _tail(line, max(room // 2, 1))
    hidden = len(line) - len(head) - len(tail)
    return f"{head}…⟨{hidden:,} characters⟩…{tail}"


def _head(text: str, cells: int) -> str:
    """The longest start of ``text`` within ``cells`` cells (one character at least)."""
    used = 0
    for index, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > cells:
            return text[: max(index, 1)]
    return text


def _tail(text: str, cells: int) -> str:
    """The longest end of ``text`` within ``cells`` cells."""
    used = 0
    for index in range(len(text) - 1, -1, -1):
        used += get_character_cell_size(text[index])
        if used > cells:
            return text[index + 1 :]
    return text
