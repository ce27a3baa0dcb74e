"""What a CLI does between turns is a turn of its own (``trigger="cli"``), never
unrecorded: driven against the fake two-way CLI (``LATER <s> <prompt>``: the turn
ends at once, then the CLI works by itself, as claude's background tasks do).

The fake claude (its control protocol) plays a question asked right after its own
end of a turn; the real claude is in ``tests/security/test_between_turns.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.run_events import ApprovalEvent
from tests.session.twoway import agent
from tests.support import FAKE_BIN

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_a_question_between_turns_is_a_turn_of_its_own(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.allow()

    events: list[ApprovalEvent] = []
    runs = tmp_path / "runs.jsonl"
    a = agent(tmp_path, approver=approver, transcripts=str(tmp_path / "t"), run_log=str(runs))
    a.subscribe(lambda e: events.append(e) if isinstance(e, ApprovalEvent) else None)
    async with a.session() as s:
        first = await s.send_result('LATER 0.3 ASK Bash {"command": "make"}')
        assert first.status == 0 and first.message == "started in the background"
        assert first.trigger == "user" and first.approvals == []
        with anyio.fail_after(10):
            later = await s.cli_turn()
        assert later.trigger == "cli" and later.turn == 2
        assert later.status == 0 and later.message == 'allowed {"command": "make"}'
        (record,) = later.approvals
        assert (record["tool"], record["allowed"], record["turn"]) == ("Bash", True, 2)
        assert [r.trigger for r in s.results] == ["user", "cli"]
        assert s.usage["input_tokens"] == 24  # both turns metered
    assert [r.command for r in asked] == ["make"] and asked[0].turn == 2
    assert [e.run_id for e in events] == [later.run_id]
    # recorded like any turn: its transcript holds what the CLI said and our answer
    folder = Path(later.transcript or "")
    assert '"type":"ask"' in (folder / "stdout.jsonl").read_text().replace(" ", "")
    assert '"op":"answer"' in (folder / "stdin.jsonl").read_text().replace(" ", "")
    logged = [json.loads(line) for line in runs.read_text().splitlines()]
    assert [(r["trigger"], r["turn"]) for r in logged] == [("user", 1), ("cli", 2)]


@pytest.mark.slow
async def test_a_send_waits_for_the_turn_the_cli_started(tmp_path: Path) -> None:
    async def slow(request: ApprovalRequest) -> Decision:
        await anyio.sleep(0.5)
        return Decision.allow()

    async with agent(tmp_path, approver=slow).session() as s:
        await s.send_result('LATER 0.1 ASK Bash {"command": "make"}')
        await anyio.sleep(0.3)  # the CLI's own turn is under way, its question pending
        after = await s.send_result("TEXT next")
        assert after.status == 0 and after.message == "next"
        assert [(r.trigger, r.turn) for r in s.results] == [("user", 1), ("cli", 2), ("user", 3)]
        assert s.results[1].approvals[0]["allowed"] is True


@pytest.mark.slow
async def test_text_between_turns_is_recorded_and_noise_is_not_a_turn(tmp_path: Path) -> None:
    async with agent(tmp_path).session() as s:
        await s.send_result("LATER 0.2 TEXT done by myself")
        with anyio.fail_after(10):
            later = await s.cli_turn()
        assert later.message == "done by myself" and later.trigger == "cli"
        await s.send_result("NEWS")  # a type nobody knows: ignored, no turn
        await anyio.sleep(0.3)
        assert [r.trigger for r in s.results] == ["user", "cli", "user"]


async def test_without_a_session_a_question_after_the_turn_is_refused_unasked(
    tmp_path: Path,
) -> None:
    """A one-shot ``run(approver=...)``: once its one turn is over nobody takes a turn
    of the CLI's, so what it asks is refused at once, never put to the approver (whose
    answer would be recorded nowhere)."""
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.allow()

    r = await agent(tmp_path, approver=approver, grace=2.0).run_result(
        'LATER 0 ASK Bash {"command": "touch late"}'
    )
    assert r.status == 0 and r.message == "started in the background"
    assert asked == []


@pytest.mark.slow
async def test_the_sessions_own_record_holds_the_opening_and_its_turns(tmp_path: Path) -> None:
    """The opening exchange (and what comes between turns) is in the session's own
    directory beside its turns'; `genesis show <session>` shows its turns in order."""
    base = tmp_path / "t"
    async with agent(tmp_path, transcripts=str(base)).session() as s:
        one = await s.send_result("TEXT first")
        two = await s.send_result("TEXT second")
    own = base / s.key
    meta = json.loads((own / "meta.json").read_text())
    assert meta["kind"] == "session" and meta["session"] == s.key
    assert '"op":"hello"' in (own / "stdin.jsonl").read_text().replace(" ", "")
    assert '"type":"ready"' in (own / "stdout.jsonl").read_text().replace(" ", "")
    assert "TEXT first" not in (own / "stdin.jsonl").read_text()  # the turns' are theirs
    summary = json.loads((own / "session.json").read_text())
    assert summary["runs"] == [one.run_id, two.run_id] and summary["turns"] == 2
    for n, r in ((1, one), (2, two)):
        turn_meta = json.loads((Path(r.transcript or "") / "meta.json").read_text())
        assert (turn_meta["session"], turn_meta["turn"], turn_meta["trigger"]) == (s.key, n, "user")
    env = {**os.environ, "GENESIS_TRANSCRIPTS": str(base)}
    genesis = [sys.executable, "-m", "coding_genesis._cli.main"]
    shown = await anyio.run_process([*genesis, "show", s.key[:12]], env=env, check=False)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.decode().splitlines()
    assert lines[0] == f"session {s.key}"
    turn_lines = [line for line in lines if one.run_id[:12] in line or two.run_id[:12] in line]
    assert [line.split()[0] for line in turn_lines] == ["1", "2"]
    assert "first" in turn_lines[0] and "second" in turn_lines[1]
    listed = await anyio.run_process([*genesis, "runs"], env=env, check=False)
    assert s.key[:12] not in listed.stdout.decode()  # a session's own directory is not a run


