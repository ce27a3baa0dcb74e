"""The fake model server, checked on its own and against the REAL claude and codex CLIs.

The real-CLI tests skip when a CLI is not installed (see ``real_cli.find_cli``). Each run gets a
marker variable in its environment; whatever carries it is killed after the test, so nothing is
left behind even when a tool process escaped with ``setsid``.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import (
    DEFAULT_TEXT,
    TOOL_DONE_PREFIX,
    FakeModelServer,
    Scenario,
    parse_scenario,
    sleep_command,
)
from tests.fakes.real_cli import (
    MARKER_ENV,
    CLIRun,
    claude_run,
    clean_env,
    codex_run,
    find_cli,
    kill_marked,
    marked_processes,
    repo_root,
)

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    rc: int | None
    events: list[dict[str, Any]]
    stdout: str
    stderr: str
    seconds: float

    def of_type(self, type_: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e.get("type") == type_ and (subtype is None or e.get("subtype") == subtype)
        ]

    def describe(self) -> str:
        head = f"rc={self.rc} after {self.seconds:.1f}s"
        return f"{head}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


def parse_lines(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            events.append(obj)
    return events


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique mark for the CLI's environment; every marked process is killed afterwards."""
    mark = uuid.uuid4().hex
    yield mark
    kill_marked(mark)
    assert not marked_processes(mark)


def run(spec: CLIRun, tmp_path: Path, marker: str, timeout: float = 60.0) -> Outcome:
    """Run a CLI to completion with stdin closed; stdout/stderr go to files (a tool process that
    escaped and kept the pipe open cannot hang the reader)."""
    env = dict(spec.env, **{MARKER_ENV: marker})
    out_path = tmp_path / f"stdout-{marker}.txt"
    err_path = tmp_path / f"stderr-{marker}.txt"
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            spec.argv,
            env=env,
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            rc: int | None = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = None
            kill_marked(marker)
            proc.kill()
            proc.wait(10)
    seconds = time.monotonic() - start
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    return Outcome(rc, parse_lines(stdout), stdout, stderr, seconds)


def session_id_of(outcome: Outcome) -> str:
    inits = outcome.of_type("system", "init")
    assert inits, outcome.describe()
    sid = inits[0].get("session_id")
    assert isinstance(sid, str) and sid, outcome.describe()
    return sid


def claude_result(outcome: Outcome) -> dict[str, Any]:
    results = outcome.of_type("result")
    assert len(results) == 1, outcome.describe()
    return results[0]


def claude_blocks(outcome: Outcome, block_type: str) -> list[dict[str, Any]]:
    """Content blocks of one type from ``assistant`` and ``user`` lines."""
    blocks = []
    for e in outcome.events:
        if e.get("type") not in ("assistant", "user"):
            continue
        content = (e.get("message") or {}).get("content")
        if isinstance(content, list):
            blocks += [b for b in content if isinstance(b, dict) and b.get("type") == block_type]
    return blocks


def codex_items(
    outcome: Outcome, item_type: str, event: str = "item.completed"
) -> list[dict[str, Any]]:
    return [
        e["item"]
        for e in outcome.events
        if e.get("type") == event and (e.get("item") or {}).get("type") == item_type
    ]


def http_request(
    url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        data = None if body is None else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])
        for line in raw.decode().splitlines()
        if line.startswith("data: ")
    ]


# --------------------------------------------------------------------------------------------
# the server on its own (no CLI needed)
# --------------------------------------------------------------------------------------------


def test_parse_scenario() -> None:
    assert parse_scenario("hello") is None
    assert parse_scenario("please SCENARIO:bash echo hi; ls\nmore") == Scenario(
        "bash", "echo hi; ls"
    )
    assert parse_scenario("SCENARIO:text a\nSCENARIO:429once") == Scenario("429once", "")
    assert parse_scenario("SCENARIO:Sleep 5") == Scenario("sleep", "5")


