"""The session's "always" answers (``approval.Remembered``): as narrow as what was asked,
one store for every backend, each call it settles recorded with ``source: "always"``.

The store itself, then a session of the fake two-way CLI (``tests/fakes/twoway_cli.py``)
driven through the whole machinery; the real claude and codex are in
``tests/security/test_always.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.approval import ApprovalRequest, Decision, Remembered, always_covers
from coding_genesis.run_events import ApprovalEvent
from tests.session.twoway import TwoWayBackend


def command(text: str, tool: str = "Bash") -> ApprovalRequest:
    return ApprovalRequest(tool, {"command": text}, kind="command", command=text, cwd="/w")


def write(*paths: str, tool: str = "Write", cwd: str = "/w") -> ApprovalRequest:
    return ApprovalRequest(tool, {"file_path": paths[0]}, kind="write", paths=paths, cwd=cwd)


def test_a_command_covers_that_exact_command_of_that_tool() -> None:
    store = Remembered()
    assert store.keep(command("ls"), Decision.allow(always=True)) == "this exact Bash command"
    known = store.recall(command("ls"))
    assert known is not None and known.allowed and known.input is None
    assert store.recall(command("ls -la")) is None
    assert store.recall(command("ls ")) is None  # exact: not a prefix, not normalized
    assert store.recall(command("ls", tool="Shell")) is None


def test_a_write_covers_exactly_its_resolved_paths(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "link").symlink_to(tmp_path)
    store = Remembered()
    covers = store.keep(write("a.txt", cwd=str(work)), Decision.allow(always=True))
    assert covers == "Write writing exactly a.txt"
    assert store.recall(write(str(work / "a.txt"), cwd="/elsewhere")) is not None  # same file
    assert store.recall(write("a.txt", cwd=str(tmp_path))) is None  # another file
    assert store.recall(write("a.txt", "b.txt", cwd=str(work))) is None  # more than was asked
    assert store.recall(write("a.txt", tool="Edit", cwd=str(work))) is None  # another tool
    assert store.recall(write("link/a.txt", cwd=str(work))) is None  # resolves outside


def test_a_deny_covering_any_path_refuses_the_whole_write(tmp_path: Path) -> None:
    store = Remembered()
    cwd = str(tmp_path)
    store.keep(write("ok.txt", cwd=cwd), Decision.allow(always=True))
    store.keep(write("secret.txt", cwd=cwd), Decision.deny("never", always=True, end_turn=True))
    refused = store.recall(write("ok.txt", "secret.txt", cwd=cwd))
    assert refused is not None and not refused.allowed and refused.message == "never"
    assert not refused.end_turn  # a remembered refusal lets the turn go on


def test_other_kinds_and_once_answers_are_not_remembered() -> None:
    store = Remembered()
    read = ApprovalRequest("Read", {"file_path": "/etc/passwd"}, kind="read", cwd="/w")
    assert always_covers(read) is None
    assert store.keep(read, Decision.allow(always=True)) is None
    assert store.keep(command("ls"), Decision.allow()) is None  # once
    unresolvable = write("a.txt", cwd="")  # relative, no cwd: cannot be checked
    assert always_covers(unresolvable) is None
    assert store.keep(unresolvable, Decision.allow(always=True)) is None
    assert len(store) == 0
    assert store.recall(read) is None and store.recall(command("ls")) is None


# -- through a session ----------------------------------------------------------------

anyio_test = pytest.mark.anyio


def agent(tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    settings.setdefault("timeout", 20)
    settings.setdefault("grace", 1.0)
    settings.setdefault("ledger", str(tmp_path / "ledger"))
    return CodingGenesisAgent(TwoWayBackend(), cwd=str(tmp_path), **settings)


@anyio_test
async def test_a_session_settles_repeats_itself_and_records_each(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        if request.command == "rm -rf build":
            return Decision.deny("never that", always=True)
        return Decision.allow(always=True)

    events: list[ApprovalEvent] = []
    a = agent(tmp_path, approver=approver)
    a.subscribe(lambda e: events.append(e) if isinstance(e, ApprovalEvent) else None)
    async with a.session() as s:
        first = await s.send_result('ASK Bash {"command": "make"}')
        assert first.approvals[0]["source"] == "approver"
        assert first.approvals[0]["always"] == "this exact Bash command"
        again = await s.send_result('ASK Bash {"command": "make"}')
        assert again.message == 'allowed {"command": "make"}'
        (record,) = again.approvals
        assert (record["source"], record["allowed"], record["decision"]) == (
            "always",
            True,
            "allow_always",
        )
        other = await s.send_result('ASK Bash {"command": "make install"}')
        assert other.approvals[0]["source"] == "approver"  # not covered: asked
        no = await s.send_result('ASK Bash {"command": "rm -rf build"}')
        no_again = await s.send_result('ASK Bash {"command": "rm -rf build"}')
        assert no.message == no_again.message == "denied never that"
        assert no_again.approvals[0]["source"] == "always"
        read = await s.send_result('ASK Read {"file_path": "x"}')
        assert read.approvals[0]["always"].startswith("this call only")
        read_again = await s.send_result('ASK Read {"file_path": "x"}')
        assert read_again.approvals[0]["source"] == "approver"  # a read is not remembered
    assert [r.command or r.tool for r in asked] == [
        "make",
        "make install",
        "rm -rf build",
        "Read",
        "Read",
    ]
    assert [e.source for e in events] == [
        "approver",
        "always",
        "approver",
        "approver",
        "always",
        "approver",
        "approver",
    ]


@anyio_test
async def test_a_write_allowed_always_inside_does_not_allow_one_outside(tmp_path: Path) -> None:
    """The finding: an "always" answer for a write in the repo let a later write of
    that tool through anywhere, unasked and unrecorded."""
    work = tmp_path / "repo"
    work.mkdir()

    def approver(request: ApprovalRequest) -> Decision:
        inside = all(
            os.path.realpath(os.path.join(request.cwd, p)).startswith(str(work) + os.sep)
            for p in request.paths
        )
        return Decision.allow(always=True) if inside else Decision.deny("outside the repo")

    async with agent(work, approver=approver).session() as s:
        await s.send_result(f'ASK Write {{"file_path": "{work}/notes.md"}}')
        outside = await s.send_result(f'ASK Write {{"file_path": "{tmp_path}/.bashrc"}}')
    assert outside.message == "denied outside the repo"
    assert outside.approvals[0]["source"] == "approver"
