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

from coding_genesis import Decision
from coding_genesis.approval import ApprovalRequest
from tests.fakes.model_server import RecordedRequest
from tests.real_cli.test_claude_codex import Rig, claude_rig, codex_rig, hermetic_env, rig
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


async def test_codex_narrows_and_widens_the_sandbox_for_the_later_turns(codex_rig: Rig) -> None:
    rig = codex_rig
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


def text_format(request: RecordedRequest) -> Any:
    return ((request.body or {}).get("text") or {}).get("format")


async def test_codex_takes_a_schema_for_its_turn_alone(codex_rig: Rig) -> None:
    rig = codex_rig
    async with session_agent(rig).session() as session:
        before = await session.send_result("SCENARIO:text one")
        shaped = await session.send_result('SCENARIO:json {"n": 7}', output_schema=_SCHEMA)
        after = await session.send_result("SCENARIO:text three")
    assert (before.message, after.message, after.output) == ("one", "three", None)
    assert shaped.status == 0 and shaped.output == {"n": 7}, shaped.message
    formats = [
        (r.scenario.name if r.scenario else None, text_format(r))
        for r in rig.server.model_requests()
    ]
    schemas = [f for _, f in formats if f is not None]
    assert len(schemas) == 1 and schemas[0]["type"] == "json_schema", formats
    assert schemas[0]["schema"]["properties"] == _SCHEMA["properties"]
    assert [name for name, f in formats if f is not None] == ["json"]


async def test_claude_narrows_and_widens_again_a_level_a_turn_switched(claude_rig: Rig) -> None:
    rig = claude_rig
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