@pytest.mark.slow
@pytest.mark.parametrize("allow", [True, False])
async def test_a_question_after_the_clis_end_of_a_turn_is_answered(
    tmp_path: Path, allow: bool
) -> None:
    """The fake claude (``ENDED_ASK``): between turns a background task's text and
    result, then at once (one write, all read before a turn of the CLI's starts) a
    ``can_use_tool``.  The turn that takes them ends at the CLI's next end, the one
    after the answer, not at the end before the question: that one withdrew the
    question unanswered, and claude waited for an answer for ever."""
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.allow() if allow else Decision.deny("not now")

    a = CodingGenesisAgent(
        "claude",
        cli_path=str(FAKE_BIN / "claude"),
        cwd=str(tmp_path),
        timeout=10,
        grace=1.0,
        ledger=str(tmp_path / "ledger"),
        approver=approver,
    )
    async with a.session() as s:
        first = await s.send_result('ENDED_ASK 0.3 Bash {"command": "make"}')
        assert first.status == 0 and first.message == "started in the background"
        with anyio.fail_after(8):
            later = await s.cli_turn()
        said = 'allowed Bash {"command": "make"}' if allow else "denied Bash: not now"
        assert later.trigger == "cli" and later.message == said, later
        (record,) = later.approvals
        assert (record["tool"], record["allowed"], record["turn"]) == ("Bash", allow, 2)
        assert [r.command for r in asked] == ["make"] and asked[0].turn == 2
        with anyio.fail_after(8):
            after = await s.send_result("hello", timeout=5)
        assert after.status == 0 and after.message == "fake claude got: hello", after
        assert [(r.trigger, r.turn) for r in s.results] == [("user", 1), ("cli", 2), ("user", 3)]
