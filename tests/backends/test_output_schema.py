"""How claude and codex are given ``output_schema=`` (one-shot and live), what
their protocols and translators make of a structured answer, and claude's own
word that it gave up on the schema."""

from __future__ import annotations

import json
from typing import Any

from coding_genesis.backends import ClaudeBackend, CodexBackend, GeminiBackend
from coding_genesis.backends.claude_control import ANSWER_TOOL, HOOK_ID
from coding_genesis.backends.codex_control import CodexControl
from coding_genesis.control import PermissionAsk, Ready, Reply
from coding_genesis.events import ResultEvent
from coding_genesis.result import RunResult
from tests.backends.test_codex_control import schema_problems
from tests.support import cli_request, given_session

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
    "additionalProperties": False,
}


def test_claude_takes_the_schema_as_json_schema_in_both_modes() -> None:
    backend = ClaudeBackend()
    assert backend.structured_output and not GeminiBackend().structured_output
    spec = backend.build_command(cli_request("hi", "/w", output_schema=SCHEMA))
    flag = '--json-schema={"type":"object","properties":{"name":{"type":"string"}},' + (
        '"required":["name"],"additionalProperties":false}'
    )
    assert flag in spec.args and spec.stdin == b"hi"
    assert not any(
        a.startswith("--json-schema") for a in backend.build_command(cli_request("hi", "/w")).args
    )
    live = backend.control().command(cli_request(cwd="/w", output_schema=SCHEMA))
    assert flag in live.args and live.stdin is None


def test_codex_exec_reads_the_schema_from_a_private_file() -> None:
    backend = CodexBackend()
    spec = backend.build_command(cli_request("hi", "/w", resume="t-1", output_schema=SCHEMA))
    at = spec.args.index("--output-schema")
    assert spec.args[at + 1] == "{overlay}/output-schema.json"
    assert at < spec.args.index("resume")  # an option of exec, before its subcommand
    assert json.loads(spec.overlay["output-schema.json"]) == SCHEMA
    assert spec.warnings == ()
    plain = backend.build_command(cli_request("hi", "/w"))
    assert "--output-schema" not in plain.args and not plain.overlay


def test_codex_warns_of_a_schema_the_openai_api_refuses_in_strict_mode() -> None:
    nested = {
        "type": "object",
        "properties": {"item": {"type": "object", "properties": {"a": {"type": "string"}}}},
        "required": ["item"],
        "additionalProperties": False,
    }
    (warning,) = (
        CodexBackend().build_command(cli_request("hi", "/w", output_schema=nested)).warnings
    )
    assert warning.startswith("output_schema at $.item is not in OpenAI's strict form")
    loose = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": False,
    }
    spec = CodexControl().command(cli_request(cwd="/w", output_schema=loose))
    assert any("output_schema at $ is not in OpenAI's strict form" in w for w in spec.warnings)


def test_codex_app_server_asks_for_the_schema_on_each_turn() -> None:
    protocol = CodexControl()
    protocol.begin(cli_request(cwd="/w", output_schema=SCHEMA))
    protocol.receive({"id": 1, "result": {}})
    protocol.receive({"id": 2, "result": {"thread": {"id": "t"}}})
    for prompt in ("one", "two"):
        (turn,) = protocol.begin_turn(prompt)
        assert turn["method"] == "turn/start" and turn["params"]["outputSchema"] == SCHEMA
        assert schema_problems(turn) == []
    free = CodexControl()
    free.begin(cli_request(cwd="/w"))
    (turn,) = free.begin_turn("x")
    assert "outputSchema" not in turn["params"]


def _opened_claude() -> Any:
    proto = ClaudeBackend().control()
    begun = proto.begin(cli_request(cwd="/w", approvals=True, output_schema=SCHEMA))
    (init,) = begun.greeting
    ok = {"subtype": "success", "request_id": init["request_id"], "response": {}}
    assert proto.receive({"type": "control_response", "response": ok}) == (
        Ready(given_session(begun)),
    )
    proto.begin_turn("go")
    return proto


def _request(rid: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "control_request", "request_id": rid, "request": body}


def test_claude_structured_answer_never_reaches_the_approver() -> None:
    proto = _opened_claude()
    call: dict[str, Any] = {
        "hook_event_name": "PreToolUse",
        "tool_name": ANSWER_TOOL,
        "tool_input": {"name": "x"},
    }
    hook = {"subtype": "hook_callback", "callback_id": HOOK_ID, "input": call}
    (reply,) = proto.receive(_request("h1", hook))
    assert isinstance(reply, Reply)
    (obj,) = reply.objects
    decision = obj["response"]["response"]["hookSpecificOutput"]["permissionDecision"]
    assert (obj["response"]["request_id"], decision) == ("h1", "allow")
    can_use = {"subtype": "can_use_tool", "tool_name": ANSWER_TOOL, "input": {"name": "x"}}
    (reply,) = proto.receive(_request("c1", can_use))
    assert isinstance(reply, Reply)
    assert reply.objects[0]["response"]["response"] == {
        "behavior": "allow",
        "updatedInput": {"name": "x"},
    }
    # any other tool still asks
    other = dict(hook, input={**call, "tool_name": "Bash", "tool_input": {"command": "ls"}})
    (ask,) = proto.receive(_request("h2", other))
    assert isinstance(ask, PermissionAsk) and ask.request.tool == "Bash"


def test_claude_result_is_the_structured_output() -> None:
    translator = ClaudeBackend().translator()
    line = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "Here you go.",
        "structured_output": {"name": "é"},
    }
    (result,) = [e for e in translator.translate(line) if isinstance(e, ResultEvent)]
    assert result.text == '{"name": "é"}' and not result.is_error


def test_claude_giving_up_on_the_schema_reads_as_invalid_output() -> None:
    gave_up = RunResult(
        status=1,
        message="Failed to provide valid structured output after 5 attempts",
        is_error=True,
        result_subtype="error_max_structured_output_retries",
    )
    assert ClaudeBackend().failure_hint(gave_up) == "invalid_output"
    other = gave_up.model_copy(update={"result_subtype": "error_max_turns"})
    assert ClaudeBackend().failure_hint(other) is None
