"""How a body is read, in-process (no server): what it may set comes from the house's one list
(``capabilities.UNTRUSTED``), what its backend cannot do from the one check
(``capabilities.check``), in their words; the API's models list exactly those fields."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

import coding_genesis.backends
from coding_genesis._serve import models
from coding_genesis._serve.requests import (
    NOT_IN_A_SESSION,
    SERVED_FIELDS,
    Accepted,
    AcceptedSession,
    Refused,
    Rules,
    read_run_request,
    read_session_request,
    read_turn_request,
    root_path,
)
from coding_genesis.approval import allow_tools
from coding_genesis.backends import get_backend
from coding_genesis.capabilities import UNTRUSTED, check, untrusted_backend_problem
from coding_genesis.config import AgentConfig
from coding_genesis.request import SEND_OPTION_NAMES
from tests.session.twoway import one_way_backend

DATA = {name for name, trust in UNTRUSTED.items() if trust == "data"}
#: Data of a live session only: a run keeps no turns.
SESSION_ONLY = {"keep_results", "fork", "resume_at"}


def _rules(tmp_path: Path, *, trusted: bool = False) -> Rules:
    return Rules(trusted, root_path(tmp_path), {}, "failer")


def _run(tmp_path: Path, body: dict[str, object], **kw: bool) -> Accepted | Refused:
    return read_run_request(
        orjson.dumps(body),
        _rules(tmp_path, **kw),
        owned={},
        inbox=lambda _timeout: allow_tools("Read"),
    )


def test_the_models_list_what_the_one_list_lets_a_body_set() -> None:
    assert set(models.RunRequest.model_fields) == DATA - SESSION_ONLY | SERVED_FIELDS
    # isolation: data, but what the capability check refuses of any live session
    session = DATA - set(NOT_IN_A_SESSION) - {"prompt", "isolation"} | SERVED_FIELDS
    assert set(models.SessionRequest.model_fields) == session
    # A turn: its prompt and exactly send()'s options, each classified in the one list.
    assert set(models.TurnRequest.model_fields) == {"prompt"} | SEND_OPTION_NAMES
    assert set(models.TurnRequest.model_fields) <= set(UNTRUSTED)


def test_a_turn_sets_data_only_in_the_one_list_s_words(tmp_path: Path) -> None:
    """What a turn may set without --trusted-input is what the one list says:
    every option of send() it calls trusted is refused, in a body's words."""
    rules, trusting = _rules(tmp_path), _rules(tmp_path, trusted=True)
    values = {"timeout": 5.0, "model": "m-b", "permissions": "full", "output_schema": {}}
    assert set(values) == SEND_OPTION_NAMES
    for name, value in values.items():
        asked = {"prompt": "hi", name: value}
        read = read_turn_request(asked, rules)
        if UNTRUSTED[name] == "data":
            assert read == asked
        else:
            assert isinstance(read, Refused), name
            assert read.message.startswith(f"refused field(s) {name}: a run-many file may set only")
        assert read_turn_request(asked, trusting) == asked
    assert UNTRUSTED["model"] == "data" and UNTRUSTED["permissions"] == "trusted"
    assert read_turn_request({"prompt": "hi", "model": None}, rules) == {"prompt": "hi"}
    named = read_turn_request({"prompt": ["a", {"type": "file", "path": "x"}]}, rules)
    assert isinstance(named, Refused) and "naming a path ('x')" in named.message
    dash = read_turn_request({"prompt": "hi", "model": "-x"}, rules)
    assert isinstance(dash, Refused) and "would read as a command-line option" in dash.message


def test_a_body_sets_data_only_in_the_words_of_a_batch_line(tmp_path: Path) -> None:
    refused = _run(tmp_path, {"prompt": "hi", "grace": 1})
    assert isinstance(refused, Refused)
    assert refused.message.startswith("refused field(s) grace: a run-many file may set only")
    assert "approval_timeout" in refused.message  # data, as the one list says
    assert isinstance(_run(tmp_path, {"prompt": "hi", "grace": 1}, trusted=True), Accepted)
    named = _run(tmp_path, {"prompt": "hi", "approve_tools": ["Bash"]}, trusted=True)
    assert isinstance(named, Refused) and "an approver comes only from the command line" in (
        named.message
    )


def test_the_inbox_s_deadline_is_data_bounded_by_a_day(tmp_path: Path) -> None:
    body = {"prompt": "hi", "approvals": "inbox", "approval_timeout": 5}
    accepted = _run(tmp_path, body)
    assert isinstance(accepted, Accepted) and accepted.approvals == "inbox"
    assert accepted.agent.config.approval_timeout == 5
    too_long = _run(tmp_path, {**body, "approval_timeout": 86_401})
    assert isinstance(too_long, Refused) and too_long.message.startswith(
        "refused approval_timeout 86401: untrusted input may wait at most 86400 seconds"
    )
    assert isinstance(_run(tmp_path, {**body, "approval_timeout": 86_401}, trusted=True), Accepted)
    for bad in ("soon", True, 0):
        refused = _run(tmp_path, {**body, "approval_timeout": bad})
        assert isinstance(refused, Refused), bad
        assert refused.message.startswith("approval_timeout must be"), refused


