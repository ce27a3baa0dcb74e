"""claude's control protocol (``ClaudeControl``) against what the real claude wrote.

The recordings (tests/fakes/recordings/twoway, made by tests/fakes/record_claude_control.py
with claude 2.1.330) are replayed: each line claude wrote goes to ``receive``; each line the
recorder wrote must be exactly what the protocol writes again (claude accepted those); the
meanings must say what happened.  Then the hostile cases: garbage, unknown ids, wrong types.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.backend import Translator
from coding_genesis.backends.claude import ClaudeBackend
from coding_genesis.backends.claude_control import HOOK_ID, SESSION_FLAGS, ClaudeControl
from coding_genesis.control import (
    FORWARD,
    Forward,
    Incoming,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    Ready,
    Reply,
    TurnEnded,
    Unknown,
    UnparsedLine,
)
from coding_genesis.events import Event, ResultEvent, TextEvent, ToolResultEvent
from tests.support import cli_request, given_session

TWOWAY = Path(__file__).parents[1] / "fakes" / "recordings" / "twoway"
Decide = Callable[[ApprovalRequest], Decision]


def _allow(request: ApprovalRequest) -> Decision:
    return Decision.allow(reason="recorder allows")


@dataclass
class Replay:
    meanings: list[Incoming] = field(default_factory=list)
    asks: list[PermissionAsk] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    sent: int = 0
    #: The conversation id each opening gave claude (what its Ready names).
    given: list[str | None] = field(default_factory=list)


def replay(name: str, decide: Decide = _allow) -> Replay:
    """Feed claude's lines to a protocol, answer its asks with ``decide``, and check that
    every line it writes is the one the recorder wrote (and claude accepted)."""
    out = Replay()
    proto: ClaudeControl | None = None
    written: list[Outgoing] = []
    translator: Translator = ClaudeBackend().translator()
    for line in (TWOWAY / f"claude_{name}.jsonl").read_text().splitlines():
        entry = json.loads(line)
        obj = entry.get("obj")
        if entry["dir"] == ">":
            request = obj.get("request", {})
            if request.get("subtype") == "initialize":
                proto = ClaudeBackend().control()
                approvals = request.get("hooks") is not None
                begun = proto.begin(cli_request(cwd="/srv/rec/work", approvals=approvals))
                out.given.append(given_session(begun))
                written += begun.greeting
            elif obj["type"] == "user":
                assert proto is not None
                written += proto.begin_turn(obj["message"]["content"])
                translator = proto.translator()
            elif request.get("subtype") == "interrupt":
                assert proto is not None
                written += proto.interrupt()
            assert written, f"the recorder wrote {obj} but the protocol wrote nothing"
            assert written.pop(0) == obj
            out.sent += 1
        elif entry["dir"] == "<":
            assert proto is not None
            for meaning in proto.receive(obj):
                out.meanings.append(meaning)
                if isinstance(meaning, PermissionAsk):
                    out.asks.append(meaning)
                    written += proto.answer(meaning, decide(meaning.request))
                elif isinstance(meaning, Reply):
                    written += meaning.objects
                elif meaning is FORWARD:
                    out.events += translator.translate(obj)
    assert written == [], "the protocol wrote more than the recorder did"
    return out


def ends(out: Replay) -> list[TurnEnded]:
    return [m for m in out.meanings if isinstance(m, TurnEnded)]


def results(out: Replay) -> list[ResultEvent]:
    return [e for e in out.events if isinstance(e, ResultEvent)]


# -- the recordings ---------------------------------------------------------------------


def test_two_turns_in_one_process() -> None:
    out = replay("two_turns")
    assert [m for m in out.meanings if isinstance(m, Ready)] == [Ready(s) for s in out.given]
    assert len(out.given) == 1
    assert ends(out) == [TurnEnded("completed"), TurnEnded("completed")]
    texts = [e.text for e in out.events if isinstance(e, TextEvent)]
    assert texts == ["first answer", "second answer"]
    assert [r.is_error for r in results(out)] == [False, False]
    assert out.asks == []


def test_an_approved_write_is_asked_once_through_the_hook() -> None:
    out = replay("write_approved")
    (ask,) = out.asks
    request = ask.request
    assert (request.tool, request.kind) == ("Write", "write")
    assert request.paths == ("/srv/rec/work/approved.txt",)
    assert request.input == {"file_path": "/srv/rec/work/approved.txt", "content": "hello\n"}
    assert request.tool_call_id is not None and request.tool_call_id.startswith("toolu_")
    assert request.session_id is not None
    assert ends(out) == [TurnEnded("completed")] * 2


def test_a_refused_write_lets_the_turn_go_on() -> None:
    out = replay("write_refused", lambda r: Decision.deny("no writes here"))
    assert len(out.asks) == 1
    refusals = [e for e in out.events if isinstance(e, ToolResultEvent) and e.is_error]
    assert "no writes here" in refusals[0].output
    first = results(out)[0]
    assert first.text is not None and "no writes here" in first.text
    assert ends(out) == [TurnEnded("completed")] * 2


def test_a_refusal_that_ends_the_turn() -> None:
    out = replay("write_end_turn", lambda r: Decision.deny("stop right there", end_turn=True))
    assert ends(out) == [TurnEnded("interrupted", "stop right there"), TurnEnded("completed")]
    assert results(out)[0].terminal_reason == "hook_stopped"


def test_an_allow_with_changed_input() -> None:
    def change(request: ApprovalRequest) -> Decision:
        return Decision.allow({**request.input, "content": "changed by the approver\n"})

    out = replay("write_changed_input", change)
    assert len(out.asks) == 1
    notes = (TWOWAY / "claude_write_changed_input.jsonl").read_text()
    assert "changed.txt after the turn: 'changed by the approver\\\\n'" in notes


def test_a_plain_echo_reaches_the_approver() -> None:
    (ask,) = replay("echo").asks
    assert (ask.request.tool, ask.request.kind, ask.request.command) == (
        "Bash",
        "command",
        "echo hi",
    )
    assert ask.request.reason is None


def test_without_approvals_claude_asks_with_its_reason() -> None:
    seen: list[ApprovalRequest] = []

    def deny(request: ApprovalRequest) -> Decision:
        seen.append(request)
        return Decision.deny("not without an approver", end_turn=len(seen) > 1)

    out = replay("ask_without_approvals", deny)
    assert [r.command for r in seen] == [
        "python3 -c 'import time; time.sleep(1)'",
        "python3 -c 'import time; time.sleep(2)'",
    ]
    assert seen[0].reason == "This command requires approval"
    # claude offered its own "always allow" rules (permission_suggestions): they
    # are never handed back (test_allow_always_never_hands_claude_its_suggestions)
    assert ends(out) == [
        TurnEnded("completed"),
        TurnEnded("completed"),
        TurnEnded("interrupted", "not without an approver"),
    ]
    assert results(out)[2].subtype == "error_during_execution"


def test_an_interrupt_ends_the_turn_and_the_next_one_works() -> None:
    out = replay("interrupt")
    assert ends(out) == [TurnEnded("interrupted"), TurnEnded("completed")]
    assert [r.subtype for r in results(out)] == ["error_during_execution", "success"]
    notes = (TWOWAY / "claude_interrupt.jsonl").read_text()
    assert "sleeping python alive 1 s after the turn's end: False" in notes


def test_resume_in_a_second_process() -> None:
    out = replay("resume")
    assert [m for m in out.meanings if isinstance(m, Ready)] == [Ready(s) for s in out.given]
    assert len(out.given) == 2
    first, second = results(out)
    assert first.session_id == second.session_id
    spec = ClaudeBackend().control().command(cli_request(cwd="/w", resume=first.session_id))
    assert f"--resume={first.session_id}" in spec.args


def test_resume_of_an_unknown_session_is_a_fatal_fault() -> None:
    out = replay("resume_unknown")
    (fault,) = out.meanings
    assert isinstance(fault, ProtocolFault) and fault.fatal
    assert "No conversation found" in fault.message


# -- the command ------------------------------------------------------------------------


def test_the_command_is_the_one_shot_run_s_in_stream_json() -> None:
    backend = ClaudeBackend()
    start = cli_request(
        cwd="/w",
        model="m",
        permissions="read-only",
        approvals=True,
        max_turns=3,
        cli_max_retries=2,
        options={"append_system_prompt": "be brief"},
        extra_args=("--x",),
    )
    spec = backend.control().command(start)
    assert spec.args[: len(SESSION_FLAGS)] == SESSION_FLAGS
    assert "-p" not in spec.args
    assert spec.stdin is None
    assert spec.env == {"CLAUDE_CODE_MAX_RETRIES": "2", "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1"}
    (session_id,) = [a for a in spec.args if a.startswith("--session-id=")]
    assert spec.args.index(session_id) == len(SESSION_FLAGS)  # a new conversation: our id
    assert "CLAUDECODE" in spec.unset_env
    assert spec.args[-1] == "--x"
    for flag in (
        "--model=m",
        "--max-turns=3",
        "--permission-mode=default",
        "--disallowedTools=Bash,Edit,Write,MultiEdit,NotebookEdit",
        "--append-system-prompt=be brief",
    ):
        assert flag in spec.args


def test_hooks_only_with_approvals() -> None:
    (init,) = ClaudeBackend().control().begin(cli_request(cwd="/w")).greeting
    assert init["request"] == {"subtype": "initialize", "hooks": None}
    (init,) = ClaudeBackend().control().begin(cli_request(cwd="/w", approvals=True)).greeting
    hooks = init["request"]["hooks"]
    assert hooks == {"PreToolUse": [{"matcher": None, "hookCallbackIds": [HOOK_ID]}]}


# -- hostile and odd messages -----------------------------------------------------------


def _opened(approvals: bool = True) -> ClaudeControl:
    proto = ClaudeBackend().control()
    begun = proto.begin(cli_request(cwd="/w", approvals=approvals))
    (init,) = begun.greeting
    ok = {"subtype": "success", "request_id": init["request_id"], "response": {}}
    assert proto.receive({"type": "control_response", "response": ok}) == (
        Ready(given_session(begun)),
    )
    proto.begin_turn("go")
    return proto


def _hook(rid: str, tool: str = "Bash", tool_input: Any = None, call: str = "toolu_1") -> Any:
    data: dict[str, Any] = {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_use_id": call}
    data["tool_input"] = {"command": "echo hi"} if tool_input is None else tool_input
    request = {"subtype": "hook_callback", "callback_id": HOOK_ID, "input": data}
    return {
        "type": "control_request",
        "request_id": rid,
        "request": {**request, "tool_use_id": call},
    }


def _can_use(rid: str, tool: Any = "Bash", call: str = "toolu_1", **extra: Any) -> Any:
    request = {"subtype": "can_use_tool", "tool_name": tool, "input": {"command": "echo hi"}}
    return {
        "type": "control_request",
        "request_id": rid,
        "request": {**request, "tool_use_id": call, **extra},
    }


def _reply(meanings: Any) -> dict[str, Any]:
    (reply,) = meanings
    assert isinstance(reply, Reply)
    (obj,) = reply.objects
    assert obj["type"] == "control_response"
    response: dict[str, Any] = obj["response"]
    return response


@pytest.mark.parametrize(
    "obj",
    [
        {"type": "control_request"},
        {"type": "control_request", "request_id": 5, "request": {"subtype": "can_use_tool"}},
        {"type": "control_request", "request_id": "", "request": {}},
        {"type": "control_request", "request_id": "r", "request": "can_use_tool"},
        {"type": "control_response"},
        {"type": "control_response", "response": []},
        {"type": "control_response", "response": {"subtype": "success", "request_id": "nope"}},
        {"type": "control_response", "response": {"subtype": "success", "request_id": ["x"]}},
    ],
)
def test_a_malformed_control_message_is_a_fault(obj: dict[str, Any]) -> None:
    (fault,) = _opened().receive(obj)
    assert isinstance(fault, ProtocolFault) and not fault.fatal


def test_error_answers_to_our_requests() -> None:
    proto = ClaudeBackend().control()
    (init,) = proto.begin(cli_request(cwd="/w")).greeting
    error = {"subtype": "error", "request_id": init["request_id"], "error": "bad hooks"}
    (fault,) = proto.receive({"type": "control_response", "response": error})
    assert fault == ProtocolFault("claude refused initialize: bad hooks", True)
    proto = _opened()
    (interrupt,) = proto.interrupt()
    error = {"subtype": "error", "request_id": interrupt["request_id"], "error": "no"}
    # a refused interrupt: the turn had ended by itself (a race), nothing is broken
    assert proto.receive({"type": "control_response", "response": error}) == ()
    # the same answer again is an answer to an id no longer pending
    (again,) = proto.receive({"type": "control_response", "response": error})
    assert isinstance(again, ProtocolFault)
    # a fault quotes a bounded part of claude's words
    fresh = ClaudeBackend().control()
    (init,) = fresh.begin(cli_request(cwd="/w")).greeting
    error = {"subtype": "error", "request_id": init["request_id"], "error": "x" * 10**6}
    (fault,) = fresh.receive({"type": "control_response", "response": error})
    assert isinstance(fault, ProtocolFault) and len(fault.message) < 1000
    huge = {"subtype": "success", "request_id": "y" * 10**6}
    (fault,) = proto.receive({"type": "control_response", "response": huge})
    assert isinstance(fault, ProtocolFault) and len(fault.message) < 1000


@pytest.mark.parametrize(
    "request_body",
    [
        {"subtype": "mcp_message", "server_name": "s", "message": {"jsonrpc": "2.0", "id": 1}},
        {"subtype": "rewind_everything"},
        {"subtype": None},
        {"subtype": "hook_callback", "callback_id": "someone_else", "input": {}},
        {"subtype": "hook_callback", "callback_id": HOOK_ID, "input": "x"},
        {"subtype": "hook_callback", "callback_id": HOOK_ID, "input": {"hook_event_name": "Stop"}},
    ],
)
def test_requests_we_do_not_serve_get_an_error(request_body: dict[str, Any]) -> None:
    obj = {"type": "control_request", "request_id": "r9", "request": request_body}
    response = _reply(_opened().receive(obj))
    assert (response["subtype"], response["request_id"]) == ("error", "r9")


def test_an_unreadable_tool_call_is_refused_not_asked() -> None:
    proto = _opened()
    response = _reply(proto.receive(_hook("h1", tool_input=["not", "a", "dict"])))
    decision = response["response"]["hookSpecificOutput"]["permissionDecision"]
    assert (response["subtype"], decision) == ("success", "deny")
    response = _reply(proto.receive(_can_use("c1", tool=None)))
    assert response["response"]["behavior"] == "deny"


@pytest.mark.parametrize(
    ("tool", "tool_input", "path"),
    [
        ("Write", {"file_path": "/w/a.txt", "content": "x"}, "/w/a.txt"),
        ("Edit", {"file_path": "/w/a.txt", "old_string": "a", "new_string": "b"}, "/w/a.txt"),
        ("MultiEdit", {"file_path": "/w/a.txt", "edits": [{"old_string": "a"}]}, "/w/a.txt"),
        ("NotebookEdit", {"notebook_path": "/w/n.ipynb", "new_source": "1"}, "/w/n.ipynb"),
    ],
)
def test_each_write_tool_names_its_file(tool: str, tool_input: dict[str, Any], path: str) -> None:
    ask = _opened().receive(_hook("h1", tool=tool, tool_input=tool_input))
    (question,) = ask
    assert isinstance(question, PermissionAsk)
    request = question.request
    assert (request.kind, request.paths, request.unreadable) == ("write", (path,), None)


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Write", {"content": "x"}),  # no path at all
        ("Write", {"file_path": ["/w/a", "/etc/x"], "content": "x"}),
        ("Edit", {"file_path": 7}),
        ("MultiEdit", {"file_path": ""}),
        ("NotebookEdit", {"file_path": "/w/n.ipynb"}),  # not the field NotebookEdit names
    ],
)
def test_a_write_whose_path_is_not_one_is_unreadable(tool: str, tool_input: dict[str, Any]) -> None:
    for message in (_hook("h1", tool=tool, tool_input=tool_input), _can_use("c1", tool=tool)):
        if message["request"]["subtype"] == "can_use_tool":
            message["request"]["input"] = tool_input
        (question,) = _opened().receive(message)
        assert isinstance(question, PermissionAsk)
        assert question.request.kind == "write" and question.request.unreadable, question


def test_other_lines_are_forwarded_and_unknown_control_types_counted() -> None:
    proto = _opened()
    for obj in ({}, {"type": ["x"]}, {"type": "keep_alive"}, {"type": "stream_event"}):
        assert proto.receive(obj) == (FORWARD,)
    assert proto.receive({"type": "control_shrug"}) == (Unknown("control_shrug"),)


def test_one_tool_call_is_never_asked_twice() -> None:
    proto = _opened()
    (ask,) = proto.receive(_hook("h1"))
    assert isinstance(ask, PermissionAsk)
    assert proto.answer(ask, Decision.allow({"command": "echo safer"}))
    assert proto.answer(ask, Decision.deny()) == []  # answered already
    # claude asking again about the same call gets the hook's answer, unasked
    response = _reply(proto.receive(_can_use("c1")))
    assert response["response"] == {"behavior": "allow", "updatedInput": {"command": "echo safer"}}


def test_a_cancelled_question_is_not_answered() -> None:
    proto = _opened()
    (ask,) = proto.receive(_hook("h1"))
    assert isinstance(ask, PermissionAsk)
    assert proto.receive({"type": "control_cancel_request", "request_id": "h1"}) == ()
    assert proto.answer(ask, Decision.allow()) == []
    assert proto.receive({"type": "control_cancel_request", "request_id": 7}) == ()


def test_the_codec_asks_every_call_always_answers_included() -> None:
    """ "Always" is the session's store (tests/approval/test_remembered.py):
    the codec keeps none, so every later call is a question of its own."""
    proto = _opened()
    (ask,) = proto.receive(_hook("h1"))
    assert isinstance(ask, PermissionAsk)
    proto.answer(ask, Decision.allow({"command": "echo once"}, always=True))
    proto.begin_turn("again")
    (again,) = proto.receive(_hook("h2", call="toolu_2"))
    assert isinstance(again, PermissionAsk) and again.request.command == "echo hi"
    (other,) = proto.receive(_hook("h3", tool_input={"command": "rm -rf x"}, call="toolu_3"))
    assert isinstance(other, PermissionAsk)
    proto.answer(other, Decision.deny("never", always=True, end_turn=True))
    (asked,) = proto.receive(_can_use("c4", call="toolu_4"))
    assert isinstance(asked, PermissionAsk)


def test_allow_always_never_hands_claude_its_suggestions() -> None:
    proto = _opened(approvals=False)
    rule = {"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow"}
    (ask,) = proto.receive(_can_use("c1", permission_suggestions=[rule], blocked_path="/etc/x"))
    assert isinstance(ask, PermissionAsk)
    assert ask.request.reason == "blocked path: /etc/x"
    (obj,) = proto.answer(ask, Decision.allow(always=True))
    # claude's rule ("Bash", every command) is wider than what was asked: never handed back
    assert obj["response"]["response"] == {
        "behavior": "allow",
        "updatedInput": {"command": "echo hi"},
    }


def test_a_result_ends_the_turn_as_completed_or_interrupted() -> None:
    proto = _opened()
    assert proto.receive({"type": "result", "subtype": "success"}) == (
        FORWARD,
        TurnEnded("completed"),
    )
    proto.begin_turn("next")
    proto.interrupt()
    assert proto.receive({"type": "result"}) == (FORWARD, TurnEnded("interrupted"))
    proto.begin_turn("and next")
    assert proto.receive({"type": "result"}) == (FORWARD, TurnEnded("completed"))


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(
    ["type", "request_id", "request", "response", "subtype", "input", "tool_name", "callback_id"]
)
_types = st.sampled_from(
    ["control_request", "control_response", "control_cancel_request", "result", "system"]
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    kind=_types,
    body=st.dictionaries(_keys, _json | st.dictionaries(_keys, _json, max_size=5), max_size=5),
)
def test_receive_never_raises(kind: str, body: dict[str, Any]) -> None:
    proto = _opened()
    for meaning in proto.receive({**body, "type": kind}):
        if isinstance(meaning, PermissionAsk):
            proto.answer(meaning, Decision.deny())


# -- a line too deep to parse, answered from what could be read of it ----------------------


def _unread(**fields: Any) -> UnparsedLine:
    return UnparsedLine({tuple(k.split("__")): v for k, v in fields.items()})


def test_an_unparsed_tool_question_is_denied_as_unreadable() -> None:
    for subtype, callback, answer_key in (
        ("hook_callback", HOOK_ID, "hookSpecificOutput"),
        ("can_use_tool", None, "behavior"),
    ):
        proto = _opened()
        line = _unread(
            type="control_request",
            request_id="r9",
            request__subtype=subtype,
            request__callback_id=callback,
            request__tool_name="Workflow",
            request__tool_use_id="toolu_9",
        )
        (ask,) = proto.unparsed(line)
        assert isinstance(ask, PermissionAsk)
        assert (ask.request.tool, ask.request.tool_call_id) == ("Workflow", "toolu_9")
        assert ask.request.unreadable and "too deep" in ask.request.unreadable
        (answer,) = proto.answer(ask, Decision.deny("unread"))
        response = answer["response"]["response"]
        assert response[answer_key] in (
            {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "unread",
            },
            "deny",
        )


def test_an_unparsed_request_of_another_kind_is_answered_unasked() -> None:
    proto = _opened()
    observed = _unread(
        type="control_request",
        request_id="r1",
        request__subtype="hook_callback",
        request__callback_id="genesis_post_tool_use",
    )
    assert _reply(proto.unparsed(observed)) == {
        "subtype": "success",
        "request_id": "r1",
        "response": {},
    }
    other = _unread(type="control_request", request_id="r2", request__subtype="mcp_message")
    response = _reply(proto.unparsed(other))
    assert response["subtype"] == "error" and "could not read" in response["error"]
    (fault,) = proto.unparsed(_unread(type="control_request"))
    assert isinstance(fault, ProtocolFault)
    assert proto.unparsed(_unread(type="assistant")) == ()
    assert proto.unparsed(_unread()) == ()


def test_an_unparsed_result_ends_the_turn_with_what_was_read() -> None:
    proto = _opened()
    line = _unread(
        type="result",
        subtype="success",
        is_error=False,
        result="the answer",
        usage__input_tokens=3,
    )
    forward, ended = proto.unparsed(line)
    assert isinstance(forward, Forward) and forward.obj is not None
    assert forward.obj == {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "the answer",
        "usage": {"input_tokens": 3},
    }
    assert ended == TurnEnded("completed")


def test_an_always_answer_never_settles_a_call_it_cannot_read() -> None:
    proto = _opened()
    (ask,) = proto.receive(
        _hook("h1", tool="Write", tool_input={"file_path": "/w/a", "content": "x"})
    )
    assert isinstance(ask, PermissionAsk)
    proto.answer(ask, Decision.allow(always=True))
    unread = {"file_path": ["/w/a", "/etc/x"], "content": "x"}
    (again,) = proto.receive(_hook("h2", tool="Write", tool_input=unread, call="toolu_2"))
    assert isinstance(again, PermissionAsk) and again.request.unreadable  # denied, not "always"
