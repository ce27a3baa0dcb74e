"""Every option is declared once (``coding_genesis/request.py``): its keyword in the
TypedDicts that type ``run()``, ``session()``, the agent and a batch line, its stored
value and its one check in ``RequestSettings``, which ``AgentConfig`` inherits.  These
tests hold the declarations to each other, so an option added in one place and not the
other fails here."""

from __future__ import annotations

import dataclasses
import pickle
import signal
from pathlib import Path

import pytest

from coding_genesis import AgentConfig, ConfigError
from coding_genesis.batch import BatchSettings
from coding_genesis.config import AgentSettings
from coding_genesis.request import (
    CALL_OPTION_NAMES,
    LIVE_OPTION_NAMES,
    RUN_OPTION_NAMES,
    CallOptions,
    LiveOptions,
    RequestOptions,
    RequestSettings,
    SharedOptions,
)

SETTINGS = {f.name for f in dataclasses.fields(RequestSettings)}


def test_run_options_are_the_request_options_the_call_options_and_retry() -> None:
    assert (
        RequestOptions.__optional_keys__ | CallOptions.__optional_keys__ | {"retry"}
        == RUN_OPTION_NAMES
    )
    live_only = {"resume", "fork", "resume_at", "keep_results"}
    assert RequestOptions.__optional_keys__ | live_only == LIVE_OPTION_NAMES
    assert {"resume", "request_key"} == CALL_OPTION_NAMES


def test_every_request_option_is_a_stored_setting() -> None:
    keys = SharedOptions.__optional_keys__ | RequestOptions.__optional_keys__
    assert keys - {"cwd"} <= SETTINGS, (keys - {"cwd"}) - SETTINGS


def test_the_agent_inherits_every_setting_and_shares_every_shared_keyword() -> None:
    assert issubclass(AgentConfig, RequestSettings)
    assert set(AgentConfig.field_names()) >= SETTINGS
    assert SharedOptions.__optional_keys__ <= AgentSettings.__optional_keys__
    assert set(AgentSettings.__optional_keys__) == set(AgentConfig.field_names()) - {"backend"}
    batch = BatchSettings.__optional_keys__
    assert AgentSettings.__optional_keys__ | CallOptions.__optional_keys__ == batch
    live_only = {"keep_results", "resume", "fork", "resume_at"}
    assert set(LiveOptions.__optional_keys__) - live_only <= SETTINGS | {"cwd"}


def test_every_setting_says_how_it_is_checked() -> None:
    """A setting without a check is one we chose to take as given."""
    unchecked = {f.name for f in dataclasses.fields(AgentConfig) if f.metadata.get("check") is None}
    assert unchecked == {"kill_leftovers", "clock"}


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("timeout", 0, "timeout must be a finite number of seconds > 0"),
        ("max_turns", 0, "max_turns must be an integer >= 1"),
        ("permissions", "root", "permissions must be one of"),
        ("options", ["x"], "options must be a mapping"),
        ("extra_args", "-v", "extra_args must be a list of strings"),
        ("env", {"A=B": "c"}, "env must map variable names to string values"),
        ("stop_signals", [999], "unknown signal 999 in stop_signals"),
        ("max_line_bytes", 0, "max_line_bytes must be a positive integer"),
        ("stderr_tail_bytes", -1, "stderr_tail_bytes must be a non-negative integer"),
        ("keep", "sometimes", "keep must be 'never', 'on_failure' or 'always'"),
        ("telemetry", "yes", "telemetry must be True or False"),
    ],
)
def test_each_setting_is_refused_by_its_own_check(name: str, value: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        AgentConfig(**{name: value})  # type: ignore[arg-type]


def test_a_setting_is_kept_as_its_check_makes_it(tmp_path: Path) -> None:
    config = AgentConfig(
        cli_path=str(tmp_path / "cli"),
        extra_args=["-v"],
        stop_signals=[signal.SIGINT],
        hooks=None,
        ledger=True,
        model="",
    )
    assert config.cli_path == (str(tmp_path / "cli"),) and config.extra_args == ("-v",)
    assert config.stop_signals == (signal.SIGINT,)
    assert config.hooks == {} and config.ledger is None and config.model is None


def test_the_agent_config_replaces_pickles_and_compares() -> None:
    config = AgentConfig("failer", timeout=5, max_turns=3, options={"a": 1})
    again = pickle.loads(pickle.dumps(config))
    assert again == config and again.options == {"a": 1}
    changed = config.replace(timeout=7)
    assert (changed.timeout, changed.max_turns, changed.backend) == (7.0, 3, "failer")
    with pytest.raises(ConfigError, match="timeout"):
        config.replace(timeout=-1)
