"""A fake model server for driving the real ``claude`` and ``codex`` CLIs in tests.

Standard library only. One server answers both wire protocols on 127.0.0.1:

* Anthropic Messages API (what ``claude`` speaks): ``HEAD /`` and ``POST /v1/messages``, streaming
  (SSE) or not; any other path gets a harmless answer.
* OpenAI Responses API (what ``codex`` speaks): ``POST /v1/responses`` (SSE).
* Gemini API v1beta (what ``gemini`` speaks): ``POST /v1beta/models/{model}:streamGenerateContent``
  (SSE), ``:generateContent``, ``:countTokens``, ``GET /v1beta/models``.
* OpenAI chat completions (what ``opencode`` and ``qwen`` speak): ``POST /v1/chat/completions``
  (SSE ending in ``[DONE]``, or one JSON answer).

What the "model" does is chosen by a keyword in the user's prompt, ``SCENARIO:<name> [args]``
(see ``MODEL_SERVER.md`` next to this file for the full list). Every request is recorded in
memory (headers without credentials, parsed JSON body) so tests can inspect what the CLI sent.

    with FakeModelServer() as server:
        env["ANTHROPIC_BASE_URL"] = server.url                 # claude
        base_url = server.openai_base_url                      # codex: http://127.0.0.1:PORT/v1
        ...
        assert server.requests_for("/v1/messages")
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import http.server
import itertools
import json
import re
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = [
    "DEFAULT_TEXT",
    "FakeModelServer",
    "RecordedRequest",
    "Scenario",
    "parse_scenario",
    "sleep_command",
]

DEFAULT_TEXT = "Hello from the fake model."
#: The tool claude offers for an answer of a JSON schema (``--json-schema``).
STRUCTURED_OUTPUT_TOOL = "StructuredOutput"
TOOL_DONE_PREFIX = "The tool finished. Output: "
TOOL_ERROR_PREFIX = "The tool finished (tool reported an error). Output: "
# Tool output quoted back in the final answer is cut to this many characters.
MAX_QUOTED_OUTPUT = 4000

_SCENARIO_RE = re.compile(r"SCENARIO:([A-Za-z0-9_\-]+)[ \t]*([^\r\n]*)")
_STATUS_RE = re.compile(r"^([1-5][0-9][0-9])(once)?$")
_WORKDIR_RE = re.compile(r"(?:working directory|<cwd>)\s*:?\s*([^\s<]+)", re.IGNORECASE)
_SENSITIVE_HEADERS = frozenset(
    {"authorization", "x-api-key", "proxy-authorization", "cookie", "api-key", "openai-api-key"}
)

# Error bodies per HTTP status, in each API's own error shape.
_ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "Bad request (fake)."),
    401: ("authentication_error", "Invalid API key (fake)."),
    403: ("permission_error", "Permission denied (fake)."),
    404: ("not_found_error", "Not found (fake)."),
    413: ("request_too_large", "Request too large (fake)."),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit (fake)."),
    500: ("api_error", "Internal server error (fake)."),
    529: ("overloaded_error", "Overloaded (fake)."),
}
_GEMINI_ERRORS = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument (fake)."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "Permission denied (fake)."),
    404: ("NOT_FOUND", "Not found (fake)."),
    429: ("RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    500: ("INTERNAL", "Internal error (fake)."),
    503: ("UNAVAILABLE", "The model is overloaded (fake)."),
}
#: Shell tools as the CLIs declare them, most specific first: name -> how its argument is passed.
SHELL_TOOLS = ("run_shell_command", "bash", "shell", "exec_command", "shell_command")
_OPENAI_ERRORS = {
    400: ("invalid_request_error", "invalid_request", "Bad request (fake)."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided (fake)."),
    403: ("invalid_request_error", "forbidden", "Forbidden (fake)."),
    404: ("invalid_request_error", "not_found", "Not found (fake)."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached (fake)."),
    500: ("server_error", "server_error", "The server had an error (fake)."),
    503: ("server_error", "server_overloaded", "Service unavailable (fake)."),
}


# --------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    """A parsed ``SCENARIO:<name> <arg>`` keyword. ``arg`` is the rest of that line, stripped."""

    name: str
    arg: str = ""

    @property
    def line(self) -> str:
        return f"SCENARIO:{self.name} {self.arg}".strip()


def parse_scenario(text: str) -> Scenario | None:
    """The last ``SCENARIO:`` keyword in ``text``, or None."""
    found = None
    for m in _SCENARIO_RE.finditer(text):
        found = Scenario(m.group(1).lower(), m.group(2).strip())
    return found


def sleep_command(seconds: str | float) -> str:
    """The shell command of ``SCENARIO:sleep <seconds>``: a Python sleep, not ``sleep N``.

    claude 2.1.330 refuses a bare long ``sleep`` as a Bash command ("Blocked: standalone sleep
    600 ..."), so a long-running tool that every real CLI runs is ``python3 -c ...`` (claude
    needs ``--allowedTools Bash`` or ``Bash(python3:*)`` to run it without asking).
    """
    return f"python3 -c 'import time; time.sleep({seconds})'"


@dataclasses.dataclass(slots=True)
class RecordedRequest:
    """One request as the server saw it. ``headers`` has lower-case names, credentials removed."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text if it was not JSON, or None if empty
    api: str | None  # "anthropic", "openai", "gemini", "chat" or None (anything else)
    scenario: Scenario | None = None
    state_key: tuple[str, ...] | None = None
    status: int | None = None  # HTTP status answered; None while pending / never answered
    action: str | None = None  # what the server did: "text", "tool_use", "error", "hang", ...
    time: float = dataclasses.field(default_factory=time.time)
    #: ``chunks`` / ``think``: when (``time.time()``) each text piece was sent (flushed).
    chunks_sent: list[float] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class _Conversation:
    """What the server needs to know about one request to decide its answer."""

    scenario: Scenario | None
    tool_output: str | None  # output of the tool call answering our last tool request, if any
    tool_is_error: bool
    conversation_id: str
    workdir: str | None
    model: str
    #: User messages that carry this scenario's line (2 or more: the conversation was
    #: continued with the same request, e.g. a retry resuming its session).
    prompts: int = 1


