"""The hook points beyond tool calls and the tool matchers, on the two-way fake
CLI (``tests/fakes/twoway_cli.py``, which has no prompt or session points of its
own): the session reports the prompt, its start and its end itself, observed;
a matcher's semantics (claude's) and the checks of ``@matching`` and
``agents=``.  claude's own points: ``tests/backends/test_claude_hooks.py`` and,
with the real CLI, ``tests/real_cli/test_hook_points.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis.errors import ConfigError
from coding_genesis.hooks import HookInput, HookResult, hook_table, matches, matching, run_hooks
from coding_genesis.subagents import Subagent, subagent_table
from tests.session import twoway

pytestmark = pytest.mark.anyio


def _hook(data: HookInput) -> None:
    return None


@pytest.mark.parametrize(
    ("matcher", "tool", "runs"),
    [
        ("Bash", "Bash", True),
        ("Bash", "BashOutput", False),  # names alone match exactly
        ("Bash|Write", "Write", True),
        ("Bash|Write", "Edit", False),
        ("mcp__.*", "mcp__genesis__add", True),  # anything else: a search
        ("Notebook.*", "NotebookEdit", True),
        ("^Edit$", "MultiEdit", False),
        ("*", "Anything", True),
        ("", "Anything", True),
        ("commandExecution", "commandExecution", True),  # codex's own name
    ],
)
def test_a_matcher_matches_as_claude_s_does(matcher: str, tool: str, runs: bool) -> None:
    hook = matching(matcher)(lambda data: None)
    assert matches(hook, HookInput("pre_tool", tool=tool)) is runs
    assert matches(_hook, HookInput("pre_tool", tool=tool))  # no matcher: every tool


async def test_run_hooks_skips_a_hook_for_other_tools_and_records_nothing_of_it() -> None:
    seen: list[str] = []

    @matching("Write")
    def writes(data: HookInput) -> HookResult:
        seen.append(f"writes {data.tool}")
        return HookResult(block=True, message="no")

    def every(data: HookInput) -> None:
        seen.append(f"every {data.tool}")

    for tool in ("Bash", "Write"):
        ran = await run_hooks(
            [writes, every],
            HookInput("pre_tool", tool=tool),
            timeout=1.0,
            effects=frozenset({"block"}),
        )
        names = [r.hook.rpartition(".")[2] for r in ran.records]
        assert names == (["writes"] if tool == "Write" else ["every"])
    assert seen == ["every Bash", "writes Write"]  # the block ended Write's list


def test_matchers_and_subagents_are_checked() -> None:
    with pytest.raises(ConfigError, match="is no regular expression"):
        matching("(unclosed")
    with pytest.raises(ConfigError, match="a matcher is a string"):
        matching(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="only pre_tool and post_tool hooks may"):
        hook_table({"turn_end": matching("Bash")(_hook)})
    assert list(hook_table({"post_tool": matching("Bash")(_hook)})) == ["post_tool"]

    table = subagent_table({"reviewer": {"description": "Reviews", "prompt": "Review."}})
    assert table == {"reviewer": Subagent("Reviews", "Review.")}
    for bad, words in [
        ({"-x": Subagent("d", "p")}, "is no subagent name"),
        ({"r": {"description": "d"}}, r"agents\['r'\].prompt must be a non-empty string"),
        ({"r": {"description": "d", "prompt": "p", "color": "red"}}, "unknown field"),
        ({"r": {"description": "d", "prompt": "p", "tools": "Read"}}, "list of tool names"),
        ({"r": "a prompt"}, "must be a Subagent"),
        (["reviewer"], "must be a mapping"),
    ]:
        with pytest.raises(ConfigError, match=words):
            subagent_table(bad)


async def test_the_session_reports_its_start_each_prompt_and_its_end(tmp_path: Path) -> None:
    seen: list[HookInput] = []

    def observe(data: HookInput) -> HookResult:
        seen.append(data)
        return HookResult(context="not applied")

    hooks: Any = {e: observe for e in ("session_start", "prompt_submit", "session_end")}
    agent = twoway.agent(tmp_path, ledger=False, hooks=hooks)
    async with agent.session() as session:
        first = await session.send_result("TEXT one")
        second = await session.send_result("TEXT two")
        assert session.end_hooks == []
    assert [(h["event"], h["turn"], h["via"]) for h in first.hooks] == [
        ("session_start", 1, "observed"),
        ("prompt_submit", 1, "observed"),
    ]
    assert [(h["event"], h["turn"]) for h in second.hooks] == [("prompt_submit", 2)]
    (end,) = session.end_hooks
    assert (end["event"], end["turn"], end["via"], end["outcome"]) == (
        "session_end",
        2,
        "observed",
        "continued",
    )
    assert end["not_applied"] == "twoway cannot apply a session_end hook's context"
    assert [(h.event, h.prompt) for h in seen] == [
        ("session_start", None),
        ("prompt_submit", "TEXT one"),
        ("prompt_submit", "TEXT two"),
        ("session_end", None),
    ]
    assert {h.session_id for h in seen} == {session.session_id}

    # a one-shot run is a session of one turn: its result carries all three
    seen.clear()
    run = await agent.run_result("TEXT once")
    assert run.status == 0, run.message
    assert [(h["event"], h["via"]) for h in run.hooks] == [
        ("session_start", "observed"),
        ("prompt_submit", "observed"),
        ("session_end", "observed"),
    ]
    assert [h.event for h in seen] == ["session_start", "prompt_submit", "session_end"]


async def test_a_hanging_session_end_hook_does_not_hold_the_close(tmp_path: Path) -> None:
    async def hang(data: HookInput) -> None:
        await anyio.sleep(30)

    agent = twoway.agent(tmp_path, ledger=False, hooks={"session_end": hang}, hook_timeout=0.3)
    with anyio.fail_after(10):
        async with agent.session() as session:
            await session.send_result("TEXT one")
    (end,) = session.end_hooks
    assert (end["outcome"], end["error"]) == ("timeout", "no answer within 0.3s")
