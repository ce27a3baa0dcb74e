"""`genesis chat` answering the CLI's questions to the user (``asker=``) in a real
pseudo-terminal, against the fake codex app-server (its ``QUESTION`` scenario asks
two questions with ``item/tool/requestUserInput`` and says the answers it got): each
question shown as the approval screen lays out its text, its options numbered; a
number picks an option, words are the answer, and nothing typed becomes a prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_genesis._cli.question import user_answer, user_question
from coding_genesis.questions import UserAnswer, UserQuestion
from tests.support import FakeCLI
from tests.terminal import Terminal, terminals

__all__ = ["terminals"]  # the fixture, active here too

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]


def test_chat_asks_the_clis_questions_and_takes_the_answers(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    fake = FakeCLI(tmp_path, "codex")
    env = {
        **fake.env(),
        "GENESIS_TRANSCRIPTS": "off",
        "GENESIS_RUN_LOG": "off",
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
    }
    argv = ["chat", "--backend", "codex", "--cli-path", fake.path, "--grace", "1"]
    terminal = Terminal(argv, env=env)
    terminals.append(terminal)
    assert terminal.wait_for("session open"), terminal.screen
    terminal.send(b"QUESTION Proceed \x1b[31mnow?\r")  # an escape in it is never drawn
    assert terminal.wait_for("The CLI asks (Go?):"), terminal.screen
    assert terminal.wait_below("│ Proceed [31mnow?", "1. yes"), terminal.screen  # ESC dropped
    assert terminal.wait_for("Answer (a number or your words; empty declines):"), terminal.screen
    terminal.send(b"1\r")
    assert terminal.wait_for("The CLI asks (Why):"), terminal.screen
    terminal.send(b"because it is late\r")
    said = '"q1": {"answers": ["yes"]}, "q2": {"answers": ["because it is late"]}'
    assert terminal.wait_for(said), terminal.screen
    terminal.send(b"/exit\r")
    assert terminal.wait() == 0
    turns = [r for r in fake.records() if r.get("received") == "turn/start"]
    assert len(turns) == 1, turns  # neither answer was sent as a prompt
    assert "Traceback" not in terminal.seen and "\x1b[31m" not in terminal.seen


@pytest.mark.parametrize(
    ("typed", "multiple", "answer"),
    [
        ("2", False, UserAnswer(choices=("teal",))),
        ("1, 2", True, UserAnswer(choices=("red", "teal"))),
        ("1, 2", False, UserAnswer(text="1, 2")),  # one option only: the words stand
        ("3", False, UserAnswer(text="3")),
        ("  ", False, UserAnswer(declined=True)),
        ("my own", False, UserAnswer(text="my own")),
    ],
)
def test_what_a_typed_line_answers(typed: str, multiple: bool, answer: UserAnswer) -> None:
    question = UserQuestion("Color?", options=("red", "teal"), multiple=multiple)
    assert user_answer(question, typed) == answer


def test_a_long_question_fits_the_screen_and_says_what_is_left_out() -> None:
    question = UserQuestion("\n".join(f"line {i}" for i in range(200)), options=("a",) * 12)
    above, prompt = user_question(question, 60, 20)
    assert prompt == "Answer (a number or your words; empty declines): "
    assert len(above) + 1 <= 20 and all(len(line) <= 60 for line in above)
    assert any("not shown" in line for line in above) and "⟨3 more options not shown⟩" in above[-1]
