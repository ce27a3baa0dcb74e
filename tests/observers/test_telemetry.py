"""OpenTelemetry spans (coding_genesis._observers.telemetry), with the SDK's in-memory exporter and fake CLIs.

The real ``claude`` run is in ``test_telemetry_real_cli.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import context, propagate, trace
from opentelemetry.sdk.trace import ReadableSpan

from coding_genesis import AttemptEvent, CodingGenesisAgent, Event, retry as retry_mod
from coding_genesis._observers.telemetry import TelemetryObserver, usage_attributes
from coding_genesis._util.redact import MASK, Redactor
from coding_genesis.config import AgentConfig
from coding_genesis.errors import ConfigError
from coding_genesis.events import ToolCallEvent
from coding_genesis.observer import RunInfo
from tests.otel_support import Spans, spans, traceparent
from tests.pipeline.test_always_responds import tool_result, tool_use
from tests.support import FakeCLI, present

__all__ = ["spans"]

REPO = Path(__file__).resolve().parents[2]
TRACE_VARS = ["TRACEPARENT", "TRACESTATE"]


def env_seen(fake: FakeCLI) -> list[dict[str, str | None]]:
    """What each start of the fake CLI saw of the trace variables."""
    return [r["env"] for r in fake.records() if "env" in r]


def one_tool_script(
    fake: FakeCLI, output: str = "a.txt b.txt", answer: str = "done", command: str = "ls"
) -> None:
    fake.script(
        [
            {"record_env": TRACE_VARS},
            {"init": True},
            tool_use("toolu_1", "Bash", command=command),
            tool_result("toolu_1", output),
            {"answer": answer},
        ]
    )


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.slow
def test_run_attempt_and_tool_spans_under_the_callers_span(
    spans: Spans, fake_claude: FakeCLI
) -> None:
    one_tool_script(fake_claude)
    agent = fake_claude.agent(name="fixer", model="fake-model")
    with trace.get_tracer("test").start_as_current_span("caller") as caller:
        result = agent.run_sync("list the files")
    assert result["status"] == 0, result["message"]

    run = spans.one("invoke_agent ")
    assert run.name == "invoke_agent fixer"
    assert run.kind is trace.SpanKind.CLIENT
    assert run.parent is not None and run.parent.span_id == caller.get_span_context().span_id
    assert run.context.trace_id == caller.get_span_context().trace_id
    a = attrs(run)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.agent.name"] == "fixer"
    assert a["gen_ai.conversation.id"] == result["session_id"]
    assert a["gen_ai.request.model"] == "fake-model"
    assert a["gen_ai.response.model"] == result["model"] == "fake-model"
    assert a["gen_ai.usage.input_tokens"] == present(result["usage"])["input_tokens"] == 3
    assert a["gen_ai.usage.output_tokens"] == present(result["usage"])["output_tokens"] == 5
    assert a["coding_genesis.run_id"] == result["run_id"]
    assert a["coding_genesis.cost_usd"] == result["cost_usd"]
    assert "error.type" not in a
    assert run.status.status_code is trace.StatusCode.UNSET

    (attempt,) = spans.children(run)
    assert attempt.name == "attempt 1" and attrs(attempt)["coding_genesis.attempt"] == 1
    (tool,) = spans.children(attempt)
    assert tool.name == "execute_tool Bash"
    t = attrs(tool)
    assert t["gen_ai.operation.name"] == "execute_tool"
    assert t["gen_ai.tool.name"] == "Bash"
    assert t["gen_ai.tool.call.id"] == "toolu_1"
    assert "error.type" not in t
    assert tool.start_time is not None and tool.end_time is not None
    assert run.start_time <= tool.start_time <= tool.end_time <= run.end_time  # type: ignore[operator]

    # The CLI was started with the attempt span as its parent context.
    (seen,) = env_seen(fake_claude)
    assert seen["TRACEPARENT"] is not None
    assert seen["TRACEPARENT"].startswith(traceparent(attempt)), (seen, traceparent(attempt))


@pytest.mark.slow
def test_tracestate_is_passed_on(spans: Spans, fake_claude: FakeCLI) -> None:
    one_tool_script(fake_claude)
    agent = fake_claude.agent()
    carrier = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=abc",
    }
    token = context.attach(propagate.extract(carrier))
    try:
        result = agent.run_sync("list the files")
    finally:
        context.detach(token)
    assert result["status"] == 0
    run = spans.one("invoke_agent ")
    assert run.parent is not None and run.parent.span_id == 0xB7AD6B7169203331
    (seen,) = env_seen(fake_claude)
    assert seen["TRACEPARENT"] is not None
    assert seen["TRACEPARENT"].startswith("00-0af7651916cd43dd8448eb211c80319c-")
    assert seen["TRACESTATE"] == "vendor=abc"


@pytest.mark.slow
def test_retries_give_one_attempt_span_each(spans: Spans, fake_claude: FakeCLI) -> None:
    fake_claude.script(
        [
            {"record_env": TRACE_VARS},
            {"init": True},
            {"stderr": "Error: connection reset"},
            {"exit": 1},
        ]
    )
    agent = fake_claude.agent(retry=1)

    def rescript(event: Event) -> None:
        if isinstance(event, AttemptEvent) and event.phase == "started" and event.attempt == 2:
            fake_claude.script([{"record_env": TRACE_VARS}, {"answer": "done on retry"}])

    agent.subscribe(rescript)
    with retry_mod.testing():
        result = agent.run_sync("fix it")
    assert result["status"] == 0 and result["attempts"] == 2, result["message"]

    run = spans.one("invoke_agent ")
    attempts = sorted(spans.children(run), key=lambda s: s.start_time or 0)
    assert [s.name for s in attempts] == ["attempt 1", "attempt 2"]
    first, second = attempts
    assert attrs(first)["error.type"] == result["retry_history"][0]["error"]
    assert attrs(first)["coding_genesis.failure.category"] == "network"
    assert attrs(first)["coding_genesis.attempt.action"] == "retry"
    assert first.status.status_code is trace.StatusCode.ERROR
    assert "error.type" not in attrs(second)
    assert second.status.status_code is trace.StatusCode.UNSET
    assert attrs(run)["coding_genesis.attempts"] == 2
    assert "error.type" not in attrs(run)
    # Each start of the CLI named its own attempt.
    seen = [e["TRACEPARENT"] for e in env_seen(fake_claude)]
    assert len(seen) == 2 and all(seen)
    assert seen[0].startswith(traceparent(first))  # type: ignore[union-attr]
    assert seen[1].startswith(traceparent(second))  # type: ignore[union-attr]


@pytest.mark.slow
def test_a_failure_sets_error_type_and_the_error_status(spans: Spans, fake_claude: FakeCLI) -> None:
    fake_claude.script(
        [
            {"init": True},
            tool_use("toolu_9", "Bash", command="false"),
            tool_result("toolu_9", "exit 1: it broke", is_error=True),
            {"stderr": "Error: Invalid API key"},
            {"exit": 1},
        ]
    )
    result = fake_claude.agent().run_sync("fix it")
    assert result["is_error"] and result["error"]
    run = spans.one("invoke_agent ")
    a = attrs(run)
    assert a["error.type"] == result["error"]
    assert a["coding_genesis.failure.category"] == present(result["failure"])["category"]
    assert a["coding_genesis.status"] == result["status"]
    assert run.status.status_code is trace.StatusCode.ERROR
    (attempt,) = spans.children(run)
    assert attrs(attempt)["error.type"] == result["error"]
    (tool,) = spans.children(attempt)
    assert attrs(tool)["error.type"] == "tool_error"
    assert tool.status.status_code is trace.StatusCode.ERROR


@pytest.mark.slow
def test_a_tool_call_without_result_ends_unfinished(spans: Spans, fake_claude: FakeCLI) -> None:
    fake_claude.script(
        [{"init": True}, tool_use("toolu_2", "Bash", command="sleep 100"), {"hang": True}]
    )
    result = fake_claude.agent(timeout=1.0).run_sync("wait")
    assert result["error"] == "timeout"
    tool = spans.one("execute_tool ")
    assert attrs(tool)["error.type"] == "unfinished"
    assert attrs(spans.one("invoke_agent "))["error.type"] == "timeout"


def test_opt_out_gives_no_spans_and_no_traceparent(spans: Spans, fake_claude: FakeCLI) -> None:
    one_tool_script(fake_claude)
    agent = fake_claude.agent(telemetry=False)
    with trace.get_tracer("test").start_as_current_span("caller"):
        result = agent.run_sync("list the files")
    assert result["status"] == 0
    assert [s.name for s in spans.all()] == ["caller"]
    assert env_seen(fake_claude) == [{"TRACEPARENT": None, "TRACESTATE": None}]


def test_no_text_by_default(spans: Spans, fake_claude: FakeCLI) -> None:
    one_tool_script(
        fake_claude, output="tool-output-xyzzy", answer="answer-plugh", command="cat zork.txt"
    )
    result = fake_claude.agent().run_sync("prompt-frobozz")
    assert result["message"] == "answer-plugh"
    text = spans.text()
    assert "invoke_agent" in text and "execute_tool" in text
    for secret in ("prompt-frobozz", "tool-output-xyzzy", "answer-plugh", "zork"):
        assert secret not in text, secret


def test_text_when_opted_in_with_secrets_masked(
    spans: Spans, fake_claude: FakeCLI, tmp_path: Path
) -> None:
    secret = "sk-telemetry-0123456789abcdef"
    one_tool_script(fake_claude, output=f"the key is {secret}", answer=f"done; used {secret}")
    agent = fake_claude.agent(telemetry_content=True, env={"MY_API_KEY": secret})
    result = agent.run_sync(f"use the key {secret} to list the files")
    assert result["status"] == 0
    text = spans.text()
    assert secret not in text
    run = attrs(spans.one("invoke_agent "))
    (message,) = json.loads(run["gen_ai.input.messages"])
    assert message["role"] == "user"
    assert message["parts"][0]["content"] == f"use the key {MASK} to list the files"
    (answer,) = json.loads(run["gen_ai.output.messages"])
    assert answer["parts"][0]["content"] == f"done; used {MASK}"
    tool = attrs(spans.one("execute_tool "))
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"command": "ls"}
    assert tool["gen_ai.tool.call.result"] == f"the key is {MASK}"


def test_without_an_sdk_nothing_is_recorded_or_passed_on(fake_claude: FakeCLI) -> None:
    # opentelemetry-api importable, no tracer provider configured, no caller's trace:
    # the observer does not even join the run (its events are not delivered to it)
    info = RunInfo("r1", "a", "claude", "p", "/", 1.0, None, None, time.time(), Redactor({}))
    assert TelemetryObserver().start(info) is None
    one_tool_script(fake_claude)
    result = fake_claude.agent().run_sync("list the files")
    assert result["status"] == 0
    assert env_seen(fake_claude) == [{"TRACEPARENT": None, "TRACESTATE": None}]


def test_without_an_sdk_the_callers_context_still_reaches_the_cli(fake_claude: FakeCLI) -> None:
    one_tool_script(fake_claude)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    token = context.attach(propagate.extract({"traceparent": parent}))
    try:
        result = fake_claude.agent().run_sync("list the files")
    finally:
        context.detach(token)
    assert result["status"] == 0
    (seen,) = env_seen(fake_claude)
    assert seen["TRACEPARENT"] == parent


@pytest.mark.slow
def test_a_run_without_opentelemetry_importable_works_unchanged(tmp_path: Path) -> None:
    code = f"""
