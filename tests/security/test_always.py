""" "Always" is one store, as narrow as what was asked (issue "approvals that hold"),
with the REAL claude and codex against the fake model server.

The finding: on claude, "always" for one write allowed every later write of that tool,
anywhere, unasked and unrecorded (the claude codec kept it by tool); codex was
answered ``acceptForSession`` and kept its own rules.  Now the session's store settles a
repeat only when it is covered exactly (the same resolved paths, the same command) and
records it with ``source: "always"``; anything more is asked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_genesis.approval import ApprovalRequest, Decision
from tests.real_cli.test_claude_codex import Rig, codex_rig, hermetic_env, rig
from tests.real_cli.test_sessions import session_agent

__all__ = ["codex_rig", "hermetic_env", "rig"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _inside(request: ApprovalRequest, root: Path) -> bool:
    return bool(request.paths) and all(
        os.path.realpath(os.path.join(request.cwd, p)).startswith(str(root) + os.sep)
        for p in request.paths
    )


async def test_always_for_a_write_in_the_repo_does_not_let_one_outside_through(
    rig: Rig,
) -> None:
    outside = rig.tmp / "outside"
    outside.mkdir()
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        if request.kind != "write":
            return Decision.allow()
        if _inside(request, rig.work):
            return Decision.allow(always=True)
        return Decision.deny("only in the repo")

    agent = session_agent(rig, approver=approver)
    async with agent.session() as session:
        first = await session.send_result("SCENARIO:write inside.txt one")
        assert first.status == 0, first.message
        assert (rig.work / "inside.txt").read_text() == "one\n"
        escaped = await session.send_result(f"SCENARIO:write {outside}/.bashrc evil")
        assert escaped.status == 0, escaped.message
        assert not (outside / ".bashrc").exists()
        refused = [a for a in escaped.approvals if a["kind"] == "write"]
        assert refused and refused[0]["allowed"] is False, escaped.approvals
        assert refused[0]["source"] == "approver"  # asked, not settled by "always"
        writes = [a for a in first.approvals if a["kind"] == "write"]
        assert writes[0]["source"] == "approver"
        assert "inside.txt" in writes[0]["always"], writes[0]  # what the answer covers
    assert any(str(outside) in " ".join(r.paths) for r in asked)


async def test_a_repeat_is_settled_by_the_store_and_recorded(rig: Rig) -> None:
    calls: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        calls.append(request)
        return Decision.allow(always=True)

    agent = session_agent(rig, approver=approver)
    async with agent.session() as session:
        await session.send_result("SCENARIO:bash echo same")
        again = await session.send_result("SCENARIO:bash echo same")
        assert again.status == 0, again.message
        commands = [a for a in again.approvals if a["kind"] == "command"]
        assert commands and commands[0]["source"] == "always", again.approvals
        other = await session.send_result("SCENARIO:bash echo other")
        asked = [a for a in other.approvals if a["kind"] == "command"]
        assert asked and asked[0]["source"] == "approver", other.approvals
    commands_asked = [c.command for c in calls if c.kind == "command"]
    assert len(commands_asked) == 2, commands_asked  # "echo same" once, "echo other" once


async def test_deny_always_holds_without_asking_again(rig: Rig) -> None:
    calls: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        calls.append(request)
        return Decision.deny("not this file", always=True)

    agent = session_agent(rig, approver=approver)
    async with agent.session() as session:
        for _ in range(2):
            r = await session.send_result("SCENARIO:write nope.txt x")
            assert r.status == 0, r.message
        assert not (rig.work / "nope.txt").exists()
        sources = [a["source"] for a in r.approvals if a["kind"] == "write"]
        assert sources == ["always"], r.approvals
    assert len([c for c in calls if c.kind == "write"]) == 1
