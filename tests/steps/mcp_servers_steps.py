"""Step definitions of tests/features/mcp_servers.feature (the caller's MCP servers),
on the fake ACP agent of tests/steps/acp_steps.py and the failer.  The server is
tests/fakes/mcp_stdio_server.py, which writes its name and its environment's
``FAKE_MCP_SECRET`` to a marker file when started."""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_bdd import given, parsers, then, when

from coding_genesis.errors import RefusedError
from tests.steps.acp_steps import AcpWorld

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_stdio_server.py"
SECRET = "mcp-secret-for-the-feature-0042"


@given(parsers.parse('the caller\'s MCP server "{name}"'))
def callers_server(acp: AcpWorld, name: str) -> None:
    marker = acp.tmp_path / f"{name}.started"
    acp.settings["mcp_servers"] = {
        name: {
            "command": sys.executable,
            "args": [str(SERVER), name, str(marker)],
            "env": {"FAKE_MCP_SECRET": SECRET},
        }
    }


@when("an agent is built")
def build(acp: AcpWorld) -> None:
    try:
        acp.agent()
    except RefusedError as exc:
        acp.refusal = exc


@then(parsers.parse('the server "{name}" was started with its own secret'))
def started_with_secret(acp: AcpWorld, name: str) -> None:
    assert (acp.tmp_path / f"{name}.started").read_text().split() == [name, SECRET]


@then(parsers.parse('the agent is refused with "{words}"'))
def refused(acp: AcpWorld, words: str) -> None:
    assert acp.refusal is not None, "nothing was refused"
    assert words in str(acp.refusal), acp.refusal
