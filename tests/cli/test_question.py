"""The question asked at the terminal about a tool call (`coding_genesis._cli.question`):
laid out to fit any screen, saying what it leaves out, a move shown from its source to its
destination, and its answers as data.  (In a real terminal: tests/security/test_questions.py.)"""

from __future__ import annotations

import pytest

from coding_genesis._cli.question import Question, choices
from coding_genesis.approval import ApprovalRequest
from tests.security.test_questions import COLUMNS, DANGER, PADDED, ROWS


def layout(command: str, columns: int = COLUMNS, rows: int = ROWS) -> list[str]:
    request = ApprovalRequest("Bash", {"command": command}, kind="command", command=command)
    above, prompt = Question(request, choices("session")).render(columns, rows)
    return [*above, prompt]


@pytest.mark.parametrize("padding", sorted(PADDED))
def test_the_question_fits_the_screen_and_says_what_it_leaves_out(padding: str) -> None:
    for columns, rows in ((80, 24), (40, 10), (200, 60)):
        shown = layout(PADDED[padding], columns, rows)
        # Every row above the question within the width; the question may wrap.
        assert all(len(line) <= columns for line in shown[:-1]), shown
        assert sum(-(-len(line) // columns) for line in shown) <= rows - 1, shown
        text = "\n".join(shown)
        assert DANGER in text or columns < len(DANGER) + 8, text
        if rows < 60:  # too big for the screen: what is not shown is said
            assert any(mark in text for mark in ("⟨", "more lines not shown")), text


def test_a_move_is_shown_from_its_source_to_its_destination() -> None:
    request = ApprovalRequest(
        "fileChange",
        {},
        kind="write",
        paths=("a.txt", "/home/u/.bashrc", "b.txt"),
        moves=(("a.txt", "/home/u/.bashrc"),),
    )
    above, prompt = Question(request, choices("run", request)).render(80, 24)
    assert above == ["fileChange wants to write:", "  │ a.txt → /home/u/.bashrc", "  │ b.txt"]
    # an unresolvable relative path (no cwd): no "always" for these paths is offered
    assert prompt == (
        "Allow fileChange? [y]es (this call once) / [t]ool (every fileChange call) / [n]o: "
    )


def test_choices_are_data_the_typed_answer_picks_one() -> None:
    request = ApprovalRequest("Bash", {"command": "ls"}, kind="command", command="ls")
    question = Question(request, choices("session", request))
    assert question.hint == "  answer y, a, t or n (n <why> tells the model why)"
    assert question.choice("maybe") is None
    yes, no, always, tool = (
        question.choice(word) for word in ("Y", "no  not now", "always", "tool")
    )
    assert yes is not None and yes[0].decision(yes[1]).allowed
    assert not yes[0].decision("").always
    assert no is not None
    refused = no[0].decision(no[1])
    assert not refused.allowed and refused.message == "not now"
    assert always is not None
    exact = always[0].decision("")
    assert exact.always and exact.scope == "exact"
    assert tool is not None
    wide = tool[0].decision("")
    assert wide.always and wide.scope == "tool"


def test_each_choice_says_its_scope() -> None:
    command = ApprovalRequest("Bash", {"command": "ls"}, kind="command", command="ls", cwd="/w")
    labels = [c.label for c in choices("session", command)]
    assert labels == [
        "[y]es (this command once)",
        "[a]lways (this exact Bash command)",
        "[t]ool (every Bash call)",
        "[n]o",
    ]
    write = ApprovalRequest("Write", {}, kind="write", paths=("a.txt",), cwd="/w")
    assert "[a]lways (these paths)" in [c.label for c in choices("run", write)]
    read = ApprovalRequest("Read", {}, kind="read", cwd="/w")
    assert [c.words[0] for c in choices("run", read)] == ["y", "t", "n"]  # a read: no "always"
