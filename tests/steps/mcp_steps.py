"""Step definitions of tests/features/mcp.feature: a real ``genesis mcp``
process and the ``mcp`` package's client (tests/mcp/support.py), held open
across the steps in the portal's event loop.  Skipped without the mcp extra."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from pytest_bdd import given, parsers, then, when


class Scene:
    """The client of a scenario's server and what it was answered."""

    def __init__(self, portal: BlockingPortal, session: Any) -> None:
        self.portal = portal
        self.session = session
        self.answer: Any = None
        self.progress: Any = None
        self.approval: dict[str, Any] | None = None

    def call(self, name: str, arguments: dict[str, Any], progress: Any = None) -> Any:
        return self.portal.call(lambda: self.session.call_tool(name, arguments, None, progress))


@pytest.fixture
def mcp_scene(tmp_path: Path, portal: BlockingPortal) -> Iterator[Scene]:
    pytest.importorskip("mcp", reason="genesis mcp needs the mcp extra (the mcp package)")
    from tests.mcp.support import over_stdio

    with portal.wrap_async_context_manager(over_stdio(tmp_path)) as session:
        yield Scene(portal, session)


@given("the tools of a server without --trusted-input", target_fixture="parts")
def _parts(tmp_path: Path, portal: BlockingPortal) -> Any:
    """A server's parts, in-process (what ``genesis mcp`` and ``/mcp`` act on)."""
    from coding_genesis._serve.parts import Settings, build

    root = tmp_path / "root"
    root.mkdir()
    settings = Settings(
        host="",
        port=0,
        root=str(root.resolve()),
        state_dir=tmp_path / "state",
        trusted=False,
        concurrency=1,
        queue=10,
        max_body=0,
        drain_timeout=0,
        on_term="cancel",
        fallback_backend="failer",
        defaults={},
        transcripts=None,
        run_log=None,
        ledger=False,
        version="test",
        doctor=lambda names, timeout: [],
    )
    (tmp_path / "state").mkdir(mode=0o700)
    return portal.call(build, settings, "t" * 43).service


@when(parsers.parse('a tool call of "{tool}" sets "{field}" to {value}'), target_fixture="refusal")
def _tool_call(parts: Any, portal: BlockingPortal, tool: str, field: str, value: str) -> str:
    from coding_genesis._mcp.tools import ToolError, call

    async def progress(_value: float, _message: str) -> None:
        return None

    arguments = {"prompt": "hi", field: json.loads(value)}
    with pytest.raises(ToolError) as refused:
        portal.call(call, parts, tool, arguments, progress)
    return str(refused.value)


@then(parsers.parse('the call is refused: "{words}"'))
def _refused(refusal: str, words: str) -> None:
    assert refusal.startswith(words), refusal


@then("the server's queue holds no run")
def _queue_empty(parts: Any) -> None:
    assert not parts.runs.entries and not parts.runs.pending


@given("a genesis mcp", target_fixture="mcp")
def _a_server(mcp_scene: Scene) -> Scene:
    return mcp_scene


@when(parsers.parse('the client calls "{tool}" with {arguments}'))
def _calls(mcp: Scene, tool: str, arguments: str) -> None:
    from tests.mcp.support import Progress

    mcp.progress = Progress()
    mcp.answer = mcp.call(tool, json.loads(arguments), mcp.progress)


@then(parsers.parse('the tool answers a finished run with status {status:d} and error "{error}"'))
def _finished(mcp: Scene, status: int, error: str) -> None:
    from tests.mcp.support import structured

    run = structured(mcp.answer)
    assert run["state"] == "finished", run
    assert run["result"]["status"] == status and run["result"]["error"] == error, run


@then(parsers.parse('the client was told the progress "{first}" and "{last}"'))
def _told(mcp: Scene, first: str, last: str) -> None:
    messages = mcp.progress.messages
    assert first in messages and last in messages, messages
    assert messages.index(first) < messages.index(last), messages


@then(parsers.parse('the tool answers an error saying "{words}"'))
def _error(mcp: Scene, words: str) -> None:
    from tests.mcp.support import text

    assert mcp.answer.is_error and words in text(mcp.answer), text(mcp.answer)
    assert "Traceback" not in text(mcp.answer)


@then("the server lists no run")
def _no_run(mcp: Scene) -> None:
    from tests.mcp.support import structured

    assert structured(mcp.call("list_runs", {}))["runs"] == []


@then(parsers.parse('the MCP server\'s inbox holds one pending approval for "{command}"'))
def _pending(mcp: Scene, command: str) -> None:
    from tests.mcp.support import structured

    run = structured(mcp.answer)
    deadline = time.monotonic() + 30
    while True:
        listed = structured(mcp.call("list_approvals", {"run": run["id"]}))["approvals"]
        if listed or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(listed) == 1, listed
    assert listed[0]["call"]["command"] == command and listed[0]["state"] == "pending"
    mcp.approval = listed[0]


@when("the client allows it through the answer_approval tool")
def _allows(mcp: Scene) -> None:
    from tests.mcp.support import structured

    assert mcp.approval is not None
    answered = structured(
        mcp.call("answer_approval", {"approval": mcp.approval["id"], "decision": "allow"})
    )
    assert answered["state"] == "answered" and answered["answer"]["channel"] == "mcp"


@then(parsers.parse("the run finishes with status {status:d}"))
def _run_finishes(mcp: Scene, status: int) -> None:
    from tests.mcp.support import structured

    assert mcp.approval is not None
    done = structured(mcp.call("get_run", {"run": mcp.approval["run"], "wait": 30}))
    assert done["state"] == "finished" and done["result"]["status"] == status, done
