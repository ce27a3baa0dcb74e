"""The REAL claude, against the fake model server, with our MCP server
configured (``--mcp-config``): it calls the ``run`` tool, which runs the
failer under our supervision and returns its result to the model (the next
model request carries it); an interrupt of the outer session stops the
nested run's process tree; with ``genesis serve``'s ``/mcp`` configured, the
nested run's approvals wait in the server's inbox and an answer there lets
it finish."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from tests.fakes.model_server import TOOL_DONE_PREFIX, FakeModelServer
from tests.real_cli.test_claude_codex import Rig, claude_rig, hermetic_env
from tests.real_cli.test_serve_sessions import _gone
from tests.serve.support import serving
from tests.session.interrupting import interrupted_turn, polled

__all__ = ["claude_rig", "hermetic_env"]  # the real-CLI fixtures, active here too

pytest.importorskip("mcp", reason="genesis mcp needs the mcp extra (the mcp package)")

pytestmark = pytest.mark.timeout(180)

#: The run tool as claude names it (server "genesis").
RUN_TOOL = "mcp__genesis__run"


def _genesis_env(tmp: Path) -> dict[str, str]:
    """What the nested server records under: its own transcripts, run log, ledger."""
    return {
        "XDG_STATE_HOME": str(tmp / "state"),
        "GENESIS_TRANSCRIPTS": str(tmp / "runs"),
        "GENESIS_RUN_LOG": str(tmp / "runs.jsonl"),
        "GENESIS_LEDGER": str(tmp / "ledger"),
        "GENESIS_BACKEND": "failer",
    }


def _stdio_config(rig: Rig) -> str:
    """claude's ``--mcp-config``: ``genesis mcp`` on stdio, runs under the rig's directory."""
    argv = ["-m", "coding_genesis._cli.main", "mcp", "--root", str(rig.work)]
    server = {"type": "stdio", "command": sys.executable, "args": argv}
    return json.dumps({"mcpServers": {"genesis": {**server, "env": _genesis_env(rig.tmp)}}})


def _claude(rig: Rig, config: str, *tools: str) -> Any:
    return rig.agent_with(options={"mcp_config": config, "allowed_tools": [RUN_TOOL, *tools]})


def _call(arguments: dict[str, Any]) -> str:
    return f"SCENARIO:tool {RUN_TOOL} {json.dumps(arguments)}"


def _tool_results(server: FakeModelServer) -> list[str]:
    """The tool results the model was sent, as text."""
    found = []
    for request in server.model_requests():
        for message in (request.body or {}).get("messages", []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append(json.dumps(block.get("content")))
    return found


def test_claude_runs_the_failer_through_genesis_mcp_and_the_model_reads_its_result(
    claude_rig: Rig, model_server: FakeModelServer
) -> None:
    rig = claude_rig
    agent = _claude(rig, _stdio_config(rig))
    result = dict(agent.run_sync(_call({"prompt": "/fail", "backend": "failer"})))
    assert result["status"] == 0, result
    assert str(result["message"]).startswith(TOOL_DONE_PREFIX), result["message"]
    (carried,) = [r for r in _tool_results(model_server) if "cli_error" in r]
    # the nested run's answer: the failer's failure, analyzed under our supervision
    assert "Simulated agent failure" in carried and "agent_error" in carried
    assert '\\"backend\\":\\"failer\\"' in carried or "failer" in carried
    logged = [json.loads(line) for line in (rig.tmp / "runs.jsonl").read_text().splitlines()]
    assert [(r["backend"], r["status"]) for r in logged if r["backend"] == "failer"] == [
        ("failer", 1)
    ]


def _mcp_server_of(work: Path) -> list[psutil.Process]:
    """The ``genesis mcp`` serving ``work`` (claude's child)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "mcp" in cmdline and str(work) in cmdline:
            found.append(proc)
    return found


def _nested_failers(work: Path) -> list[psutil.Process]:
    """The failers the ``genesis mcp`` of ``work`` runs."""
    found = []
    for server in _mcp_server_of(work):
        try:
            children = server.children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for child in children:
            try:
                if any(part.endswith("failer.py") for part in child.cmdline()):
                    found.append(child)
            except psutil.Error:
                continue
    return found


def test_an_interrupt_of_the_outer_session_stops_the_nested_run(
    claude_rig: Rig, model_server: FakeModelServer
) -> None:
    rig = claude_rig
    agent = _claude(rig, _stdio_config(rig))
    seen: list[psutil.Process] = []

    def nested_running() -> bool:
        seen.extend(_nested_failers(rig.work))
        return bool(seen)

    async def scenario() -> None:
        async with agent.session() as session:
            ready = polled(nested_running, "the nested failer runs", tries=600, every=0.1)
            turn = await interrupted_turn(session, _call({"prompt": "/timeout 120"}), ready)
            assert turn.status == 130 and turn.error == "interrupted", turn
            for _ in range(100):
                if _gone(seen):
                    break
                await anyio.sleep(0.1)
            assert _gone(seen), [p.pid for p in seen]
            servers = _mcp_server_of(rig.work)
        for _ in range(100):  # the session closed: its MCP server ends with it
            if _gone(servers):
                break
            await anyio.sleep(0.1)
        assert _gone(servers)

    anyio.run(scenario)
    assert not _nested_failers(rig.work)
    # stopped by our supervision, which answered it: cancelled, recorded as every run is
    logged = [json.loads(line) for line in (rig.tmp / "runs.jsonl").read_text().splitlines()]
    nested = [r for r in logged if r["backend"] == "failer"]
    assert [(r["status"], r["error"]) for r in nested] == [(130, "cancelled")], nested


def test_the_nested_runs_approvals_wait_in_the_servers_inbox(
    claude_rig: Rig, model_server: FakeModelServer, tmp_path: Path
) -> None:
    rig = claude_rig
    env = _genesis_env(tmp_path / "serve")
    with serving(tmp_path / "serve", env=env, root=rig.work) as served, served.client() as client:
        config = {
            "mcpServers": {
                "genesis": {
                    "type": "http",
                    "url": f"{served.url}/mcp",
                    "headers": {"Authorization": f"Bearer {served.token}"},
                }
            }
        }
        agent = _claude(rig, json.dumps(config))
        prompt = _call({"prompt": "/bash echo nested-approved", "approvals": "inbox"})
        answers: list[dict[str, Any]] = []
        asked: list[dict[str, Any]] = []

        async def scenario() -> None:
            async with anyio.create_task_group() as tg:

                async def outer() -> None:
                    answers.append(dict(await agent.run(prompt)))

                tg.start_soon(outer)
                deadline = time.monotonic() + 90
                while True:
                    listed = client.get("/approvals").json()["approvals"]
                    if listed:
                        break
                    assert time.monotonic() < deadline, "the nested run asked nothing"
                    await anyio.sleep(0.1)
                (item,) = listed
                asked.append(item)
                assert item["call"]["command"] == "echo nested-approved" and item["run"]
                answered = client.post(f"/approvals/{item['id']}", json={"decision": "allow"})
                assert answered.status_code == 200, answered.text

        anyio.run(scenario)
        assert answers[0]["status"] == 0, answers[0]
        nested = client.get(f"/runs/{asked[0]['run']}").json()
        assert nested["state"] == "finished" and nested["status"] == 0, nested
        carried = [r for r in _tool_results(model_server) if "nested-approved" in r]
        assert carried and '\\"status\\":0' in carried[-1].replace(" ", ""), carried
