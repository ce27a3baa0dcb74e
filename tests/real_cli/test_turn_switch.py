"""A turn's own model, permission level and output schema (``send(..., model=,
permissions=, output_schema=)``) with the REAL claude and codex against the fake
model server, each effect read off the model requests the CLI made: the switched
model on the next request and the ones after (sticky), a narrowed level that
stops a write, a widened one that lets it through, a schema on its own turn's
request alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent, Decision
from coding_genesis.approval import ApprovalRequest
from tests.fakes.model_server import RecordedRequest
from tests.real_cli.test_claude_codex import Rig, claude_rig, codex_rig, hermetic_env, rig
from tests.real_cli.test_gemini_opencode_qwen import MoreRig, more_rig
from tests.real_cli.test_sessions import session_agent

__all__ = ["claude_rig", "codex_rig", "hermetic_env", "rig"]  # the real-CLI fixtures

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def turn_requests(rig: Rig, word: str) -> list[RecordedRequest]:
    """The model requests of the turn whose prompt ends ``SCENARIO:text <word>``."""
    return [
        r for r in rig.server.model_requests() if r.scenario is not None and r.scenario.arg == word
    ]


def model_of(request: RecordedRequest) -> Any:
    return request.body.get("model") if isinstance(request.body, dict) else None


async def test_a_switched_model_holds_for_the_later_turns(rig: Rig) -> None:
    async with session_agent(rig).session(model="m-a") as session:
        first = await session.send_result("SCENARIO:text one")
        second = await session.send_result("SCENARIO:text two", model="m-b")
        third = await session.send_result("SCENARIO:text three")
    assert [first.status, second.status, third.status] == [0, 0, 0], second.message
    asked = [[model_of(r) for r in turn_requests(rig, w)] for w in ("one", "two", "three")]
    assert asked == [["m-a"], ["m-b"], ["m-b"]]
    assert [first.model, second.model, third.model] == ["m-a", "m-b", "m-b"]


async def test_a_narrowed_level_holds_for_the_later_turns_and_widens_again(rig: Rig) -> None:
    """edit → read-only (codex: ``sandboxPolicy`` readOnly; claude: the
    level's deny rules and mode) → the same again (sticky) → edit."""
    async with session_agent(rig, permissions="edit").session() as session:
        wrote = await session.send_result("SCENARIO:write first.txt one")
        narrowed = await session.send_result(
            "SCENARIO:write second.txt two", permissions="read-only"
        )
        still = await session.send_result("SCENARIO:write third.txt three")  # sticky
        widened = await session.send_result("SCENARIO:write fourth.txt four", permissions="edit")
    assert (rig.work / "first.txt").read_text() == "one\n"
    assert not (rig.work / "second.txt").exists(), narrowed.message
    assert not (rig.work / "third.txt").exists(), still.message
    assert (rig.work / "fourth.txt").read_text() == "four\n", widened.message
    assert wrote.status == widened.status == 0


_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


def worded_in(request: RecordedRequest) -> bool:
    """The schema is worded in the request's last user message (claude)."""
    messages = (request.body or {}).get("messages") or []
    users = [m for m in messages if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    if isinstance(content, list):
        content = " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return "JSON Schema:" in str(content)


def text_format(request: RecordedRequest) -> Any:
    return ((request.body or {}).get("text") or {}).get("format")


async def test_a_schema_for_one_turn_reaches_that_turns_request_alone(rig: Rig) -> None:
    """codex: ``turn/start``'s ``outputSchema``, which codex sends as the request's
    ``text.format``; claude (whose ``--json-schema`` is the process's): worded in
    that turn's prompt.  Either way the answer is validated, the next turn's not."""
    async with session_agent(rig).session() as session:
        before = await session.send_result("SCENARIO:text one")
        shaped = await session.send_result('SCENARIO:json {"n": 7}', output_schema=_SCHEMA)
        after = await session.send_result("SCENARIO:text three")
    assert (before.message, after.message, after.output) == ("one", "three", None)
    assert shaped.status == 0 and shaped.output == {"n": 7}, shaped.message
    requests = rig.server.model_requests()
    if rig.backend == "codex":
        schemas = [(r.scenario, text_format(r)) for r in requests if text_format(r) is not None]
        assert [s.name if s else None for s, _ in schemas] == ["json"], schemas
        assert schemas[0][1]["type"] == "json_schema"
        assert schemas[0][1]["schema"]["properties"] == _SCHEMA["properties"]
    else:
        worded = [r.scenario.name if r.scenario else None for r in requests if worded_in(r)]
        assert worded and set(worded) == {"json"}, worded


async def test_claude_takes_the_levels_rules_from_the_switch_and_drops_them_again(
    claude_rig: Rig,
) -> None:
    """With an approver that allows everything, only the read-only level's deny
    rules (``apply_flag_settings``) stop a write; switched back to edit, they
    are gone (the flag-settings patch replaced them)."""
    rig = claude_rig
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> Decision:
        asked.append(Path(request.paths[0]).name if request.paths else request.tool)
        return Decision.allow()

    async with session_agent(rig, permissions="edit", approver=approver).session() as session:
        narrowed = await session.send_result(
            "SCENARIO:write second.txt two", permissions="read-only"
        )
        widened = await session.send_result("SCENARIO:write fourth.txt four", permissions="edit")
    assert not (rig.work / "second.txt").exists(), (narrowed.message, asked)
    assert (rig.work / "fourth.txt").read_text() == "four\n", widened.message
    assert narrowed.status == widened.status == 0


def qwen_agent(rig: MoreRig) -> CodingGenesisAgent:
    return CodingGenesisAgent(
        "qwen", cli_path=rig.cli, cwd=rig.work, env=rig.env(), ledger=False, timeout=90.0
    )


@pytest.fixture
def qwen_rig(request: pytest.FixtureRequest, model_server: Any, tmp_path: Path) -> MoreRig:
    return more_rig("qwen", request, model_server, tmp_path)  # skips when not installed


async def test_qwen_widens_a_plan_session_by_session_set_mode(qwen_rig: MoreRig) -> None:
    """ACP: a turn's level is the agent's mode for it (qwen: ``plan`` for
    read-only, ``auto-edit`` for edit), set by ``session/set_mode`` before the
    turn's prompt; it holds for the later turns."""
    rig = qwen_rig
    agent = qwen_agent(rig)
    async with agent.session(permissions="read-only") as session:
        planned = await session.send_result(f"SCENARIO:write {rig.work}/planned.txt no")
        widened = await session.send_result(
            f"SCENARIO:write {rig.work}/widened.txt yes", permissions="edit"
        )
        still = await session.send_result(f"SCENARIO:write {rig.work}/still.txt yes")  # sticky
        narrowed = await session.send_result(
            f"SCENARIO:write {rig.work}/narrowed.txt no", permissions="read-only"
        )
    assert "Plan mode is active" in planned.message, planned.message
    assert not (rig.work / "planned.txt").exists(), planned.message
    assert (rig.work / "widened.txt").read_text().strip() == "yes", widened.message
    assert (rig.work / "still.txt").read_text().strip() == "yes", still.message
    assert "Plan mode is active" in narrowed.message, narrowed.message
    assert not (rig.work / "narrowed.txt").exists(), narrowed.message


async def test_qwen_takes_a_model_switch_by_its_config_option_and_says_why_not(
    qwen_rig: MoreRig,
) -> None:
    """qwen declares its model as a configuration option (``session/new``'s
    ``configOptions``, category "model"); a turn's ``model=`` is a
    ``session/set_config_option`` of it before the prompt.  qwen offers only
    the models of its settings (here one): another is refused in qwen's words,
    the turn fails before its prompt is sent, and the session goes on, on the
    model it had."""
    rig = qwen_rig
    agent = qwen_agent(rig)
    async with agent.session() as session:
        first = await session.send_result("SCENARIO:text one")
        second = await session.send_result("SCENARIO:text two", model="m-b")
        third = await session.send_result("SCENARIO:text three")
    assert (first.status, third.status, third.message) == (0, 0, "three")
    assert second.status == 1 and second.message.startswith(
        "qwen refused set_model: Internal error: Model 'm-b' not found"
    ), second.message
    prompted = {r.scenario.arg for r in rig.server.model_requests() if r.scenario is not None}
    assert prompted == {"one", "three"}  # turn two's prompt never reached the model


async def test_qwen_takes_a_schema_for_its_turn_alone_in_its_prompt(qwen_rig: MoreRig) -> None:
    rig = qwen_rig
    agent = qwen_agent(rig)
    async with agent.session() as session:
        shaped = await session.send_result('SCENARIO:json {"n": 7}', output_schema=_SCHEMA)
        after = await session.send_result("SCENARIO:text three")
    assert shaped.status == 0 and shaped.output == {"n": 7}, shaped.message
    assert (after.status, after.message, after.output) == (0, "three", None)


async def test_claude_refuses_to_widen_a_session_opened_read_only(claude_rig: Rig) -> None:
    """The deny rules of ``--disallowedTools`` last for the process: widening is
    refused in words (64) before anything is sent, and the session lives on."""
    rig = claude_rig
    async with session_agent(rig, permissions="read-only").session() as session:
        refused = await session.send_result("SCENARIO:write wide.txt x", permissions="edit")
        after = await session.send_result("SCENARIO:text still here")
    assert (refused.status, refused.error) == (64, "invalid_request")
    assert "cannot switch a live session opened with permissions='read-only'" in refused.message
    assert (after.status, after.message) == (0, "still here")
    assert not (rig.work / "wide.txt").exists()
    assert all(
        r.scenario is None or r.scenario.name != "write" for r in rig.server.model_requests()
    )