@dataclasses.dataclass(slots=True)
class _Reply:
    """What to answer. kind: text | tool | error | hang | stall | stream_error."""

    kind: str
    text: str = ""
    status: int = 200
    tool_name: str = ""
    tool_input: Any = None  # dict for JSON tools, str for freeform (custom) tools
    #: ``chunks`` / ``think``: the text (and the thought) streamed in this many pieces,
    #: ``gap`` seconds apart; ``thought``: reasoning streamed before the text.
    pieces: int = 1
    gap: float = 0.0
    thought: str = ""

    def split(self, text: str) -> list[str]:
        """``text`` in :attr:`pieces` pieces (fewer when it is shorter)."""
        size = max(1, -(-len(text) // max(1, self.pieces)))
        return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _chunked(name: str, arg: str, default: str) -> _Reply:
    """``SCENARIO:chunks <n> <gap_ms> <text>``: the text in n pieces, gap_ms apart;
    ``SCENARIO:think <n> <gap_ms> <thought> | <text>``: the thought streamed first, the same way."""
    parts = arg.split(None, 2)
    numbers = parts[:2] if len(parts) >= 2 else ["3", "100"]
    if not all(re.fullmatch(r"[0-9]+", x) for x in numbers):
        numbers, parts = ["3", "100"], ["", "", arg]
    text = parts[2] if len(parts) > 2 else default
    thought = ""
    if name == "think":
        thought, _, text = text.partition("|")
        thought, text = thought.strip(), text.strip() or default
    pieces = min(int(numbers[0]), 200) or 1
    return _Reply(
        "text", text, pieces=pieces, gap=min(int(numbers[1]), 5000) / 1000, thought=thought
    )


def _text_of(content: Any) -> str:
    """Concatenated text of an Anthropic/OpenAI content value (string or list of blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if block.get("type") in ("text", "input_text", "output_text") and isinstance(
                    block.get("text"), str
                ):
                    parts.append(block["text"])
                elif block.get("type") == "tool_result":
                    parts.append(_text_of(block.get("content")))
    return "\n".join(parts)


def _anthropic_conversation(body: dict[str, Any], headers: dict[str, str]) -> _Conversation:
    messages = body.get("messages") or []
    scenario: Scenario | None = None
    scen_index = -1
    prompts = 0
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, list):
            text = "\n".join(
                b.get("text", "")
                for b in content
                if isinstance(b, dict)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
            )
        else:
            text = _text_of(content)
        found = parse_scenario(text)
        if found is not None:
            if scenario is None:
                scenario, scen_index = found, i
            prompts += found.line == scenario.line
    tool_output: str | None = None
    tool_is_error = False
    for msg in messages[scen_index + 1 :]:
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tool_output = _text_of(block.get("content"))
                tool_is_error = bool(block.get("is_error"))
    # claude 2.1.197 names its working directory in ``system``; 2.1.330 in a message of role
    # "system" inside ``messages`` ("# Environment ... Primary working directory: DIR").
    system_texts = [_text_of(body.get("system"))] + [
        _text_of(msg.get("content"))
        for msg in messages
        if isinstance(msg, dict) and msg.get("role") == "system"
    ]
    m = next(filter(None, map(_WORKDIR_RE.search, system_texts)), None)
    conv_id = headers.get("x-claude-code-session-id", "")
    if not conv_id:
        meta = body.get("metadata")
        if isinstance(meta, dict):
            conv_id = str(meta.get("user_id", ""))
    return _Conversation(
        scenario=scenario,
        tool_output=tool_output,
        tool_is_error=tool_is_error,
        conversation_id=conv_id,
        workdir=m.group(1) if m else None,
        model=str(body.get("model") or "claude-fake"),
        prompts=max(prompts, 1),
    )


def _openai_conversation(body: dict[str, Any], headers: dict[str, str]) -> _Conversation:
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list):
        items = []
    scenario: Scenario | None = None
    scen_index = -1
    workdir: str | None = None
    prompts = 0
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        if item.get("type", "message") != "message":
            continue
        text = _text_of(item.get("content"))
        if workdir is None:
            m = _WORKDIR_RE.search(text)
            if m:
                workdir = m.group(1)
        found = parse_scenario(text)
        if found is not None:
            if scenario is None:
                scenario, scen_index = found, i
            prompts += found.line == scenario.line
    tool_output: str | None = None
    tool_is_error = False
    for item in items[scen_index + 1 :]:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "tool_search_output":  # codex's client-side tool search
            tool_output = json.dumps(item.get("tools") or [])
            continue
        if item.get("type") in (
            "function_call_output",
            "custom_tool_call_output",
            "local_shell_call_output",
        ):
            out = item.get("output")
            if isinstance(out, dict):  # {"content": ..., "success": ...} in some versions
                tool_is_error = out.get("success") is False
                out = out.get("content", out)
            tool_output = out if isinstance(out, str) else _text_of(out)
    conv_id = (
        headers.get("session-id")
        or headers.get("session_id")
        or headers.get("thread-id")
        or str(body.get("prompt_cache_key") or "")
    )
    return _Conversation(
        scenario=scenario,
        tool_output=tool_output,
        tool_is_error=tool_is_error,
        conversation_id=conv_id,
        workdir=workdir,
        model=str(body.get("model") or "gpt-fake"),
        prompts=max(prompts, 1),
    )


def _gemini_conversation(body: dict[str, Any], headers: dict[str, str]) -> _Conversation:
    """Gemini ``contents``: ``{"role": "user"|"model", "parts": [{"text"}|{"functionCall"}|
    {"functionResponse": {"name", "response": {"output"|"error"}}}]}``."""
    contents = body.get("contents")
    contents = contents if isinstance(contents, list) else []
    scenario: Scenario | None = None
    scen_index = -1
    prompts = 0
    for i in range(len(contents) - 1, -1, -1):
        msg = contents[i]
        if not isinstance(msg, dict) or msg.get("role", "user") != "user":
            continue
        given = msg.get("parts")
        texts: list[Any] = given if isinstance(given, list) else []
        text = "\n".join(
            p["text"] for p in texts if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
        found = parse_scenario(text)
        if found is not None:
            if scenario is None:
                scenario, scen_index = found, i
            prompts += found.line == scenario.line
    tool_output: str | None = None
    tool_is_error = False
    for msg in contents[scen_index + 1 :]:
        parts = msg.get("parts") if isinstance(msg, dict) else None
        for part in parts if isinstance(parts, list) else []:
            answer = part.get("functionResponse") if isinstance(part, dict) else None
            if not isinstance(answer, dict):
                continue
            response = answer.get("response")
            response = response if isinstance(response, dict) else {"output": response}
            tool_is_error = "error" in response and "output" not in response
            out = response.get("output", response.get("error", ""))
            tool_output = out if isinstance(out, str) else json.dumps(out)
    system = body.get("systemInstruction") or body.get("system_instruction")
    system_text = _text_of(system.get("parts")) if isinstance(system, dict) else ""
    m = _WORKDIR_RE.search(system_text)
    return _Conversation(
        scenario=scenario,
        tool_output=tool_output,
        tool_is_error=tool_is_error,
        conversation_id="",
        workdir=m.group(1) if m else None,
        model=str(body.get("model") or "gemini-fake"),
        prompts=max(prompts, 1),
    )


def _chat_conversation(body: dict[str, Any], headers: dict[str, str]) -> _Conversation:
    """OpenAI chat ``messages``: the scenario in the last user message that has one, the tool's
    output in a later ``role: "tool"`` message."""
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    scenario: Scenario | None = None
    scen_index = -1
    prompts = 0
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        found = parse_scenario(_text_of(msg.get("content")))
        if found is not None:
            if scenario is None:
                scenario, scen_index = found, i
            prompts += found.line == scenario.line
    tool_output: str | None = None
    for msg in messages[scen_index + 1 :]:
        if isinstance(msg, dict) and msg.get("role") == "tool":
            tool_output = _text_of(msg.get("content"))
    system_text = "\n".join(
        _text_of(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") == "system"
    )
    m = _WORKDIR_RE.search(system_text)
    return _Conversation(
        scenario=scenario,
        tool_output=tool_output,
        tool_is_error=False,
        conversation_id=headers.get("x-session-id", ""),
        workdir=m.group(1) if m else None,
        model=str(body.get("model") or "chat-fake"),
        prompts=max(prompts, 1),
    )


def _json_values(text: str) -> list[str]:
    """The JSON values written one after another in ``text``, each as its own text."""
    decoder = json.JSONDecoder()
    values: list[str] = []
    at = 0
    while at < len(text):
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            break
        try:
            _, end = decoder.raw_decode(text, at)
        except ValueError:
            values.append(text[at:].strip())
            break
        values.append(text[at:end])
        at = end
    return values


def _declared_tools(names: Iterable[str]) -> str | None:
    """The shell tool among the declared tool names, if any."""
    declared = set(names)
    return next((t for t in SHELL_TOOLS if t in declared), None)


def _shell_args(tool: str, cmd: str) -> dict[str, Any]:
    if tool == "exec_command":
        return {"cmd": cmd}
    if tool == "shell":
        return {"command": ["bash", "-lc", cmd]}
    if tool == "bash":
        return {"command": cmd, "description": "Run a command for the fake scenario"}
    return {"command": cmd}


def _schema_example(schema: Any) -> Any:
    """A value of a JSON schema's shape (for gemini's JSON-mode side calls, e.g. its router)."""
    if not isinstance(schema, dict):
        return {}
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        return {k: _schema_example(v) for k, v in props.items()}
    if kind in ("integer", "number"):
        return 10
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    return "fake"


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeModelServer


class FakeModelServer:
    """Fake Anthropic + OpenAI model endpoint on 127.0.0.1 (see module docstring).

    ``retry_after`` is the value of the ``retry-after`` header sent with 429/529/503 answers
    (seconds, as a string). ``default_text`` is the answer when the prompt has no scenario.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        retry_after: str = "0",
        default_text: str = DEFAULT_TEXT,
    ) -> None:
        self.host = host
        self.port = port
        self.retry_after = retry_after
        self.default_text = default_text
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._counts: dict[tuple[str, ...], int] = {}
        self._stopping = threading.Event()
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._ids = itertools.count(1)

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> str:
        """Bind (port 0 = any free port), serve in a background thread, return the base URL."""
        if self._server is not None:
            return self.url
        self._stopping.clear()
        server = _HTTPServer((self.host, self.port), _Handler)
        server.fake = self
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-model-server:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self.url

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving. Releases hanging requests and closes open connections; never hangs."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # wakes "hang"/"stall" handlers
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        done = threading.Event()

        def _shutdown() -> None:
            server.shutdown()
            done.set()

        threading.Thread(target=_shutdown, daemon=True).start()
        done.wait(timeout)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> FakeModelServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL for claude's ``ANTHROPIC_BASE_URL``: ``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """Base URL for a codex model provider: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    # ---------------------------------------------------------------- inspection

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, path: str, method: str = "POST") -> list[RecordedRequest]:
        """Recorded requests whose path (query string ignored) is ``path``."""
        return [
            r
            for r in self.requests
            if r.method == method and r.path.split("?", 1)[0].rstrip("/") == path.rstrip("/")
        ]

    def model_requests(self) -> list[RecordedRequest]:
        """Recorded model calls (``/v1/messages``, ``/v1/responses``, Gemini's
        ``:generateContent`` / ``:streamGenerateContent`` and ``/v1/chat/completions``)."""
        return [r for r in self.requests if r.api is not None]

    def clear(self) -> None:
        """Forget recorded requests and per-conversation counters."""
        with self._lock:
            self._requests.clear()
            self._counts.clear()

    # ---------------------------------------------------------------- internals

    def _record(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(rec)

    def _bump(self, key: tuple[str, ...]) -> int:
        """Count one more request for ``key``; return how many came before this one."""
        with self._lock:
            n = self._counts.get(key, 0)
            self._counts[key] = n + 1
            return n

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_fake_{uuid.uuid4().hex[:16]}"

    def _decide(self, api: str, conv: _Conversation, rec: RecordedRequest) -> _Reply:
        scen = conv.scenario
        rec.scenario = scen
        if scen is None:
            if conv.tool_output is not None:
                return self._after_tool(conv)
            return _Reply("text", self.default_text)
        key = (api, conv.conversation_id, scen.line)
        rec.state_key = key
        seen = self._bump(key)
        name, arg = scen.name, scen.arg

        status = _STATUS_RE.match(name)
        if status:
            code, once = int(status.group(1)), bool(status.group(2))
            if not once or seen == 0:
                return _Reply("error", status=code)
            name = "text"  # recovered: answer normally (the arg, if any, is the text)

        if conv.tool_output is not None:
            return self._after_tool(conv)
        if name == "later":  # SCENARIO:later <seconds> <scenario>: that scenario, answered late
            secs, _, inner = arg.partition(" ")
            if re.fullmatch(r"[0-9]+(\.[0-9]+)?", secs):
                time.sleep(min(float(secs), 30.0))
            later = parse_scenario("SCENARIO:" + inner) if inner else None
            name, arg = (later.name, later.arg) if later is not None else ("text", "")
        if name == "hangonce":  # the first request of the conversation hangs, then text
            return _Reply("hang") if seen == 0 else _Reply("text", arg or self.default_text)
        if name == "hang":
            return _Reply("hang")
        if name == "stall":
            return _Reply("stall")
        if name == "stream_error":
            return _Reply("stream_error")
        if name in ("bash", "shell", "sh"):
            return _Reply("tool", tool_name="shell", tool_input=arg or "echo hi")
        if name == "sleep":
            secs = arg.split()[0] if arg.split() else "30"
            if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", secs):
                secs = "30"
            return _Reply("tool", tool_name="shell", tool_input=sleep_command(secs))
        if name == "write":
            parts = arg.split(None, 1)
            path = parts[0] if parts else "fake_written.txt"
            content = parts[1] if len(parts) > 1 else "hello file"
            return _Reply("tool", tool_name="write", tool_input={"path": path, "content": content})
        if name in ("json", "jsonfix"):
            return self._json(api, conv, rec, name, arg)
        if name == "tool":
            # SCENARIO:tool <Name> <json input>  (raw tool call, e.g. claude's Read/Glob)
            parts = arg.split(None, 1)
            tname = parts[0] if parts else "Bash"
            try:
                tinput = json.loads(parts[1]) if len(parts) > 1 else {}
            except ValueError:
                tinput = parts[1]
            return _Reply("tool", tool_name="raw:" + tname, tool_input=tinput)
        if name in ("chunks", "think"):
            return _chunked(name, arg, self.default_text)
        # "text" and anything unknown
        return _Reply("text", arg or self.default_text)

    def _json(
        self, api: str, conv: _Conversation, rec: RecordedRequest, name: str, arg: str
    ) -> _Reply:
        """``SCENARIO:json <value>``: the final answer is that JSON, given the way the CLI asks
        for structured output: claude (``--json-schema``) as a call of the ``StructuredOutput``
        tool it offers, codex (``text.format`` json_schema) and the others as the message's
        text.  ``SCENARIO:jsonfix <bad> <good>``: ``<bad>`` for the first prompt, ``<good>``
        once a later prompt of the conversation carries the same line too (a retry)."""
        text = arg
        if name == "jsonfix":
            values = _json_values(arg)
            text = values[min(conv.prompts, len(values)) - 1] if values else arg
        body = rec.body if isinstance(rec.body, dict) else {}
        tools = body.get("tools")
        offered = (
            {t.get("name") for t in tools if isinstance(t, dict)}
            if isinstance(tools, list)
            else set()
        )
        if api == "anthropic" and STRUCTURED_OUTPUT_TOOL in offered:
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if isinstance(value, dict):
                return _Reply("tool", tool_name="raw:" + STRUCTURED_OUTPUT_TOOL, tool_input=value)
        return _Reply("text", text or "{}")

    def _after_tool(self, conv: _Conversation) -> _Reply:
        out = conv.tool_output or ""
        if len(out) > MAX_QUOTED_OUTPUT:
            out = out[:MAX_QUOTED_OUTPUT]
        prefix = TOOL_ERROR_PREFIX if conv.tool_is_error else TOOL_DONE_PREFIX
        return _Reply("text", prefix + out)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    server_version = "FakeModelServer/1.0"
    sys_version = ""

    # quiet
    def log_message(self, format: str, *args: Any) -> None:
        return

    def setup(self) -> None:
        super().setup()
        with self.server.fake._lock:
            self.server.fake._conns.add(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        with self.server.fake._lock:
            self.server.fake._conns.discard(self.connection)

    def handle(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            super().handle()

    # ------------------------------------------------------------- plumbing

    @property
    def fake(self) -> FakeModelServer:
        return self.server.fake

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > 0:
            return self.rfile.read(length)
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return b""

    def _record(self, api: str | None, raw: bytes) -> RecordedRequest:
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        headers = {
            k.lower(): v for k, v in self.headers.items() if k.lower() not in _SENSITIVE_HEADERS
        }
        rec = RecordedRequest(self.command, self.path, headers, body, api)
        self.fake._record(rec)
        return rec

    def _request_id(self) -> str:
        return f"req_fake_{uuid.uuid4().hex[:12]}"

    def _send_json(
        self,
        status: int,
        payload: Any,
        extra_headers: dict[str, str] | None = None,
        rec: RecordedRequest | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        rid = self._request_id()
        self.send_header("request-id", rid)
        self.send_header("x-request-id", rid)
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()
        if rec is not None:
            rec.status = status

    def _start_sse(self, rec: RecordedRequest) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        rid = self._request_id()
        self.send_header("request-id", rid)
        self.send_header("x-request-id", rid)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        rec.status = 200

    def _sse(self, event: str, data: dict[str, Any]) -> None:
        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _pieces(
        self,
        reply: _Reply,
        text: str,
        send: Callable[[str], None],
        rec: RecordedRequest | None = None,
    ) -> None:
        """Send ``text`` in the reply's pieces, its gap apart (``chunks`` / ``think``);
        ``rec``: stamp each piece's time in ``rec.chunks_sent`` (the answer's text)."""
        for i, piece in enumerate(reply.split(text)):
            if i and reply.gap:
                time.sleep(reply.gap)
            send(piece)
            if rec is not None:
                rec.chunks_sent.append(time.time())

    def _reply(
        self,
        api: str,
        conv: _Conversation,
        rec: RecordedRequest,
        error: Callable[[int, RecordedRequest], None],
    ) -> _Reply | None:
        """The fake's reply to this request (recorded as its action); ``None`` once an error
        (sent by ``error``, the API's own error body) or a hang has been served instead."""
        reply = self.fake._decide(api, conv, rec)
        rec.action = reply.kind
        if reply.kind == "error":
            error(reply.status, rec)
            return None
        if reply.kind == "hang":
            self._hang(rec)
            return None
        return reply

    def _hang(self, rec: RecordedRequest, action: str = "hang") -> None:
        """Hold the request until the server stops, then drop the connection unanswered."""
        rec.action = action
        self.fake._stopping.wait()
        self.close_connection = True

    # ------------------------------------------------------------- verbs

    def do_HEAD(self) -> None:
        self._record(None, b"")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        rec = self._record(None, b"")
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/models"):
            payload: Any = {"data": [], "object": "list", "has_more": False, "models": []}
        else:
            payload = {}
        self._send_json(200, payload, rec=rec)

    def do_DELETE(self) -> None:
        rec = self._record(None, self._read_body())
        self._send_json(200, {}, rec=rec)

    do_PUT = do_DELETE
    do_PATCH = do_DELETE

    def do_POST(self) -> None:
        raw = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith(":countTokens"):
            rec = self._record(None, raw)
            self._send_json(200, {"totalTokens": 12}, rec=rec)
        elif path.endswith((":streamGenerateContent", ":generateContent")):
            rec = self._record("gemini", raw)
            self._gemini(rec, stream=path.endswith(":streamGenerateContent"))
        elif path.endswith("/chat/completions"):
            rec = self._record("chat", raw)
            self._chat(rec)
        elif path.endswith("/messages/count_tokens"):
            rec = self._record(None, raw)
            self._send_json(200, {"input_tokens": 12}, rec=rec)
        elif path.endswith("/messages"):
            rec = self._record("anthropic", raw)
            self._anthropic(rec)
        elif path.endswith("/responses"):
            rec = self._record("openai", raw)
            self._openai(rec)
        else:
            rec = self._record(None, raw)
            self._send_json(200, {}, rec=rec)

    # ------------------------------------------------------------- Anthropic

    def _anthropic(self, rec: RecordedRequest) -> None:
        body = rec.body if isinstance(rec.body, dict) else {}
        conv = _anthropic_conversation(body, rec.headers)
        reply = self._reply("anthropic", conv, rec, self._anthropic_error)
        if reply is None:
            return
        blocks: list[dict[str, Any]]
        if reply.kind == "tool":
            blocks = [self._anthropic_tool_block(reply, conv)]
            stop_reason = "tool_use"
        else:
            blocks = [{"type": "text", "text": reply.text or DEFAULT_TEXT}]
            if reply.thought:
                thinking = {"type": "thinking", "thinking": reply.thought, "signature": "fake"}
                blocks.insert(0, thinking)
            stop_reason = "end_turn"
        msg_id = self.fake._new_id("msg")
        usage = {
            "input_tokens": 12,
            "output_tokens": 7,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        if not body.get("stream"):
            if reply.kind in ("stall", "stream_error"):
                blocks = [{"type": "text", "text": DEFAULT_TEXT}]
                stop_reason = "end_turn"
            self._send_json(
                200,
                {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": conv.model,
                    "content": blocks,
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": usage,
                },
                rec=rec,
            )
            return
        self._start_sse(rec)
        self._sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": conv.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": dict(usage, output_tokens=1),
                },
            },
        )
        if reply.kind == "stall":
            self._sse("ping", {"type": "ping"})
            self._hang(rec, "stall")
            return
        if reply.kind == "stream_error":
            self._sse(
                "error",
                {
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "The model failed (fake)."},
                },
            )
            return
        for index, block in enumerate(blocks):
            if block["type"] in ("text", "thinking"):
                kind = block["type"]
                empty = {"type": kind, kind: ""} if kind == "text" else dict(block, thinking="")
                self._sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": empty},
                )

                def piece(text: str, index: int = index, kind: str = kind) -> None:
                    self._sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": f"{kind}_delta", kind: text},
                        },
                    )

                self._pieces(reply, block[kind], piece, rec if kind == "text" else None)
                if kind == "thinking":
                    signature = {"type": "signature_delta", "signature": "fake"}
                    self._sse(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": signature},
                    )
            else:
                start = dict(block, input={})
                self._sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
                js = json.dumps(block["input"])
                cut = len(js) // 2
                for half in (js[:cut], js[cut:]):
                    self._sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": half},
                        },
                    )
            self._sse("content_block_stop", {"type": "content_block_stop", "index": index})
        self._sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        self._sse("message_stop", {"type": "message_stop"})

    def _anthropic_tool_block(self, reply: _Reply, conv: _Conversation) -> dict[str, Any]:
        tool_id = self.fake._new_id("toolu")
        if reply.tool_name == "shell":
            name = "Bash"
            tool_input: Any = {
                "command": reply.tool_input,
                "description": "Run a command for the fake scenario",
            }
        elif reply.tool_name == "write":
            name = "Write"
            path = reply.tool_input["path"]
            if not path.startswith("/") and conv.workdir:
                path = conv.workdir.rstrip("/") + "/" + path
            tool_input = {"file_path": path, "content": reply.tool_input["content"] + "\n"}
        else:
            name = reply.tool_name.removeprefix("raw:")
            tool_input = copy.deepcopy(reply.tool_input)
            if not isinstance(tool_input, dict):
                tool_input = {"input": tool_input}
        return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}

    def _anthropic_error(self, status: int, rec: RecordedRequest) -> None:
        etype, message = _ANTHROPIC_ERRORS.get(
            status,
            ("api_error" if status >= 500 else "invalid_request_error", f"HTTP {status} (fake)."),
        )
        headers = {}
        if status in (429, 529, 503):
            headers["retry-after"] = self.fake.retry_after
        self._send_json(
            status,
            {"type": "error", "error": {"type": etype, "message": message}},
            extra_headers=headers,
            rec=rec,
        )

    # ------------------------------------------------------------- OpenAI Responses

    def _openai(self, rec: RecordedRequest) -> None:
        body = rec.body if isinstance(rec.body, dict) else {}
        conv = _openai_conversation(body, rec.headers)
        reply = self._reply("openai", conv, rec, self._openai_error)
        if reply is None:
            return
        resp_id = self.fake._new_id("resp")
        base = {
            "id": resp_id,
            "object": "response",
            "created_at": int(time.time()),
            "model": conv.model,
            "status": "in_progress",
            "output": [],
        }
        if reply.kind == "tool":
            item = self._openai_tool_item(reply, body)
        else:
            item = {
                "type": "message",
                "id": self.fake._new_id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": reply.text or DEFAULT_TEXT, "annotations": []}
                ],
            }
        if not body.get("stream", True):
            done = dict(base, status="completed", output=[item], usage=_openai_usage())
            self._send_json(200, done, rec=rec)
            return
        self._start_sse(rec)
        seq = itertools.count()
        self._sse(
            "response.created",
            {"type": "response.created", "sequence_number": next(seq), "response": base},
        )
        if reply.kind == "stall":
            self._hang(rec, "stall")
            return
        if reply.kind == "stream_error":
            failed = dict(
                base,
                status="failed",
                error={"code": "server_error", "message": "The model failed (fake)."},
            )
            self._sse(
                "response.failed",
                {"type": "response.failed", "sequence_number": next(seq), "response": failed},
            )
            return
        output = [item]
        if reply.thought and item["type"] == "message":
            output.insert(0, self._openai_reasoning(reply, seq))
        if item["type"] == "message":
            added = dict(item, status="in_progress", content=[])
            self._sse(
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": len(output) - 1,
                    "item": added,
                },
            )

            def piece(text: str) -> None:
                self._sse(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "sequence_number": next(seq),
                        "item_id": item["id"],
                        "output_index": len(output) - 1,
                        "content_index": 0,
                        "delta": text,
                    },
                )

            self._pieces(reply, item["content"][0]["text"], piece, rec)
        self._sse(
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "sequence_number": next(seq),
                "output_index": len(output) - 1,
                "item": item,
            },
        )
        done = dict(base, status="completed", output=output, usage=_openai_usage())
        self._sse(
            "response.completed",
            {"type": "response.completed", "sequence_number": next(seq), "response": done},
        )

    def _openai_reasoning(self, reply: _Reply, seq: Iterator[int]) -> dict[str, Any]:
        """``SCENARIO:think``: a reasoning item whose summary streams first (output 0)."""
        rid = self.fake._new_id("rs")
        item: dict[str, Any] = {"type": "reasoning", "id": rid, "summary": []}
        self._sse(
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": item,
            },
        )
        where = {"item_id": rid, "output_index": 0, "summary_index": 0}
        part = {"type": "summary_text", "text": ""}
        self._sse(
            "response.reasoning_summary_part.added",
            {
                "type": "response.reasoning_summary_part.added",
                "sequence_number": next(seq),
                **where,
                "part": part,
            },
        )

        def piece(text: str) -> None:
            self._sse(
                "response.reasoning_summary_text.delta",
                {
                    "type": "response.reasoning_summary_text.delta",
                    "sequence_number": next(seq),
                    **where,
                    "delta": text,
                },
            )

        self._pieces(reply, reply.thought, piece)
        self._sse(
            "response.reasoning_summary_text.done",
            {
                "type": "response.reasoning_summary_text.done",
                "sequence_number": next(seq),
                **where,
                "text": reply.thought,
            },
        )
        done = dict(part, text=reply.thought)
        self._sse(
            "response.reasoning_summary_part.done",
            {
                "type": "response.reasoning_summary_part.done",
                "sequence_number": next(seq),
                **where,
                "part": done,
            },
        )
        item = dict(item, summary=[done])
        self._sse(
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": item,
            },
        )
        return item

    # ------------------------------------------------------------- Gemini v1beta

    def _gemini(self, rec: RecordedRequest, *, stream: bool) -> None:
        body = rec.body if isinstance(rec.body, dict) else {}
        model = self.path.split("?", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
        conv = _gemini_conversation(dict(body, model=model), rec.headers)
        config = body.get("generationConfig")
        config = config if isinstance(config, dict) else {}
        reply = self.fake._decide("gemini", conv, rec)
        if reply.kind == "error":
            rec.action = "error"
            status = reply.status
            code, message = _GEMINI_ERRORS.get(status, ("UNKNOWN", f"HTTP {status} (fake)."))
            headers = {"retry-after": self.fake.retry_after} if status in (429, 503) else {}
            payload = {"error": {"code": status, "message": message, "status": code}}
            self._send_json(status, payload, extra_headers=headers, rec=rec)
            return
        if reply.kind == "hang":
            rec.action = "hang"
            self._hang(rec)
            return
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if config.get("responseMimeType") == "application/json" and not stream:
            # A JSON-mode side call (gemini's model router, next-speaker check): not the answer.
            rec.action = "json"
            part: dict[str, Any] = {"text": json.dumps(_schema_example(schema))}
        elif reply.kind == "tool":
            rec.action = "tool"
            part = {"functionCall": self._gemini_call(reply, body)}
        else:
            rec.action = "text"
            part = {"text": reply.text or DEFAULT_TEXT}
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": self.fake._new_id("resp"),
        }
        if not stream:
            self._send_json(200, chunk, rec=rec)
            return
        self._start_sse(rec)
        if reply.kind == "stall":
            rec.action = "stall"
            self._hang(rec, "stall")
            return
        if reply.pieces > 1 and "text" in part:
            texts = reply.split(part["text"])
            candidate: dict[str, Any] = chunk["candidates"][0]  # type: ignore[index]

            def piece(text: str, thought: bool = False) -> None:
                parts = [{"text": text, "thought": True} if thought else {"text": text}]
                content = {"role": "model", "parts": parts}
                last = not thought and len(rec.chunks_sent) == len(texts) - 1
                first: dict[str, Any] = dict(candidate, content=content)
                if not last:
                    first.pop("finishReason")
                self._gemini_chunk(dict(chunk, candidates=[first]))

            if reply.thought:
                self._pieces(reply, reply.thought, functools.partial(piece, thought=True))
            self._pieces(reply, part["text"], piece, rec)
            return
        self._gemini_chunk(chunk)

    def _gemini_chunk(self, chunk: dict[str, Any]) -> None:
        self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        self.wfile.flush()

    def _gemini_call(self, reply: _Reply, body: dict[str, Any]) -> dict[str, Any]:
        names: list[str] = []
        for tool in body.get("tools") or []:
            decls = tool.get("functionDeclarations") if isinstance(tool, dict) else None
            for decl in decls if isinstance(decls, list) else []:
                if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                    names.append(decl["name"])
        call_id = self.fake._new_id("call")
        if reply.tool_name == "shell":
            tool = _declared_tools(names) or "run_shell_command"
            return {"name": tool, "args": _shell_args(tool, reply.tool_input), "id": call_id}
        if reply.tool_name == "write":
            args = {"file_path": reply.tool_input["path"], "content": reply.tool_input["content"]}
            return {"name": "write_file", "args": args, "id": call_id}
        name = reply.tool_name.removeprefix("raw:")
        args = reply.tool_input if isinstance(reply.tool_input, dict) else {}
        return {"name": name, "args": args, "id": call_id}

    # ------------------------------------------------------------- OpenAI chat completions

    def _chat(self, rec: RecordedRequest) -> None:
        body = rec.body if isinstance(rec.body, dict) else {}
        conv = _chat_conversation(body, rec.headers)
        reply = self._reply("chat", conv, rec, self._openai_error)
        if reply is None:
            return
        tools = [
            t["function"]["name"]
            for t in body.get("tools") or []
            if isinstance(t, dict)
            and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str)
        ]
        delta: dict[str, Any] = {"role": "assistant"}
        finish = "stop"
        if reply.kind == "tool" and tools:
            call = self._chat_call(reply, tools)
            delta["content"] = None
            delta["tool_calls"] = [dict(call, index=0)]
            finish = "tool_calls"
        else:
            if reply.kind == "tool":  # a side call without tools (a title, a summary)
                rec.action = "text"
            delta["content"] = reply.text if reply.kind == "text" else "Fake title"
        base = {
            "id": self.fake._new_id("chatcmpl"),
            "created": int(time.time()),
            "model": conv.model,
        }
        usage = {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16}
        if not body.get("stream"):
            message = {k: v for k, v in delta.items() if k != "tool_calls"}
            if "tool_calls" in delta:
                message["tool_calls"] = [
                    {k: v for k, v in c.items() if k != "index"} for c in delta["tool_calls"]
                ]
            answer = dict(
                base,
                object="chat.completion",
                choices=[{"index": 0, "message": message, "finish_reason": finish}],
                usage=usage,
            )
            self._send_json(200, answer, rec=rec)
            return
        self._start_sse(rec)
        if reply.kind == "stall":
            self._hang(rec, "stall")
            return

        def send(payload: dict[str, Any] | str) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

        chunk = dict(base, object="chat.completion.chunk")
        if reply.kind == "text" and (reply.pieces > 1 or reply.thought):

            def piece(text: str, key: str = "content") -> None:
                part = {
                    "index": 0,
                    "delta": {"role": "assistant", key: text},
                    "finish_reason": None,
                }
                send(dict(chunk, choices=[part]))

            if reply.thought:
                self._pieces(
                    reply, reply.thought, functools.partial(piece, key="reasoning_content")
                )
            self._pieces(reply, reply.text, piece, rec)
        else:
            send(dict(chunk, choices=[{"index": 0, "delta": delta, "finish_reason": None}]))
        send(dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
        send(dict(chunk, choices=[], usage=usage))
        send("[DONE]")

    def _chat_call(self, reply: _Reply, tools: list[str]) -> dict[str, Any]:
        call_id = "call_" + uuid.uuid4().hex[:8]
        if reply.tool_name == "shell":
            tool = _declared_tools(tools) or tools[0]
            args: Any = _shell_args(tool, reply.tool_input)
        elif reply.tool_name == "write":
            path, content = reply.tool_input["path"], reply.tool_input["content"] + "\n"
            tool = next((t for t in ("write_file", "write") if t in tools), "write_file")
            args = {"file_path": path, "content": content}
            if tool == "write":
                args = {"filePath": path, "content": content}
        else:
            tool = reply.tool_name.removeprefix("raw:")
            args = reply.tool_input
        arguments = args if isinstance(args, str) else json.dumps(args)
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": tool, "arguments": arguments},
        }

    def _openai_tool_item(self, reply: _Reply, body: dict[str, Any]) -> dict[str, Any]:
        tools = {
            t.get("name"): t
            for t in body.get("tools") or []
            if isinstance(t, dict) and t.get("name")
        }
        call_id = self.fake._new_id("call")
        if reply.tool_name == "shell":
            cmd: str = reply.tool_input
            if "exec_command" in tools or not tools:
                return _function_call(call_id, "exec_command", {"cmd": cmd})
            if "shell_command" in tools:
                return _function_call(call_id, "shell_command", {"command": cmd})
            if "shell" in tools:
                return _function_call(call_id, "shell", {"command": ["bash", "-lc", cmd]})
            return _function_call(call_id, "exec_command", {"cmd": cmd})
        if reply.tool_name == "write":
            path = reply.tool_input["path"]
            lines = reply.tool_input["content"].split("\n")
            patch = (
                "*** Begin Patch\n*** Add File: "
                + path
                + "\n"
                + "".join(f"+{line}\n" for line in lines)
                + "*** End Patch\n"
            )
            spec = tools.get("apply_patch")
            if spec is not None and spec.get("type") == "custom":
                return {
                    "type": "custom_tool_call",
                    "id": self.fake._new_id("ctc"),
                    "call_id": call_id,
                    "name": "apply_patch",
                    "input": patch,
                    "status": "completed",
                }
            if spec is not None:
                return _function_call(call_id, "apply_patch", {"input": patch})
            # No apply_patch tool offered: write the file with the shell instead.
            quoted = shlex.quote(path)
            text = shlex.quote(reply.tool_input["content"] + "\n")
            script = f'mkdir -p "$(dirname {quoted})" && printf %s {text} > {quoted}'
            return _function_call(call_id, "exec_command", {"cmd": script})
        name = reply.tool_name.removeprefix("raw:")
        if name == "tool_search" and name not in tools and _offers_tool_search(body):
            args = reply.tool_input if isinstance(reply.tool_input, dict) else {}
            return {
                "type": "tool_search_call",
                "id": self.fake._new_id("tsc"),
                "call_id": call_id,
                "execution": "client",
                "status": "completed",
                "arguments": {"query": str(args.get("query", reply.tool_input))},
            }
        namespace = None if name in tools else _namespace_of(name, body)
        if namespace is not None:
            args = reply.tool_input if isinstance(reply.tool_input, dict) else {}
            return dict(_function_call(call_id, name, args), namespace=namespace)
        spec = tools.get(name)
        if spec is not None and spec.get("type") == "custom":
            return {
                "type": "custom_tool_call",
                "id": self.fake._new_id("ctc"),
                "call_id": call_id,
                "name": name,
                "input": reply.tool_input
                if isinstance(reply.tool_input, str)
                else json.dumps(reply.tool_input),
                "status": "completed",
            }
        args = (
            reply.tool_input if isinstance(reply.tool_input, dict) else {"input": reply.tool_input}
        )
        return _function_call(call_id, name, args)

    def _openai_error(self, status: int, rec: RecordedRequest) -> None:
        etype, code, message = _OPENAI_ERRORS.get(
            status,
            (
                "server_error" if status >= 500 else "invalid_request_error",
                None,
                f"HTTP {status} (fake).",
            ),
        )
        headers = {}
        if status in (429, 503):
            headers["retry-after"] = self.fake.retry_after
        self._send_json(
            status,
            {"error": {"message": message, "type": etype, "param": None, "code": code}},
            extra_headers=headers,
            rec=rec,
        )


