"""Step definitions for transcripts (tracker issue 15: the raw stdout is the record)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_bdd import given, then

from coding_genesis._cli.main import main
from coding_genesis.run_events import LIFECYCLE_KINDS
from tests.steps.agent_steps import World

TOOL = {
    "type": "assistant",
    "message": {
        "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]
    },
}


def _run_dir(world: World) -> Path:
    assert world.response is not None
    return Path(world.response["transcript"])


@given('a CodingGenesisAgent with backend "claude" writing transcripts')
def agent_with_transcripts(world: World) -> None:
    world.backend = "claude"
    world.kwargs["transcripts"] = world.tmp_path / "runs"


@given("the subprocess emits a tool call, then a result")
def emits_tool_call(world: World) -> None:
    world.steps = [{"init": True}, {"emit": TOOL}, {"answer": "done"}]


@then("the transcript's stdout holds every line the CLI printed")
def stdout_recorded(world: World) -> None:
    assert world.response is not None and world.response["status"] == 0, world.response
    raw = (_run_dir(world) / "stdout.jsonl").read_bytes()
    assert raw.count(b"\n") == world.response["lines"] >= 3
    assert b'"tool_use"' in raw


@then("events.jsonl holds only the runner's own events")
def only_lifecycle(world: World) -> None:
    lines = (_run_dir(world) / "events.jsonl").read_text().splitlines()
    kinds = {json.loads(line)["type"] for line in lines}
    assert "run_started" in kinds and kinds <= {k.value for k in LIFECYCLE_KINDS}


@then("genesis show --events lists the tool call the subscribers saw")
def show_events(world: World, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    base = str(world.tmp_path / "runs")
    capsysbinary.readouterr()
    assert main(["show", "last", "--events", "--transcript-dir", base]) == 0
    shown = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
    assert world.log is not None
    calls = [e for e in shown if e["type"] == "tool_call"]
    assert (
        [(e["name"], e["input"]) for e in calls]
        == [(e["name"], e["input"]) for e in world.log.of("tool_call")]
        == [("Bash", {"command": "ls"})]
    )
    assert [e["type"] for e in shown] == [e["type"] for e in world.log.events]
