"""The embedded failer speaks claude's control protocol (its backend's ``control()`` is
claude's codec): what the feature files in tests/features/ (sessions, approvals, hooks,
host tools, structured output) do not show, against the real failer script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from coding_genesis import CodingGenesisAgent, Decision, RunResponse, tool
from coding_genesis.backends.claude_control import ClaudeControl
from coding_genesis.backends.failer import FAILER_SCRIPT, FailerBackend
from coding_genesis.status import Status

pytestmark = pytest.mark.anyio


def agent(tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    settings.setdefault("timeout", 20)
    settings.setdefault("grace", 1.0)
    settings.setdefault("ledger", str(tmp_path / "ledger"))
    settings.setdefault("options", {"state_dir": str(tmp_path / "state")})
    return CodingGenesisAgent("failer", cwd=str(tmp_path), **settings)


def body(response: RunResponse) -> dict[str, Any]:
    """The failer's answer: a JSON body."""
    data = json.loads(response["message"])
    assert isinstance(data, dict)
    return data


def test_the_failer_speaks_claude_s_codec() -> None:
    backend = FailerBackend()
    assert isinstance(backend.control(), ClaudeControl)
    assert backend.structured_output


@pytest.mark.slow
async def test_turns_in_one_process_and_the_one_shot_answer_unchanged(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        first = await s.send("hello")
        second = await s.send("/fail")
        third = await s.send("/history")
    assert first["status"] == 0 and body(first)["message"] == (
        "No failure mode specified, responding normally"
    )
    assert second["status"] == 1 and (second["failure"] or {})["category"] == "agent_error", second
    assert body(third)["message"] == "2 earlier prompts in this conversation: hello | /fail"
    assert first["session_id"] == second["session_id"] == third["session_id"]
    one_shot = await a.run("hello")
    assert one_shot["status"] == 0 and body(one_shot)["message"] == body(first)["message"]


@pytest.mark.slow
async def test_resume_continues_and_an_unknown_id_fails_as_claude_s_does(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        await s.send("remember 7")
        session_id = s.session_id
    assert session_id
    stored = list((tmp_path / "state").iterdir())
    assert [p.suffix for p in stored] == [".session"]
    assert stored[0].stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    async with a.session(resume=session_id) as s:
        again = await s.send("/history")
    assert again["session_id"] == session_id
    assert body(again)["message"] == "1 earlier prompts in this conversation: remember 7"
    async with a.session(resume="0f0f0f0f-0000-4000-8000-000000000000") as s:
        lost = await s.send("hi")
    assert lost["status"] == 1 and lost["error"] == "incomplete", lost
    assert "failer ended before it was ready: No conversation found" in lost["message"]
    assert "Traceback" not in lost["message"] and "Fatal Python" not in lost["message"]


@pytest.mark.slow
async def test_without_an_approver_claude_s_rules_decide(tmp_path: Path) -> None:
    a = agent(tmp_path)
    async with a.session() as s:
        plain = await s.send("/bash echo unasked")
        asked = await s.send("/bash python3 -c print(1)")
        write = await s.send("/write a.txt hi")
    assert body(plain)["message"] == "ran echo unasked: unasked" and plain["approvals"] == []
    (question,) = asked["approvals"]
    assert question["allowed"] is False and question["source"] == "permissions", question
    assert "Bash was refused" in body(asked)["message"]
    assert not (tmp_path / "a.txt").exists() and write["approvals"][0]["kind"] == "write"
    async with agent(tmp_path, permissions="read-only").session() as s:
        refused = await s.send("/bash echo no")
    assert "No such tool available: Bash. Bash is disabled" in body(refused)["message"]
    async with agent(tmp_path, permissions="edit").session() as s:
        edited = await s.send("/write b.txt yes")
    assert (tmp_path / "b.txt").read_text() == "yes\n" and edited["approvals"] == []


@pytest.mark.slow
async def test_read_only_holds_whatever_the_approver_and_a_switch_say(tmp_path: Path) -> None:
    """claude's read-only removes Bash and Write (``--disallowedTools``): the
    failer, playing claude, takes them away too, so an approver that allows
    everything is never asked and writes nothing, at the opening level or at
    one a turn switched to."""
    asked: list[str] = []

    def approver(request: Any) -> Decision:
        asked.append(str(request.tool))
        return Decision.allow()

    async with agent(tmp_path, permissions="read-only", approver=approver).session() as s:
        opened = await s.send("/write a.txt no")
        ran = await s.send("/bash python3 -c print(1)")
    async with agent(tmp_path, permissions="edit", approver=approver).session() as s:
        switched = await s.send("/write b.txt no", permissions="read-only")
    for refused in (opened, ran, switched):
        assert "is disabled for this session" in body(refused)["message"], refused
    assert not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
    assert asked == []


@pytest.mark.slow
async def test_always_hands_claude_its_suggestions_and_the_rule_holds(tmp_path: Path) -> None:
    asked: list[str] = []

    def approver(request: Any) -> Decision:
        asked.append(str(request.command))
        return Decision.allow(always=True)

    a = agent(tmp_path, approver=approver)
    async with a.session() as s:
        for _ in range(2):
            r = await s.send("/bash python3 -c print(42)")
            assert body(r)["message"] == "ran python3 -c print(42): 42", r
    assert asked == ["python3 -c print(42)"]  # the second call: settled without asking


@pytest.mark.slow
async def test_one_shot_tool_calls_follow_the_permission_level(tmp_path: Path) -> None:
    a = agent(tmp_path)
    refused = await a.run("/write one.txt x")
    assert refused["status"] == 0 and refused["tool_calls"] == 1
    assert "haven't granted it yet" in body(refused)["message"]
    assert not (tmp_path / "one.txt").exists()
    done = await a.run("/write one.txt x", permissions="edit")
    assert (tmp_path / "one.txt").read_text() == "x\n" and done["status"] == 0
    ran = await a.run("/bash python3 -c print(6*7)", permissions="full")
    assert body(ran)["message"] == "ran python3 -c print(6*7): 42"
    missing = await a.run("/bash no-such-command-here", permissions="full")
    assert "exited 127" in body(missing)["message"]


class Review(BaseModel):
    verdict: str
    issues: list[str]


@pytest.mark.slow
async def test_structured_output_one_shot_and_its_one_retry(tmp_path: Path) -> None:
    a = agent(tmp_path)
    made = await a.run_result("Review the last commit", output_schema=Review)
    assert made.output == Review(verdict="failer", issues=["failer"]), made
    wrong = await a.run_result('/json {"verdict": 1}', output_schema=Review)
    # Retried once (the continuation prompt repeats the request, so the same answer).
    assert wrong.error == "invalid_output" and wrong.attempts == 2, wrong
    assert "$.verdict: Input should be a valid string" in wrong.message


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.slow
async def test_a_host_tool_it_was_not_given_is_a_clear_failure(tmp_path: Path) -> None:
    async with agent(tmp_path, tools=[add]).session() as s:
        unknown = await s.send('/tool mul {"a": 1}')
        known = await s.send('/tool add {"a": 1, "b": 2}')
    assert unknown["status"] == 1 and "no host tool 'mul' (tools=: add)" in unknown["message"]
    assert body(known)["message"] == "add answered: 3" and known["tool_calls"] == 1


@pytest.mark.slow
async def test_an_interrupted_wait_and_a_cut_turn(tmp_path: Path) -> None:
    import anyio

    async with agent(tmp_path).session() as s:
        async with anyio.create_task_group() as tg:
            results: list[RunResponse] = []

            async def waiting() -> None:
                results.append(await s.send("/timeout 600"))

            tg.start_soon(waiting)
            await anyio.sleep(0.5)
            await s.interrupt()
        assert results[0]["status"] == Status.CANCELLED and results[0]["error"] == "interrupted"
        after = await s.send("hello")
        assert after["status"] == 0
        cut = await s.send("/partial")
    assert cut["status"] == 1 and cut["error"] == "incomplete", cut


def test_the_script_alone_needs_only_its_directory(tmp_path: Path) -> None:
    # Run as the backend runs it (a script, not -m): the two-way module comes from its own
    # directory, and stdin's end ends it cleanly.
    init = {"type": "control_request", "request_id": "g1", "request": {"subtype": "initialize"}}
    turn = {"type": "user", "message": {"role": "user", "content": "/bash echo hi"}}
    done = subprocess.run(
        [sys.executable, "-S", FAILER_SCRIPT, "--input-format", "stream-json"],
        input="".join(json.dumps(o) + "\n" for o in (init, turn)).encode(),
        capture_output=True,
        timeout=30,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "GENESIS_FAILER_STATE_DIR": str(tmp_path / "state")},
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert lines[0]["response"]["request_id"] == "g1"
    assert lines[-1]["type"] == "result" and "ran echo hi: hi" in lines[-1]["result"]
    assert done.stderr == b""
