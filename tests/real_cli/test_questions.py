"""``asker=`` against the REAL claude 2.1.330 and codex 0.169 and the fake model
server (issue 41, §10): the model's question to the user (claude's
``AskUserQuestion`` tool, codex's ``request_user_input`` tool, which 0.169 offers
the model with no feature flag: measured) reaches the asker, and its answer reaches
the model's next request; without an asker the model reads that nobody can answer.
Each question is in the result's ``questions`` and a ``QuestionEvent``."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from coding_genesis.questions import NO_ONE_ANSWERS, UserAnswer, UserQuestion
from tests.real_cli.test_claude_codex import (
    Recorder,
    Rig,
    claude_rig,
    codex_rig,
    explain,
    hermetic_env,
)

__all__ = ["claude_rig", "codex_rig", "hermetic_env"]  # the real-CLI fixtures, active here too

pytestmark = pytest.mark.timeout(240)

QUESTION = "Which color should the button be?"
CLAUDE_ASKS = "SCENARIO:tool AskUserQuestion " + json.dumps(
    {
        "questions": [
            {
                "question": QUESTION,
                "header": "Color",
                "options": [
                    {"label": "red", "description": "warm"},
                    {"label": "teal", "description": "cool"},
                ],
                "multiSelect": False,
            }
        ]
    }
)
CODEX_ASKS = "SCENARIO:tool request_user_input " + json.dumps(
    {
        "questions": [
            {
                "id": "color",
                "header": "Color",
                "question": QUESTION,
                "options": [
                    {"label": "red", "description": "warm"},
                    {"label": "teal", "description": "cool"},
                ],
            }
        ]
    }
)


def asks(rig: Rig) -> str:
    return CLAUDE_ASKS if rig.backend == "claude" else CODEX_ASKS


def last_request(rig: Rig) -> str:
    return json.dumps(rig.server.model_requests()[-1].body)


@pytest.fixture(params=["claude", "codex"])
def question_rig(request: pytest.FixtureRequest) -> Rig:
    rig: Rig = request.getfixturevalue(f"{request.param}_rig")
    return rig


def test_the_askers_answer_reaches_the_model(question_rig: Rig) -> None:
    rig = question_rig
    heard: list[UserQuestion] = []

    async def asker(question: UserQuestion) -> UserAnswer:
        heard.append(question)
        return UserAnswer(choices=("teal",))

    agent = rig.agent_with(asker=asker)
    events = Recorder(agent)
    with agent.session_sync() as session:
        turn = session.send(asks(rig))
    assert [(q.text, q.options) for q in heard] == [(QUESTION, ("red", "teal"))], explain(turn)
    assert "teal" in last_request(rig), explain(turn)
    (record,) = turn["questions"]
    assert record["answered"] is True and record["answer"] == "teal" and record["source"] == "asker"
    (event,) = [e for e in events.events if e["type"] == "question"]
    assert event["question"] == QUESTION and event["answered"] is True


def test_without_an_asker_the_model_reads_that_nobody_answers(claude_rig: Rig) -> None:
    """(codex without an asker keeps request_user_input off: it tells the model itself
    that the tool "is unavailable in Default mode")."""
    rig = claude_rig
    with rig.agent_with().session_sync() as session:
        turn = session.send(CLAUDE_ASKS)
    assert NO_ONE_ANSWERS in last_request(rig), explain(turn)
    (record,) = turn["questions"]
    assert record["answered"] is False and record["source"] == "none"


def test_an_asker_too_slow_is_no_answer(question_rig: Rig) -> None:
    rig = question_rig

    async def slow(question: UserQuestion) -> Any:
        await anyio.sleep(30)

    with rig.agent_with(asker=slow, question_timeout=0.5).session_sync() as session:
        turn = session.send(asks(rig))
    assert NO_ONE_ANSWERS in last_request(rig), explain(turn)
    assert turn["questions"][0]["source"] == "timeout"


def test_with_an_approver_the_question_still_goes_to_the_asker(claude_rig: Rig) -> None:
    """claude's PreToolUse hook (an approver's) lets AskUserQuestion through to its
    can_use_tool: the approver is not asked about a question, the asker is."""
    rig = claude_rig
    approved: list[str] = []

    def approver(request: Any) -> bool:
        approved.append(request.tool)
        return True

    agent = rig.agent_with(asker=lambda question: "teal", approver=approver)
    with agent.session_sync() as session:
        turn = session.send(CLAUDE_ASKS)
    assert "teal" in last_request(rig), explain(turn)
    assert approved == [] and turn["questions"][0]["answered"] is True


def test_a_run_with_an_asker_is_one_live_turn(question_rig: Rig) -> None:
    rig = question_rig
    result = rig.agent_with(asker=lambda question: "teal").run_sync(asks(rig))
    assert "teal" in last_request(rig), explain(result)
    assert [q["answer"] for q in result["questions"]] == ["teal"]


def test_a_secret_answer_reaches_the_model_and_none_of_our_records(codex_rig: Rig) -> None:
    """codex's ``isSecret`` question: the answer reaches the model, but neither the
    result's record, the question's event nor the transcript's record of what we wrote
    to codex keeps it.  (The fake model then repeats its tool's output, secret and all,
    as its answer: what a model says is not ours to mask.)"""
    rig = codex_rig
    secret = "hunter2-7c1e94d0b3"
    asking = json.loads(CODEX_ASKS.split(" ", 2)[2])
    asking["questions"][0] |= {"isSecret": True, "isOther": True}
    agent = rig.agent_with(asker=lambda question: secret, transcripts=str(rig.tmp / "runs"))
    events = Recorder(agent)
    with agent.session_sync() as session:
        turn = session.send("SCENARIO:tool request_user_input " + json.dumps(asking))
    assert secret in last_request(rig), explain(turn)
    (record,) = turn["questions"]
    assert record["answered"] is True and record["answer"] is None
    (event,) = [e for e in events.events if e["type"] == "question"]
    assert secret not in json.dumps(event) and secret not in json.dumps(record)
    written = list((rig.tmp / "runs").rglob("stdin.jsonl"))
    assert written and all(secret.encode() not in p.read_bytes() for p in written)
    assert any(b"[REDACTED]" in p.read_bytes() for p in written)
