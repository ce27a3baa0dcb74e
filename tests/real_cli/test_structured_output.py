"""Structured output with the REAL claude and codex against the fake model server.

``output_schema=`` reaches each CLI the way it takes one (claude ``--json-schema``: the
fake model calls the ``StructuredOutput`` tool claude offers; codex ``--output-schema`` /
the app-server's ``outputSchema``: the fake model answers the JSON text), one-shot and in
a live session: a valid answer is the result's ``output``; an invalid one is asked again
once with the validation error (the one-shot run resumes its session, the session takes a
second turn), then fails ``invalid_output``; a wrong first answer fixed by that retry
succeeds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from coding_genesis.approval import ApprovalRequest
from tests.real_cli.test_claude_codex import Rig, hermetic_env, rig

__all__ = ["hermetic_env", "rig"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["name", "count"],
    "additionalProperties": False,
}
GOOD = '{"name": "x", "count": 2}'
BAD = '{"nam": 1}'
RETRY_WORDS = "Your final answer did not have the required structured format"


class Named(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    count: int


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def prompts(rig: Rig) -> list[str]:
    """The user text of each model request (its last user message)."""
    texts = []
    for request in rig.server.model_requests():
        body = request.body if isinstance(request.body, dict) else {}
        items = body.get("messages") if rig.backend == "claude" else body.get("input")
        users = [m for m in items or [] if isinstance(m, dict) and m.get("role") == "user"]
        texts.append(json.dumps(users[-1]) if users else "")
    return texts


async def test_a_valid_answer_is_the_output_one_shot_and_in_a_session(rig: Rig) -> None:
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request.tool)
        return True

    a = rig.agent_with()
    one = await a.run_result(f"SCENARIO:json {GOOD}", output_schema=SCHEMA)
    assert one.status == 0, one.message
    assert one.output == {"name": "x", "count": 2} and one.attempts == 1
    typed = await a.run_result(f"SCENARIO:json {GOOD}", output_schema=Named)
    assert typed.output == Named(name="x", count=2), typed.message
    async with a.session(output_schema=Named, approver=approver) as session:
        turns = [await session.send(f"SCENARIO:json {GOOD}") for _ in range(2)]
    assert [t["output"] for t in turns] == [{"name": "x", "count": 2}] * 2, turns
    assert [t["turn"] for t in turns] == [1, 2]
    assert asked == []  # claude's StructuredOutput call is the answer, not an action
    for request in rig.server.model_requests():
        body = request.body
        if rig.backend == "claude":
            (tool,) = [t for t in body["tools"] if t["name"] == "StructuredOutput"]
            assert tool["input_schema"]["required"] == ["name", "count"]
        else:
            fmt = body["text"]["format"]
            assert (fmt["type"], fmt["strict"]) == ("json_schema", True)
            assert fmt["schema"]["required"] == ["name", "count"]


async def test_an_invalid_answer_is_asked_again_once_then_fails(rig: Rig) -> None:
    # claude checks the StructuredOutput call itself; with one attempt allowed it gives
    # up (error_max_structured_output_retries), which is invalid_output here too.
    env = rig.env(MAX_STRUCTURED_OUTPUT_RETRIES="1") if rig.backend == "claude" else None
    a = rig.agent_with(env=env)
    one = await a.run_result(f"SCENARIO:json {BAD}", output_schema=SCHEMA)
    assert one.status == 1 and one.error == "invalid_output", one.message
    assert one.attempts == 2 and one.output is None
    first, second = one.retry_history
    assert (first["category"], first["action"]) == ("invalid_output", "retry")
    assert first["resume_session"] and second["action"] == "fail"
    if rig.backend == "claude":
        assert one.result_subtype == "error_max_structured_output_retries"
        assert "must have required property 'name'" in one.message
    else:
        assert "$: missing required property 'name'" in one.message
    last = prompts(rig)[-1]
    assert RETRY_WORDS in last and "SCENARIO:json" in last  # the retry quoted the error
    rig.server.clear()
    async with a.session(output_schema=SCHEMA) as session:
        wrong = await session.send_result(f"SCENARIO:json {BAD}")
        assert wrong.error == "invalid_output" and wrong.attempts == 2, wrong.message
        assert wrong.turn == 2 and session.turns == 2
        assert RETRY_WORDS in prompts(rig)[-1]
        after = await session.send_result(f"SCENARIO:json {GOOD}")
    assert after.status == 0 and after.output == {"name": "x", "count": 2}, after.message
    assert after.pid == wrong.pid and after.turn == 3


async def test_a_wrong_first_answer_fixed_by_the_retry(rig: Rig) -> None:
    a = rig.agent_with()
    fix = f"SCENARIO:jsonfix {BAD} {GOOD}"
    one = await a.run_result(fix, output_schema=Named)
    assert one.status == 0, one.message
    assert one.output == Named(name="x", count=2) and one.attempts == 2
    assert one.retry_history[0]["category"] == "invalid_output"
    async with a.session(output_schema=SCHEMA) as session:
        turn = await session.send_result(fix)
    assert turn.status == 0 and turn.output == {"name": "x", "count": 2}, turn.message
    assert (turn.attempts, turn.turn) == (2, 2)
