"""Adapter for OpenAI's ``codex`` CLI (``codex exec --json --skip-git-repo-check``).

The prompt goes to stdin (the ``-`` argument), so it is never read as a flag
and has no argv size limit.  Both the current event format (``thread.started``,
``item.*``, ``turn.*``) and the old one (``{"id", "msg": {...}}``, codex <= 0.43)
are understood.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from coding_genesis.backend import (
    Backend,
    CommandSpec,
    OptionSpec,
    Translator,
)
from coding_genesis.events import (
    CliRetryEvent,
    ErrorEvent,
    Event,
    ResultEvent,
    SessionEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from coding_genesis.request import Request
from coding_genesis.result import RunResult

from ._codex import (
    REPOSITORY_FILES,
    SANDBOX,
    SETTING_SOURCES,
    TAKES,
    codex_overrides,
    codex_sandbox,
    http_status,
    request_extras,
    strict_schema_warning,
    untrusted_project,
)
from ._common import PROXY_ENV, as_int, preview
from .codex_control import CodexControl

__all__ = ["CodexBackend", "CodexTranslator", "codex_failure_hint", "http_status"]

#: The output schema's file in the run's private overlay directory.
_SCHEMA_FILE = "output-schema.json"

_TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})

#: "Reconnecting... 2/5 (...)": codex retrying the API by itself (not fatal).
_RECONNECTING = re.compile(r"^Reconnecting\.\.\.\s*(\d+)/(\d+)")

#: Messages whose meaning codex words itself, most specific first.
_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # codex's wording for HTTP 5xx from the model API (see the codex_500 recording).
    ("internal", re.compile(r"experiencing high demand|internal server error", re.I)),
    ("rate_limit", re.compile(r"usage limit|quota|too many requests", re.I)),
    ("auth", re.compile(r"unauthorized|not logged in|please log ?in|invalid api key", re.I)),
    (
        "network",
        re.compile(
            r"stream disconnected|error sending request|waiting for network|connection (?:refused|reset|closed)|idle timeout waiting",
            re.I,
        ),
    ),
)


def codex_failure_hint(result: RunResult) -> str | None:
    """Category from codex's own words for its failure (turn.failed, last error line)."""
    texts = [result.message, *reversed(result.cli_errors)]
    for text in texts:
        for category, pattern in _HINTS:
            if text and pattern.search(text):
                return category
    return None


class CodexBackend(Backend):
    name = "codex"
    executable = "codex"
    path_env_var = "GENESIS_CODEX_PATH"
    #: What it needs from the environment under ``inherit_env=False``.
    env_needs = (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "CODEX_HOME",
        *PROXY_ENV,
    )
    supports_resume = True
    #: ``--output-schema FILE`` (``outputSchema`` of the app-server's ``turn/start``):
    #: sent to the API as a strict JSON-Schema response format; codex does not
    #: check the answer itself.
    structured_output = True
    setting_sources = SETTING_SOURCES
    default_setting_sources = ("user",)
    repository_files = REPOSITORY_FILES
    #: Sent to the CLI if the runner dies (it cleans up its own tools on SIGTERM).
    pdeath_signal = signal.SIGTERM
    permission_levels = frozenset(SANDBOX)
    takes = TAKES
    notes = (
        "no turn limit: max_turns= is reported as not honored",
        "API retries are capped per model provider (-c model_providers.NAME."
        "request_max_retries / stream_max_retries): only for a provider named in "
        "options={'config': {'model_provider': NAME}}",
        "a project's .codex/ is not read, even in a project marked trusted (-c projects=...: "
        "the working directory and those above it untrusted); "
        "setting_sources=('user', 'project') leaves codex's own trust to decide",
    )
    options: Mapping[str, OptionSpec] = {
        "sandbox": OptionSpec((str,), "-s (read-only, workspace-write, danger-full-access)"),
        "profile": OptionSpec((str,), "-p, a profile of config.toml"),
        "config": OptionSpec((dict,), "-c key=value overrides"),
    }

    def install_hint(self) -> str:
        return "install it with `npm install -g @openai/codex`, or set GENESIS_CODEX_PATH"

    def build_command(self, request: Request) -> CommandSpec:
        opts = request.options
        args: list[str] = ["exec", "--json", "--skip-git-repo-check", "-C", request.cwd]
        if request.model:
            args += ["-m", request.model]
        sandbox, warnings = codex_sandbox(request.permissions, opts)
        if sandbox:
            args += ["-s", sandbox]
        if opts.get("profile"):
            args += ["-p", str(opts["profile"])]
        overrides, more = codex_overrides(opts, request.max_turns, request.cli_max_retries)
        args += untrusted_project(request.cwd, request.setting_sources)
        args += overrides
        warnings += more
        extras = request_extras(request)
        args += extras.exec_args
        warnings += extras.warnings
        overlay: dict[str, bytes] = {}
        if request.output_schema is not None:
            overlay[_SCHEMA_FILE] = json.dumps(request.output_schema).encode("utf-8")
            args += ["--output-schema", f"{{overlay}}/{_SCHEMA_FILE}"]
            warnings += strict_schema_warning(request.output_schema)
        args.extend(request.extra_args)
        if request.resume:
            args += ["resume", request.resume]
        args.append("-")  # read the prompt from stdin
        return CommandSpec(
            args=tuple(args),
            stdin=request.prompt.encode("utf-8"),
            overlay=overlay,
            warnings=tuple(warnings),
        )

    def translator(self) -> CodexTranslator:
        return CodexTranslator()

    def failure_hint(self, result: RunResult) -> str | None:
        return codex_failure_hint(result)

    def control(self) -> CodexControl:
        """A live session over ``codex app-server`` (JSON-RPC, can steer)."""
        return CodexControl()