import json, sys
sys.modules["opentelemetry"] = None  # not importable
from pathlib import Path
from tests.support import FakeCLI
from tests.pipeline.test_always_responds import tool_result, tool_use
fake = FakeCLI(Path({str(tmp_path)!r}), "claude")
fake.script([
    {{"record_env": ["TRACEPARENT"]}},
    {{"init": True}},
    tool_use("toolu_1", "Bash", command="ls"),
    tool_result("toolu_1", "a b"),
    {{"answer": "done"}},
])
result = fake.agent().run_sync("list the files")
print(json.dumps({{
    "status": result["status"],
    "message": result["message"],
    "tool_calls": result["tool_calls"],
    "env": [r["env"] for r in fake.records() if "env" in r],
    "otel": sys.modules["opentelemetry"] is None,
}}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEPARENT", "TRACESTATE")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {
        "status": 0,
        "message": "done",
        "tool_calls": 1,
        "env": [{"TRACEPARENT": None}],
        "otel": True,
    }


def test_telemetry_settings_are_checked() -> None:
    assert AgentConfig().telemetry is True and AgentConfig().telemetry_content is False
    for bad in ({"telemetry": "yes"}, {"telemetry_content": 1}):
        with pytest.raises(ConfigError) as caught:
            CodingGenesisAgent("claude", **bad)
        assert next(iter(bad)) in str(caught.value)


def test_usage_attributes_count_cached_input() -> None:
    claude = {
        "input_tokens": 10,
        "output_tokens": 7,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    }
    assert usage_attributes(claude) == {
        "gen_ai.usage.input_tokens": 130,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_creation.input_tokens": 20,
    }
    codex = {"input_tokens": 50, "cached_input_tokens": 40, "output_tokens": 3}
    assert usage_attributes(codex) == {
        "gen_ai.usage.input_tokens": 50,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.usage.cache_read.input_tokens": 40,
    }
    assert usage_attributes(None) == {}
    assert usage_attributes({"input_tokens": "many", "output_tokens": True}) == {}


@pytest.mark.slow
def test_opentelemetry_is_imported_by_the_first_run_not_before(tmp_path: Path) -> None:
    from tests.test_startup import loaded

    top, _ = loaded("from coding_genesis import CodingGenesisAgent\nCodingGenesisAgent('failer')")
    assert "opentelemetry" not in top
    state = str(tmp_path / "state")
    top, _ = loaded(
        "from coding_genesis import CodingGenesisAgent\n"
        f"r = CodingGenesisAgent('failer', options={{'state_dir': {state!r}}}).run_sync('hello')\n"
        "assert r['status'] == 0, r\n"
    )
    assert "opentelemetry" in top


def test_a_cancelled_run_ends_its_spans(spans: Spans, fake_claude: FakeCLI) -> None:
    fake_claude.script(
        [{"init": True}, tool_use("toolu_3", "Bash", command="sleep 100"), {"hang": True}]
    )
    agent = fake_claude.agent()

    async def main() -> None:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                def cancel_at_the_tool(event: Event) -> None:
                    if isinstance(event, ToolCallEvent):
                        scope.cancel()

                agent.subscribe(cancel_at_the_tool)
                tg.start_soon(agent.run, "wait")
        assert scope.cancelled_caught

    anyio.run(main)
    run = spans.one("invoke_agent ")
    assert attrs(run)["error.type"] == "cancelled"
    assert attrs(run)["coding_genesis.status"] == 130
    assert run.status.status_code is trace.StatusCode.ERROR
    (attempt,) = spans.children(run)
    assert attrs(attempt)["error.type"] == "cancelled"
    (tool,) = spans.children(attempt)
    assert attrs(tool)["error.type"] == "unfinished"
    assert all(s.end_time is not None for s in spans.all())
