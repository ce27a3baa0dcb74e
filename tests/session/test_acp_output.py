"""``output_schema=`` and ``hooks=`` over the Agent Client Protocol, through the whole
machinery, against the fake ACP agent (``tests/fakes/fake_acp.py``).

ACP has no schema field: the schema goes in the turn's prompt and we validate the
answer (one retry, with the validation error: a next turn in a live session, a resumed
or fresh live turn for a ``run()``).  A ``pre_tool`` hook blocks a call through the
agent's permission request (the reject option); the other points are observed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from coding_genesis import CodingGenesisAgent, load_backends_file
from coding_genesis.approval import ApprovalRequest
from coding_genesis.errors import ConfigError
from coding_genesis.hooks import HookInput, HookResult, wants
from tests.session.test_acp_session import FLAVOURS, ONCE, agent, backends_file, recorded

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Named(BaseModel):
    name: str


GOOD = '{"name":"ada"}'
BAD = '{"nom":"ada"}'
#: The one wording of the schema in the prompt (coding_genesis._pipeline.output).
WORDS = "Your final answer must be one JSON value matching this JSON Schema"


def prompts(tmp_path: Path) -> list[str]:
    return [
        str(e["params"]["prompt"][0]["text"])
        for e in recorded(tmp_path)
        if e.get("received") == "session/prompt"
    ]


def methods(tmp_path: Path) -> list[str]:
    return [str(e.get("received")) for e in recorded(tmp_path)]


async def test_a_valid_answer_in_a_session(flavour: str, tmp_path: Path) -> None:
    a = agent(flavour, tmp_path, output_schema=Named)
    async with a.session() as s:
        r = await s.send_result(f"JSON {GOOD}")
    assert r.status == 0 and r.output == Named(name="ada"), r.message
    assert r.attempts == 1
    (sent,) = prompts(tmp_path)
    assert sent.startswith(f"JSON {GOOD}\n\n") and sent.count(WORDS) == 1
    assert '"required":["name"]' in sent  # the schema itself, as JSON


async def test_an_invalid_answer_is_retried_once_in_the_session_then_fails(
    flavour: str, tmp_path: Path
) -> None:
    a = agent(flavour, tmp_path, output_schema=Named)
    async with a.session() as s:
        r = await s.send_result(f"JSON {BAD}")
        after = await s.send_result(f"JSON {GOOD}")  # the session lives on
    assert r.status == 1 and r.error == "invalid_output", r.message
    assert r.attempts == 2 and r.output is None
    assert "does not match Named:\n- $.name: Field required" in r.message
    assert after.status == 0 and after.output == Named(name="ada")
    first, retry, _ = prompts(tmp_path)
    assert first.startswith(f"JSON {BAD}\n\n")
    assert retry.startswith("Continue from previous attempt:") and "does not match" in retry
    assert retry.count(WORDS) == 1  # the retry is a turn like any: the schema said once
    assert methods(tmp_path).count("initialize") == 1  # one process, three turns


async def test_a_retried_answer_becomes_valid_in_the_session(flavour: str, tmp_path: Path) -> None:
    a = agent(flavour, tmp_path)
    async with a.session(output_schema=Named) as s:
        r = await s.send_result(f"JSONFIX {BAD} {GOOD}")
    assert r.status == 0 and r.output == Named(name="ada"), r.message
    assert r.attempts == 2 and r.retry_history[0]["error"] == "invalid_output"
    assert methods(tmp_path).count("session/new") == 1  # the retry: the same session


@pytest.mark.parametrize("flavour_", ["gemini", "qwen"])
async def test_a_run_with_an_approver_retries_without_a_broken_load(
    flavour_: str, tmp_path: Path
) -> None:
    """One live turn per attempt: qwen's retry loads the session (session/load
    works there); gemini's load wipes a session, so its retry is a fresh session
    whose prompt repeats the request with the validation error."""
    a = agent(flavour_, tmp_path, approver=lambda r: True)
    r = await a.run_result(f"JSONFIX {BAD} {GOOD}", output_schema=Named)
    assert r.status == 0 and r.output == Named(name="ada"), r.message
    assert r.attempts == 2
    resumed = r.retry_history[0]["resume_session"]
    if flavour_ == "gemini":
        assert resumed is None and "session/load" not in methods(tmp_path)
        assert methods(tmp_path).count("session/new") == 2
    else:
        assert resumed and methods(tmp_path).count("session/load") == 1


async def test_a_run_with_only_a_schema_runs_live(tmp_path: Path) -> None:
    """No approver, hooks or tools: a schema alone makes the run a live turn (the
    one-shot command line has no place for it)."""
    a = agent("opencode", tmp_path)
    good = await a.run_result(f"JSON {GOOD}", output_schema={"type": "object"})
    assert good.status == 0 and good.output == {"name": "ada"}, good.message
    bad = await a.run_result("JSON [1]", output_schema=Named)
    assert bad.error == "invalid_output" and bad.attempts == 2
    assert all(WORDS in p for p in prompts(tmp_path))


# -- hooks ---------------------------------------------------------------------------


async def test_a_pre_tool_hook_blocks_through_the_permission_request(
    flavour: str, tmp_path: Path
) -> None:
    asked: list[ApprovalRequest] = []
    seen: list[HookInput] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    def guard(data: HookInput) -> HookResult | None:
        seen.append(data)
        if "rm" in str(data.input.get("command")):
            return HookResult(block=True, message="no rm here")
        return None

    a = agent(flavour, tmp_path, approver=approver, hooks={"pre_tool": guard})
    async with a.session() as s:
        blocked = await s.send_result('ASK execute {"command": "rm -rf x"}')
        allowed = await s.send_result('ASK execute {"command": "make"}')
    assert blocked.message == "denied reject_once", blocked.message
    assert blocked.hooks[0]["outcome"] == "blocked" and blocked.hooks[0]["not_applied"] is None
    assert blocked.hooks[0]["message"] == "no rm here"
    assert blocked.approvals == []  # the approver is never asked about a blocked call
    assert allowed.message == "allowed allow_once"
    assert [r.input for r in asked] == [{"command": "make"}]
    assert [h.tool_call_id for h in seen] == ["call_1", "call_1"]
    assert seen[0].kind == "command" and seen[0].session_id == s.session_id
    chosen = [e["chosen"] for e in recorded(tmp_path) if "chosen" in e]
    assert chosen == [ONCE[flavour][1], ONCE[flavour][0]]  # answered by kind


async def test_a_failing_pre_tool_hook_blocks_the_call(tmp_path: Path) -> None:
    def broken(data: HookInput) -> None:
        raise RuntimeError("bug")

    a = agent("opencode", tmp_path, approver=lambda r: True, hooks={"pre_tool": broken})
    async with a.session() as s:
        r = await s.send_result('ASK execute {"command": "make"}')
    assert r.message == "denied reject_once"
    assert r.hooks[0]["outcome"] == "error" and "RuntimeError: bug" in r.hooks[0]["error"]


async def test_post_tool_and_turn_end_are_observed_and_recorded_so(tmp_path: Path) -> None:
    seen: list[HookInput] = []

    def hook(data: HookInput) -> HookResult:
        seen.append(data)
        if data.event == "pre_tool":
            return HookResult()
        return HookResult(block=True, message="observed only")  # cannot block: recorded so

    hooks: Any = {"pre_tool": [hook], "post_tool": [hook], "turn_end": [hook]}
    a = agent("qwen", tmp_path, approver=lambda r: True, hooks=hooks)
    async with a.session() as s:
        r = await s.send_result('ASK execute {"command": "touch hooked"}')
    assert r.status == 0 and r.message == "allowed allow_once", r.message
    assert [h.event for h in seen] == ["pre_tool", "post_tool", "turn_end"]
    assert seen[0].tool == "execute" and seen[0].input == {"command": "touch hooked"}
    assert seen[0].kind == "command" and seen[0].tool_call_id == "call_1"
    assert seen[1].output == "ran" and seen[1].error is None
    assert seen[2].answer == "allowed allow_once" and seen[2].session_id == s.session_id
    assert [h["outcome"] for h in r.hooks] == ["continued", "continued", "continued"]
    assert r.hooks[0]["not_applied"] is None
    assert [h["not_applied"] for h in r.hooks[1:]] == [
        "qwen cannot apply a post_tool hook's block",
        "qwen cannot apply a turn_end hook's block",
    ]


async def test_a_call_run_unasked_is_observed_by_pre_tool(tmp_path: Path) -> None:
    """A tool call the agent runs without a permission request (here one of its own
    turn, after the answer) reaches pre_tool as it runs: observed, not blockable."""

    def block(data: HookInput) -> HookResult:
        return HookResult(block=True, message="too late")

    a = agent("gemini", tmp_path, hooks={"pre_tool": block})
    async with a.session() as s:
        await s.send_result("LATE")
        await s.cli_turn()
        await anyio.sleep(0.3)  # the chunk and the tool call after it: one turn or two
        await s.send_result("next")
        hooks = [h for r in s.results if r.trigger == "cli" for h in r.hooks]
    assert [(h["event"], h["tool_call_id"]) for h in hooks] == [("pre_tool", "late")]
    assert hooks[0]["outcome"] == "continued"
    assert hooks[0]["not_applied"] == "gemini cannot apply a pre_tool hook's block"


def test_declared_effects_the_point_cannot_apply_are_refused(tmp_path: Path) -> None:
    agent("qwen", tmp_path, hooks={"pre_tool": wants("block")(lambda h: None)})
    with pytest.raises(ConfigError, match="cannot apply a pre_tool hook's context"):
        agent("qwen", tmp_path, hooks={"pre_tool": wants("context")(lambda h: None)})
    with pytest.raises(ConfigError, match="a post_tool hook there only observes"):
        agent("gemini", tmp_path, hooks={"post_tool": wants("block")(lambda h: None)})
    with pytest.raises(ConfigError, match="unknown effect"):
        wants("explode")  # type: ignore[arg-type]


async def test_the_generic_backend_takes_a_schema_and_a_blocking_hook(tmp_path: Path) -> None:
    (backend,) = load_backends_file(backends_file(tmp_path)).values()

    def guard(data: HookInput) -> HookResult:
        return HookResult(block=True, message="never")

    a = CodingGenesisAgent(backend, cwd=str(tmp_path), timeout=20, ledger=False)
    fixed = await a.run_result(f"JSONFIX {BAD} {GOOD}", output_schema=Named)
    assert fixed.status == 0 and fixed.output == Named(name="ada") and fixed.attempts == 2
    blocked = await a.run_result(
        'ASK execute {"command": "ls"}', approver=lambda r: True, hooks={"pre_tool": guard}
    )
    assert blocked.message == "denied reject_once" and blocked.approvals == []
    assert blocked.hooks[0]["outcome"] == "blocked"
