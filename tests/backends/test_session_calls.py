"""The codecs' side of a session's context (issue 41): claude's
``get_context_usage`` call and its answers, codex's ``thread/compact/start``
call and the context's use it reports by itself, an ACP agent's
``usage_update`` where its backend says it reports one, and each CLI's compaction
as a ``CompactionEvent`` (claude's ``compact_boundary``, codex's
``contextCompaction`` item: ``manual`` when we asked for it)."""

from __future__ import annotations

from typing import Any

import pytest

from coding_genesis import AcpBackend, ConfigError, ContextUsage
from coding_genesis.backend import CommandSpec
from coding_genesis.backends import available_backends, get_backend
from coding_genesis.backends.acp import AcpAgent, AcpControl, ReportingAcpControl
from coding_genesis.backends.claude import ClaudeBackend
from coding_genesis.backends.codex_control import CodexControl
from coding_genesis.capabilities import session_refusal
from coding_genesis.control import Answered, ControlIntent, ProtocolFault
from coding_genesis.events import CompactionEvent
from tests.backends.test_acp_codec import opened
from tests.support import cli_request, given_session


def _claude() -> Any:
    proto = ClaudeBackend().control()
    begun = proto.begin(cli_request(cwd="/w"))
    (init,) = begun.greeting
    ok = {"subtype": "success", "request_id": init["request_id"], "response": {}}
    assert proto.receive({"type": "control_response", "response": ok})
    assert given_session(begun)
    return proto


def _answer(rid: str, **response: Any) -> dict[str, Any]:
    return {"type": "control_response", "response": {"request_id": rid, **response}}


def test_claude_asks_its_context_use_and_reads_the_answer() -> None:
    proto = _claude()
    key, (obj,) = proto.call(ControlIntent("context_usage"))
    assert obj["request"] == {"subtype": "get_context_usage", "detail": "summary"}
    assert key == obj["request_id"]
    said = {"totalTokens": 1234, "maxTokens": 200000, "percentage": 0.6, "categories": []}
    (answered,) = proto.receive(_answer(key, subtype="success", response=said))
    assert answered == Answered(key, ContextUsage(1234, 200000, "claude get_context_usage"))


@pytest.mark.parametrize(
    ("response", "error"),
    [
        ({"subtype": "error", "error": "not supported"}, "not supported"),
        ({"subtype": "success", "response": {"maxTokens": 9}}, "answered no totalTokens"),
        ({"subtype": "success", "response": "no object"}, "answered no totalTokens"),
        ({"subtype": "success", "response": {"totalTokens": True}}, "answered no totalTokens"),
    ],
)
def test_claude_s_refusal_or_an_unreadable_answer_is_an_error_answer(
    response: dict[str, Any], error: str
) -> None:
    proto = _claude()
    key, _ = proto.call(ControlIntent("context_usage"))
    (answered,) = proto.receive(_answer(key, **response))
    assert isinstance(answered, Answered) and answered.result is None
    assert answered.error is not None and error in answered.error
    # Answered once: a second answer is a request we never sent.
    (again,) = proto.receive(_answer(key, subtype="success", response={"totalTokens": 1}))
    assert isinstance(again, ProtocolFault)


def test_claude_has_no_call_it_does_not_know() -> None:
    with pytest.raises(NotImplementedError, match="cannot fly"):
        _claude().call(ControlIntent("fly"))


def test_claude_s_compact_boundary_is_a_compaction_event() -> None:
    translator = ClaudeBackend().control().translator()
    meta = {"trigger": "manual", "pre_tokens": 4321}
    line = {"type": "system", "subtype": "compact_boundary", "compact_metadata": meta}
    (event,) = translator.translate(line)
    assert isinstance(event, CompactionEvent)
    assert (event.trigger, event.tokens_before) == ("manual", 4321)
    bare = translator.translate({"type": "system", "subtype": "compact_boundary"})
    assert [(e.trigger, e.tokens_before) for e in bare] == [("auto", None)]  # type: ignore[attr-defined]


def _codex() -> CodexControl:
    proto = CodexControl()
    proto.begin(cli_request(cwd="/w"))
    proto.receive({"id": 1, "result": {}})
    proto.receive({"id": 2, "result": {"thread": {"id": "t"}}})
    return proto


def _usage(last: Any, window: Any = 258400) -> dict[str, Any]:
    total = {"inputTokens": 50, "outputTokens": 10, "cachedInputTokens": 0, "totalTokens": 60}
    usage = {"total": total, "last": last, "modelContextWindow": window}
    return {
        "method": "thread/tokenUsage/updated",
        "params": {"threadId": "t", "turnId": "u", "tokenUsage": usage},
    }


