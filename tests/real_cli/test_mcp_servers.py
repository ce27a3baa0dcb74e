"""``mcp_servers=`` against the REAL claude 2.1.330 and codex 0.169 and the fake
model server (issue 41, §9): each CLI starts the caller's stdio MCP server
(``tests/fakes/mcp_stdio_server.py``) with its own environment, the model calls
its ``echo`` tool and the tool's output reaches the model's next request; the
result lists the server as the CLI reported it; the server's secret appears in
no argv, transcript or answer.

codex 0.169, measured: its MCP tools hide behind ``tool_search`` (a turn that
searches, then one that calls); with ``approvalPolicy: never`` it refuses an MCP
tool call ("MCP tool call requires approval, but approval policy is never")
unless the server's ``default_tools_approval_mode`` is ``approve`` (what we
declare without an approver); with an approver it asks through
``mcpServer/elicitation/request`` (``codex_approval_kind: mcp_tool_call``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.approval import ApprovalRequest
from tests.real_cli.test_claude_codex import Rig, claude_rig, codex_rig, explain, hermetic_env

__all__ = ["claude_rig", "codex_rig", "hermetic_env"]  # the real-CLI fixtures, active here too

pytestmark = pytest.mark.timeout(240)

SERVER = Path(__file__).parents[1] / "fakes" / "mcp_stdio_server.py"
SECRET = "mcp-secret-7f3a9c1e5b2d4086"


def agent(rig: Rig, **settings: Any) -> CodingGenesisAgent:
    """An agent of ``rig`` with the server ``srv``, which writes its environment's secret
    to a marker file, and transcripts kept."""
    servers = {
        "srv": {
            "command": sys.executable,
            "args": [str(SERVER), "srv", str(rig.tmp / "started")],
            "env": {"FAKE_MCP_SECRET": SECRET},
        }
    }
    return rig.agent_with(mcp_servers=servers, transcripts=str(rig.tmp / "transcripts"), **settings)


def leaked(rig: Rig, *responses: Any) -> list[str]:
    """Where the secret shows: a transcript file, a response."""
    assert any((rig.tmp / "transcripts").rglob("*.jsonl")), "no transcript was written"
    found = [
        str(path)
        for path in (rig.tmp / "transcripts").rglob("*")
        if path.is_file() and SECRET.encode() in path.read_bytes()
    ]
    return found + [f"response {i}" for i, r in enumerate(responses) if SECRET in str(r)]


def reached_the_model(rig: Rig, text: str) -> bool:
    return any(text in str(request.body) for request in rig.server.model_requests())


def test_claude_calls_the_servers_tool(claude_rig: Rig) -> None:
    rig = claude_rig
    with agent(rig).session_sync() as session:
        turn = session.send('SCENARIO:tool mcp__srv__echo {"text": "one"}')
    assert "srv echoes: one" in turn["message"], explain(turn)
    assert reached_the_model(rig, "srv echoes: one")
    assert {"name": "srv", "status": "connected", "error": None} in turn["mcp_servers"]
    assert (rig.tmp / "started").read_text().split() == ["srv", SECRET]  # its env reached it
    one_shot = agent(rig).run_sync('SCENARIO:tool mcp__srv__echo {"text": "two"}')
    assert "srv echoes: two" in one_shot["message"], explain(one_shot)
    assert leaked(rig, turn, one_shot) == []


def search_then_echo(session: Any, text: str) -> Any:
    """codex hides MCP tools behind tool_search: the model searches, then calls."""
    found = session.send('SCENARIO:tool tool_search {"query": "echo"}')
    assert "mcp__srv" in found["message"], explain(found)
    return session.send(f'SCENARIO:tool echo {{"text": "{text}"}}')


def test_codex_calls_the_servers_tool_without_an_approver(codex_rig: Rig) -> None:
    rig = codex_rig
    with agent(rig).session_sync() as session:
        first = session.send("SCENARIO:text hi")
        turn = search_then_echo(session, "one")
    assert "srv echoes: one" in turn["message"], explain(turn)
    assert reached_the_model(rig, "srv echoes: one")
    assert {"name": "srv", "status": "ready", "error": None} in first["mcp_servers"]
    assert (rig.tmp / "started").read_text().split() == ["srv", SECRET]
    assert leaked(rig, first, turn) == []


@pytest.mark.parametrize("allowed", [True, False])
def test_codex_asks_the_approver_once_about_the_servers_tool(codex_rig: Rig, allowed: bool) -> None:
    rig = codex_rig
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return allowed

    with agent(rig, approver=approver).session_sync() as session:
        turn = search_then_echo(session, "two")
    assert [(a.tool, a.kind) for a in asked] == [("mcp__srv__echo", "other")], explain(turn)
    assert reached_the_model(rig, "srv echoes: two") is allowed, explain(turn)
    (record,) = turn["approvals"]
    assert record["tool"] == "mcp__srv__echo" and record["allowed"] is allowed
