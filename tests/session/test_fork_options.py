"""A session's fork (issue 41): the options ``fork=`` and ``resume_at=`` checked
(``Request.build``, the untrusted-input rules, the capability check's ``fork``
row), each CLI's opening of a fork (claude's ``--fork-session`` and
``--resume-session-at``, codex's ``thread/fork`` with ``lastTurnId``) and the
turn id each result carries (``RunResult.turn_id``), which a fork resumes at;
and a sync session's ``context_usage()`` and ``compact()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_genesis import AgentConfig, CodingGenesisAgent, ConfigError, RefusedError
from coding_genesis.backends.claude import ClaudeBackend
from coding_genesis.backends.codex_control import CodexControl
from coding_genesis.capabilities import untrusted_problem
from coding_genesis.control import Ready, Reply
from coding_genesis.events import ResultEvent
from coding_genesis.request import LIVE_OPTION_NAMES, Request
from tests.support import FAKE_BIN, cli_request

SID = "0f0f0f0f-0000-4000-8000-000000000000"


def _build(**options: Any) -> Request:
    return Request.build(
        AgentConfig(backend="claude"),
        "",
        options,
        cwd="/",
        backend="claude",
        names=LIVE_OPTION_NAMES,
        called="session()",
        session=True,
    )


def test_fork_and_resume_at_are_checked() -> None:
    forked = _build(resume=SID, fork=True, resume_at="uuid-1")
    assert (forked.resume, forked.fork, forked.resume_at) == (SID, True, "uuid-1")
    assert _build(resume=SID).fork is False
    cases: list[tuple[dict[str, Any], str]] = [
        ({"fork": True}, "need resume="),
        ({"resume": SID, "resume_at": "u"}, "resume_at= needs fork=True"),
        ({"resume": SID, "fork": "yes"}, "fork must be True or False"),
        ({"resume": SID, "fork": True, "resume_at": "--print"}, "invalid turn id"),
        ({"resume": SID, "fork": True, "resume_at": ""}, "invalid turn id"),
    ]
    for options, words in cases:
        with pytest.raises(ConfigError, match=words):
            _build(**options)


def test_a_turn_id_that_reads_as_a_flag_is_refused_from_untrusted_input() -> None:
    refused = untrusted_problem({"prompt": "p", "resume": SID, "fork": True, "resume_at": "-x"})
    assert refused is not None and "refused resume_at '-x'" in refused
    assert untrusted_problem({"prompt": "p", "resume": SID, "fork": True, "resume_at": "u"}) is None


def test_a_backend_that_cannot_fork_refuses_a_forked_session(tmp_path: Path) -> None:
    agent = CodingGenesisAgent("qwen", cli_path=str(FAKE_BIN / "qwen"), cwd=str(tmp_path))
    with pytest.raises(RefusedError, match="backend 'qwen' cannot fork a session"):
        agent.session(resume=SID, fork=True)


def test_claude_forks_in_a_new_process_with_a_session_id_of_ours() -> None:
    proto = ClaudeBackend().control()
    begun = proto.begin(cli_request(resume=SID, fork=True, resume_at="uuid-7"))
    args = begun.command.args
    assert f"--resume={SID}" in args and "--fork-session" in args
    assert "--resume-session-at=uuid-7" in args
    (given,) = [a for a in args if a.startswith("--session-id=")]
    assert given.removeprefix("--session-id=") != SID  # the fork's own id
    plain = ClaudeBackend().control().begin(cli_request(resume=SID)).command.args
    assert "--fork-session" not in plain and not any(a.startswith("--session-id") for a in plain)


def test_codex_opens_a_fork_with_thread_fork() -> None:
    proto = CodexControl()
    proto.begin(cli_request(resume="t1", fork=True, resume_at="turn-1"))
    (reply,) = proto.receive({"id": 1, "result": {}})
    assert isinstance(reply, Reply)
    opening = reply.objects[1]
    assert opening["method"] == "thread/fork"
    assert opening["params"]["threadId"] == "t1" and opening["params"]["lastTurnId"] == "turn-1"
    assert proto.receive({"id": 2, "result": {"thread": {"id": "t2"}}}) == (Ready("t2"),)
    assert proto.thread_id == "t2"
    resumed = CodexControl()
    resumed.begin(cli_request(resume="t1"))
    (reply,) = resumed.receive({"id": 1, "result": {}})
    assert isinstance(reply, Reply) and reply.objects[1]["method"] == "thread/resume"
    assert "lastTurnId" not in reply.objects[1]["params"]


def test_each_result_names_its_turn() -> None:
    codex = CodexControl().translator()
    done = {"threadId": "t", "turn": {"id": "turn-9", "status": "completed"}}
    (result,) = codex.translate({"method": "turn/completed", "params": done})
    assert isinstance(result, ResultEvent) and result.turn_id == "turn-9"
    claude = ClaudeBackend().control().translator()
    for line_id in ("a-1", "a-2"):
        claude.translate(
            {
                "type": "assistant",
                "uuid": line_id,
                "message": {"content": [{"type": "text", "text": "x"}]},
            }
        )
    events = claude.translate({"type": "result", "subtype": "success", "result": "x"})
    (result,) = [e for e in events if isinstance(e, ResultEvent)]
    assert result.turn_id == "a-2"  # the turn's last assistant line
    fresh = ClaudeBackend().control().translator()
    events = fresh.translate({"type": "result", "subtype": "success", "result": "x"})
    (result,) = [e for e in events if isinstance(e, ResultEvent)]
    assert result.turn_id is None and "turn_id" not in result.to_dict()


def test_a_sync_session_says_its_context_and_compacts(tmp_path: Path) -> None:
    agent = CodingGenesisAgent(
        "failer", cwd=str(tmp_path), timeout=20, options={"state_dir": str(tmp_path / "s")}
    )
    with agent.session_sync() as session:
        assert session.send_result("hello").status == 0
        assert session.context_usage().used == 25  # the failer: 25 a prompt
        compacted = session.compact()
        assert compacted.status == 0 and "Compacted" in compacted.message
        assert session.context_usage().used == 0
