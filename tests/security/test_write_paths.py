"""Every path a write touches is checked: a codex patch that moves a file (`*** Move to:`) puts
both its ends in the approval request, so `writes_under` refuses a move out of (or into) its
root; a write whose shape the backend cannot read is denied before any approver is asked.

Found by an audit: codex reports `*** Update File: a` / `*** Move to: <anywhere>` as the change
of `a` with a `move_path`, the request named only `a`, and `writes_under(<work>)` let the file be
written outside the root (in an attack: `~/.bashrc`).  Run with the REAL codex 0.169 against the
fake model server, and with the fake claude speaking the control protocol."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent, writes_under
from coding_genesis.approval import ApprovalRequest
from tests.real_cli.test_claude_codex import Rig, codex_rig, hermetic_env
from tests.support import FakeCLI

__all__ = ["codex_rig", "hermetic_env"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def patch(*sections: str) -> str:
    """The model's call of codex's ``apply_patch`` tool, as a fake model scenario."""
    text = "*** Begin Patch\n" + "".join(sections) + "*** End Patch\n"
    return "SCENARIO:tool apply_patch " + json.dumps(text)


async def test_a_codex_move_out_of_the_root_is_refused(codex_rig: Rig) -> None:
    work, outside = codex_rig.work, codex_rig.tmp / "outside"
    outside.mkdir()
    (work / "a.txt").write_text("hello\n")
    asked: list[ApprovalRequest] = []
    roots = writes_under(work)

    def approver(request: ApprovalRequest) -> Any:
        asked.append(request)
        return roots(request)

    agent = CodingGenesisAgent(
        "codex",
        cli_path=codex_rig.cli,
        cwd=work,
        env=codex_rig.env(),
        timeout=60.0,
        grace=2.0,
        approver=approver,
    )
    moved = outside / "moved.txt"
    async with agent.session() as session:
        result = await session.send_result(
            patch(f"*** Update File: a.txt\n*** Move to: {moved}\n@@\n-hello\n+bye\n")
        )
        assert [a["allowed"] for a in result.approvals] == [False], result.approvals
        assert "outside the allowed roots" in str(result.approvals[0]["reason"])
        (request,) = asked
        assert request.moves == ((str(work / "a.txt"), str(moved)),)
        assert not moved.exists()
        assert (work / "a.txt").read_text() == "hello\n"

        # Into the root from outside: the source outside would be deleted; refused too.
        victim = outside / "victim.txt"
        victim.write_text("keep me\n")
        result = await session.send_result(
            patch(f"*** Update File: {victim}\n*** Move to: in.txt\n@@\n-keep me\n+taken\n")
        )
        assert [a["allowed"] for a in result.approvals] == [False], result.approvals
        assert victim.read_text() == "keep me\n"
        assert not (work / "in.txt").exists()

        # A move inside the root is a write like any other: allowed.
        result = await session.send_result(
            patch("*** Update File: a.txt\n*** Move to: sub/b.txt\n@@\n-hello\n+moved\n")
        )
        assert [a["allowed"] for a in result.approvals] == [True], result.approvals
        assert (work / "sub" / "b.txt").read_text() == "moved\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


async def test_a_write_the_backend_cannot_read_is_denied_unasked(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    asked: list[ApprovalRequest] = []

    def allow_everything(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    agent = fake.agent(approver=allow_everything, cwd=tmp_path)
    async with agent.session() as session:
        result = await session.send_result('ASK Write {"file_path": ["a.txt", "/etc/x"]}')
        (record,) = result.approvals
        assert (record["allowed"], record["source"]) == (False, "unreadable"), record
        assert "file_path is not a path" in str(record["reason"])
        assert "denied Write" in (result.message or "")
        readable = await session.send_result('ASK Write {"file_path": "a.txt", "content": "x"}')
        assert readable.approvals[0]["allowed"] is True
    assert [r.paths for r in asked] == [("a.txt",)]  # only the readable write was asked
