"""Step definitions of tests/features/questions.feature (the CLI's questions to the
user, ``asker=``), on the fake codex app-server (``tests/fakes/fake_app_server.py``,
its ``QUESTION`` scenario) through tests/steps/session_steps.py's session, and on
the fake ACP agent of tests/steps/acp_steps.py."""

from __future__ import annotations

import json

from pytest_bdd import given, parsers, then

from coding_genesis.questions import UserAnswer, UserQuestion
from tests.steps.acp_steps import AcpWorld
from tests.steps.session_steps import Live
from tests.support import FAKE_BIN


def fake_codex(live: Live) -> None:
    live.backend = "codex"
    del live.settings["options"]  # the failer's
    live.settings["cli_path"] = str(FAKE_BIN / "codex")


@given(parsers.parse('a fake codex agent whose asker answers "{choice}" and "{text}"'))
def codex_with_asker(live: Live, choice: str, text: str) -> None:
    fake_codex(live)

    async def asker(question: UserQuestion) -> UserAnswer:
        return UserAnswer(choices=(choice,)) if question.options else UserAnswer(text=text)

    live.settings["asker"] = asker


@given("a fake codex agent with no asker")
def codex_without_asker(live: Live) -> None:
    fake_codex(live)


@given(parsers.parse('an asker answering "{text}"'))
def an_asker(acp: AcpWorld, text: str) -> None:
    acp.settings["asker"] = lambda question: text


@then(parsers.parse('the CLI got the answers "{first}" and "{second}"'))
def cli_got(live: Live, first: str, second: str) -> None:
    said = json.loads(live.last["message"].removeprefix("answers: "))
    assert said == {"q1": {"answers": [first]}, "q2": {"answers": [second]}}, live.last


@then(
    parsers.parse(
        'the turn recorded the questions "{first}" and "{second}", answered by "{source}"'
    )
)
def recorded(live: Live, first: str, second: str, source: str) -> None:
    questions = live.last["questions"]
    assert [q["question"] for q in questions] == [first, second], questions
    assert {q["source"] for q in questions} == {source}, questions
    assert all(q["answered"] is (source == "asker") for q in questions), questions


@then(parsers.parse('the agent\'s form was filled with "{text}"'))
def form_filled(acp: AcpWorld, text: str) -> None:
    said = json.loads(acp.last.message.removeprefix("elicited: "))
    assert said == {"action": "accept", "content": {"answer": text}}, acp.last