def test_anthropic_streaming_and_json_answers(model_server: FakeModelServer) -> None:
    body: dict[str, Any] = {
        "model": "claude-x",
        "stream": True,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "SCENARIO:bash ls -l"}]}
        ],
    }
    status, headers, raw = http_request(
        model_server.url, "POST", "/v1/messages?beta=true", body, {"x-api-key": "secret"}
    )
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    events = sse_events(raw)
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    tool = events[1]["content_block"]
    assert tool["type"] == "tool_use" and tool["name"] == "Bash"
    partial = "".join(e["delta"]["partial_json"] for e in events[2:4])
    assert json.loads(partial)["command"] == "ls -l"
    assert events[5]["delta"]["stop_reason"] == "tool_use"

    # second request: after the tool result, a final text (non-streaming this time)
    body["stream"] = False
    body["messages"] += [
        {"role": "assistant", "content": [tool]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool["id"], "content": "total 0"}],
        },
    ]
    status, _, raw = http_request(model_server.url, "POST", "/v1/messages", body)
    answer = json.loads(raw)
    assert status == 200 and answer["stop_reason"] == "end_turn"
    assert answer["content"] == [{"type": "text", "text": TOOL_DONE_PREFIX + "total 0"}]

    recs = model_server.requests_for("/v1/messages")
    assert len(recs) == 2
    assert "x-api-key" not in recs[0].headers
    assert recs[0].body["model"] == "claude-x"
    assert [r.action for r in recs] == ["tool", "text"]


@pytest.mark.parametrize("where", ["system", "system-message"])
def test_anthropic_write_and_sleep_tools(model_server: FakeModelServer, where: str) -> None:
    """A relative ``write`` path is joined to the working directory claude names: in ``system``
    (claude 2.1.197) or in a ``messages`` entry of role "system" (2.1.330)."""
    env = "# Environment\n - Primary working directory: /w/dir\n - Platform: linux"
    body: dict[str, Any] = {"model": "claude-x", "stream": False, "system": "You are a CLI."}
    prompts = ["SCENARIO:write out.txt hi", "SCENARIO:sleep 600"]
    inputs = []
    for prompt in prompts:
        body["messages"] = [{"role": "user", "content": prompt}]
        if where == "system":
            body["system"] = [
                {"type": "text", "text": "You are a CLI."},
                {"type": "text", "text": env},
            ]
        else:
            body["messages"].append({"role": "system", "content": [{"type": "text", "text": env}]})
        status, _, raw = http_request(model_server.url, "POST", "/v1/messages", body)
        assert status == 200
        (tool,) = json.loads(raw)["content"]
        inputs.append((tool["name"], tool["input"]))
    assert inputs[0] == ("Write", {"file_path": "/w/dir/out.txt", "content": "hi\n"})
    # Not `sleep 600`, which claude 2.1.330 refuses as a Bash command.
    assert inputs[1][0] == "Bash" and inputs[1][1]["command"] == sleep_command(600)
    assert sleep_command(600) == "python3 -c 'import time; time.sleep(600)'"


def test_openai_streaming_answers(model_server: FakeModelServer) -> None:
    body: dict[str, Any] = {
        "model": "gpt-5.5",
        "stream": True,
        "tools": [{"type": "function", "name": "exec_command", "parameters": {}}],
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "SCENARIO:bash echo hi"}],
            }
        ],
    }
    status, _, raw = http_request(
        model_server.url, "POST", "/v1/responses", body, {"Authorization": "Bearer k"}
    )
    events = sse_events(raw)
    assert status == 200
    assert [e["type"] for e in events] == [
        "response.created",
        "response.output_item.done",
        "response.completed",
    ]
    call = events[1]["item"]
    assert call["type"] == "function_call" and call["name"] == "exec_command"
    assert json.loads(call["arguments"]) == {"cmd": "echo hi"}

    body["input"] += [
        call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "hi\n"},
    ]
    _, _, raw = http_request(model_server.url, "POST", "/v1/responses", body)
    events = sse_events(raw)
    done = next(e for e in events if e["type"] == "response.output_item.done")["item"]
    assert done["content"][0]["text"] == TOOL_DONE_PREFIX + "hi\n"
    assert events[-1]["type"] == "response.completed"
    assert all("authorization" not in r.headers for r in model_server.requests)


