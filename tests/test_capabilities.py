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
from coding_genesis.request import LIVE_OPTION_NAMES, RUN_OPTION_NAMES
from tests.session.twoway import TwoWayBackend

ROOT = Path(__file__).resolve().parent.parent


def backend_of(name: str) -> str | Backend:
    """A registered backend by name; "twoway": the two-way fake of the session tests."""
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
        "gemini",
        {"approver": lambda request: True},
        "backend 'gemini' has no two-way protocol, which approver= needs; "
        f"backends that have one: {', '.join(backends_that('two_way'))}",
    ),
    (
        "gemini",
        {"hooks": {"pre_tool": lambda hook: None}},
        "backend 'gemini' has no two-way protocol, which hooks= needs; "
        f"backends that have one: {', '.join(backends_that('two_way'))}",
    ),
    (
        "twoway",
        {"hooks": {"pre_compact": lambda hook: None}},
        "backend 'twoway' reports no pre_compact hook point, which hooks= needs (its hook events: ",
    ),
    (
        "gemini",
        {"tools": [_tool]},
        "backend 'gemini' cannot call the caller's functions, which tools= needs; "
        "backends that can: claude, codex, failer",
    ),
    (
        "gemini",
        {"output_schema": _SCHEMA},
        "backend 'gemini' takes no output schema, which output_schema= needs; "
        "backends that do: claude, codex, failer",
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
    [row for row in ROWS if row[0] != "gemini"]
    + [
        (
            "gemini",
            {},
            "backend 'gemini' has no two-way protocol, which a live session needs; "
            f"backends that have one: {', '.join(backends_that('two_way'))}",
        )
    ],
)
def test_a_session_raises_the_same_words(backend: str, options: dict[str, Any], words: str) -> None:
    agent = CodingGenesisAgent(backend_of(backend), ledger=False)
    with pytest.raises(RefusedError) as refused:
        agent.session(**options)
    assert str(refused.value).startswith(words)


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
    refused = check(get_backend("gemini"), config)
    assert refused is not None and refused.option == "output_schema"


def test_every_option_is_classified() -> None:
    every = (
        set(AgentConfig.field_names())
        | RUN_OPTION_NAMES
        | LIVE_OPTION_NAMES
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