def _offers_tool_search(body: dict[str, Any]) -> bool:
    """Whether a Responses request offers client-side tool search (codex 0.169 hides
    MCP tools behind it)."""
    return any(
        isinstance(t, dict) and t.get("type") == "tool_search" for t in body.get("tools") or []
    )


def _namespace_of(name: str, body: dict[str, Any]) -> str | None:
    """The namespace of tool ``name`` when a tool search of this conversation (or the request's
    own ``tools``) gave it inside one (codex's MCP tools: namespace ``mcp__<server>__``)."""
    entries: list[Any] = list(body.get("tools") or [])
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "tool_search_output":
            entries += item.get("tools") or []
    for entry in entries:
        if isinstance(entry, dict) and entry.get("type") == "namespace":
            inner = [t.get("name") for t in entry.get("tools") or [] if isinstance(t, dict)]
            if name in inner:
                return str(entry.get("name"))
    return None


def _function_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(args),
        "status": "completed",
    }


def _openai_usage() -> dict[str, Any]:
    return {
        "input_tokens": 12,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 19,
    }


@contextlib.contextmanager
def running_server(**kwargs: Any) -> Iterator[FakeModelServer]:
    """``with running_server() as s:`` — same as ``with FakeModelServer(**kwargs) as s:``."""
    server = FakeModelServer(**kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.fakes.model_server [--port N] [-- COMMAND ...]``: the real CLIs offline.

    Starts the server; with a COMMAND, runs it with every CLI pointed at the server (a
    private HOME under a temporary directory) and exits with its code; without one, prints
    the ``export`` lines for another shell and serves until Ctrl-C.
    """
    import argparse
    import shlex
    import subprocess
    import sys
    import tempfile

    from tests.fakes.real_cli import clean_env, offline_env, stripped_names

    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.model_server",
        description="The fake model server: run the real claude, codex, gemini, opencode "
        "and qwen CLIs without a network or credentials.",
        epilog="example: python -m tests.fakes.model_server -- genesis run -b claude "
        "'SCENARIO:bash echo hi' --ask",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)"
    )
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- COMMAND ...: run it, then stop"
    )
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with tempfile.TemporaryDirectory(prefix="genesis-offline-") as home:
        server = FakeModelServer(port=args.port)
        url = server.start()
        try:
            values = offline_env(url, home)
            if command:
                env = {**clean_env(), **values}
                try:
                    return subprocess.run(command, env=env, check=False).returncode
                except FileNotFoundError:
                    print(f"{command[0]}: command not found", file=sys.stderr)
                    return 127
            print(f"# the fake model server: {url} (Ctrl-C stops it)")
            print("# in another shell (its HOME is a temporary one):")
            for name in stripped_names():
                if name not in values:
                    print(f"unset {name}")
            for name, value in sorted(values.items()):
                print(f"export {name}={shlex.quote(value)}")
            sys.stdout.flush()
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0
        finally:
            server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
