"""A control message nested deeper than the JSON parser takes is still answered.

Found by an audit: a `control_request` nested 1,100 levels deep (7 KB; orjson stops at 1,024),
which the model reaches through claude's `Workflow` tool (its `args` are any JSON), was skipped
by the tolerant parser, never answered, and the turn hung until its wall limit (1,800 s in
`genesis chat`).  Now the head of a line that cannot be parsed is read for its envelope and the
protocol answers it: a tool call's question is denied as unreadable (recorded like any
approval), any other request gets an error, a turn's end still ends the turn.  Checked with the
hostile fakes of both protocols (claude's stream-json, codex's app-server JSON-RPC), with an
approver that allows everything: nothing unread is allowed, and each turn ends by itself, long
before its wall limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_genesis.approval import ApprovalRequest
from coding_genesis.result import RunResult
from tests.support import FakeCLI

pytestmark = [pytest.mark.timeout(60), pytest.mark.anyio]

#: The turns' wall limit: a turn that waited for an answer that never came ends here.
WALL = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class AllowEverything:
    """An approver that allows every call it is asked about, and keeps them."""

    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        self.asked.append(request)
        return True


def ended_by_itself(result: RunResult) -> None:
    """The turn ended by the protocol, not at its wall limit."""
    assert result.error != "timeout", (result.status, result.error, result.message)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [1100, 5000])
async def test_claude_a_deep_tool_question_is_denied_and_the_turn_goes_on(
    tmp_path: Path, depth: int
) -> None:
    approver = AllowEverything()
    fake = FakeCLI(tmp_path, "claude")
    agent = fake.agent(approver=approver, timeout=WALL, cwd=tmp_path)
    async with agent.session() as session:
        result = await session.send_result(f"DEEP_ASK {depth}")
        ended_by_itself(result)
        assert result.status == 0, (result.error, result.message)
        assert (result.message or "").startswith("denied Workflow:"), result.message
        (record,) = result.approvals
        assert (record["tool"], record["allowed"], record["source"]) == (
            "Workflow",
            False,
            "unreadable",
        )
        assert result.skipped_lines == 2  # the tool_use line and the question, both unread
        # The session goes on.
        after = await session.send_result('ASK Bash {"command": "ls"}')
        assert after.message == 'allowed Bash {"command": "ls"}'
    assert [r.command for r in approver.asked] == ["ls"]  # the deep call never reached it


async def test_claude_a_deep_request_of_another_kind_gets_an_error(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path, "claude")
    agent = fake.agent(approver=AllowEverything(), timeout=WALL, cwd=tmp_path)
    async with agent.session() as session:
        result = await session.send_result("DEEP_REQUEST")
        ended_by_itself(result)
        assert (result.message or "").startswith("answered error: genesis could not read"), (
            result.message
        )


@pytest.mark.slow
@pytest.mark.parametrize("depth", [1100, 5000])
async def test_claude_a_deep_result_still_ends_the_turn_with_its_answer(
    tmp_path: Path, depth: int
) -> None:
    fake = FakeCLI(tmp_path, "claude")
    agent = fake.agent(approver=AllowEverything(), timeout=WALL, cwd=tmp_path)
    async with agent.session() as session:
        result = await session.send_result(f"DEEP_RESULT {depth}")
        ended_by_itself(result)
        # Read from the line's head (usage) and tail (type, subtype, the answer).
        assert (result.status, result.message) == (0, "the answer after a deep refusal")
        assert (result.usage or {}).get("input_tokens") == 3, result.usage
        assert result.skipped_lines == 1
        assert (await session.send_result("hello")).message == "fake claude got: hello"


async def test_codex_a_deep_approval_request_is_declined_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    approver = AllowEverything()
    fake = FakeCLI(tmp_path, "codex")
    agent = fake.agent(approver=approver, timeout=WALL, cwd=tmp_path)
    async with agent.session() as session:
        result = await session.send_result("DEEP_ASK")
        ended_by_itself(result)
        assert (result.status, result.message) == (0, "decision: decline")
        (record,) = result.approvals
        assert (record["tool"], record["allowed"], record["source"]) == (
            "commandExecution",
            False,
            "unreadable",
        )
        after = await session.send_result("ASK ls")
        assert after.message == "decision: accept"
    assert [r.command for r in approver.asked] == ["ls"]


@pytest.mark.slow
async def test_codex_a_deep_tool_call_gets_an_error_and_a_deep_turn_end_ends_the_turn(
    tmp_path: Path,
) -> None:
    fake = FakeCLI(tmp_path, "codex")
    agent = fake.agent(approver=AllowEverything(), timeout=WALL, cwd=tmp_path)
    async with agent.session() as session:
        result = await session.send_result("DEEP_TOOL")
        ended_by_itself(result)
        assert result.message == "tool call answered: error -32602"
        result = await session.send_result("DEEP_END")
        ended_by_itself(result)
        assert result.status != 0, result.message
        assert "turn/completed was nested too deep" in (result.message or "")
        assert "(status completed)" in (result.message or "")
        result = await session.send_result("DEEP_END 5000")  # its status unread too
        ended_by_itself(result)
        assert "(status unread)" in (result.message or ""), result.message
        assert (await session.send_result("hello")).message == "fake codex got: hello"
