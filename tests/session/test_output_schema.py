"""``output_schema=`` through the whole machinery, against the fake claude and codex
(one-shot: ``fakecli.py`` answering with the prompt it read; live: ``fakecontrol.py``
and ``fake_app_server.py`` answering ``JSON <value>``): the validated ``output``, an
answer that does not match asked again once (a one-shot run resumes its session, a
session takes a second turn) with the validation error, then ``invalid_output``; the
door (status 64, ``ConfigError``, ``AgentUsageError``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from coding_genesis import CodingGenesisAgent, ConfigError, RetryPolicy
from coding_genesis.errors import AgentUsageError
from tests.session.twoway import one_way_backend
from tests.support import FAKE_BIN, FakeCLI

pytestmark = pytest.mark.anyio


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verdict: str
    issues: list[str]


GOOD = '{"verdict": "ok", "issues": ["a"]}'
BAD = '{"verdict": 1}'
RETRY_WORDS = "Your final answer did not have the required structured format"


@pytest.fixture(params=["claude", "codex"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def live_agent(backend: str, tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    record = tmp_path / "record.jsonl"
    return CodingGenesisAgent(
        backend,
        cli_path=str(FAKE_BIN / backend),
        cwd=str(tmp_path),
        ledger=False,
        timeout=20,
        grace=1.0,
        env={"FAKE_CLI_RECORD": str(record)},
        **settings,
    )


def recorded(tmp_path: Path, key: str) -> list[Any]:
    lines = (tmp_path / "record.jsonl").read_text().splitlines()
    return [entry[key] for entry in map(json.loads, lines) if key in entry]


@pytest.mark.slow
async def test_a_turn_answers_the_model_instance_and_the_dict(backend: str, tmp_path: Path) -> None:
    a = live_agent(backend, tmp_path, output_schema=Review)
    async with a.session() as s:
        result = await s.send_result(f"JSON {GOOD}")
        assert result.status == 0 and result.error is None, result.message
        assert result.output == Review(verdict="ok", issues=["a"])
        response = await s.send(f"JSON {GOOD}")
        assert response["output"] == {"verdict": "ok", "issues": ["a"]}
        assert response["attempts"] == 1 and response["turn"] == 2
    if backend == "codex":  # the schema reaches each turn/start
        assert recorded(tmp_path, "schema") == [Review.model_json_schema()] * 2


@pytest.mark.slow
async def test_a_wrong_answer_is_asked_again_once_in_the_same_session(
    backend: str, tmp_path: Path
) -> None:
    a = live_agent(backend, tmp_path)
    schema = Review.model_json_schema()
    async with a.session(output_schema=schema) as s:
        first = await s.send_result(f"JSON {GOOD}")
        assert first.output == {"verdict": "ok", "issues": ["a"]}
        wrong = await s.send_result(f"JSON {BAD}")
        # the second turn quoted the validation error; the fake answered it with text
        assert wrong.status == 1 and wrong.error == "invalid_output", wrong.message
        assert wrong.attempts == 2 and wrong.turn == 3 and s.turns == 3
        assert RETRY_WORDS in wrong.message and "expected string, got integer" in wrong.message
        assert wrong.output is None
        first_try, second_try = wrong.retry_history
        assert (first_try["category"], first_try["action"]) == ("invalid_output", "retry")
        assert first_try["resume_session"] is None  # the same process goes on: no resume
        assert second_try["action"] == "fail"
        assert wrong.failure is not None and wrong.failure.category == "invalid_output"
        after = await s.send_result(f"JSON {GOOD}")
        assert after.status == 0 and after.pid == first.pid and after.turn == 4


@pytest.fixture(params=["claude", "codex"])
def fake(request: pytest.FixtureRequest, tmp_path: Path) -> FakeCLI:
    cli = FakeCLI(tmp_path, flavour=str(request.param))
    cli.script([{"answer_prompt": True}])
    return cli


@pytest.mark.slow
async def test_one_shot_answers_the_validated_output(fake: FakeCLI) -> None:
    a = fake.agent()
    result = await a.run_result(GOOD, output_schema=Review)
    assert result.status == 0 and result.output == Review(verdict="ok", issues=["a"])
    response = await a.run(GOOD, output_schema=Review.model_json_schema())
    assert response["output"] == {"verdict": "ok", "issues": ["a"]}


@pytest.mark.slow
async def test_one_shot_retries_once_resuming_the_session_without_a_policy(
    fake: FakeCLI,
) -> None:
    a = fake.agent()
    assert a.retry_policy is None
    result = await a.run_result(BAD, output_schema=Review)
    assert result.status == 1 and result.error == "invalid_output"
    assert result.attempts == 2 and result.retry_count == 1
    # the second answer is the continuation prompt echoed: it quoted the first error
    assert RETRY_WORDS in result.message and "$.verdict" in result.message
    argvs = [r["argv"] for r in fake.records() if "argv" in r]
    assert len(argvs) == 2
    resumed = " ".join(argvs[1])
    assert "--resume=" in resumed if fake.flavour == "claude" else " resume " in resumed
    assert result.data is None  # the second answer was not even JSON
    failure = result.failure
    assert failure is not None and failure.retryable
    assert failure.suggested_actions[0].startswith("Continue the session")


@pytest.mark.slow
async def test_a_policy_s_own_row_decides(fake: FakeCLI) -> None:
    a = fake.agent(retry=RetryPolicy.default().with_category("invalid_output", max_retries=0))
    result = await a.run_result(BAD, output_schema=Review)
    assert result.error == "invalid_output" and result.attempts == 1
    assert result.retry_history[0]["action"] == "fail"


async def test_a_secret_in_the_answer_is_masked_in_the_output(fake: FakeCLI) -> None:
    secret = "sk-test-0123456789abcdef"
    a = fake.agent(env={"OPENAI_API_KEY": secret})
    result = await a.run_result(
        json.dumps({"verdict": "ok", "issues": [secret]}), output_schema=Review
    )
    assert result.status == 0 and isinstance(result.output, Review)
    assert secret not in json.dumps(result.to_dict())


async def test_the_door(tmp_path: Path) -> None:
    # every shipped backend takes a schema (ACP's in the prompt): a one-way one does not
    with pytest.raises(ConfigError, match="backends that do: claude, codex"):
        CodingGenesisAgent(one_way_backend(), output_schema=Review)
    with pytest.raises(ConfigError, match="uses patternProperties"):
        CodingGenesisAgent("claude", output_schema={"type": "object", "patternProperties": {}})
    oneway = CodingGenesisAgent(one_way_backend(), cwd=str(tmp_path))
    refused = await oneway.run("hi", output_schema=Review)
    assert refused["status"] == 64 and "backends that do: claude, codex" in refused["message"]
    claude = CodingGenesisAgent("claude", cli_path=str(FAKE_BIN / "claude"), cwd=str(tmp_path))
    bad = await claude.run("hi", output_schema={"type": "array"})
    assert bad["status"] == 64 and "must describe an object" in bad["message"]
    with pytest.raises(AgentUsageError, match="must describe an object"):
        claude.session(output_schema={"type": "string"})
