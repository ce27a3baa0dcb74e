"""The hook points beyond tool calls, tool matchers and subagent definitions with the REAL
claude, codex and qwen against the fake model server.

claude calls its own callbacks: a ``pre_tool`` hook matching ``Write`` is registered with that
matcher and runs for the write alone; a ``prompt_submit`` hook's context reaches the model's
request; the model's ``Agent`` call of a subagent defined with ``agents=`` runs that subagent
(its request carries the definition's prompt as its system prompt) between ``subagent_start``
and ``subagent_stop``.  claude never calls ``SessionStart``/``SessionEnd`` back over the
SDK's control protocol (measured): the session reports them, observed, as it does the prompt
and the session's ends on codex and qwen, which have no such points of their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import Subagent
from coding_genesis.hooks import HookInput, HookResult, matching
from tests.fakes.model_server import FakeModelServer
from tests.real_cli.test_claude_codex import Rig, claude_rig, codex_rig, hermetic_env
from tests.real_cli.test_gemini_opencode_qwen import MoreRig, more_rig
from tests.real_cli.test_sessions import session_agent

# the real-CLI fixtures, active here too
__all__ = ["claude_rig", "codex_rig", "hermetic_env"]

pytestmark = [pytest.mark.timeout(180), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def qwen_rig(
    request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path
) -> MoreRig:
    return more_rig("qwen", request, model_server, tmp_path)  # skips when not installed


def _sent(transcripts: Path, key: str) -> list[dict[str, Any]]:
    """What the session wrote its CLI outside its turns (its own transcript)."""
    lines = (transcripts / key / "stdin.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


async def test_a_matcher_a_prompt_context_and_the_session_points_on_claude(
    claude_rig: Rig,
) -> None:
    rig = claude_rig
    writes: list[HookInput] = []

    @matching("Write")
    def guard(hook: HookInput) -> HookResult:
        writes.append(hook)
        return HookResult(block=True, message="no writes today")

    prompts: list[str | None] = []

    def context(hook: HookInput) -> HookResult:
        prompts.append(hook.prompt)
        return HookResult(context="PROMPT-SUBMIT-CONTEXT")

    hooks: Any = {
        "pre_tool": guard,
        "prompt_submit": context,
        "session_start": lambda hook: None,
        "session_end": lambda hook: None,
    }
    transcripts = rig.tmp / "t"
    agent = session_agent(
        rig, hooks=hooks, transcripts=str(transcripts), options={"allowed_tools": ["Bash"]}
    )
    async with agent.session() as session:
        ran = await session.send_result("SCENARIO:bash echo hi")
        assert ran.status == 0 and ran.message == "The tool finished. Output: hi", ran.message
        assert writes == []  # claude never called back for Bash
        refused = await session.send_result("SCENARIO:write refused.txt nope")
        assert refused.status == 0, refused.message
    assert not (rig.work / "refused.txt").exists()
    assert [(h.tool, h.event) for h in writes] == [("Write", "pre_tool")]
    assert [(h["event"], h["via"]) for h in ran.hooks] == [
        ("session_start", "observed"),
        ("prompt_submit", "cli"),
    ]
    assert [(h["event"], h["outcome"]) for h in refused.hooks] == [
        ("prompt_submit", "changed"),
        ("pre_tool", "blocked"),
    ]
    assert [(h["event"], h["via"]) for h in session.end_hooks] == [("session_end", "observed")]
    assert prompts == ["SCENARIO:bash echo hi", "SCENARIO:write refused.txt nope"]
    (init,) = [o for o in _sent(transcripts, session.key) if o.get("type") == "control_request"]
    registered = init["request"]["hooks"]
    assert [m["matcher"] for m in registered["PreToolUse"]] == ["Write"]
    assert [m["matcher"] for m in registered["UserPromptSubmit"]] == [None]
    assert "SessionStart" not in registered and "SessionEnd" not in registered
    said = json.dumps([r.body for r in rig.server.model_requests()])
    assert "UserPromptSubmit hook additional context: PROMPT-SUBMIT-CONTEXT" in said
    assert "PreToolUse:Write hook error: no writes today" in said


async def test_a_defined_subagent_runs_between_its_start_and_stop_hooks(claude_rig: Rig) -> None:
    rig = claude_rig
    seen: list[HookInput] = []

    def start(hook: HookInput) -> HookResult:
        seen.append(hook)
        return HookResult(context="SUBAGENT-START-CONTEXT")

    def stop(hook: HookInput) -> None:
        seen.append(hook)

    reviewer = Subagent("Reviews code", "REVIEWER-SYSTEM-PROMPT", tools=("Read",))
    agent = session_agent(
        rig,
        agents={"reviewer": reviewer},
        hooks={"subagent_start": start, "subagent_stop": stop},
        options={"allowed_tools": ["Agent"]},
    )
    call = {"subagent_type": "reviewer", "description": "review", "prompt": "SCENARIO:text hi"}
    async with agent.session() as session:
        r = await session.send_result(f"SCENARIO:tool Agent {json.dumps(call)}")
    assert r.status == 0, r.message
    assert "hi" in r.message
    assert [(h.event, h.agent) for h in seen] == [
        ("subagent_start", "reviewer"),
        ("subagent_stop", "reviewer"),
    ]
    assert seen[1].answer == "hi"
    assert [(h["event"], h["outcome"]) for h in r.hooks] == [
        ("subagent_start", "changed"),
        ("subagent_stop", "continued"),
    ]
    first, sub = rig.server.model_requests()[:2]
    assert "- reviewer: Reviews code (Tools: Read)" in json.dumps(first.body)
    system = json.dumps(sub.body["system"])
    assert "REVIEWER-SYSTEM-PROMPT" in system  # the definition's prompt is its system prompt
    assert "REVIEWER-SYSTEM-PROMPT" not in json.dumps(first.body["system"])
    assert [t["name"] for t in sub.body["tools"]] == ["Read"]
    assert "SUBAGENT-START-CONTEXT" in json.dumps(sub.body)


async def test_a_one_shot_claude_run_names_its_subagents(claude_rig: Rig) -> None:
    rig = claude_rig
    reviewer = Subagent("Reviews code", "REVIEWER-SYSTEM-PROMPT")
    agent = session_agent(rig, agents={"reviewer": reviewer})
    r = await agent.run_result("SCENARIO:text hi")
    assert r.status == 0, r.message
    assert "- reviewer: Reviews code" in json.dumps(rig.server.model_requests()[0].body)


def _observing() -> tuple[list[HookInput], dict[str, Any]]:
    seen: list[HookInput] = []

    def observe(hook: HookInput) -> HookResult:
        seen.append(hook)
        return HookResult(block=True, message="would refuse")

    return seen, {e: observe for e in ("session_start", "prompt_submit", "session_end")}


async def test_codex_s_prompt_and_session_points_are_observed(codex_rig: Rig) -> None:
    seen, hooks = _observing()
    agent = session_agent(codex_rig, hooks=hooks)
    async with agent.session() as session:
        r = await session.send_result("SCENARIO:text hi")
    assert r.status == 0 and r.message == "hi", r.message  # the block was not applied
    assert [(h["event"], h["via"]) for h in r.hooks] == [
        ("session_start", "observed"),
        ("prompt_submit", "observed"),
    ]
    assert r.hooks[1]["not_applied"] == "codex cannot apply a prompt_submit hook's block"
    assert [(h["event"], h["via"]) for h in session.end_hooks] == [("session_end", "observed")]
    assert [h.event for h in seen] == ["session_start", "prompt_submit", "session_end"]
    assert seen[1].prompt == "SCENARIO:text hi" and seen[1].session_id == session.session_id


async def test_qwen_s_prompt_and_session_points_are_observed(qwen_rig: MoreRig) -> None:
    seen, hooks = _observing()
    agent = session_agent(qwen_rig, hooks=hooks, ledger=False)
    r = await agent.run_result("SCENARIO:text hi")  # a one-shot run: its one turn's session
    assert r.status == 0 and r.message == "hi", r.message
    assert [(h["event"], h["via"]) for h in r.hooks] == [
        ("session_start", "observed"),
        ("prompt_submit", "observed"),
        ("session_end", "observed"),
    ]
    assert r.hooks[2]["not_applied"] == "qwen cannot apply a session_end hook's block"
    assert [h.event for h in seen] == ["session_start", "prompt_submit", "session_end"]


async def test_a_prompt_submit_hook_keeps_a_prompt_from_claude_s_model(claude_rig: Rig) -> None:
    rig = claude_rig

    def refuse(hook: HookInput) -> HookResult | None:
        if "secret" in str(hook.prompt):
            return HookResult(block=True, message="no secrets in prompts")
        return None

    agent = session_agent(rig, hooks={"prompt_submit": refuse})
    async with agent.session() as session:
        refused = await session.send_result("SCENARIO:text the secret is 42")
        after = await session.send_result("SCENARIO:text fine")
    assert refused.status == 0, refused.message
    assert refused.message.startswith(
        "UserPromptSubmit operation blocked by hook:\nno secrets in prompts"
    ), refused.message
    assert [(h["event"], h["outcome"]) for h in refused.hooks] == [("prompt_submit", "blocked")]
    assert after.status == 0 and after.message == "fine", after.message
    said = json.dumps([r.body for r in rig.server.model_requests()])
    assert "the secret is 42" not in said  # the model never read it
