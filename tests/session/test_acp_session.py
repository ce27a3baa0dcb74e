"""Live sessions over the Agent Client Protocol, through the whole machinery, against the
fake ACP agent (``tests/fakes/fake_acp.py``: ``bin/gemini --acp``, ``bin/qwen --acp``,
``bin/opencode acp``, each flavour naming its permission options and reporting its usage
as the real agent does).  Each hostile case ends with a clear answer, never a hang or a
traceback, and nothing of the session outlives it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from coding_genesis import AcpBackend, Budget, CodingGenesisAgent, load_backends_file
from coding_genesis.approval import ApprovalRequest, Decision, writes_under
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.events import PlanEvent, ThoughtEvent
from coding_genesis.tools import tool
from tests.session.interrupting import interrupted_turn, polled
from tests.session.test_protocol_faults import left

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the codec is the subject; tests/session runs the machinery on both loops


FAKES = Path(__file__).resolve().parents[1] / "fakes" / "bin"
FLAVOURS = ("gemini", "qwen", "opencode")
#: Each flavour's allow-once and reject-once option ids (tests/fakes/fake_acp.py).
ONCE = {
    "gemini": ("proceed_once", "cancel"),
    "qwen": ("proceed_once", "cancel"),
    "opencode": ("once", "reject"),
}


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def agent(flavour: str, tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    settings.setdefault("timeout", 20)
    settings.setdefault("grace", 1.0)
    settings.setdefault("ledger", str(tmp_path / "ledger"))
    env = {"FAKE_CLI_RECORD": str(tmp_path / "record.jsonl"), **settings.pop("env", {})}
    return CodingGenesisAgent(
        flavour, cli_path=str(FAKES / flavour), cwd=str(tmp_path), env=env, **settings
    )


def remember(asked: list[Any], answer: bool) -> Callable[[ApprovalRequest], bool]:
    """An approver that keeps what it is asked and answers ``answer``."""

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return answer

    return approver


def recorded(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def sleepers(key: str) -> list[int]:
    found = []
    for pid in left(key):
        try:
            if "time.sleep" in " ".join(psutil.Process(pid).cmdline()):
                found.append(pid)
        except psutil.Error:
            continue
    return found


async def wait_gone(key: str, within: float = 10.0) -> list[int]:
    for _ in range(int(within / 0.05)):
        if not left(key):
            break
        await anyio.sleep(0.05)
    return left(key)


@pytest.mark.slow
async def test_three_turns_in_one_process_with_each_flavours_usage(
    flavour: str, tmp_path: Path
) -> None:
    a = agent(flavour, tmp_path)
    async with a.session() as s:
        results = [await s.send_result(f"turn {n}") for n in range(3)]
        assert s.session_id and all(r.session_id == s.session_id for r in results)
    assert [r.message for r in results] == [f"fake {flavour} got: turn {n}" for n in range(3)]
    assert len({r.pid for r in results}) == 1
    for r in results:
        assert r.status == 0, r.message
        assert (r.usage or {}).get("inputTokens") == 10, r.usage  # per turn, not summed
        assert (r.usage or {}).get("outputTokens") == 6
    assert s.usage["inputTokens"] == 30
    assert await wait_gone(s.key) == []
    sent = [e["received"] for e in recorded(tmp_path) if "received" in e]
    assert sent[:2] == ["initialize", "session/new"]
    assert sent.count("session/prompt") == 3
    init = next(e for e in recorded(tmp_path) if e.get("received") == "initialize")
    assert init["params"]["protocolVersion"] == 1
    # Only what we serve: no file system, no terminal.
    assert init["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    }


@pytest.mark.slow
async def test_options_are_chosen_by_kind_and_always_is_answered_once(
    flavour: str, tmp_path: Path
) -> None:
    answers = iter(
        [
            Decision.allow(),
            Decision.deny("not that"),
            Decision.allow(always=True),
            Decision.deny("never", always=True),
        ]
    )
    seen: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        seen.append(request)
        return next(answers)

    a = agent(flavour, tmp_path, approver=approver)
    write = json.dumps({"file_path": "a.txt", "content": "x"})
    async with a.session() as s:
        allowed = await s.send_result('ASK execute {"command": "touch made"}')
        denied = await s.send_result(f"ASK edit {write}")
        always = await s.send_result('ASK execute {"command": ["ls", "-l"]}')
        never = await s.send_result('ASK move {"source": "a", "destination": "b"}')
    allow_id, reject_id = ONCE[flavour]
    chosen = [e["chosen"] for e in recorded(tmp_path) if "chosen" in e]
    # "always" too is answered with the once option: the session keeps "always".
    assert chosen == [allow_id, reject_id, allow_id, reject_id]
    assert allowed.message == "allowed allow_once" and allowed.tool_calls == 1
    assert denied.message == "denied reject_once" and denied.status == 0
    assert always.message == "allowed allow_once" and never.message == "denied reject_once"
    assert [r.kind for r in seen] == ["command", "write", "command", "write"]
    assert seen[0].command == "touch made" and seen[2].command == "ls -l"
    assert seen[1].paths == ("a.txt",)
    assert seen[3].paths == ("a", "b")  # a move's both ends
    assert allowed.approvals[0]["allowed"] is True and denied.approvals[0]["allowed"] is False


@pytest.mark.slow
async def test_always_is_kept_by_the_session_and_settles_the_same_call(
    flavour: str, tmp_path: Path
) -> None:
    """An "always" answer over ACP goes to the session's one store
    (approval.Remembered), as narrow as what was asked: the same command again
    is settled there (recorded with source "always", the approver not asked),
    another command is asked; the agent is answered once per call."""
    seen: list[str | None] = []

    def approver(request: ApprovalRequest) -> Decision:
        seen.append(request.command)
        return Decision.allow(always=True)

    a = agent(flavour, tmp_path, approver=approver)
    async with a.session() as s:
        first = await s.send_result('ASK execute {"command": "make test"}')
        again = await s.send_result('ASK execute {"command": "make test"}')
        other = await s.send_result('ASK execute {"command": "make clean"}')
    assert seen == ["make test", "make clean"]
    assert first.approvals[0]["source"] == "approver"
    assert "this exact" in first.approvals[0]["always"]
    assert again.approvals[0]["source"] == "always" and again.approvals[0]["allowed"] is True
    assert other.approvals[0]["source"] == "approver"
    assert [r.message for r in (first, again, other)] == ["allowed allow_once"] * 3
    allow_id = ONCE[flavour][0]
    assert [e["chosen"] for e in recorded(tmp_path) if "chosen" in e] == [allow_id] * 3


async def test_writes_under_holds_over_acp(tmp_path: Path) -> None:
    """Every path of an ACP tool call is in the request: a write (or either end of
    a move) outside ``writes_under`` is refused, inside it is allowed."""
    root = tmp_path / "work"
    root.mkdir()
    a = agent("qwen", tmp_path, approver=writes_under(str(root)))
    inside = json.dumps({"file_path": str(root / "a.txt")})
    outside = json.dumps({"file_path": str(tmp_path / "elsewhere.txt")})
    away = json.dumps({"source": str(root / "a.txt"), "destination": "/etc/cron.d/x"})
    async with a.session() as s:
        ok = await s.send_result(f"ASK edit {inside}")
        out = await s.send_result(f"ASK edit {outside}")
        moved = await s.send_result(f"ASK move {away}")
    assert ok.message == "allowed allow_once" and ok.approvals[0]["allowed"] is True
    for refused in (out, moved):
        assert refused.message == "denied reject_once", refused.message
        assert refused.approvals[0]["allowed"] is False
        assert "writes_under" in refused.approvals[0]["reason"]
    assert "/etc/cron.d/x" in moved.approvals[0]["reason"]


async def test_a_call_acp_cannot_read_whole_is_denied_unasked(tmp_path: Path) -> None:
    """A tool call whose shape we cannot read (a path that is not one, a kind ACP
    does not name, a write naming no path) is denied before the approver is
    asked, and recorded so (source "unreadable")."""
    seen: list[ApprovalRequest] = []

    approver = remember(seen, True)
    a = agent("opencode", tmp_path, approver=approver)
    async with a.session() as s:
        results = [
            await s.send_result('ASK edit {"file_path": 5}'),
            await s.send_result("ASK teleport {}"),
            await s.send_result('ASK delete {"recursive": true}'),
        ]
    assert seen == []
    for r in results:
        assert r.message == "denied reject_once", r.message
        assert r.approvals[0]["source"] == "unreadable" and r.approvals[0]["allowed"] is False


@pytest.mark.slow
@pytest.mark.parametrize("depth", [1100, 5000])
async def test_a_permission_request_too_deep_to_parse_is_denied_unasked(
    tmp_path: Path, depth: int
) -> None:
    """A request nested deeper than the parser takes is still answered (never
    left waiting until the wall limit): denied as unreadable, recorded."""
    seen: list[ApprovalRequest] = []

    approver = remember(seen, True)
    a = agent("gemini", tmp_path, approver=approver, timeout=10)
    async with a.session() as s:
        r = await s.send_result(f"DEEP {depth}")
        after = await s.send_result("after")
    assert r.status == 0 and r.message == "answered cancelled", r.message
    assert seen == []
    assert r.approvals[0]["source"] == "unreadable" and r.approvals[0]["tool"] == "deep"
    assert r.duration_s < 5
    assert after.status == 0, after.message


async def test_a_refusal_that_ends_the_turn_cancels_it(tmp_path: Path) -> None:
    a = agent("qwen", tmp_path, approver=lambda r: Decision.deny("stop here", end_turn=True))
    async with a.session() as s:
        r = await s.send_result('ASK execute {"command": "rm x"}')
        assert r.status == 1 and r.error == "permission_denied", r.message
        assert "stop here" in r.message
        after = await s.send_result("still here")
        assert after.status == 0 and after.message == "fake qwen got: still here"
    received = [e.get("received") for e in recorded(tmp_path)]
    assert "session/cancel" in received
    assert [e["chosen"] for e in recorded(tmp_path) if "chosen" in e] == ["cancel"]


async def test_a_request_with_no_allow_option_is_refused_and_said(
    flavour: str, tmp_path: Path
) -> None:
    a = agent(flavour, tmp_path, approver=lambda r: True)
    async with a.session() as s:
        r = await s.send_result("NOALLOW")
        assert r.status == 1 and r.error == "cli_error", r.message
        assert "offering no option to allow it once" in r.message
        assert "reject_always, reject_once" in r.message
        after = await s.send_result("after")
        assert after.status == 0, after.message
    assert [e["chosen"] for e in recorded(tmp_path) if "chosen" in e] == ["no"]
    assert await wait_gone(s.key) == []


async def test_without_an_approver_a_request_is_denied_with_the_permission_level(
    tmp_path: Path,
) -> None:
    a = agent("gemini", tmp_path, permissions="edit")
    async with a.session() as s:
        r = await s.send_result('ASK execute {"command": "make"}')
    assert r.status == 0 and r.message == "denied reject_once"
    assert r.approvals[0]["source"] == "permissions"
    modes = [e["mode"] for e in recorded(tmp_path) if "mode" in e]
    assert modes == ["autoEdit"]  # permissions="edit" is gemini's autoEdit mode


@pytest.mark.parametrize(
    ("flavour_", "permissions", "approver", "mode"),
    [
        ("gemini", "read-only", None, "plan"),
        ("gemini", "full", None, "yolo"),
        ("gemini", None, True, "default"),
        ("gemini", "read-only", True, "plan"),  # an approver never widens read-only
        ("qwen", "edit", None, "auto-edit"),
        ("qwen", "full", True, "default"),
        # no level, no approver: the asking mode, never the one its settings choose
        ("qwen", None, None, "default"),
    ],
)
async def test_permissions_and_an_approver_pick_the_mode(
    tmp_path: Path, flavour_: str, permissions: Any, approver: Any, mode: str | None
) -> None:
    settings: dict[str, Any] = {"permissions": permissions}
    if approver:
        settings["approver"] = lambda r: True
    a = agent(flavour_, tmp_path, **settings)
    async with a.session() as s:
        assert (await s.send_result("hi")).status == 0
    modes = [e["mode"] for e in recorded(tmp_path) if "mode" in e]
    assert modes == [mode]


@pytest.mark.slow
async def test_interrupt_kills_the_tool_and_the_session_lives_on(
    flavour: str, tmp_path: Path
) -> None:
    a = agent(flavour, tmp_path, approver=lambda r: True)
    async with a.session() as s:
        started = polled(
            lambda: sleepers(s.key), "the sleeping tool never started", tries=200, every=0.05
        )
        r = await interrupted_turn(s, "SLEEP 600", started)
        assert r.status == 130 and r.error == "interrupted", r.message
        assert sleepers(s.key) == []
        after = await s.send_result("after the interrupt")
        assert after.status == 0 and after.message.endswith("after the interrupt")
    assert await wait_gone(s.key) == []
    assert "session/cancel" in [e.get("received") for e in recorded(tmp_path)]


@pytest.mark.slow
async def test_a_tool_the_agents_cancel_leaves_running_is_stopped(tmp_path: Path) -> None:
    a = agent("opencode", tmp_path)
    async with a.session() as s:
        started = polled(
            lambda: sleepers(s.key), "the sleeping tool never started", tries=200, every=0.05
        )
        r = await interrupted_turn(s, "ORPHAN 600", started)
        assert r.status == 130, r.message
        assert sleepers(s.key) == []  # the stray the agent left was found and stopped
        assert (await s.send_result("next")).status == 0
    assert await wait_gone(s.key) == []


@pytest.mark.slow
async def test_a_refused_question_is_answered_cancelled_at_the_interrupt(tmp_path: Path) -> None:
    async def never(request: ApprovalRequest) -> bool:
        await anyio.sleep(600)
        return True

    a = agent("gemini", tmp_path, approver=never, approval_timeout=30)
    async with a.session() as s:
        r = await interrupted_turn(s, 'ASK execute {"command": "x"}', lambda: anyio.sleep(1.0))
        assert r.status == 130, r.message
        assert (await s.send_result("hello")).status == 0
    answers = [e for e in recorded(tmp_path) if e.get("received") == 0]
    assert answers and answers[0]["result"] == {"outcome": {"outcome": "cancelled"}}


async def test_death_mid_turn_is_incomplete_and_closes_the_session(
    flavour: str, tmp_path: Path
) -> None:
    a = agent(flavour, tmp_path)
    async with a.session() as s:
        r = await s.send_result("DIE")
        assert r.status == 1 and r.error == "incomplete", r.message
        assert "exited with code 3" in r.message
        assert s.closed
        with pytest.raises(AgentUsageError):
            await s.send("hello")
    assert await wait_gone(s.key) == []


@pytest.mark.slow
async def test_silence_meets_the_idle_and_the_wall_deadline(tmp_path: Path) -> None:
    a = agent("qwen", tmp_path, idle_timeout=1.0)
    async with a.session() as s:
        started = time.monotonic()
        r = await s.send_result("SILENCE")
        assert time.monotonic() - started < 10
        assert r.status == 124 and r.error == "idle_timeout", r.message
    assert await wait_gone(s.key) == []
    b = agent("qwen", tmp_path)
    async with b.session() as s:
        r = await s.send_result("SILENCE", timeout=1.0)
        assert r.status == 124 and r.error == "timeout", r.message
    assert await wait_gone(s.key) == []


@pytest.mark.slow
async def test_garbage_malformed_unknown_ids_and_unknown_updates(
    flavour: str, tmp_path: Path
) -> None:
    a = agent(flavour, tmp_path)
    async with a.session() as s:
        garbage = await s.send_result("GARBAGE")
        assert garbage.status == 0 and garbage.message == "after garbage"
        assert garbage.skipped_lines == 2
        malformed = await s.send_result("MALFORMED")
        assert malformed.status == 1 and malformed.error == "cli_error"
        assert "neither a method nor a result" in malformed.message
        unknown_id = await s.send_result("UNKNOWN_ID")
        assert unknown_id.status == 1 and "id 9999, which we never used" in unknown_id.message
        unknown = await s.send_result("UNKNOWN")
        assert unknown.status == 0 and unknown.message == "after unknown"
        assert any("2 message(s) of a type" in w for w in unknown.warnings), unknown.warnings
        after = await s.send_result("after all that")
        assert after.status == 0 and after.message.endswith("after all that")
    assert await wait_gone(s.key) == []


async def test_overlapping_request_ids_and_requests_we_do_not_serve(
    flavour: str, tmp_path: Path
) -> None:
    a = agent(flavour, tmp_path, approver=lambda r: True)
    async with a.session() as s:
        r = await s.send_result("OVERLAP")
    assert r.status == 0, r.message
    allow_id = ONCE[flavour][0]
    assert r.message == (
        "answers: fs/read_text_file=-32601 terminal/create=-32601 "
        f"craft/drainMidTurnQueue=-32601 permission={allow_id}"
    )
    assert len(r.approvals) == 1


@pytest.mark.parametrize(("code", "category"), [(401, "auth"), (429, "rate_limit")])
async def test_error_answers_are_classified(
    flavour: str, tmp_path: Path, code: int, category: str
) -> None:
    a = agent(flavour, tmp_path)
    async with a.session() as s:
        r = await s.send_result(f"ERROR {code}")
        assert r.status == 1 and r.is_error, r.message
        assert r.failure is not None and r.failure.category == category, (r.failure, r.message)
        if code == 429:
            assert r.failure.retry_after_s == 7.0, r.failure
        if flavour != "opencode":  # opencode's answer names no status, only its words
            assert r.api_error_status == code
        assert (await s.send_result("after")).status == 0


async def test_an_end_turn_that_hides_an_error_is_no_success(tmp_path: Path) -> None:
    a = agent("gemini", tmp_path)
    async with a.session() as s:
        r = await s.send_result("HIDDEN")
    assert r.status == 1 and r.is_error and "did not report" in r.message


@pytest.mark.slow
async def test_updates_after_the_answer_are_a_turn_of_the_agents_own(
    flavour: str, tmp_path: Path
) -> None:
    """The turn ends at its answer; what the agent says after it, before the next
    prompt, is no turn of the caller's: it is recorded as a turn the agent took
    (``trigger="cli"``), as claude's and codex's work between turns is.  (ACP
    updates carry no turn id: one that came after the next prompt was sent
    could not be told apart.)"""
    a = agent(flavour, tmp_path)
    async with a.session() as s:
        late = await s.send_result("LATE")
        own = await s.cli_turn()
        await anyio.sleep(0.3)  # the next prompt comes after the late updates, as a person's
        after = await s.send_result("next")
        results = list(s.results)
    assert late.status == 0 and late.message == "on time" and late.trigger == "user"
    assert after.message == f"fake {flavour} got: next", after.message
    assert after.tool_calls == 0 and after.trigger == "user"
    assert own.trigger == "cli" and own.status == 0, own.message
    cli = [r for r in results if r.trigger == "cli"]
    assert cli[0] is own and own.message == "late words", own.message
    # the chunk and the tool call after it: one turn of the agent's, or two
    assert sum(r.tool_calls for r in cli) == 1 and all(r.status == 0 for r in cli)
    assert [r.trigger for r in results if r.trigger == "user"] == ["user", "user"]


async def test_a_question_after_the_answer_is_asked_in_the_agents_own_turn(
    tmp_path: Path,
) -> None:
    """A permission request the agent sends after its turn's answer waits for an
    answer: the turn the agent took by itself asks the approver and records it,
    and ends only once the call it allowed is over (never withdrawn unanswered,
    which would leave the agent waiting)."""
    seen: list[ApprovalRequest] = []

    approver = remember(seen, True)
    a = agent("gemini", tmp_path, approver=approver, timeout=10)
    async with a.session() as s:
        late = await s.send_result("LATEASK touch late")
        while not any(r.approvals for r in s.results if r.trigger == "cli"):
            await s.cli_turn()
        after = await s.send_result("next")
        cli = [r for r in s.results if r.trigger == "cli"]
    assert late.status == 0 and late.message == "on time"
    assert [r.command for r in seen] == ["touch late"]
    asked = next(r for r in cli if r.approvals)
    assert asked.status == 0, asked.message
    assert asked.approvals[0]["allowed"] is True and asked.approvals[0]["source"] == "approver"
    assert sum(r.tool_calls for r in cli) == 1
    assert [e["chosen"] for e in recorded(tmp_path) if "chosen" in e] == ["proceed_once"]
    assert after.status == 0 and after.message == "fake gemini got: next", after.message


async def test_thoughts_and_plans_are_typed_events_and_no_part_of_the_answer(
    tmp_path: Path,
) -> None:
    a = agent("qwen", tmp_path)
    async with a.session() as s, s.stream("THINK pondering deeply") as turn:
        events = [event async for event in turn]
    thoughts = [e for e in events if isinstance(e, ThoughtEvent)]
    plans = [e for e in events if isinstance(e, PlanEvent)]
    assert [t.text for t in thoughts] == ["pondering deeply"]
    assert [p.entries for p in plans] == [
        [
            {"content": "look", "priority": "high", "status": "completed"},
            {"content": "answer", "priority": "medium", "status": "in_progress"},
        ]
    ]
    assert turn.result is not None and turn.result.status == 0
    assert turn.result.message == "fake qwen got: THINK pondering deeply"


async def test_stop_reasons_other_than_end_turn_fail_the_turn(tmp_path: Path) -> None:
    a = agent("qwen", tmp_path)
    async with a.session() as s:
        r = await s.send_result("REFUSE max_tokens")
        limit = await s.send_result("REFUSE max_turn_requests")
    assert r.status == 1 and "max_tokens" in r.message and r.error == "cli_error"
    # the turn's limit of model requests is the turn limit every backend names so
    assert limit.status == 1 and limit.error == "max_turns", (limit.error, limit.message)
    assert "max_turn_requests" in limit.message


async def test_a_changed_input_cannot_reach_an_acp_agent_and_is_recorded(tmp_path: Path) -> None:
    """ACP's answer is one of the options offered: an allow with a changed input
    runs the call as asked, and its record says the change was not applied."""
    a = agent("gemini", tmp_path, approver=lambda r: Decision.allow({"command": "true"}))
    async with a.session() as s:
        r = await s.send_result('ASK execute {"command": "make"}')
    assert r.message == "allowed allow_once"
    assert "cannot change a call's input" in r.approvals[0]["not_applied"]


async def test_the_turns_cost_is_the_growth_of_the_sessions_cost(tmp_path: Path) -> None:
    a = agent("gemini", tmp_path)
    async with a.session() as s:
        first = await s.send_result("COST")
        second = await s.send_result("COST")
    assert first.cost_usd == pytest.approx(0.25) and second.cost_usd == pytest.approx(0.25)
    assert first.cost_source == "reported"
    assert s.cost_usd == pytest.approx(0.5)


@pytest.mark.slow
async def test_an_agent_that_ignores_a_closed_stdin_is_stopped(tmp_path: Path) -> None:
    a = agent("gemini", tmp_path, grace=0.5)
    async with a.session() as s:
        assert (await s.send_result("STUBBORN")).status == 0
        key = s.key
        started = time.monotonic()
    assert time.monotonic() - started < 10
    assert await wait_gone(key) == []


@pytest.mark.slow
async def test_another_protocol_version_is_refused(tmp_path: Path) -> None:
    a = agent("qwen", tmp_path, env={"FAKE_ACP_VERSION": "2"})
    async with a.session() as s:
        r = await s.send_result("hello")
    assert r.status == 1
    assert "ACP protocol version 2; coding-genesis speaks version 1 only" in r.message
    assert await wait_gone(s.key) == []


@pytest.mark.slow
async def test_resume_loads_the_session_where_the_agent_offers_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    a = agent("qwen", tmp_path, env={"FAKE_ACP_STORE": str(store)})
    async with a.session() as first:
        assert (await first.send_result("remember tangerine")).status == 0
        sid = first.session_id
    assert sid
    async with a.session(resume=sid) as second:
        r = await second.send_result("and now?")
        assert r.status == 0 and r.message == "fake qwen got: and now?"  # no replay in it
        assert second.session_id == sid
    load = [e for e in recorded(tmp_path) if e.get("received") == "session/load"]
    assert load and load[0]["params"]["sessionId"] == sid


@pytest.mark.slow
async def test_resume_is_refused_where_it_is_broken_or_not_offered(tmp_path: Path) -> None:
    gemini = agent("gemini", tmp_path)
    with pytest.raises(AgentUsageError, match="wipes the session"):
        gemini.session(resume="some-session")
    r = await gemini.run("hello", resume="some-session", approver=lambda r: True)
    assert r["status"] == 64 and "wipes the session" in r["message"]
    assert recorded(tmp_path) == []  # refused before anything was started
    qwen = agent("qwen", tmp_path, env={"FAKE_ACP_NO_LOAD": "1"})
    async with qwen.session(resume="some-session") as s:
        r2 = await s.send_result("hello")
    assert r2.status == 1 and "does not offer session/load" in r2.message


async def test_what_acp_backends_cannot_do_is_refused_clearly(tmp_path: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    agent("gemini", tmp_path, tools=[add])  # served over MCP: tests/session/test_acp_tools.py
    with pytest.raises(ConfigError, match="reports no pre_compact hook point"):
        agent("qwen", tmp_path, hooks={"pre_compact": [lambda h: None]})
    agent("opencode", tmp_path, output_schema={"type": "object"})  # in the prompt: test_acp_output
    a = agent("gemini", tmp_path)
    async with a.session() as s:
        with pytest.raises(AgentUsageError, match="steer"):
            await s.steer("more")


async def test_a_budget_crossed_mid_turn_stops_the_session(tmp_path: Path) -> None:
    a = agent(
        "qwen", tmp_path, approver=lambda r: True, budget=Budget(max_tool_calls=1, per_run=True)
    )
    async with a.session() as s:
        first = await s.send_result('ASK execute {"command": "one"}')
        assert first.status == 0, first.message
        spent = await s.send_result('ASK execute {"command": "two"}')
        assert spent.status == 1 and spent.error == "budget_exceeded", spent.message
        assert s.closed
    assert await wait_gone(s.key) == []


@pytest.mark.slow
async def test_cancelling_a_turn_stops_the_tree(tmp_path: Path) -> None:
    a = agent("opencode", tmp_path)
    async with a.session() as s:
        with anyio.move_on_after(1.5):
            await s.send_result("SLEEP 600")
        key = s.key
    assert await wait_gone(key) == []


@pytest.mark.slow
def test_the_runner_sigkilled_with_a_session_open_leaves_nothing(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    root = Path(__file__).resolve().parents[2]
    script = f"""
