"""One runner below the agent: a one-shot ``run()``, a session's ``send()`` and a
turn the CLI starts by itself all pass through ``Runner.run`` (driven against the
fake two-way CLI, ``tests/fakes/twoway_cli.py``); a second ``send()`` during a
turn is answered 75 before anything is built; ``session()`` shows its keywords
as ``run()`` does; the agent's session-only methods are deprecated."""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis._live.link import LiveLink
from coding_genesis._pipeline.runner import Runner
from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.errors import AgentUsageError
from coding_genesis.request import LIVE_OPTION_NAMES, Request
from coding_genesis.result import RunResult
from tests.session import twoway

pytestmark = pytest.mark.anyio


def agent(tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    settings.setdefault("ledger", False)
    return twoway.agent(tmp_path, **settings)


@pytest.mark.slow
async def test_a_run_a_turn_and_the_clis_own_turn_pass_through_one_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, LiveLink | None, str]] = []
    run = Runner.run

    async def recorded(
        self: Runner,
        prompt: str,
        options: Mapping[str, Any] = {},
        *,
        session: LiveLink | None = None,
        trigger: Any = "user",
    ) -> RunResult:
        calls.append((prompt, session, trigger))
        return await run(self, prompt, options, session=session, trigger=trigger)

    monkeypatch.setattr(Runner, "run", recorded)

    def allow(request: ApprovalRequest) -> Decision:
        return Decision.allow()

    a = agent(tmp_path, approver=allow)
    one_shot = await a.run("TEXT once")
    assert one_shot["status"] == 0 and one_shot["message"] == "once"
    async with a.session() as s:
        first = await s.send_result('LATER 0.2 ASK Bash {"command": "make"}')
        assert first.status == 0
        with anyio.fail_after(10):
            later = await s.cli_turn()
        assert later.status == 0 and later.trigger == "cli"
        link = s._link
    assert link is not None
    assert [(p, session is None, trigger) for p, session, trigger in calls] == [
        ("TEXT once", True, "user"),
        ('LATER 0.2 ASK Bash {"command": "make"}', False, "user"),
        (calls[2][0], False, "cli"),
    ]
    assert calls[1][1] is link and calls[2][1] is link


@pytest.mark.slow
async def test_a_second_send_during_a_turn_is_busy_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    for_turn = Request.for_turn

    def counted(self: Request, prompt: object, **options: Any) -> Request:
        built.append(str(prompt))
        return for_turn(self, prompt, **options)

    monkeypatch.setattr(Request, "for_turn", counted)
    async with agent(tmp_path).session() as s:
        results: list[RunResult] = []
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                results.append(await s.send_result("SLEEP 1"))

            tg.start_soon(turn)
            with anyio.fail_after(10):
                await s.wait_for_turn()
            busy = await s.send_result("TEXT second")
        assert busy.status == 75 and busy.error == "busy"
        assert results[0].status == 0
    assert built == ["SLEEP 1"]


def test_session_shows_its_keywords_as_run_does(tmp_path: Path) -> None:
    for method in (CodingGenesisAgent.session, CodingGenesisAgent.session_sync):
        parameters = inspect.signature(method).parameters
        assert set(LIVE_OPTION_NAMES) <= set(parameters)
        assert all(
            parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in LIVE_OPTION_NAMES
        )


def test_the_agents_session_only_methods_are_deprecated(tmp_path: Path) -> None:
    a = agent(tmp_path)
    with pytest.warns(DeprecationWarning, match="backends_that"):
        assert "claude" in a.two_way_backends()
    with pytest.warns(DeprecationWarning, match="claim_session"):
        a.claim_session(None)
    session = a.session()
    with pytest.warns(DeprecationWarning, match="claim_session"):
        a.claim_session(session)
    with (
        pytest.warns(DeprecationWarning, match="claim_session"),
        pytest.raises(AgentUsageError, match="already"),
    ):
        a.claim_session(a.session())


def test_session_owner_is_a_deprecated_name() -> None:
    # lazy: the module's attribute is looked up (it warns)
    import coding_genesis.session as session_module

    with pytest.warns(DeprecationWarning, match="SessionOwner is deprecated"):
        assert session_module.SessionOwner is not None


@pytest.mark.slow
def test_a_clis_turn_waits_for_a_run_of_another_threads_event_loop(tmp_path: Path) -> None:
    """The session lives in its portal's loop, ``run_sync()`` in this thread's own: the
    CLI's turn, answered busy, waits for that run without waiting on its loop's event."""

    def allow(request: ApprovalRequest) -> Decision:
        return Decision.allow()

    a = agent(tmp_path, approver=allow)
    with a.session_sync() as s:
        assert s.send("LATER 0.3 TEXT later")["status"] == 0
        run = a.run_sync("SLEEP 1")  # the CLI wants its turn meanwhile: busy
        assert run["status"] == 0, run["message"]
        deadline = time.monotonic() + 10
        while not any(r.trigger == "cli" for r in s.session.results):
            assert time.monotonic() < deadline, "the CLI's turn never ran"
            time.sleep(0.05)
        (later,) = [r for r in s.session.results if r.trigger == "cli"]
        assert later.status == 0 and later.message == "later"
