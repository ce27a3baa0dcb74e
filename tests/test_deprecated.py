"""Every public name that was renamed or moved still resolves to the new object,
with a ``DeprecationWarning`` that names its new home (one test each; the
changelog lists them under "Deprecated")."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import coding_genesis
from coding_genesis import CircuitBreaker, RetryPolicy, RunSpec, SessionPool, config, request
from coding_genesis.batch import run_many_sync

#: (module, old name, the object it now is)
MOVED = [
    ("coding_genesis", "SessionOptions", request.CallOptions),
    ("coding_genesis", "TurnOptions", request.RequestOptions),
    ("coding_genesis.options", "SessionOptions", request.CallOptions),
    ("coding_genesis.options", "TurnOptions", request.RequestOptions),
    ("coding_genesis.options", "RunOptions", request.RunOptions),
    ("coding_genesis.options", "LiveOptions", request.LiveOptions),
    ("coding_genesis.options", "RetrySetting", request.RetrySetting),
    ("coding_genesis.options", "OutputSchemaSetting", request.OutputSchemaSetting),
    ("coding_genesis.options", "RUN_OPTION_NAMES", request.RUN_OPTION_NAMES),
    ("coding_genesis.options", "LIVE_OPTION_NAMES", request.LIVE_OPTION_NAMES),
    ("coding_genesis.options", "SESSION_OPTION_NAMES", request.CALL_OPTION_NAMES),
    ("coding_genesis.options", "AgentSettings", config.AgentSettings),
    ("coding_genesis.options", "Settings", config.Settings),
    ("coding_genesis.options", "BreakerSetting", config.BreakerSetting),
]


@pytest.mark.parametrize(("module", "name", "new"), MOVED, ids=lambda v: str(v)[:40])
def test_a_moved_name_still_resolves_with_a_warning(module: str, name: str, new: object) -> None:
    found = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{name} is deprecated: use "):
        value = getattr(found, name)
    assert value is new


def test_codex_app_server_is_codex_control_with_a_warning() -> None:
    from coding_genesis.backends import codex_control

    with pytest.warns(DeprecationWarning, match=r"codex_control\.CodexAppServer is deprecated: "):
        value = codex_control.CodexAppServer
    assert value is codex_control.CodexControl
    assert "CodexAppServer" not in codex_control.__all__


def test_deprecated_names_are_not_in_all() -> None:
    assert not set(coding_genesis._DEPRECATED) & set(coding_genesis.__all__)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    options = importlib.import_module("coding_genesis.options")
    name = "Nope"
    with pytest.raises(AttributeError, match=name):
        getattr(options, name)
    with pytest.raises(AttributeError, match=name):
        getattr(coding_genesis, name)


@pytest.mark.parametrize("where", ["coding_genesis", "coding_genesis.backend"])
@pytest.mark.parametrize("name", ["AttemptRequest", "RunRequest"])
def test_attempt_request_is_a_request_that_still_takes_resume_session(
    where: str, name: str
) -> None:
    module = importlib.import_module(where)
    with pytest.warns(DeprecationWarning, match=rf"{name} is deprecated: use coding_genesis"):
        old = getattr(module, name)
    made = old(prompt="p", cwd="/w", resume_session="s-1", output_schema={"type": "object"})
    assert isinstance(made, request.Request)
    assert made.resume == "s-1" and made.output_schema == {"type": "object"}


def test_request_resume_session_reads_resume_with_a_warning() -> None:
    made = request.Request(prompt="p", cwd="/w", resume="s-2")
    with pytest.warns(DeprecationWarning, match="use Request.resume"):
        assert made.resume_session == "s-2"


def test_session_start_makes_the_sessions_request() -> None:
    control = importlib.import_module("coding_genesis.control")
    with pytest.warns(DeprecationWarning, match="SessionStart is deprecated"):
        session_start = control.SessionStart
    start = session_start(cwd="/w", approvals=True, hooks=frozenset({"turn_end"}), model="m")
    assert isinstance(start, request.Request) and start.prompt == ""
    assert start.approvals and set(start.hooks) == {"turn_end"} and start.model == "m"
    with pytest.raises(TypeError, match="hook_timeout"):
        session_start(cwd="/w", hook_wait=40)


# -- durations: one spelling (a float of seconds, no unit suffix on the way in) --------


def test_session_pool_takes_max_idle_s_and_wait_s_with_a_warning(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match="max_idle_s= is deprecated: use max_idle="):
        pool = SessionPool("failer", size=1, max_idle_s=30, wait=1, cwd=str(tmp_path))  # type: ignore[call-arg]
    assert pool.max_idle == 30
    with pytest.warns(DeprecationWarning, match="wait_s= is deprecated: use wait="):
        pool = SessionPool("failer", size=1, max_idle=30, wait_s=2, cwd=str(tmp_path))  # type: ignore[call-arg]
    assert pool.wait == 2
    with pytest.warns(DeprecationWarning, match="max_idle_s= is deprecated"):
        assert pool.max_idle_s == 30
    with pytest.warns(DeprecationWarning, match="wait_s= is deprecated"):
        assert pool.wait_s == 2


@pytest.mark.slow
def test_run_many_takes_deadline_s_with_a_warning() -> None:
    specs = [RunSpec(prompt="hello", backend="failer", ledger=False)]
    with pytest.warns(DeprecationWarning, match="run_many: deadline_s= is deprecated"):
        (result,) = run_many_sync(specs, deadline_s=60)
    assert result["status"] == 0


def test_retry_policy_takes_deadline_s_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="deadline_s= is deprecated: use deadline="):
        policy = RetryPolicy.parse({"deadline_s": 9})
    assert policy == RetryPolicy.default(deadline=9)
    with pytest.warns(DeprecationWarning, match="deadline_s= is deprecated"):
        assert RetryPolicy.default(deadline=9).deadline_s == 9


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("base_delay_s", "base_delay"),
        ("max_delay_s", "max_delay"),
        ("retry_after_cap_s", "retry_after_cap"),
    ],
)
def test_category_policy_takes_its_old_names_with_a_warning(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"{old}= is deprecated: use {new}="):
        policy = RetryPolicy.default().with_category("network", **{old: 7})
    assert getattr(policy.for_category("network"), new) == 7
    with pytest.warns(DeprecationWarning, match=f"{old}= is deprecated"):
        assert getattr(policy.for_category("network"), old) == 7


def test_circuit_breaker_takes_cooldown_s_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="cooldown_s= is deprecated: use cooldown="):
        breaker = CircuitBreaker(threshold=2, cooldown_s=5)
    assert breaker.cooldown == 5
    with pytest.warns(DeprecationWarning, match="cooldown_s= is deprecated"):
        assert breaker.cooldown_s == 5
    with pytest.raises(TypeError, match="cooldwn"):
        CircuitBreaker(cooldwn=5)