def test_gemini_answers(model_server: FakeModelServer) -> None:
    path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    tools = [{"functionDeclarations": [{"name": "read_file"}, {"name": "run_shell_command"}]}]
    contents: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": "SCENARIO:bash echo hi"}]}
    ]
    status, _, raw = http_request(
        model_server.url, "POST", path, {"contents": contents, "tools": tools}
    )
    (chunk,) = sse_events(raw)
    assert status == 200
    part = chunk["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"]["name"] == "run_shell_command"
    assert part["functionCall"]["args"] == {"command": "echo hi"}
    contents += [
        {"role": "model", "parts": [part]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "run_shell_command", "response": {"output": "hi"}}}
            ],
        },
    ]
    _, _, raw = http_request(model_server.url, "POST", path, {"contents": contents, "tools": tools})
    (chunk,) = sse_events(raw)
    assert chunk["candidates"][0]["content"]["parts"] == [{"text": TOOL_DONE_PREFIX + "hi"}]
    # A JSON-mode side call (gemini's model router) gets an object of the schema's shape.
    router = {
        "contents": [{"role": "user", "parts": [{"text": "SCENARIO:bash echo hi"}]}],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {
                "type": "object",
                "properties": {"reasoning": {"type": "string"}, "score": {"type": "integer"}},
            },
        },
    }
    _, _, raw = http_request(
        model_server.url, "POST", "/v1beta/models/flash-lite:generateContent", router
    )
    text = json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(text) == {"reasoning": "fake", "score": 10}
    status, _, raw = http_request(
        model_server.url,
        "POST",
        path,
        {"contents": [{"role": "user", "parts": [{"text": "SCENARIO:429"}]}]},
    )
    assert status == 429 and json.loads(raw)["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert [r.api for r in model_server.model_requests()] == ["gemini"] * 4


def test_chat_completions_answers(model_server: FakeModelServer) -> None:
    tools = [{"type": "function", "function": {"name": n}} for n in ("read", "bash")]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a fake."},
        {"role": "user", "content": [{"type": "text", "text": "SCENARIO:bash echo hi"}]},
    ]
    body = {"model": "fake-model", "stream": True, "messages": messages, "tools": tools}
    status, _, raw = http_request(model_server.url, "POST", "/v1/chat/completions", body)
    assert status == 200 and raw.decode().rstrip().endswith("data: [DONE]")
    chunks = [
        json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")
    ]
    (call,) = chunks[0]["choices"][0]["delta"]["tool_calls"]
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"])["command"] == "echo hi"
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[2]["usage"]["total_tokens"] == 16
    messages += [
        {"role": "assistant", "tool_calls": [{k: v for k, v in call.items() if k != "index"}]},
        {"role": "tool", "tool_call_id": call["id"], "content": "hi\n"},
    ]
    body["stream"] = False
    _, _, raw = http_request(model_server.url, "POST", "/v1/chat/completions", body)
    answer = json.loads(raw)["choices"][0]
    assert answer["message"]["content"] == TOOL_DONE_PREFIX + "hi\n"
    assert answer["finish_reason"] == "stop"
    # A call without tools (opencode's title) gets text, even for a tool scenario.
    title = {"model": "fake-model", "messages": messages[:2]}
    _, _, raw = http_request(model_server.url, "POST", "/v1/chat/completions", title)
    assert json.loads(raw)["choices"][0]["message"] == {
        "role": "assistant",
        "content": "Fake title",
    }


