"""Step definitions for telemetry.feature: the fake claude, the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from pytest_bdd import given, parsers, then, when

from coding_genesis import CodingGenesisAgent
from tests.otel_support import Spans, spans, traceparent
from tests.pipeline.test_always_responds import tool_result, tool_use
from tests.support import FakeCLI

__all__ = ["spans"]


class TelemetryWorld:
    def __init__(self, tmp_path: Path, spans: Spans) -> None:
        self.spans = spans
        self.fake = FakeCLI(tmp_path, "claude")
        self.agent: CodingGenesisAgent | None = None
        self.response: Mapping[str, Any] = {}
        self.current: ReadableSpan | None = None

    def span(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans.all() if s.name == name]
        assert len(found) == 1, [s.name for s in self.spans.all()]
        return found[0]

    def seen(self) -> list[dict[str, str | None]]:
        return [r["env"] for r in self.fake.records() if "env" in r]


@pytest.fixture
def telemetry_world(tmp_path: Path, spans: Spans) -> TelemetryWorld:
    return TelemetryWorld(tmp_path, spans)


@given("an OpenTelemetry SDK exporting to memory")
def _sdk(telemetry_world: TelemetryWorld) -> None:
    assert telemetry_world.spans.all() == []


@given("a fake claude CLI that calls one tool and answers")
def _cli(telemetry_world: TelemetryWorld) -> None:
    telemetry_world.fake.script(
        [
            {"record_env": ["TRACEPARENT"]},
            {"init": True},
            tool_use("toolu_1", "Bash", command="ls"),
            tool_result("toolu_1", "a.txt"),
            {"answer": "done"},
        ]
    )


@given("an agent with the default settings")
def _default_agent(telemetry_world: TelemetryWorld) -> None:
    telemetry_world.agent = telemetry_world.fake.agent()


@given("an agent with telemetry off")
def _agent_off(telemetry_world: TelemetryWorld) -> None:
    telemetry_world.agent = telemetry_world.fake.agent(telemetry=False)


@when(parsers.parse('the agent runs "{prompt}" inside the caller\'s span "{name}"'))
def _run(telemetry_world: TelemetryWorld, prompt: str, name: str) -> None:
    agent = telemetry_world.agent
    assert agent is not None
    with trace.get_tracer("test").start_as_current_span(name):
        # run_sync: the caller's context is this thread's (a portal's loop runs elsewhere)
        telemetry_world.response = agent.run_sync(prompt)
    assert telemetry_world.response["status"] == 0, telemetry_world.response["message"]


@then(parsers.parse('a span "{child}" is a child of "{parent}"'))
def _child_of(telemetry_world: TelemetryWorld, child: str, parent: str) -> None:
    span, above = telemetry_world.span(child), telemetry_world.span(parent)
    assert span.parent is not None and span.parent.span_id == above.context.span_id
    telemetry_world.current = span


@then(parsers.parse('it has one child "{first}" with one child "{second}"'))
def _grandchild(telemetry_world: TelemetryWorld, first: str, second: str) -> None:
    current = telemetry_world.current
    assert current is not None
    (attempt,) = telemetry_world.spans.children(current)
    assert attempt.name == first
    (tool,) = telemetry_world.spans.children(attempt)
    assert tool.name == second


@then(parsers.parse('the CLI was started with a TRACEPARENT naming "{name}"'))
def _traceparent(telemetry_world: TelemetryWorld, name: str) -> None:
    (seen,) = telemetry_world.seen()
    value = seen["TRACEPARENT"]
    assert value is not None and value.startswith(traceparent(telemetry_world.span(name)))


@then(parsers.parse('no span holds the text "{text}"'))
def _no_text(telemetry_world: TelemetryWorld, text: str) -> None:
    assert text not in telemetry_world.spans.text()


@then(parsers.parse('the only span is "{name}"'))
def _only(telemetry_world: TelemetryWorld, name: str) -> None:
    assert [s.name for s in telemetry_world.spans.all()] == [name]


@then("the CLI was started without a TRACEPARENT")
def _no_traceparent(telemetry_world: TelemetryWorld) -> None:
    assert telemetry_world.seen() == [{"TRACEPARENT": None}]
