"""The one capability check: one wording per refusal, asked by every entry
point (the agent's constructor raises it, a call answers 64 with the same
words, ``session()`` raises them, a batch line answers them at its index);
and the one list of what untrusted input may set, which classifies every
option and is the table of ``docs/security.md``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent, RunSpec
from coding_genesis.backend import Backend
from coding_genesis.batch import run_many_sync
from coding_genesis.capabilities import UNTRUSTED, backends_that, check, untrusted_problem
from coding_genesis.config import AgentConfig
from coding_genesis.errors import AgentUsageError, ConfigError, RefusedError
from coding_genesis.hooks import wants
from coding_genesis.request import LIVE_OPTION_NAMES, RUN_OPTION_NAMES, SEND_OPTION_NAMES
from coding_genesis.subagents import Subagent
from tests.session.twoway import TwoWayBackend, one_way_backend

ROOT = Path(__file__).resolve().parent.parent


def backend_of(name: str) -> str | Backend:
    """A registered backend by name; "twoway": the two-way fake of the session
    tests; "oneway": a backend with no two-way protocol (every shipped one has
    one)."""
    if name == "oneway":
        return one_way_backend()
    return TwoWayBackend() if name == "twoway" else name


def _tool(x: int) -> int:
    """Doubles x."""
    return 2 * x


_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}

#: (backend, options, the exact words): one per row of the check.
ROWS: list[tuple[str, dict[str, Any], str]] = [
    (
        "gemini",
        {"options": {"nope": 1}},
        "unknown option(s) 'nope' for backend 'gemini'; valid options: "
        "approval_mode, include_directories",
    ),
    (
        "oneway",
        {"approver": lambda request: True},
        "backend 'oneway' has no two-way protocol, which approver= needs; "
        f"backends that have one: {', '.join(backends_that('two_way'))}",
    ),
    (
        "oneway",
        {"hooks": {"pre_tool": lambda hook: None}},
        "backend 'oneway' has no two-way protocol, which hooks= needs; "
        f"backends that have one: {', '.join(backends_that('two_way'))}",
    ),
    (
        "twoway",
        {"hooks": {"pre_compact": lambda hook: None}},
        "backend 'twoway' reports no pre_compact hook point, which hooks= needs (its hook events: ",
    ),
    (
        "oneway",
        {"tools": [_tool]},
        "backend 'oneway' cannot call the caller's functions, which tools= needs; "
        f"backends that can: {', '.join(backends_that('tools'))}",
    ),
    (
        "oneway",
        {"output_schema": _SCHEMA},
        "backend 'oneway' takes no output schema, which output_schema= needs; "
        f"backends that do: {', '.join(backends_that('output_schema'))}",
    ),
    # the Agent Client Protocol's backends: a pre_tool hook blocks, the rest
    # observe; no system prompt
    (
        "gemini",
        {"hooks": {"pre_tool": wants("block", "input")(lambda hook: None)}},
        "backend 'gemini' cannot apply a pre_tool hook's input, which hook <lambda> "
        "declares (wants): a pre_tool hook there can only block",
    ),
    (
        "opencode",
        {"hooks": {"turn_end": wants("block")(lambda hook: None)}},
        "backend 'opencode' cannot apply a turn_end hook's block, which hook <lambda> "
        "declares (wants): a turn_end hook there only observes",
    ),
    (
        "qwen",
        {"hooks": {"pre_compact": lambda hook: None}},
        "backend 'qwen' reports no pre_compact hook point, which hooks= needs "
        "(its hook events: pre_tool, post_tool, turn_end, prompt_submit, session_start, "
        "session_end)",
    ),
    # the points the session observes itself: nothing a hook asks is applied there
    (
        "codex",
        {"hooks": {"prompt_submit": wants("context")(lambda hook: None)}},
        "backend 'codex' cannot apply a prompt_submit hook's context, which hook <lambda> "
        "declares (wants): a prompt_submit hook there only observes",
    ),
    (
        "codex",
        {"hooks": {"subagent_start": lambda hook: None}},
        "backend 'codex' reports no subagent_start hook point, which hooks= needs "
        "(its hook events: pre_tool, post_tool, turn_end, pre_compact, prompt_submit, "
        "session_start, session_end)",
    ),
    (
        "qwen",
        {"agents": {"reviewer": Subagent("Reviews code", "You review code.")}},
        "backend 'qwen' takes no subagent definitions, which agents= needs; "
        f"backends that do: {', '.join(backends_that('agents'))}",
    ),
    (
        "opencode",
        {"system_prompt": "Be brief."},
        "backend 'opencode' takes no system prompt, which system_prompt= needs; "
        f"backends that do: {', '.join(backends_that('system_prompt'))}",
    ),
    (
        "opencode",
        {"add_dirs": [str(ROOT)]},
        "backend 'opencode' takes no extra directories, which add_dirs= needs; "
        f"backends that do: {', '.join(backends_that('add_dirs'))}",
    ),
]


@pytest.mark.parametrize(("backend", "options", "words"), ROWS)
def test_the_constructor_raises_the_one_wording(
    backend: str, options: dict[str, Any], words: str
) -> None:
    with pytest.raises(RefusedError) as refused:
        CodingGenesisAgent(backend_of(backend), ledger=False, **options)
    assert str(refused.value).startswith(words)
    assert isinstance(refused.value, ConfigError) and isinstance(refused.value, AgentUsageError)


@pytest.mark.parametrize(("backend", "options", "words"), ROWS)
def test_a_call_answers_64_with_the_same_words(
    backend: str, options: dict[str, Any], words: str
) -> None:
    agent = CodingGenesisAgent(backend_of(backend), ledger=False)
    response = agent.run_sync("hello", **options)
    assert response["status"] == 64 and response["error"] == "invalid_request"
    assert response["message"].startswith(words)


@pytest.mark.parametrize(
    ("backend", "options", "words"),
    [row for row in ROWS if row[0] != "oneway"]
    + [
        (
            "oneway",
            {},
            "backend 'oneway' has no two-way protocol, which a live session needs; "
            f"backends that have one: {', '.join(backends_that('two_way'))}",
        )
    ],
)
def test_a_session_raises_the_same_words(backend: str, options: dict[str, Any], words: str) -> None:
    agent = CodingGenesisAgent(backend_of(backend), ledger=False)
    with pytest.raises(RefusedError) as refused:
        agent.session(**options)
    assert str(refused.value).startswith(words)


#: The resume row's words for gemini over ACP (a call's option, never an agent's).
_NO_RESUME = (
    "backend 'gemini' cannot resume a session over its two-way protocol: gemini 0.61's "
    "session/load fails ('No previous sessions found') and wipes the session's stored history"
)


def test_a_resume_the_protocol_would_lose_is_refused_in_one_wording() -> None:
    """gemini's ACP ``session/load`` wipes the session: ``resume=`` over the
    protocol (a session, a run with an approver) is refused before anything
    starts; a one-shot run resumes with ``--resume``."""
    agent = CodingGenesisAgent("gemini", ledger=False, cli_path="/nonexistent/gemini")
    with pytest.raises(RefusedError) as refused:
        agent.session(resume="s-1")
    assert str(refused.value).startswith(_NO_RESUME)
    response = agent.run_sync("hello", resume="s-1", approver=lambda request: True)
    assert response["status"] == 64 and response["message"].startswith(_NO_RESUME)
    one_shot = agent.run_sync("hello", resume="s-1")  # refused by nothing: the CLI is absent
    assert one_shot["error"] == "not_found", one_shot["message"]
    qwen = CodingGenesisAgent("qwen", ledger=False, cli_path="/nonexistent/qwen")
    assert qwen.run_sync("hello", resume="s-1", approver=lambda r: True)["error"] == "not_found"


def test_a_session_of_an_isolated_agent_is_refused_in_one_wording() -> None:
    agent = CodingGenesisAgent("failer", ledger=False, isolation="worktree")
    with pytest.raises(RefusedError, match="isolation= and verify= apply to one-shot runs only"):
        agent.session()


@pytest.mark.slow
def test_a_batch_line_answers_the_same_words_at_its_index() -> None:
    backend, options, words = ROWS[0]
    results = run_many_sync(
        [
            RunSpec(prompt="hello", backend="failer", ledger=False),
            RunSpec(prompt="hello", backend=backend, ledger=False, **options),
        ]
    )
    assert results[0]["status"] == 0
    assert results[1]["status"] == 64 and results[1]["message"].startswith(words)


def test_the_check_answers_what_the_backend_cannot_do() -> None:
    # lazy: the registry, as the check's wording loads it
    from coding_genesis.backends import get_backend

    config = AgentConfig(backend="claude", output_schema=_SCHEMA)
    assert check(get_backend("claude"), config) is None
    refused = check(one_way_backend(), config)
    assert refused is not None and refused.option == "output_schema"


def test_every_acp_backend_takes_an_output_schema_in_the_prompt() -> None:
    """ACP has no schema field: the protocol carries it in the turn's prompt
    (tests/session/test_acp_output.py), so the one check says yes."""
    from coding_genesis.backends import get_backend

    for name in ("gemini", "qwen", "opencode"):
        config = AgentConfig(backend=name, output_schema=_SCHEMA)
        assert check(get_backend(name), config) is None, name
        assert check(get_backend(name), config, "session") is None, name
    assert {"gemini", "qwen", "opencode"} <= set(backends_that("output_schema"))


def test_every_acp_backend_takes_the_callers_functions() -> None:
    """tools= on an ACP agent: served over MCP (tests/session/test_acp_tools.py)."""
    from coding_genesis.backends import get_backend

    for name in ("gemini", "qwen", "opencode"):
        config = AgentConfig(backend=name, tools=[_tool])
        assert check(get_backend(name), config) is None, name
        assert check(get_backend(name), config, "session") is None, name
    assert {"gemini", "qwen", "opencode"} <= set(backends_that("tools"))


def test_every_option_is_classified() -> None:
    every = (
        set(AgentConfig.field_names())
        | RUN_OPTION_NAMES
        | LIVE_OPTION_NAMES
        | SEND_OPTION_NAMES
        | {"prompt", "backend", "approve_tools", "deny_commands", "writes_under"}
    )
    assert every == set(UNTRUSTED)


def test_the_security_page_lists_the_untrusted_classes_as_they_are() -> None:
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("### What untrusted input may set", 1)[1]
    found: dict[str, str] = {}
    for trust in ("data", "trusted", "never"):
        (row,) = re.findall(rf"^\| {trust} \|[^|]*\|(.*)\|$", section, flags=re.M)
        found.update(dict.fromkeys(re.findall(r"`(\w+)`", row), trust))
    assert found == dict(UNTRUSTED)


def test_untrusted_input_sets_data_only_and_never_code() -> None:
    assert untrusted_problem({"prompt": "p", "backend": "claude", "model": "m"}) is None
    assert "refused field(s) cli_path" in str(untrusted_problem({"prompt": "p", "cli_path": "x"}))
    assert untrusted_problem({"prompt": "p", "cli_path": "x"}, trusted=True) is None
    never = untrusted_problem({"prompt": "p", "approve_tools": ["Read"]}, trusted=True)
    assert never is not None and "an approver comes only from the command line" in never