@pytest.fixture
def oneway(monkeypatch: pytest.MonkeyPatch) -> str:
    """A backend named ``oneway`` with no two-way protocol, for this test only
    (every built-in backend has one)."""
    monkeypatch.setitem(coding_genesis.backends._REGISTRY, "oneway", one_way_backend)
    return "oneway"


def test_a_one_way_backend_is_refused_in_the_one_check_s_words(tmp_path: Path, oneway: str) -> None:
    refused = _run(tmp_path, {"prompt": "hi", "backend": oneway, "approvals": "inbox"})
    expected = check(get_backend(oneway), AgentConfig(backend=oneway, approver=allow_tools("Read")))
    assert expected is not None and expected.option == "approver"
    assert isinstance(refused, Refused) and refused.message == expected.message
    session = read_session_request(
        orjson.dumps({"backend": oneway, "approvals": "none"}),
        _rules(tmp_path),
        inbox=lambda _timeout: allow_tools("Read"),
        history=10,
    )
    live = check(get_backend(oneway), AgentConfig(backend=oneway), "session")
    assert live is not None and isinstance(session, Refused)
    assert session.message == live.message


def test_a_session_keeps_its_data_for_a_resume(tmp_path: Path) -> None:
    read = read_session_request(
        orjson.dumps(
            {"backend": "claude", "system_prompt": "be", "approval_timeout": 7, "keep_results": 3}
        ),
        _rules(tmp_path),
        inbox=lambda _timeout: allow_tools("Read"),
        history=10,
    )
    assert isinstance(read, AcceptedSession)
    assert read.data == {
        "backend": "claude",
        "system_prompt": "be",
        "approval_timeout": 7,
        "keep_results": 3,
    }
    assert read.approval_timeout == 7 and read.keep == 3


def test_a_served_session_forks_a_session_and_a_flag_like_turn_id_is_refused(
    tmp_path: Path,
) -> None:
    def session(**body: object) -> AcceptedSession | Refused:
        return read_session_request(
            orjson.dumps({"backend": "claude", **body}),
            _rules(tmp_path),
            inbox=lambda _timeout: allow_tools("Read"),
            history=10,
        )

    forked = session(resume="s-1", fork=True, resume_at="u-1")
    assert isinstance(forked, AcceptedSession)
    request = forked.session._request
    assert (request.resume, request.fork, request.resume_at) == ("s-1", True, "u-1")
    flag = session(resume="s-1", fork=True, resume_at="--print")
    assert isinstance(flag, Refused) and "refused resume_at '--print'" in flag.message
    alone = session(resume_at="u-1")
    assert isinstance(alone, Refused) and "need resume=" in alone.message


def test_a_session_in_a_worktree_is_refused_in_the_one_check_s_words(tmp_path: Path) -> None:
    read = read_session_request(
        orjson.dumps({"isolation": "worktree", "approvals": "none"}),
        _rules(tmp_path),
        inbox=lambda _timeout: allow_tools("Read"),
        history=10,
    )
    settings = AgentConfig(backend="failer", isolation="worktree")
    expected = check(get_backend("failer"), settings, "session")
    assert expected is not None and expected.option == "isolation"
    assert isinstance(read, Refused) and read.message == expected.message


def test_a_body_never_runs_a_backend_that_always_reads_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """codex-acp's kind (its real test: ``test_an_untrusted_batch_line_never_starts_
    codex_acp_in_a_repository``): a body chooses its cwd, so untrusted input may not
    run it, a run or a session, in the words run-many uses; ``--trusted-input`` may."""
    from coding_genesis.backends.generic import GenericBackend

    class ReadsProject(GenericBackend):
        setting_sources = (("user", "project"),)
        default_setting_sources = ("user", "project")

    backend = ReadsProject("reads-project", command=[sys.executable, "-c", "pass"])
    monkeypatch.setitem(coding_genesis.backends._REGISTRY, "reads-project", lambda: backend)
    expected = untrusted_backend_problem(backend)
    assert expected is not None and "--trusted-input" in expected
    refused = _run(tmp_path, {"prompt": "hi", "backend": "reads-project"})
    assert isinstance(refused, Refused) and refused.message == expected
    session = read_session_request(
        orjson.dumps({"backend": "reads-project", "approvals": "none"}),
        _rules(tmp_path),
        inbox=lambda _timeout: allow_tools("Read"),
        history=10,
    )
    assert isinstance(session, Refused) and session.message == expected
    trusted = _run(tmp_path, {"prompt": "hi", "backend": "reads-project"}, trusted=True)
    assert isinstance(trusted, Accepted), trusted
