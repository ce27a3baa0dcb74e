"""Metering and budgets with the REAL ``claude`` and ``codex`` against the fake
model server: codex's cost is computed from its tokens; a real claude run is
stopped by a turn budget as its second message streams in."""

from __future__ import annotations

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.budget import Budget
from tests.real_cli import test_claude_codex
from tests.real_cli.test_claude_codex import (  # noqa: F401  (hermetic_env is an autouse fixture)
    Rig,
    assert_nothing_left,
    explain,
    hermetic_env,
    run,
)

# The rigs of test_claude_codex (fixtures are found by name in this module).
claude_rig = test_claude_codex.claude_rig
codex_rig = test_claude_codex.codex_rig


def test_real_codex_cost_is_computed_from_its_tokens(codex_rig: Rig) -> None:
    agent = CodingGenesisAgent(
        "codex",
        cli_path=codex_rig.cli,
        cwd=codex_rig.work,
        timeout=60,
        grace=1.0,
        env=codex_rig.env(),
        model="gpt-5.5",  # the model of the fake's codex config; priced as gpt-5
    )
    result, events = run(agent, "SCENARIO:text")
    assert result["status"] == 0, explain(result, events)
    assert result["cost_source"] == "computed"
    tokens = result["metering"]["tokens"]
    # The fake model server reports 12 input and 7 output tokens per response.
    assert (tokens["input"] + tokens["cache_read"], tokens["output"]) == (12, 7)
    expected = (tokens["input"] * 1.25 + tokens["cache_read"] * 0.125 + 7 * 10.0) / 1e6
    assert result["cost_usd"] == pytest.approx(expected)
    assert result["metering"]["turns"] == 1
    assert result["metering"]["latency"]["first_text_s"] is not None


def test_real_claude_stopped_by_a_turn_budget(claude_rig: Rig) -> None:
    """Turn 1 asks for Bash; the tool runs; turn 2 (the answer) crosses
    max_turns=1: the stop is asked for at that event, the tree is gone, the
    partial work (one tool call) is in the result."""
    agent = CodingGenesisAgent(
        "claude",
        cli_path=claude_rig.cli,
        cwd=claude_rig.work,
        timeout=60,
        grace=1.0,
        env=claude_rig.env(),
        options=claude_rig.options(tools=True),
        budget=Budget(max_turns=1),
    )
    result, events = run(agent, "SCENARIO:bash echo hi")
    assert result["error"] == "budget_exceeded", explain(result, events)
    assert result["stop_reason"] == "requested"
    assert result["budget"]["exceeded"] == {
        "limit": "max_turns",
        "max": 1,
        "used": 2,
        "over": 1,
    }
    assert result["tool_calls"] == 1 and result["tool_usage"] == {"Bash": 1}
    assert result["failure"]["category"] == "budget_exceeded"
    # The stop was asked for at the crossing event, before claude's own result
    # line (which the same read may still bring in).
    (exceeded,) = [e for e in events.of("budget") if e["level"] == "exceeded"]
    crossing = [e for e in events.of("usage") if e.get("message_id")][-1]
    assert exceeded["seq"] == crossing["seq"] + 1
    assert all(e["seq"] > exceeded["seq"] for e in events.of("result"))
    assert_nothing_left(events.run_id())
