"""``output_schema=`` and a blocking ``pre_tool`` hook over the Agent Client Protocol with
the REAL gemini, qwen and opencode against the fake model server.

The schema reaches the agent in the turn's prompt and we validate the answer: a valid
answer, an invalid one (``invalid_output`` after the one retry) and one the retry fixes
(``SCENARIO:jsonfix``: the fake model answers the good value once a later prompt of the
same conversation carries the request again), in a live session (the retry is its next
turn) and for ``run(approver=...)`` (one live turn per attempt: qwen and opencode resume
it with ``session/load``; gemini's load wipes a session, so its retry is a fresh session
whose prompt repeats the request with the validation error, and the fake model, which
sees a new conversation, answers the bad value again).  A ``pre_tool`` hook blocks a
shell command through the agent's permission request: the command never runs and the
approver is never asked.  Each test skips, with the reason, when its CLI is not installed.
"""

from __future__ import annotations

import json

import pytest

from coding_genesis.approval import ApprovalRequest
from coding_genesis.hooks import HookInput, HookResult
from tests.real_cli.test_acp import acp_agent, anyio_backend, hermetic_env, rig
from tests.real_cli.test_gemini_opencode_qwen import MoreRig

# the autouse fixture of the real-CLI tests, and the rigs of test_acp, active here too
__all__ = ["anyio_backend", "hermetic_env", "rig"]

pytestmark = [pytest.mark.timeout(240), pytest.mark.anyio]

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
GOOD = '{"name":"ada"}'
BAD = '{"nom":"ada"}'


def said(rig: MoreRig) -> str:
    """Everything the agent sent the model."""
    return json.dumps([r.body for r in rig.server.model_requests()])


async def test_valid_invalid_and_retried_answers_in_a_session(rig: MoreRig) -> None:
    agent = acp_agent(rig)
    async with agent.session(output_schema=SCHEMA) as s:
        valid = await s.send_result(f"SCENARIO:json {GOOD}")
        assert valid.status == 0 and valid.output == {"name": "ada"}, valid.message
        assert valid.attempts == 1
        # the schema reached the model in the prompt, worded once
        assert "Your final answer must be one JSON value matching this JSON Schema" in said(rig)

        invalid = await s.send_result(f"SCENARIO:json {BAD}")
        assert invalid.status == 1 and invalid.error == "invalid_output", invalid.message
        assert invalid.attempts == 2 and invalid.output is None
        assert "does not match output_schema:\n- $: missing required property 'name'" in (
            invalid.message
        ), invalid.message

        fixed = await s.send_result(f"SCENARIO:jsonfix {BAD} {GOOD}")
        assert fixed.status == 0 and fixed.output == {"name": "ada"}, fixed.message
        assert fixed.attempts == 2 and fixed.retry_history[0]["error"] == "invalid_output"
        assert fixed.session_id == s.session_id  # the retry was the session's next turn


async def test_a_run_with_an_approver_retries_without_a_broken_load(rig: MoreRig) -> None:
    agent = acp_agent(rig, approver=lambda r: True)
    r = await agent.run_result(f"SCENARIO:jsonfix {BAD} {GOOD}", output_schema=SCHEMA)
    assert r.attempts == 2, r.message
    first = r.retry_history[0]
    assert first["error"] == "invalid_output"
    if rig.backend == "gemini":
        # a fresh session (no session/load), told the request and what was wrong
        assert first["resume_session"] is None
        assert "does not match output_schema" in said(rig)
        assert r.status == 1 and r.error == "invalid_output", r.message  # a new conversation
    else:
        assert first["resume_session"] == r.session_id  # session/load of the same session
        assert r.status == 0 and r.output == {"name": "ada"}, r.message


async def test_a_pre_tool_hook_blocks_a_command_through_the_permission_request(
    rig: MoreRig,
) -> None:
    asked: list[ApprovalRequest] = []
    seen: list[HookInput] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    def guard(data: HookInput) -> HookResult:
        seen.append(data)
        return HookResult(block=True, message="not in this repository")

    agent = acp_agent(rig, approver=approver, hooks={"pre_tool": guard})
    async with agent.session() as s:
        r = await s.send_result("SCENARIO:bash touch blocked.txt")
    assert r.status == 0, r.message  # a refusal is no failure of the turn
    assert not (rig.work / "blocked.txt").exists()
    assert asked == []  # a blocked call never reaches the approver
    assert seen and seen[0].kind == "command", seen
    assert "touch blocked.txt" in json.dumps(dict(seen[0].input)), seen[0].input
    blocked = [h for h in r.hooks if h["event"] == "pre_tool"]
    assert blocked[0]["outcome"] == "blocked" and blocked[0]["not_applied"] is None, json.dumps(
        r.hooks, indent=1
    )
    assert blocked[0]["message"] == "not in this repository"