def test_jsonfix_counts_a_conversations_prompts_on_gemini_and_chat(
    model_server: FakeModelServer,
) -> None:
    """``jsonfix``: the bad value while one user prompt carries the line, the good one
    once a later prompt carries it too (a retry in the same conversation)."""
    line = 'SCENARIO:jsonfix {"a":0} {"a":1}'
    path = "/v1beta/models/gemini-2.5-flash:generateContent"

    def gemini(*texts: str) -> str:
        contents = [{"role": "user", "parts": [{"text": t}]} for t in texts]
        _, _, raw = http_request(model_server.url, "POST", path, {"contents": contents})
        return str(json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"])

    def chat(*texts: str) -> str:
        messages = [{"role": "user", "content": t} for t in texts]
        body = {"model": "fake-model", "messages": messages}
        _, _, raw = http_request(model_server.url, "POST", "/v1/chat/completions", body)
        return str(json.loads(raw)["choices"][0]["message"]["content"])

    for ask in (gemini, chat):
        assert ask(line + "\n\nthe schema") == '{"a":0}'
        assert ask(line, "Continue: wrong.\nOriginal request:\n" + line) == '{"a":1}'
        assert ask("SCENARIO:text other", line) == '{"a":0}'  # another line: not a retry


def test_status_scenarios_and_once(model_server: FakeModelServer) -> None:
    def ask(text: str, api: str = "anthropic") -> tuple[int, dict[str, str]]:
        if api == "anthropic":
            body = {"messages": [{"role": "user", "content": text}], "stream": False}
            status, headers, _ = http_request(model_server.url, "POST", "/v1/messages", body)
        else:
            body = {"input": text, "stream": False}
            status, headers, _ = http_request(model_server.url, "POST", "/v1/responses", body)
        return status, headers

    status, headers = ask("SCENARIO:429")
    assert status == 429 and headers["retry-after"] == "0"
    assert ask("SCENARIO:429")[0] == 429
    assert ask("SCENARIO:429once")[0] == 429
    assert ask("SCENARIO:429once")[0] == 200
    assert ask("SCENARIO:429once", "openai")[0] == 429  # counted per API and conversation
    assert ask("SCENARIO:429once", "openai")[0] == 200
    assert ask("SCENARIO:401")[0] == 401
    assert ask("SCENARIO:500", "openai")[0] == 500
    assert ask("SCENARIO:529")[0] == 529
    # anything else is answered harmlessly
    assert http_request(model_server.url, "HEAD", "/")[0] == 200
    assert http_request(model_server.url, "GET", "/v1/models")[0] == 200
    status, _, raw = http_request(
        model_server.url, "POST", "/v1/messages/count_tokens", {"messages": []}
    )
    assert status == 200 and json.loads(raw)["input_tokens"] > 0


def test_stop_releases_hanging_requests() -> None:
    server = FakeModelServer()
    url = server.start()
    outcome: list[BaseException | int] = []

    def hang() -> None:
        try:
            body = {"messages": [{"role": "user", "content": "SCENARIO:hang"}], "stream": True}
            outcome.append(http_request(url, "POST", "/v1/messages", body)[0])
        except Exception as exc:  # noqa: BLE001  (the thread hands whatever it raised to the test)
            outcome.append(exc)

    thread = threading.Thread(target=hang, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not server.model_requests() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.model_requests()[0].action == "hang"
    start = time.monotonic()
    server.stop()
    assert time.monotonic() - start < 3
    thread.join(5)
    assert not thread.is_alive()
    assert outcome and not isinstance(outcome[0], int)  # dropped, never answered
    server.stop()  # idempotent


def test_context_manager() -> None:
    with FakeModelServer() as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert server.openai_base_url == server.url + "/v1"
        assert http_request(server.url, "HEAD", "/")[0] == 200
    with pytest.raises(OSError):  # noqa: PT011  (refused: the text varies by platform)
        http_request(server.url, "HEAD", "/")


def test_find_cli_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GENESIS_CLAUDE_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert find_cli("claude", "GENESIS_CLAUDE_PATH", tmp_path) is None
    tools = tmp_path / ".tools" / "node_modules" / ".bin"
    tools.mkdir(parents=True)
    (tools / "claude").write_text("#!/bin/sh\n")
    (tools / "claude").chmod(0o755)
    assert find_cli("claude", "GENESIS_CLAUDE_PATH", tmp_path) == str(tools / "claude")
    other = tmp_path / "my-claude"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    monkeypatch.setenv("GENESIS_CLAUDE_PATH", str(other))
    assert find_cli("claude", "GENESIS_CLAUDE_PATH", tmp_path) == str(other)


def test_clean_env_strips_parent_session() -> None:
    env = clean_env(
        {
            "CLAUDECODE": "1",
            "CLAUDE_CODE_ENTRYPOINT": "cli",
            "PATH": "/bin",
            "ANTHROPIC_API_KEY": "real",
            "OPENAI_API_KEY": "real",
        }
    )
    assert env == {"PATH": "/bin"}


# --------------------------------------------------------------------------------------------
# the real claude CLI
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_claude_text(
    model_server: FakeModelServer, real_claude: str, tmp_path: Path, marker: str
) -> None:
    spec = claude_run(model_server.url, tmp_path, "SCENARIO:text", claude_path=real_claude)
    out = run(spec, tmp_path, marker)
    assert out.rc == 0, out.describe()
    sid = session_id_of(out)
    texts = [b["text"] for b in claude_blocks(out, "text")]
    assert texts == [DEFAULT_TEXT], out.describe()
    result = claude_result(out)
    assert result["subtype"] == "success" and result["is_error"] is False
    assert result["result"] == DEFAULT_TEXT
    assert result["session_id"] == sid
    calls = model_server.requests_for("/v1/messages")
    assert len(calls) == 1 and calls[0].body["stream"] is True
    assert calls[0].headers.get("x-claude-code-session-id") == sid
    assert "x-api-key" not in calls[0].headers and "authorization" not in calls[0].headers


@pytest.mark.timeout(90)
def test_claude_bash_tool(
    model_server: FakeModelServer, real_claude: str, tmp_path: Path, marker: str
) -> None:
    spec = claude_run(
        model_server.url,
        tmp_path,
        "SCENARIO:bash touch made_by_bash.txt && echo made",
        claude_path=real_claude,
        allowed_tools=["Bash"],
    )
    out = run(spec, tmp_path, marker)
    assert out.rc == 0, out.describe()
    session_id_of(out)
    uses = claude_blocks(out, "tool_use")
    assert [u["name"] for u in uses] == ["Bash"], out.describe()
    assert uses[0]["input"]["command"] == "touch made_by_bash.txt && echo made"
    results = claude_blocks(out, "tool_result")
    assert len(results) == 1 and not results[0].get("is_error"), out.describe()
    assert results[0]["tool_use_id"] == uses[0]["id"]
    result = claude_result(out)
    assert result["is_error"] is False and result["num_turns"] == 2
    assert result["result"] == TOOL_DONE_PREFIX + "made"
    assert result["permission_denials"] == []
    assert (Path(spec.cwd) / "made_by_bash.txt").exists()
    assert len(model_server.requests_for("/v1/messages")) == 2


@pytest.mark.timeout(90)
def test_claude_write_tool(
    model_server: FakeModelServer, real_claude: str, tmp_path: Path, marker: str
) -> None:
    spec = claude_run(
        model_server.url,
        tmp_path,
        "SCENARIO:write fake_written.txt hello file",
        claude_path=real_claude,
        permission_mode="acceptEdits",
    )
    out = run(spec, tmp_path, marker)
    assert out.rc == 0, out.describe()
    uses = claude_blocks(out, "tool_use")
    assert [u["name"] for u in uses] == ["Write"], out.describe()
    target = Path(spec.cwd) / "fake_written.txt"
    assert uses[0]["input"]["file_path"] == str(target)
    assert target.read_text() == "hello file\n"
    assert claude_result(out)["result"].startswith(TOOL_DONE_PREFIX)


@pytest.mark.timeout(90)
def test_claude_429_always(
    model_server: FakeModelServer, real_claude: str, tmp_path: Path, marker: str
) -> None:
    spec = claude_run(model_server.url, tmp_path, "SCENARIO:429", claude_path=real_claude)
    out = run(spec, tmp_path, marker)
    assert out.rc == 1, out.describe()
    assert out.seconds < 30, out.describe()
    session_id_of(out)
    retries = out.of_type("system", "api_retry")
    assert retries and all(r["error_status"] == 429 for r in retries), out.describe()
    result = claude_result(out)
    assert result["is_error"] is True
    assert result["api_error_status"] == 429
    assert all(r.status == 429 for r in model_server.requests_for("/v1/messages"))


@pytest.mark.timeout(90)
def test_claude_429_once_recovers(
    model_server: FakeModelServer, real_claude: str, tmp_path: Path, marker: str
) -> None:
    spec = claude_run(model_server.url, tmp_path, "SCENARIO:429once", claude_path=real_claude)
    out = run(spec, tmp_path, marker)
    assert out.rc == 0, out.describe()
    retries = out.of_type("system", "api_retry")
    assert len(retries) == 1 and retries[0]["error_status"] == 429, out.describe()
    result = claude_result(out)
    assert result["is_error"] is False and result["result"] == DEFAULT_TEXT
    assert [r.status for r in model_server.requests_for("/v1/messages")] == [429, 200]


@pytest.mark.timeout(90)
def test_claude_falls_back_to_non_streaming_after_stream_errors(
    model_server: FakeModelServer, real_claude: str, tmp_path: Path, marker: str
) -> None:
    spec = claude_run(model_server.url, tmp_path, "SCENARIO:stream_error", claude_path=real_claude)
    out = run(spec, tmp_path, marker)
    assert out.rc == 0, out.describe()
    assert claude_result(out)["result"] == DEFAULT_TEXT
    calls = model_server.requests_for("/v1/messages")
    assert calls[0].body["stream"] is True
    assert calls[-1].body.get("stream") in (False, None)  # the JSON (non-streaming) retry


@pytest.mark.timeout(90)
def test_claude_sleep_tool_then_kill_the_tree(
    model_server: FakeModelServer, real_claude: str, tmp_path: Path, marker: str
) -> None:
    spec = claude_run(
        model_server.url,
        tmp_path,
        "SCENARIO:sleep 600",
        claude_path=real_claude,
        allowed_tools=["Bash"],
    )
    env = dict(spec.env, **{MARKER_ENV: marker})
    with open(tmp_path / "stdout.txt", "wb") as out:
        proc = subprocess.Popen(
            spec.argv,
            env=env,
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        sleeper = _wait_for_sleep(marker, "600", timeout=45)
        assert sleeper is not None, (tmp_path / "stdout.txt").read_text()
        marked = set(marked_processes(marker))
        assert proc.pid in marked and sleeper in marked
        # The tool shell runs in a session of its own: killing the CLI's group misses it.
        assert os.getsid(sleeper) != os.getsid(proc.pid)
        try:
            import psutil
        except ImportError:
            pass
        else:
            assert _as_run(psutil.Process(sleeper).cmdline()) == _sleep_argv("600")
            assert sleeper in {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        kill_marked(marker)
        proc.wait(10)
    assert not marked_processes(marker)
    assert not _pid_alive(sleeper)
    events = parse_lines((tmp_path / "stdout.txt").read_text())
    uses = [
        b
        for e in events
        if e.get("type") == "assistant"
        for b in e["message"]["content"]
        if b.get("type") == "tool_use"
    ]
    # Not `sleep 600`: claude 2.1.330 refuses a bare long sleep as a Bash command.
    assert uses and uses[0]["input"]["command"] == sleep_command(600)


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _as_run(argv: list[str]) -> list[str]:
    """``argv`` with ``python3`` as typed (a pyenv shim execs the real one by its full path)."""
    if argv[:1] and os.path.basename(argv[0]).startswith("python3"):
        return ["python3", *argv[1:]]
    return argv


def _sleep_argv(seconds: str) -> list[str]:
    """Command line of the process that ``SCENARIO:sleep <seconds>`` starts."""
    return ["python3", "-c", f"import time; time.sleep({seconds})"]


def _wait_for_sleep(marker: str, seconds: str, timeout: float) -> int | None:
    """PID of a marked ``SCENARIO:sleep <seconds>`` process, once it appears."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in marked_processes(marker):
            if _as_run(_cmdline(pid)) == _sleep_argv(seconds):
                return pid
        time.sleep(0.1)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# the real codex CLI
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_codex_text(
    model_server: FakeModelServer, real_codex: str, tmp_path: Path, marker: str
) -> None:
    spec = codex_run(model_server.url, tmp_path, "SCENARIO:text", codex_path=real_codex)
    out = run(spec, tmp_path, marker)
    assert out.rc == 0, out.describe()
    started = out.of_type("thread.started")
    assert started and started[0]["thread_id"], out.describe()
    assert [m["text"] for m in codex_items(out, "agent_message")] == [DEFAULT_TEXT]
    assert out.of_type("turn.completed") and not out.of_type("turn.failed")
    calls = model_server.requests_for("/v1/responses")
    assert len(calls) == 1 and calls[0].body["stream"] is True
    assert calls[0].headers.get("session-id") == started[0]["thread_id"]
    assert "authorization" not in calls[0].headers


@pytest.mark.timeout(90)
def test_codex_shell_command(
    model_server: FakeModelServer, real_codex: str, tmp_path: Path, marker: str
) -> None:
    spec = codex_run(
        model_server.url, tmp_path, "SCENARIO:bash echo hi && touch made.txt", codex_path=real_codex
    )
    out = run(spec, tmp_path, marker)
    assert out.rc == 0, out.describe()
    started = codex_items(out, "command_execution", "item.started")
    done = codex_items(out, "command_execution")
    assert len(started) == 1 and len(done) == 1, out.describe()
    assert "echo hi && touch made.txt" in done[0]["command"]
    assert done[0]["exit_code"] == 0 and done[0]["status"] == "completed"
    assert done[0]["aggregated_output"] == "hi\n"
    (message,) = codex_items(out, "agent_message")
    assert message["text"].startswith(TOOL_DONE_PREFIX) and "hi" in message["text"]
    assert out.of_type("turn.completed")
    assert (Path(spec.cwd) / "made.txt").exists()  # -s workspace-write allows it
    first, second = model_server.requests_for("/v1/responses")
    assert "exec_command" in {t.get("name") for t in first.body["tools"]}
    assert any(i.get("type") == "function_call_output" for i in second.body["input"])


@pytest.mark.timeout(90)
def test_codex_write_with_apply_patch(
    model_server: FakeModelServer, real_codex: str, tmp_path: Path, marker: str
) -> None:
    spec = codex_run(
        model_server.url,
        tmp_path,
        "SCENARIO:write fake_written.txt hello file",
        codex_path=real_codex,
    )
    out = run(spec, tmp_path, marker)
    assert out.rc == 0, out.describe()
    (change,) = codex_items(out, "file_change")
    assert change["status"] == "completed"
    assert change["changes"] == [{"path": str(Path(spec.cwd) / "fake_written.txt"), "kind": "add"}]
    assert (Path(spec.cwd) / "fake_written.txt").read_text() == "hello file\n"


@pytest.mark.timeout(90)
def test_codex_429_always(
    model_server: FakeModelServer, real_codex: str, tmp_path: Path, marker: str
) -> None:
    spec = codex_run(model_server.url, tmp_path, "SCENARIO:429", codex_path=real_codex)
    out = run(spec, tmp_path, marker)
    assert out.rc == 1, out.describe()
    assert out.seconds < 30, out.describe()
    (failed,) = out.of_type("turn.failed")
    assert "429" in failed["error"]["message"], out.describe()
    assert any(e["message"].startswith("Reconnecting...") for e in out.of_type("error"))
    assert not out.of_type("turn.completed")
    assert all(r.status == 429 for r in model_server.requests_for("/v1/responses"))


@pytest.mark.timeout(90)
def test_codex_429_once_recovers(
    model_server: FakeModelServer, real_codex: str, tmp_path: Path, marker: str
) -> None:
    spec = codex_run(model_server.url, tmp_path, "SCENARIO:429once", codex_path=real_codex)
    out = run(spec, tmp_path, marker)
    assert out.rc == 0, out.describe()
    errors = out.of_type("error")
    assert len(errors) == 1 and "429" in errors[0]["message"], out.describe()
    assert [m["text"] for m in codex_items(out, "agent_message")] == [DEFAULT_TEXT]
    assert out.of_type("turn.completed") and not out.of_type("turn.failed")
    assert [r.status for r in model_server.requests_for("/v1/responses")] == [429, 200]


# --------------------------------------------------------------------------------------------
# one command: the real CLIs offline (docs/sessions.md, "Try it offline")
# --------------------------------------------------------------------------------------------

OFFLINE = [sys.executable, "-m", "tests.fakes.model_server"]


@pytest.mark.slow
def test_one_command_runs_a_program_pointed_at_the_server(tmp_path: Path) -> None:
    probe = (
        "import os, urllib.request\n"
        "url = os.environ['ANTHROPIC_BASE_URL']\n"
        "print(urllib.request.urlopen(urllib.request.Request(url, method='HEAD')).status)\n"
        "print(os.environ['ANTHROPIC_API_KEY'], os.environ['HOME'])\n"
        "print(open(os.path.join(os.environ['CODEX_HOME'], 'config.toml')).read())\n"
        "raise SystemExit(3)\n"
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-real-secret", "HOME": str(tmp_path)}
    done = subprocess.run(
        [*OFFLINE, "--", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=repo_root(),
        env=env,
    )
    assert done.returncode == 3, done.stderr  # the command's own code
    status, who, config = done.stdout.split("\n", 2)
    assert status == "200"
    key, home = who.split()
    assert key == "fake" and home != str(tmp_path) and "genesis-offline-" in home
    assert 'base_url = "http://127.0.0.1:' in config
    assert not Path(home).exists()  # the temporary HOME is gone with the server


@pytest.mark.slow
def test_without_a_command_it_prints_the_exports_never_a_secret(tmp_path: Path) -> None:
    env = {**os.environ, "OPENAI_API_KEY": "sk-secret-123", "XDG_CONFIG_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        OFFLINE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=repo_root(),
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        while not any(line.startswith("export QWEN_") for line in lines):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            lines.append(line.rstrip("\n"))
        assert lines[0].startswith("# the fake model server: http://127.0.0.1:")
        assert "unset XDG_CONFIG_HOME" in lines
        assert "export OPENAI_API_KEY=fake" in lines
        assert "sk-secret-123" not in "\n".join(lines)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_one_command_runs_genesis_with_the_real_claude(real_claude: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *OFFLINE,
            "--",
            "genesis",
            "run",
            "-b",
            "claude",
            "--transcript-dir",
            "off",
            "--cwd",
            str(tmp_path),
            "SCENARIO:text offline hello",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=repo_root(),
        env={**os.environ, "GENESIS_LEDGER": "off"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "offline hello"
