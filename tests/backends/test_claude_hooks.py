"""claude's hook callbacks (``ClaudeControl`` with ``hooks=``) against what the real claude wrote.

The recording ``claude_hooks`` (tests/fakes/record_claude_control.py, claude 2.1.330) is
replayed: each line claude wrote goes to ``receive``, each hook point is answered by the
same hooks and approver as when it was recorded, and every line the protocol writes must be
the one claude accepted then.  Then the cases the recording does not hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coding_genesis.approval import Decision
from coding_genesis.backends.claude import ClaudeBackend
from coding_genesis.backends.claude_control import HOOK_ID, ClaudeControl
from coding_genesis.backends.claude_hooks import CALLBACKS
from coding_genesis.control import (
    HookCall,
    Incoming,
    Outgoing,
    PermissionAsk,
    Ready,
    Reply,
    TurnEnded,
)
from coding_genesis.hooks import HOOK_EVENTS, HookEvent, HookInput, HookResult, matching
from coding_genesis.request import Request
from coding_genesis.subagents import Subagent
from tests.support import cli_request, given_session

TWOWAY = Path(__file__).parents[1] / "fakes" / "recordings" / "twoway"
ALL = frozenset(HOOK_EVENTS)
#: The events the recording registered (it predates the others).
RECORDED = frozenset({"pre_tool", "post_tool", "turn_end", "pre_compact"})


def hooker(ends: list[str], hook: HookInput) -> HookResult:
    """The hooks the recording was made with (record_claude_control.hooks)."""
    command = str(hook.input.get("command", ""))
    if hook.event == "pre_tool" and command.startswith("rm "):
        return HookResult(block=True, message="no rm here")
    if hook.event == "pre_tool" and command == "echo hi":
        return HookResult(input={**hook.input, "command": "echo changed"}, context="PRE-CTX")
    if hook.event == "post_tool":
        return HookResult(context=f"POST-CTX error={hook.error is not None}")
    if hook.event == "turn_end" and not ends:
        ends.append(hook.answer or "")
        return HookResult(block=True, message="SCENARIO:text kept going")
    if hook.event == "pre_compact" and hook.trigger == "manual" and len(ends) == 1:
        ends.append("compact refused")
        return HookResult(block=True, message="not now")
    return HookResult()


@dataclass
class Replay:
    calls: list[HookCall] = field(default_factory=list)
    meanings: list[Incoming] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)


def replay_hooks() -> Replay:
    out = Replay()
    ends: list[str] = []
    proto: ClaudeControl | None = None
    written: list[Outgoing] = []
    for line in (TWOWAY / "claude_hooks.jsonl").read_text().splitlines():
        entry = json.loads(line)
        obj = entry.get("obj")
        if entry["dir"] == ">":
            if obj.get("request", {}).get("subtype") == "initialize":
                proto = ClaudeBackend().control()
                start = cli_request(
                    cwd="/srv/rec/work", approvals=True, hooks=RECORDED, hook_wait=95
                )
                written += proto.begin(start).greeting
            elif obj["type"] == "user":
                assert proto is not None
                written += proto.begin_turn(obj["message"]["content"])
            assert written, f"the recorder wrote {obj} but the protocol wrote nothing"
            assert written.pop(0) == obj
        elif entry["dir"] == "<":
            assert proto is not None
            for meaning in proto.receive(obj):
                out.meanings.append(meaning)
                if isinstance(meaning, HookCall):
                    out.calls.append(meaning)
                    result = hooker(ends, meaning.input)
                    written += proto.answer_hook(meaning, result)
                    if meaning.ask is not None and not result.block:
                        out.asked.append(meaning.ask.request.tool)
                        written += proto.answer(
                            meaning.ask, Decision.allow(reason="recorder allows")
                        )
                elif isinstance(meaning, PermissionAsk | Reply):
                    raise AssertionError(f"unexpected {meaning!r}: every point is a hook call")
    assert written == [], "the protocol wrote more than the recorder did"
    return out


def test_every_hook_point_replays_as_claude_accepted_it() -> None:
    out = replay_hooks()
    events = [(c.input.event, c.input.tool) for c in out.calls]
    assert events == [
        ("pre_tool", "Bash"),
        ("post_tool", "Bash"),
        ("turn_end", None),
        ("turn_end", None),
        ("pre_tool", "Bash"),
        ("turn_end", None),
        ("pre_tool", "Bash"),
        ("post_tool", "Bash"),
        ("turn_end", None),
        ("pre_compact", None),
        ("pre_compact", None),
    ]
    assert out.asked == ["Bash", "Bash"]  # the blocked rm never reached the approver
    assert [m for m in out.meanings if isinstance(m, TurnEnded)] == [TurnEnded("completed")] * 5
    pre, post, end, end_again = (c.input for c in out.calls[:4])
    assert (pre.kind, pre.input["command"], pre.tool_call_id) == (
        "command",
        "echo hi",
        pre.raw["tool_use_id"],
    )
    assert pre.session_id and pre.raw["hook_event_name"] == "PreToolUse"
    assert post.output["stdout"] == "changed"  # the hook's input ran
    assert end.answer is not None and "changed" in end.answer
    assert end_again.answer == "kept going" and end_again.raw["stop_hook_active"] is True
    failed = out.calls[7].input
    assert failed.error is not None and "nonexistent-genesis-dir" in failed.error
    assert failed.raw["hook_event_name"] == "PostToolUseFailure"
    assert [c.input.trigger for c in out.calls[9:]] == ["manual", "manual"]


def test_what_claude_did_with_each_answer() -> None:
    lines = [json.loads(line) for line in (TWOWAY / "claude_hooks.jsonl").read_text().splitlines()]
    said = json.dumps([e["obj"] for e in lines if e["dir"] == "<"])
    assert "PreToolUse:Bash hook error: no rm here" in said
    assert "Stop hook feedback:\\nSCENARIO:text kept going" in said
    assert "Compaction blocked by PreCompact hook" in said
    assert '"compact_result": "success"' in said


# -- what the recording does not hold ---------------------------------------------------------


def _opened(*, approvals: bool, hooks: frozenset[HookEvent] = ALL) -> ClaudeControl:
    proto = ClaudeBackend().control()
    start = cli_request(cwd="/w", approvals=approvals, hooks=hooks, hook_wait=40)
    begun = proto.begin(start)
    (init,) = begun.greeting
    ok = {"subtype": "success", "request_id": init["request_id"], "response": {}}
    assert proto.receive({"type": "control_response", "response": ok}) == (
        Ready(given_session(begun)),
    )
    proto.begin_turn("go")
    return proto


def _callback(rid: str, event: str, **data: Any) -> dict[str, Any]:
    names = {name: callback for callback, claude in CALLBACKS.values() for name in claude}
    payload = {"hook_event_name": event, "session_id": "s1", **data}
    request = {"subtype": "hook_callback", "callback_id": names[event], "input": payload}
    return {"type": "control_request", "request_id": rid, "request": request}


def _pre(rid: str, command: str = "echo hi", call: str = "toolu_1") -> dict[str, Any]:
    tool_input = {"command": command}
    return _callback(rid, "PreToolUse", tool_name="Bash", tool_input=tool_input, tool_use_id=call)


def _answer(objects: list[Outgoing]) -> dict[str, Any]:
    (obj,) = objects
    response: dict[str, Any] = obj["response"]["response"]
    return response


def test_only_the_events_with_hooks_are_registered_with_a_timeout() -> None:
    proto = ClaudeBackend().control()
    start = cli_request(cwd="/w", hooks=frozenset({"turn_end"}), hook_wait=40)
    (init,) = proto.begin(start).greeting
    assert init["request"]["hooks"] == {
        "Stop": [{"matcher": None, "hookCallbackIds": ["genesis_stop"], "timeout": 40}]
    }
    # approvals alone: the approver's callback as before, claude's own timeout
    (init,) = ClaudeBackend().control().begin(cli_request(cwd="/w", approvals=True)).greeting
    assert init["request"]["hooks"] == {
        "PreToolUse": [{"matcher": None, "hookCallbackIds": [HOOK_ID]}]
    }


def test_a_callback_of_an_event_without_hooks_is_refused() -> None:
    proto = _opened(approvals=False, hooks=frozenset({"pre_tool"}))
    (reply,) = proto.receive(_callback("r1", "Stop", stop_hook_active=False))
    assert isinstance(reply, Reply) and reply.objects[0]["response"]["subtype"] == "error"


def test_a_pre_tool_hook_without_an_approver_leaves_claude_its_own_check() -> None:
    proto = _opened(approvals=False)
    (call,) = proto.receive(_pre("h1"))
    assert isinstance(call, HookCall) and call.ask is None
    changed = HookResult(input={"command": "echo safe"}, context="careful")
    assert _answer(proto.answer_hook(call, changed)) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "updatedInput": {"command": "echo safe"},
            "additionalContext": "careful",
        }
    }
    (call,) = proto.receive(_pre("h2", call="toolu_2"))
    assert isinstance(call, HookCall)
    assert _answer(proto.answer_hook(call, HookResult())) == {
        "hookSpecificOutput": {"hookEventName": "PreToolUse"}
    }


def test_a_blocked_call_is_denied_and_a_later_question_about_it_too() -> None:
    proto = _opened(approvals=True)
    (call,) = proto.receive(_pre("h1", "rm -rf /"))
    assert isinstance(call, HookCall) and call.ask is not None
    output = _answer(proto.answer_hook(call, HookResult(block=True, message="no")))
    specific = output["hookSpecificOutput"]
    assert (specific["permissionDecision"], specific["permissionDecisionReason"]) == ("deny", "no")
    assert proto.answer(call.ask, Decision.allow()) == []  # the question is settled
    can_use = {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "rm -rf /"}}
    obj = {
        "type": "control_request",
        "request_id": "c1",
        "request": {**can_use, "tool_use_id": "toolu_1"},
    }
    (reply,) = proto.receive(obj)
    assert isinstance(reply, Reply)
    assert reply.objects[0]["response"]["response"]["behavior"] == "deny"


def test_the_hooks_context_goes_out_with_the_approver_s_answer() -> None:
    proto = _opened(approvals=True)
    (call,) = proto.receive(_pre("h1"))
    assert isinstance(call, HookCall) and call.ask is not None
    result = HookResult(input={"command": "echo changed"}, context="ctx")
    assert proto.answer_hook(call, result) == []  # the approver answers
    ask = replace(call.ask, request=replace(call.ask.request, input={"command": "echo changed"}))
    output = _answer(proto.answer(ask, Decision.allow()))
    assert output["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {"command": "echo changed"},
        "additionalContext": "ctx",
    }
    (call,) = proto.receive(_pre("h2", call="toolu_2"))
    assert isinstance(call, HookCall) and call.ask is not None
    proto.answer_hook(call, HookResult(input={"command": "echo changed"}))
    output = _answer(proto.answer(call.ask, Decision.deny("refused")))
    assert "updatedInput" not in output["hookSpecificOutput"]  # a refusal runs nothing
    (call,) = proto.receive(_pre("h3", call="toolu_3"))
    assert isinstance(call, HookCall) and call.ask is not None
    assert proto.answer_hook(call, HookResult(context="kept")) == []
    assert proto.receive({"type": "control_cancel_request", "request_id": "h3"}) == ()
    assert proto.answer(call.ask, Decision.allow()) == []  # claude gave up on it
    assert proto._hooked == {}


def test_an_always_decision_still_runs_the_hooks() -> None:
    """After an "always" answer the next call still runs its hooks and still
    carries the question: the session's store (not the codec) settles it,
    after the hooks (tests/approval/test_remembered.py drives a session)."""
    proto = _opened(approvals=True)
    (call,) = proto.receive(_pre("h1"))
    assert isinstance(call, HookCall) and call.ask is not None
    proto.answer_hook(call, HookResult())
    proto.answer(call.ask, Decision.allow(always=True))
    (again,) = proto.receive(_pre("h2", call="toolu_2"))
    assert isinstance(again, HookCall) and again.ask is not None
    assert proto.answer_hook(again, HookResult(context="seen")) == []  # kept for the answer
    output = _answer(proto.answer(again.ask, Decision.allow(always=True)))
    assert output["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert output["hookSpecificOutput"]["additionalContext"] == "seen"


def test_post_tool_turn_end_and_compaction_answers() -> None:
    proto = _opened(approvals=False)
    post = _callback(
        "p1",
        "PostToolUse",
        tool_name="Write",
        tool_input={"file_path": "a.txt"},
        tool_response={"ok": 1},
    )
    (call,) = proto.receive(post)
    assert isinstance(call, HookCall)
    assert (call.input.kind, call.input.output, call.input.error) == ("write", {"ok": 1}, None)
    blocked = HookResult(block=True, message="bad result", context="look again")
    assert _answer(proto.answer_hook(call, blocked)) == {
        "decision": "block",
        "reason": "bad result",
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "look again"},
    }
    (stop,) = proto.receive(_callback("s1", "Stop", last_assistant_message="done"))
    assert isinstance(stop, HookCall) and stop.input.answer == "done"
    assert _answer(proto.answer_hook(stop, HookResult())) == {}
    (compact,) = proto.receive(_callback("k1", "PreCompact", trigger="auto"))
    assert isinstance(compact, HookCall) and compact.input.trigger == "auto"
    assert proto.receive({"type": "control_cancel_request", "request_id": "k1"}) == ()
    assert proto.answer_hook(compact, HookResult(block=True)) == []  # claude gave up on it
    unreadable = _callback("p2", "PostToolUse", tool_name=3)
    (reply,) = proto.receive(unreadable)
    assert isinstance(reply, Reply) and reply.objects[0]["response"]["response"] == {}


def _named(matcher: str | None) -> Any:
    def hook(data: HookInput) -> None:
        return None

    return hook if matcher is None else matching(matcher)(hook)


def _registered(**fields: Any) -> dict[str, Any]:
    (init,) = ClaudeBackend().control().begin(Request("", "/w", **fields)).greeting
    request: dict[str, Any] = init["request"]
    return request


def _matchers(hooks: dict[str, Any]) -> dict[str, Any]:
    return {event: [m["matcher"] for m in found] for event, found in hooks.items()}


def test_an_event_whose_hooks_all_name_tools_registers_their_union() -> None:
    hooks = {
        "pre_tool": [_named("Write"), _named("Edit|Write")],
        "post_tool": [_named("mcp__.*"), _named("Bash")],
    }
    assert _matchers(_registered(hooks=hooks)["hooks"]) == {
        "PreToolUse": ["Write|Edit"],
        "PostToolUse": ["(?:mcp__.*)|(?:Bash)"],  # a regex among them: each one searched
        "PostToolUseFailure": ["(?:mcp__.*)|(?:Bash)"],
    }
    # a hook for every tool, or an approver sharing the PreToolUse callback: every tool
    every = {"pre_tool": [_named("Write"), _named(None)], "post_tool": [_named("*")]}
    assert _matchers(_registered(hooks=every)["hooks"]) == {
        "PreToolUse": [None],
        "PostToolUse": [None],
        "PostToolUseFailure": [None],
    }
    shared = _registered(hooks={"pre_tool": [_named("Write")]}, approver=lambda r: True)
    assert _matchers(shared["hooks"]) == {"PreToolUse": [None]}


def test_initialize_carries_the_subagents_and_a_one_shot_run_names_them() -> None:
    reviewer = Subagent("Reviews code", "You review code.", ("Read",), "sonnet")
    definitions = {"reviewer": reviewer, "scout": Subagent("Looks", "Look.")}
    request = _registered(agents=definitions)
    assert request["agents"] == {
        "reviewer": {
            "description": "Reviews code",
            "prompt": "You review code.",
            "tools": ["Read"],
            "model": "sonnet",
        },
        "scout": {"description": "Looks", "prompt": "Look."},
    }
    assert "agents" not in _registered()
    one_shot = ClaudeBackend().build_command(Request("hi", "/w", agents=definitions))
    flags = [a for a in one_shot.args if a.startswith("--agents")]
    assert [json.loads(f.partition("=")[2]) for f in flags] == [request["agents"]]
    session = ClaudeBackend().control().command(Request("hi", "/w", agents=definitions))
    assert not any(a.startswith("--agents") for a in session.args)  # initialize says it


def test_the_prompt_subagent_and_notification_points() -> None:
    proto = _opened(approvals=False)
    (prompt,) = proto.receive(_callback("u1", "UserPromptSubmit", prompt="go"))
    assert isinstance(prompt, HookCall) and prompt.input.event == "prompt_submit"
    assert prompt.input.prompt == "go"
    refused = HookResult(block=True, message="not this", context="ctx")
    assert _answer(proto.answer_hook(prompt, refused)) == {
        "decision": "block",
        "reason": "not this",
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "ctx"},
    }
    (start,) = proto.receive(_callback("a1", "SubagentStart", agent_type="reviewer"))
    assert isinstance(start, HookCall) and (start.input.event, start.input.agent) == (
        "subagent_start",
        "reviewer",
    )
    stop_data = {"agent_type": "reviewer", "last_assistant_message": "hi"}
    (stop,) = proto.receive(_callback("a2", "SubagentStop", **stop_data))
    assert isinstance(stop, HookCall) and (stop.input.agent, stop.input.answer) == (
        "reviewer",
        "hi",
    )
    assert _answer(proto.answer_hook(stop, HookResult(block=True, message="more"))) == {
        "decision": "block",
        "reason": "more",
    }
    (note,) = proto.receive(_callback("n1", "Notification", message="Claude needs you"))
    assert isinstance(note, HookCall) and note.input.notification == "Claude needs you"