class CodexTranslator(Translator):
    """codex exec --json lines to normalized events."""

    __slots__ = ("_started", "_thread")

    def __init__(self) -> None:
        self._started: set[str] = set()
        #: The thread (``thread.started``): its usage is the thread's running total.
        self._thread: str | None = None

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        kind = obj.get("type")
        if kind is None and isinstance(obj.get("msg"), Mapping):
            return self._legacy(obj["msg"])
        if kind == "item.completed" or kind == "item.started":
            item = obj.get("item")
            if isinstance(item, Mapping):
                return self._item(item, completed=kind == "item.completed")
            return ()
        if kind == "thread.started":
            thread = obj.get("thread_id")
            self._thread = thread if isinstance(thread, str) else None
            return (SessionEvent(thread),)
        if kind == "turn.completed":
            usage = obj.get("usage")
            if isinstance(usage, dict) and self.totals is not None:
                # The thread's running total (a resumed thread counts its past
                # turns too): this run's share of it.
                usage = {
                    k: int(v) for k, v in self.totals.share("codex", self._thread, usage).items()
                }
            return (
                UsageEvent(usage if isinstance(usage, dict) else None),
                ResultEvent(is_error=False, subtype="turn.completed", text=None),
            )
        if kind == "turn.failed":
            error = obj.get("error")
            message = error.get("message") if isinstance(error, Mapping) else None
            return (
                ResultEvent(
                    is_error=True,
                    subtype="turn.failed",
                    text=str(message or "turn failed"),
                    errors=[message],
                    api_error_status=http_status(str(message or "")),
                ),
            )
        if kind == "error":
            text = str(obj.get("message") or "")
            error = ErrorEvent(text, fatal=False)
            retry = _RECONNECTING.match(text)
            if retry is None:
                return (error,)
            return (
                CliRetryEvent(
                    attempt=int(retry.group(1)),
                    max_retries=int(retry.group(2)),
                    error_status=http_status(text),
                    error=text,
                ),
                error,
            )
        return ()

    def _item(self, item: Mapping[str, Any], *, completed: bool) -> Sequence[Event]:
        itype = item.get("type")
        item_id = str(item.get("id") or "")
        if itype == "agent_message":
            return (TextEvent(str(item.get("text") or "")),) if completed else ()
        if itype == "error":
            return (ErrorEvent(str(item.get("message") or ""), fatal=False),) if completed else ()
        if not isinstance(itype, str) or itype not in _TOOL_ITEMS:
            return ()  # reasoning, todo_list and types we do not know
        events: list[Event] = []
        name, tool_input, files = _describe_tool(item)
        if item_id not in self._started:
            self._started.add(item_id)
            events.append(ToolCallEvent(item_id, name, tool_input, files))
        if completed:
            exit_code = as_int(item.get("exit_code"))
            status = item.get("status")
            is_error = (exit_code not in (None, 0)) or status == "failed" or bool(item.get("error"))
            output = (
                item.get("aggregated_output")
                if itype == "command_execution"
                else item.get("result")
            )
            events.append(
                ToolResultEvent(item_id, name, is_error, preview(output), exit_code=exit_code)
            )
        return events

    def _legacy(self, msg: Mapping[str, Any]) -> Sequence[Event]:
        mtype = msg.get("type")
        if mtype == "agent_message":
            return (TextEvent(str(msg.get("message") or "")),)
        if mtype == "exec_command_begin":
            call_id = str(msg.get("call_id") or "")
            command = msg.get("command")
            cmd = " ".join(command) if isinstance(command, list) else command
            return (ToolCallEvent(call_id, "command_execution", {"command": cmd}),)
        if mtype == "exec_command_end":
            exit_code = as_int(msg.get("exit_code"))
            return (
                ToolResultEvent(
                    str(msg.get("call_id") or ""),
                    "command_execution",
                    exit_code not in (None, 0),
                    preview(msg.get("stdout") or msg.get("stderr")),
                    exit_code=exit_code,
                ),
            )
        if mtype == "token_count":
            return (UsageEvent(dict(msg)),)
        if mtype == "task_complete":
            text = msg.get("last_agent_message")
            return (
                ResultEvent(
                    is_error=False,
                    subtype="task_complete",
                    text=text if isinstance(text, str) else None,
                ),
            )
        if mtype == "error":
            return (ErrorEvent(str(msg.get("message") or ""), fatal=False),)
        return ()


def _describe_tool(item: Mapping[str, Any]) -> tuple[str, Any, list[str]]:
    itype = str(item.get("type"))
    if itype == "command_execution":
        return "command_execution", {"command": item.get("command")}, []
    if itype == "file_change":
        changes = item.get("changes")
        files = (
            [
                str(c["path"])
                for c in changes
                if isinstance(c, Mapping) and isinstance(c.get("path"), str)
            ]
            if isinstance(changes, list)
            else []
        )
        return "file_change", {"changes": changes}, files
    if itype == "mcp_tool_call":
        return f"mcp:{item.get('server')}/{item.get('tool')}", item.get("arguments"), []
    return itype, {"query": item.get("query")}, []