import anyio, sys
sys.path.insert(0, {str(root)!r})
from coding_genesis import CodingGenesisAgent
async def main():
    a = CodingGenesisAgent("gemini", cli_path={str(FAKES / "gemini")!r}, cwd={str(tmp_path)!r},
        ledger={str(ledger)!r}, approver=lambda r: True, timeout=120)
    async with a.session() as s:
        print(s.key, flush=True)
        await s.send("SLEEP 600")
anyio.run(main)
"""
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE) as runner:
        assert runner.stdout is not None
        key = runner.stdout.readline().decode().strip()
        deadline = time.monotonic() + 20
        while not sleepers(key) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sleepers(key), "the sleeping tool never started"
        runner.kill()
        runner.wait()
    later = CodingGenesisAgent("failer", cwd=str(tmp_path), ledger=str(ledger))
    later.run_sync("hello")  # its first run sweeps the ledger
    deadline = time.monotonic() + 20
    while left(key) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left(key) == []


async def test_transcripts_hold_both_directions(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    a = agent("gemini", tmp_path, transcripts=str(runs), approver=lambda r: True)
    async with a.session() as s:
        r = await s.send_result('ASK execute {"command": "touch x"}')
    assert r.status == 0
    stdin = "".join(p.read_text() for p in runs.rglob("stdin.jsonl"))
    stdout = "".join(p.read_text() for p in runs.rglob("stdout.jsonl"))
    assert '"session/prompt"' in stdin and '"proceed_once"' in stdin
    assert '"session/request_permission"' in stdout and '"tool_call_update"' in stdout
    # the opening exchange is the session's own (Observer.session_started), not a turn's
    own = runs / s.key
    sent = (own / "stdin.jsonl").read_text()
    assert '"initialize"' in sent and '"session/new"' in sent and '"session/set_mode"' in sent
    assert '"sessionId"' in (own / "stdout.jsonl").read_text()
    assert (
        "touch x" not in sent
        and "touch x" in (Path(r.transcript or "") / "stdin.jsonl").read_text()
    )
    assert json.loads((own / "session.json").read_text())["runs"] == [r.run_id]


# -- the generic ACP backend ------------------------------------------------------


def backends_file(tmp_path: Path, **extra: str) -> Path:
    table = {
        "format": '"acp"',
        "command": f'["{FAKES / "qwen"}", "--acp"]',
        "env": f'{{ FAKE_CLI_RECORD = "{tmp_path / "record.jsonl"}" }}',
        "modes": '{ "read-only" = "plan", edit = "auto-edit", full = "yolo" }',
        "ask_mode": '"default"',
        **extra,
    }
    lines = ["[backends.myagent]", *(f"{k} = {v}" for k, v in table.items())]
    path = tmp_path / "backends.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
async def test_the_generic_backend_from_a_backends_file(tmp_path: Path) -> None:
    (backend,) = load_backends_file(backends_file(tmp_path)).values()
    assert isinstance(backend, AcpBackend) and backend.two_way_only
    assert backend.permission_levels == {"read-only", "edit", "full"}
    a = CodingGenesisAgent(backend, cwd=str(tmp_path), timeout=20, ledger=False)
    plain = await a.run("hello there")  # a plain run is one live turn
    assert plain["status"] == 0 and plain["message"] == "fake qwen got: hello there"
    asked = await a.run('ASK execute {"command": "ls"}', approver=lambda r: True)
    assert asked["status"] == 0 and asked["message"] == "allowed allow_once"
    limited = await a.run("hi", permissions="read-only")
    assert limited["status"] == 0
    modes = [e["mode"] for e in recorded(tmp_path) if "mode" in e]
    assert modes == ["default", "default", "plan"]  # the plain run too: its asking mode


@pytest.mark.slow
async def test_the_generic_backend_refuses_a_mode_the_agent_does_not_offer(
    tmp_path: Path,
) -> None:
    backend = AcpBackend(
        "typo",
        command=[str(FAKES / "qwen"), "--acp"],
        modes={"full": "yollo"},
    )
    a = CodingGenesisAgent(backend, cwd=str(tmp_path), timeout=20, ledger=False)
    r = await a.run("hi", permissions="full")
    assert r["status"] == 1 and "offers no mode 'yollo'" in r["message"], r["message"]
    # the agent broke the session at its opening: stopped at once, not waited out
    assert r["error"] == "cli_error" and "process tree stopped" in r["message"], r["message"]
    with pytest.raises(ConfigError, match="edit"):
        CodingGenesisAgent(backend, cwd=str(tmp_path), permissions="edit")


@pytest.mark.slow
async def test_the_generic_backend_sends_add_dirs_where_the_agent_offers_them(
    tmp_path: Path,
) -> None:
    """``add_dirs=`` go in ``session/new``'s ``additionalDirectories``; an agent
    that does not offer them fails the opening, saying so, and nothing runs."""
    other = tmp_path / "other"
    other.mkdir()

    def agent_with(env: dict[str, str]) -> CodingGenesisAgent:
        backend = AcpBackend(
            "generic",
            command=[str(FAKES / "qwen"), "--acp"],
            env={"FAKE_CLI_RECORD": str(tmp_path / "record.jsonl"), **env},
        )
        return CodingGenesisAgent(
            backend, cwd=str(tmp_path), timeout=20, ledger=False, add_dirs=[str(other)]
        )

    offered = await agent_with({"FAKE_ACP_DIRS": "1"}).run("hello")
    assert offered["status"] == 0, offered["message"]
    (new,) = [e for e in recorded(tmp_path) if e.get("received") == "session/new"]
    assert new["params"]["additionalDirectories"] == [str(other)]
    silent = await agent_with({}).run("hello")
    assert silent["status"] == 1 and silent["error"] == "cli_error", silent["message"]
    assert "does not offer additionalDirectories" in silent["message"]
    assert len([e for e in recorded(tmp_path) if e.get("received") == "session/new"]) == 1


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"resume_args": '["--resume"]'}, "unknown key(s) resume_args"),
        ({"modes": '{ sometimes = "x" }'}, "unknown permission level"),
        ({"ask_mode": "3"}, "ask_mode must be a mode id"),
        ({"resume": '"yes"'}, "resume must be true or false"),
        # a title without the session's own server name would pass another server's tool
        ({"mcp_title": '"mcp.{tool}"'}, "mcp_title must name the {server} and the {tool}"),
        ({"mcp_title": '"{tool}.{server}.{cwd}"'}, "mcp_title must name the {server}"),
        ({"mcp_title": "3"}, "mcp_title must name"),
    ],
)
def test_a_bad_acp_table_is_a_clear_error(
    tmp_path: Path, extra: dict[str, str], words: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)):
        load_backends_file(backends_file(tmp_path, **extra))


def test_the_generic_backend_refuses_placeholders_and_resume_off(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no placeholders"):
        AcpBackend("x", command=["x", "{prompt}"])
    off = AcpBackend("x", command=[str(FAKES / "qwen"), "--acp"], resume=False)
    agent_ = CodingGenesisAgent(off, cwd=str(tmp_path), ledger=False)
    with pytest.raises(AgentUsageError, match="resume is off for x"):
        agent_.session(resume="abc")
    assert os.path.basename(off.executable) == "qwen"


@pytest.mark.slow
async def test_an_approver_that_does_not_answer_is_refused_at_its_deadline(
    tmp_path: Path,
) -> None:
    async def never(request: ApprovalRequest) -> bool:
        await anyio.sleep(600)
        return True

    a = agent("opencode", tmp_path, approver=never, approval_timeout=0.5)
    async with a.session() as s:
        started = time.monotonic()
        r = await s.send_result('ASK execute {"command": "touch late"}')
        assert time.monotonic() - started < 10
    assert r.status == 0 and r.message == "denied reject_once", r.message
    assert r.approvals[0]["source"] == "timeout"


@pytest.mark.slow
async def test_a_silent_idle_agent_is_stopped_as_stalled(tmp_path: Path) -> None:
    a = agent("gemini", tmp_path, stall_timeout=1.0)
    async with a.session() as s:
        started = time.monotonic()
        r = await s.send_result("SILENCE")  # no output, no CPU: a stall
        assert time.monotonic() - started < 15
        assert r.status == 124 and r.error == "stalled", r.message
        assert s.closed
    assert await wait_gone(s.key) == []
