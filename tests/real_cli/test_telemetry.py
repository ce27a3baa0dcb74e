"""OpenTelemetry spans of a run of the REAL ``claude`` with one tool call, against the fake model
server; the tool prints the ``TRACEPARENT`` the CLI was given, which names the run's attempt span.

Skips, with the reason, only when claude is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace

from tests.fakes.model_server import TOOL_DONE_PREFIX
from tests.otel_support import Spans, spans, traceparent
from tests.real_cli.test_claude_codex import Rig, claude_rig, explain, hermetic_env, run

__all__ = ["claude_rig", "hermetic_env", "spans"]

pytestmark = pytest.mark.timeout(90)


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_real_claude_run_with_one_tool_call(claude_rig: Rig, spans: Spans) -> None:
    agent = claude_rig.agent(tools=True)
    with trace.get_tracer("test").start_as_current_span("orchestrator") as caller:
        result, events = run(agent, "SCENARIO:bash echo TP=$TRACEPARENT")
    assert result["status"] == 0, explain(result, events)
    assert result["tool_calls"] == 1 and result["tool_usage"] == {"Bash": 1}, explain(result)

    run_span = spans.one("invoke_agent ")
    assert run_span.name == "invoke_agent claude-agent"
    assert run_span.parent is not None
    assert run_span.parent.span_id == caller.get_span_context().span_id
    a = attrs(run_span)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.agent.name"] == "claude-agent"
    assert a["gen_ai.conversation.id"] == result["session_id"]
    assert a["gen_ai.response.model"] == result["model"]
    assert a["gen_ai.usage.output_tokens"] == result["usage"]["output_tokens"]
    assert a["gen_ai.usage.input_tokens"] >= result["usage"]["input_tokens"]
    assert "error.type" not in a

    (attempt,) = spans.children(run_span)
    (tool,) = spans.children(attempt)
    (call,) = events.of("tool_call")
    assert tool.name == "execute_tool Bash"
    assert attrs(tool)["gen_ai.tool.name"] == "Bash"
    assert attrs(tool)["gen_ai.tool.call.id"] == call["id"]
    assert tool.start_time is not None and tool.end_time is not None
    assert tool.end_time > tool.start_time

    # The CLI's tool saw the attempt span as its parent context.
    output = result["message"].removeprefix(TOOL_DONE_PREFIX)
    words = [w for w in output.split() if w.startswith("TP=")]
    assert words, explain(result)
    assert words[0].removeprefix("TP=").startswith(traceparent(attempt)), (words, attempt)
