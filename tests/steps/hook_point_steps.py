"""Step definitions of the hook points beyond tool calls and of the tool
matchers (tests/features/hook_points.feature), on the failer and the fake ACP
agent; the scenario's world is session_steps' ``live``.  Steps are synchronous."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from coding_genesis import CodingGenesisAgent, Subagent
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.hooks import HookInput, HookResult, matching
from tests.steps.session_steps import Live


@given(parsers.parse('a pre_tool hook matching "{matcher}" that blocks saying "{message}"'))
def hook_matching(live: Live, matcher: str, message: str) -> None:
    @matching(matcher)
    def guard(point: HookInput) -> HookResult:
        return HookResult(block=True, message=message)

    live.hooks["pre_tool"] = guard


@given(parsers.parse('a prompt_submit hook that adds the context "{context}"'))
def prompt_context(live: Live, context: str) -> None:
    live.hooks["prompt_submit"] = lambda point: HookResult(context=context)


@given(parsers.parse('a prompt_submit hook that blocks saying "{message}"'))
def prompt_block(live: Live, message: str) -> None:
    live.hooks["prompt_submit"] = lambda point: HookResult(block=True, message=message)


@given("session_start, prompt_submit and session_end hooks that each ask to block")
def observed_points(live: Live) -> None:
    def ask(point: HookInput) -> HookResult:
        assert point.event != "prompt_submit" or point.prompt in ("hello", "again"), point
        return HookResult(block=True, message=f"no {point.event}")

    for event in ("session_start", "prompt_submit", "session_end"):
        live.hooks[event] = ask


@given(parsers.parse('the subagent "{name}" prompted "{prompt}"'))
def subagent(live: Live, name: str, prompt: str) -> None:
    live.settings.setdefault("agents", {})[name] = Subagent(f"The {name}", prompt)


@given(parsers.parse('a subagent_start hook that adds the context "{context}"'))
def subagent_context(live: Live, context: str) -> None:
    live.hooks["subagent_start"] = lambda point: HookResult(context=context)


@pytest.fixture
def stops() -> list[HookInput]:
    """What the subagent_stop hook was told, in order."""
    return []


@given(parsers.parse('a subagent_stop hook that blocks once saying "{message}"'))
def subagent_goes_on(live: Live, stops: list[HookInput], message: str) -> None:
    def hook(point: HookInput) -> HookResult | None:
        stops.append(point)
        return HookResult(block=True, message=message) if len(stops) == 1 else None

    live.hooks["subagent_stop"] = hook


@then(parsers.parse('the subagent_stop hook first read "{text}"'))
def subagent_read(stops: list[HookInput], text: str) -> None:
    assert stops and stops[0].answer == text and stops[0].agent == "reviewer", stops


@then("the turn ran no hook")
def no_hook(live: Live) -> None:
    assert live.last["hooks"] == [], live.last["hooks"]


@then("every hook record of the turn was observed, its block not applied")
def all_observed(live: Live) -> None:
    records = live.last["hooks"]
    assert records and all(h["via"] == "observed" for h in records), records
    for h in records:
        assert h["not_applied"] == f"{live.backend} cannot apply a {h['event']} hook's block", h


@pytest.fixture
def closed() -> list[dict[str, Any]]:
    """The end hooks' records of the session a scenario closed."""
    return []


@when("the session is closed, its end hooks kept")
def close_keeping(live: Live, closed: list[dict[str, Any]]) -> None:
    session = live.session
    assert session is not None and session.end_hooks == []  # not before the end
    live.close()
    closed.extend(session.end_hooks)


@then(parsers.parse("the session's end hooks were {pairs}, observed"))
def end_hooks(closed: list[dict[str, Any]], pairs: str) -> None:
    records = closed
    wanted = re.findall(r'"(\w+)" "(\w+)"', pairs)
    assert [(h["event"], h["outcome"]) for h in records] == wanted, records
    assert all(h["via"] == "observed" for h in records), records


@then(parsers.parse('a subagent_stop hook is refused with "{words}"'))
def subagent_refused(live: Live, words: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)):
        CodingGenesisAgent(live.backend, **live.settings, hooks={"subagent_stop": print})
    agent = live.build()
    with pytest.raises(AgentUsageError, match=re.escape(words)):
        agent.session(hooks={"subagent_stop": print})


@then(parsers.parse('agents= is refused with "{words}"'))
def agents_refused(live: Live, words: str) -> None:
    reviewer = Subagent("Reviews code", "You review code.")
    with pytest.raises(ConfigError, match=re.escape(words)):
        CodingGenesisAgent(live.backend, **live.settings, agents={"reviewer": reviewer})
    answer = live.portal.call(lambda: live.build().run("hello", agents={"reviewer": reviewer}))
    assert answer["status"] == 64 and words in str(answer["message"]), answer