def test_codex_says_its_context_use_from_its_last_report() -> None:
    proto = _codex()
    assert proto.context_said() == ContextUsage(0, None, "codex: no model request yet")
    proto.receive(_usage({"inputTokens": 12, "outputTokens": 7, "totalTokens": 19}))
    assert proto.context_said() == ContextUsage(19, 258400, "codex thread/tokenUsage/updated")
    proto.receive(_usage({"totalTokens": 40}, window=None))
    assert proto.context_said() == ContextUsage(40, None, "codex thread/tokenUsage/updated")
    proto.receive(_usage({"totalTokens": -3}))  # nonsense: not a use, the last one holds
    assert proto.context_said() == ContextUsage(40, None, "codex thread/tokenUsage/updated")


def test_codex_compacts_by_a_call_answered_at_once() -> None:
    with pytest.raises(ValueError, match="not open yet"):
        CodexControl().call(ControlIntent("compact"))
    with pytest.raises(NotImplementedError, match="cannot fly"):
        _codex().call(ControlIntent("fly"))
    proto = _codex()
    key, (obj,) = proto.call(ControlIntent("compact"))
    assert (obj["method"], obj["params"], obj["id"]) == (
        "thread/compact/start",
        {"threadId": "t"},
        key,
    )
    assert proto.receive({"id": key, "result": {}}) == (Answered(key, {}),)
    key, _ = proto.call(ControlIntent("compact"))
    (refused,) = proto.receive({"id": key, "error": {"code": -32600, "message": "busy"}})
    assert isinstance(refused, Answered) and refused.error is not None
    assert "refused thread/compact/start" in refused.error and "busy" in refused.error


def _compaction(done: bool) -> dict[str, Any]:
    item = {"type": "contextCompaction", "id": "c1"}
    method = "item/completed" if done else "item/started"
    return {"method": method, "params": {"threadId": "t", "turnId": "v", "item": item}}


def test_codex_s_compaction_is_manual_when_asked_for_and_auto_otherwise() -> None:
    proto = _codex()
    translator = proto.translator()
    assert translator.translate(_compaction(False)) == ()
    (auto,) = translator.translate(_compaction(True))
    assert isinstance(auto, CompactionEvent) and auto.trigger == "auto"
    key, _ = proto.call(ControlIntent("compact"))
    proto.receive({"id": key, "result": {}})
    began = proto.receive(
        {"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "v"}}}
    )
    assert proto.own_turn, began
    translator = proto.translator()
    (manual,) = translator.translate(_compaction(True))
    assert isinstance(manual, CompactionEvent) and manual.trigger == "manual"
    done = {"threadId": "t", "turn": {"id": "v", "status": "completed"}}
    proto.receive({"method": "turn/completed", "params": done})
    (later,) = proto.translator().translate(_compaction(True))
    assert later.trigger == "auto"  # type: ignore[attr-defined]  # the asked one ended


@pytest.mark.parametrize("name", sorted(available_backends()))
def test_each_backend_can_say_or_refuses_in_the_check_s_words(name: str) -> None:
    backend = get_backend(name)
    for what, words in (
        ("context_usage", "say its context's use now"),
        ("compact", "compact its context on demand"),
    ):
        refused = session_refusal(backend, what)
        if name in ("claude", "codex", "failer"):
            assert refused is None, (name, what)
        else:
            assert refused is not None and f"backend {name!r} cannot {words}" in refused


def _acp(reporting: bool) -> Any:
    agent = AcpAgent("fake", usage=reporting)
    control = ReportingAcpControl if reporting else AcpControl
    proto = control(agent, lambda start: CommandSpec(args=("--acp",)))
    opened(proto)
    return proto


def _usage_update(**update: Any) -> dict[str, Any]:
    params = {"sessionId": "s-1", "update": {"sessionUpdate": "usage_update", **update}}
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


def test_an_acp_agent_that_reports_its_context_use_says_its_last_usage_update() -> None:
    proto = _acp(True)
    assert proto.context_usage is True
    assert proto.context_said() == ContextUsage(0, None, "acp: no usage_update yet")
    proto.receive(_usage_update(used=1500, size=200000, cost={"amount": 0.1, "currency": "USD"}))
    assert proto.context_said() == ContextUsage(1500, 200000, "acp usage_update")
    proto.receive(_usage_update(used="lots", size=9))  # unreadable: the last one holds
    assert proto.context_said() == ContextUsage(1500, 200000, "acp usage_update")
    quiet = _acp(False)  # an agent not said to report it: refused by the check
    assert quiet.context_usage is False and quiet.context_said() is None


def test_an_acp_backend_says_whether_its_agent_reports_its_context_use() -> None:
    command = ["node", "agent.js"]
    reporting = AcpBackend("reporting", command=command, context_usage=True)
    assert session_refusal(reporting, "context_usage") is None
    quiet = AcpBackend("quiet", command=command)
    refused = session_refusal(quiet, "context_usage")
    assert refused is not None and refused.startswith("backend 'quiet' cannot say its context's")
    with pytest.raises(ConfigError, match="context_usage must be true or false"):
        AcpBackend("bad", command=command, context_usage="yes")  # type: ignore[arg-type]
