"""Steps of vocabulary.feature: the option vocabulary through fake CLIs (tests/fakes/bin)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from pytest_bdd import given, parsers, then, when

from coding_genesis import CodingGenesisAgent, GenericBackend, Permissions, RunResponse
from tests.support import FakeCLI


class VocabWorld:
    def __init__(self, tmp_path: Path, portal: BlockingPortal) -> None:
        self.tmp_path = tmp_path
        self.portal = portal
        self.fake: FakeCLI | None = None
        self.agent: CodingGenesisAgent | None = None
        self.response: dict[str, Any] | None = None
        self.help = ""


@pytest.fixture
def vocab(tmp_path: Path, portal: BlockingPortal) -> VocabWorld:
    return VocabWorld(tmp_path, portal)


@given(
    parsers.parse(
        'a generic backend "{name}" reading claude stream-json without permission arguments'
    )
)
def generic_backend(vocab: VocabWorld, name: str) -> None:
    vocab.fake = FakeCLI(vocab.tmp_path, "claude")
    backend = GenericBackend(name, command=[vocab.fake.path, "-p"], format="claude-stream-json")
    vocab.agent = CodingGenesisAgent(backend, env=vocab.fake.env(), timeout=10)


@given(parsers.parse("a codex agent with max_turns {turns:d}"))
def codex_agent(vocab: VocabWorld, turns: int) -> None:
    vocab.fake = FakeCLI(vocab.tmp_path, "codex")
    vocab.fake.script([{"answer": "done"}])
    vocab.agent = vocab.fake.agent(max_turns=turns)


@when(parsers.parse('a request asks for permissions "{level}"'))
def ask_permissions(vocab: VocabWorld, level: Permissions) -> None:
    agent = vocab.agent
    assert agent is not None

    async def run() -> RunResponse:
        return await agent.run("do the task", permissions=level)

    vocab.response = vocab.portal.call(run)


@when("the agent processes the request")
def process(vocab: VocabWorld) -> None:
    assert vocab.agent is not None
    vocab.response = vocab.portal.call(vocab.agent.run, "do the task")


@when(parsers.parse('I ask for "genesis run --help"'))
def run_help(vocab: VocabWorld, capsys: pytest.CaptureFixture[str]) -> None:
    from coding_genesis._cli.main import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    vocab.help = " ".join(capsys.readouterr().out.split())


@then(parsers.parse('the response contains key "{key}" with value {value:d}'))
def key_value(vocab: VocabWorld, key: str, value: int) -> None:
    assert vocab.response is not None
    assert vocab.response[key] == value, vocab.response


@then(parsers.parse('the response message says "{text}"'))
def message_says(vocab: VocabWorld, text: str) -> None:
    assert vocab.response is not None
    assert text in vocab.response["message"], vocab.response["message"]


@then("the CLI was never started")
def never_started(vocab: VocabWorld) -> None:
    assert vocab.fake is not None
    assert vocab.fake.records() == []


@then(parsers.parse('the response warns "{text}"'))
def warns(vocab: VocabWorld, text: str) -> None:
    assert vocab.response is not None
    assert text in vocab.response["warnings"], vocab.response["warnings"]


@then(parsers.parse('the help names the backends "{names}"'))
def help_names(vocab: VocabWorld, names: str) -> None:
    listed = vocab.help.split("one of: ", 1)[1].split(" (default", 1)[0].split(", ")
    for name in names.split(", "):
        assert name in listed, (name, listed)
