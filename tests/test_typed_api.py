"""The public entry points are typed, and each typed definition says the same as
the code it types: ``inspect.signature`` lists every parameter with its type,
``RunSpec`` refuses an unknown field, the response TypedDict names exactly the
keys ``to_dict()`` produces, and the option TypedDicts name exactly what the
agent and ``AgentConfig`` accept.  (The static side is ``tests/typing/api.py``,
which mypy checks.)"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from coding_genesis import (
    AGENT_DEFAULT,
    AgentConfig,
    AgentSettings,
    CodingGenesisAgent,
    ConfigError,
    RunOptions,
    RunResponse,
    RunResult,
    RunSpec,
    run_many_sync,
)
from coding_genesis.batch import run_many


def _entry_points() -> dict[str, Any]:
    agent = CodingGenesisAgent("failer")
    return {
        "CodingGenesisAgent": CodingGenesisAgent,
        "run": agent.run,
        "run_result": agent.run_result,
        "run_sync": agent.run_sync,
        "run_many": run_many,
        "run_many_sync": run_many_sync,
        "subscribe": agent.subscribe,
    }


@pytest.mark.parametrize("name", sorted(_entry_points()))
def test_each_entry_point_lists_its_parameters_with_types(name: str) -> None:
    signature = inspect.signature(_entry_points()[name])
    parameters = list(signature.parameters.values())
    assert parameters, name
    for parameter in parameters:
        assert parameter.kind is not parameter.VAR_KEYWORD, f"{name}: **{parameter.name}"
        assert parameter.kind is not parameter.VAR_POSITIONAL, f"{name}: *{parameter.name}"
        assert parameter.annotation is not parameter.empty, f"{name}: {parameter.name} untyped"
    assert "object object at" not in str(signature), str(signature)


def test_run_shows_every_run_option_defaulting_to_the_agent_setting() -> None:
    signature = inspect.signature(CodingGenesisAgent("failer").run)
    options = {n: p for n, p in signature.parameters.items() if n != "prompt"}
    assert set(options) == set(RunOptions.__optional_keys__)
    assert {p.default for p in options.values()} == {AGENT_DEFAULT}
    assert repr(AGENT_DEFAULT) == "<the agent's setting>"
    assert signature.parameters["retry"].annotation == "RetrySetting"


@pytest.mark.slow
def test_an_option_given_as_its_shown_default_is_the_agent_setting(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("failer", retry=1, cwd=str(tmp_path))
    options: dict[str, Any] = {"retry": AGENT_DEFAULT, "timeout": AGENT_DEFAULT}
    result = agent.run_sync("/fail-then-succeed 1", **options)
    assert (result["status"], result["retry_count"]) == (0, 1), "the agent's policy retried"
    assert result["timeout_s"] == agent.timeout


def test_the_constructor_shows_every_setting_with_its_default() -> None:
    signature = inspect.signature(CodingGenesisAgent)
    settings = set(signature.parameters) - {"backend", "config"}
    assert settings == set(AgentConfig.field_names()) - {"backend"}
    assert signature.parameters["timeout"].default == AgentConfig().timeout
    assert signature.parameters["keep"].annotation == "Keep"


def test_agent_settings_name_exactly_the_config_fields() -> None:
    assert set(AgentSettings.__optional_keys__) == set(AgentConfig.field_names()) - {"backend"}


def test_the_config_shows_its_settings_typed_as_accepted() -> None:
    parameters = inspect.signature(AgentConfig).parameters
    assert parameters["retry"].annotation == "RetrySetting"
    assert parameters["cli_path"].annotation == "str | os.PathLike[str] | Sequence[str] | None"
    assert parameters["timeout"].default == 300.0
    config = AgentConfig(retry="default", cli_path="/bin/true")
    assert config.retry is not None and config.cli_path == ("/bin/true",)


def test_run_refuses_an_option_it_does_not_define() -> None:
    agent = CodingGenesisAgent("failer")
    with pytest.raises(TypeError, match="tiemout"):
        agent.run_sync("hello", tiemout=3)  # type: ignore[call-arg]


def _keys(response: RunResponse) -> set[str]:
    return set(response)


@pytest.mark.slow
def test_the_response_typeddict_names_the_keys_of_a_success_and_a_failure(
    tmp_path: Path,
) -> None:
    agent = CodingGenesisAgent("failer")
    success = agent.run_sync("hello", cwd=str(tmp_path))
    failure = agent.run_sync("/fail", cwd=str(tmp_path))
    assert success["status"] == 0 and failure["status"] != 0
    declared = set(RunResponse.__required_keys__)
    assert len(declared) == len(RunResult.model_fields) >= 55
    assert _keys(success) == declared
    assert _keys(failure) == declared


def test_a_run_spec_refuses_an_unknown_field_at_once() -> None:
    with pytest.raises(ConfigError, match=r"unknown field.*'unknown'"):
        RunSpec(prompt="p", backend="failer", unknown=1)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="'tiemout'"):
        RunSpec(prompt="p", backend="failer", tiemout=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="tiemout"):
        RunSpec.model_validate({"prompt": "p", "backend": "failer", "tiemout": 3})
    spec = RunSpec(prompt="p", backend="failer", timeout=3, resume=None)
    assert spec.agent_kwargs() == {"timeout": 3}


@pytest.mark.slow
def test_run_many_answers_an_item_with_an_unknown_field_at_its_index(tmp_path: Path) -> None:
    results = run_many_sync(
        [
            {"prompt": "hello", "backend": "failer", "cwd": str(tmp_path)},
            {"prompt": "hello", "backend": "failer", "tiemout": 3},
        ]
    )
    assert results[0]["status"] == 0
    assert (results[1]["index"], results[1]["status"], results[1]["error"]) == (
        1,
        64,
        "invalid_request",
    )
    assert "tiemout" in results[1]["message"]


@pytest.mark.slow
def test_genesis_run_many_answers_a_line_with_an_unknown_field_with_64(tmp_path: Path) -> None:
    lines = [
        {"prompt": "hello", "backend": "failer", "cwd": str(tmp_path)},
        {"prompt": "hello", "backend": "failer", "nope": 1},
    ]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coding_genesis._cli.main",
            "run-many",
            "--trusted-input",
            str(tasks),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    by_index = {r["index"]: r for r in results if "index" in r}
    assert by_index[0]["status"] == 0, done.stderr
    assert (by_index[1]["status"], by_index[1]["error"]) == (64, "invalid_request")
    assert "nope" in by_index[1]["message"]
