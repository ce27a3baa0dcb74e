"""Every public name that was renamed or moved still resolves to the new object,
with a ``DeprecationWarning`` that names its new home (one test each; the
changelog lists them under "Deprecated")."""

from __future__ import annotations

import importlib

import pytest

import coding_genesis
from coding_genesis import config, request

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
