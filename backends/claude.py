"""Adapter for Anthropic's ``claude`` CLI (``-p ... --output-format stream-json --verbose``).

The prompt goes to stdin, never to argv: it can start with ``-``, hold
newlines or NUL-free megabytes, and never be read as a flag.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from coding_genesis.backend import (
    ALL_SETTING_SOURCES,
    Backend,
    CommandSpec,
    OptionSpec,
    RepositoryFile,
    Translator,
)
from coding_genesis.events import (
    CliRetryEvent,
    CompactionEvent,
    Event,
    McpServerEvent,
    ResultEvent,
    SessionEvent,
    TextDeltaEvent,
    TextEvent,
    ThoughtDeltaEvent,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from coding_genesis.request import Request
from coding_genesis.result import RunResult
from coding_genesis.usage import RunningTotals, Tokens, normalize_usage

from ._common import PROXY_ENV, as_int, first_class, preview, str_list
from .claude_control import SESSION_FLAGS, ClaudeControl, agent_definitions
from .claude_switch import LEVELS

__all__ = [
    "ClaudeBackend",
    "ClaudeTranslator",
    "claude_failure_hint",
    "recorded_total",
    "running_total",
]

#: claude's own wording for its failures, most specific first.
_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "auth",
        re.compile(
            r"invalid api key|please run /login|oauth token (?:has )?expired|"
            r"authentication_error|credit balance is too low|not logged in",
            re.I,
        ),
    ),
    (
        "rate_limit",
        re.compile(r"usage limit reached|\blimit reached\b|overloaded|rate_limit_error", re.I),
    ),
    ("context_overflow", re.compile(r"prompt is too long", re.I)),
    ("invalid_task", re.compile(r"cannot be used with root", re.I)),
    (
        "network",
        re.compile(
            r"request timed out|connection ?error|connection ?refused|unable to connect to api|"
            r"fetch failed|socket hang up",
            re.I,
        ),
    ),
)

#: A parent Claude Code session's variables can make the CLI refuse to start or
#: talk to the parent; the user's own configuration and credentials stay.
_UNSET_ENV = (
    "CLAUDECODE",
    "CLAUDE_CODE_*",
    "!CLAUDE_CODE_OAUTH_TOKEN",
    "!CLAUDE_CODE_USE_*",
    "!CLAUDE_CODE_SKIP_*",
    "!CLAUDE_CODE_MAX_*",
    "!CLAUDE_CODE_DISABLE_*",
    "!CLAUDE_CODE_ENABLE_*",
    "!CLAUDE_CODE_API_*",
    "!CLAUDE_CODE_CLIENT_*",
    "!CLAUDE_CODE_SUBAGENT_MODEL",
    "!CLAUDE_CODE_EFFORT_LEVEL",
)

#: permissions= → (--permission-mode, denied tools, pre-approved tools): one table
#: with the switches of a live session's turns.
_PERMISSIONS = LEVELS

#: The settings a run reads unless ``setting_sources=`` says otherwise: the
#: user's alone.  Measured on claude 2.1.330: without ``--setting-sources``
#: claude runs the working directory's hooks, ``apiKeyHelper``, MCP servers
#: (``.mcp.json`` with ``enableAllProjectMcpServers``), its skills', commands'
#: and agents' commands and the plugins its settings enable; with
#: ``--setting-sources user --strict-mcp-config`` none of them.
SAFE_SOURCES = ("user",)

#: What claude loads from a working directory (docs/security.md's table).
REPOSITORY_FILES = (
    RepositoryFile(
        ".claude/settings.json",
        "project",
        "hooks, apiKeyHelper, permissions, MCP approvals, enabled plugins",
    ),
    RepositoryFile(
        ".claude/settings.local.json",
        "local",
        "hooks, apiKeyHelper, permissions, MCP approvals, enabled plugins",
    ),
    RepositoryFile(".mcp.json", "project", "MCP servers (commands it starts)"),
    RepositoryFile(".claude/skills", "project", "skills (their !`command` lines)"),
    RepositoryFile(".claude/commands", "project", "slash commands (their !`command` lines)"),
    RepositoryFile(".claude/agents", "project", "subagents (their hooks and MCP servers)"),
)

#: Tools whose input names a file they modify.
_FILE_TOOLS = {
    "Edit": "file_path",
    "Write": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}


class ClaudeBackend(Backend):
    name = "claude"
    executable = "claude"
    path_env_var = "GENESIS_CLAUDE_PATH"
    #: What it needs from the environment under ``inherit_env=False``.
    env_needs = (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "CLAUDE_CODE_*",
        "CLAUDE_CONFIG_DIR",
        "XDG_CONFIG_HOME",
        *PROXY_ENV,
    )
    supports_resume = True
    #: ``--json-schema``: claude offers the model a ``StructuredOutput`` tool of
    #: that input schema, validates its call, and reports ``structured_output``.
    structured_output = True
    #: ``--setting-sources``: any combination.
    setting_sources = ALL_SETTING_SOURCES
    default_setting_sources = SAFE_SOURCES
    repository_files = REPOSITORY_FILES
    #: Sent to the CLI if the runner dies (it cleans up its own tools on SIGTERM).
    pdeath_signal = signal.SIGTERM
    permission_levels = frozenset({"read-only", "edit", "full"})
    #: ``partial``: ``--include-partial-messages`` (its ``stream_event`` lines).
    takes = frozenset(
        {"system_prompt", "append_system_prompt", "add_dirs", "partial", "agents", "mcp_servers"}
    )
    notes = (
        "API retries capped with CLAUDE_CODE_MAX_RETRIES (the CLI clamps it to 15)",
        'permissions="full" pre-approves the built-in tools (not bypassPermissions, '
        "which claude refuses as root); MCP tools still need allowed_tools",
        "reads the user's settings alone (--setting-sources user --strict-mcp-config, which "
        "also drops the user's own MCP servers: pass them with options={'mcp_config': ...}); "
        "setting_sources= opts in to the project's",
    )
    options: Mapping[str, OptionSpec] = {
        "max_turns": OptionSpec((int,), "--max-turns (prefer max_turns=)"),
        "permission_mode": OptionSpec((str,), "--permission-mode (default, acceptEdits, ...)"),
        "allowed_tools": OptionSpec((str, list, tuple), "--allowedTools"),
        "disallowed_tools": OptionSpec((str, list, tuple), "--disallowedTools"),
        "append_system_prompt": OptionSpec((str,), "--append-system-prompt"),
        "add_dirs": OptionSpec((str, list, tuple), "--add-dir, repeated"),
        "mcp_config": OptionSpec((str,), "--mcp-config"),
    }

    def install_hint(self) -> str:
        return (
            "install it with `npm install -g @anthropic-ai/claude-code`, or set GENESIS_CLAUDE_PATH"
        )

    def build_command(self, request: Request) -> CommandSpec:
        # A session sends its subagents in initialize (claude_control); a
        # one-shot run names them here (one argument: a definition never
        # becomes a flag of its own).
        agents = [f"--agents={json.dumps(agent_definitions(request))}"] if request.agents else []
        return _command(
            ("-p", "--output-format", "stream-json", "--verbose", *agents),
            request,
            stdin=request.prompt.encode("utf-8"),
        )

    def control(self) -> ClaudeControl:
        """claude's stream-json control protocol (see :mod:`.claude_control`)."""
        return ClaudeControl(
            command=lambda start: _command(SESSION_FLAGS, start), translator=self.translator
        )

    def translator(self) -> ClaudeTranslator:
        return ClaudeTranslator()

    def failure_hint(self, result: RunResult) -> str | None:
        return claude_failure_hint(result)


def _command(head: tuple[str, ...], start: Request, stdin: bytes | None = None) -> CommandSpec:
    """The argv of a one-shot run (``-p``) or of a live session (``head``): the
    model, turn limit, permission level, options, resume and extra arguments
    are spelled the same in both (each group in its own function, in argv order)."""
    opts = start.options
    warnings: list[str] = []
    args = [
        *head,
        *_settings_flags(start),
        *_permission_flags(start, opts, warnings),
        *_prompt_flags(start, opts, warnings),
    ]
    if start.resume:
        args.append(f"--resume={start.resume}")
        if start.fork:  # a new session id, the history copied (cut at resume_at)
            args.append("--fork-session")
            if start.resume_at:
                args.append(f"--resume-session-at={start.resume_at}")
    if start.output_schema is not None:
        args.append("--json-schema=" + json.dumps(start.output_schema, separators=(",", ":")))
    if start.partial:
        args.append(PARTIAL_FLAG)
    env: dict[str, str] = {}
    if start.cli_max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(start.cli_max_retries)
    # Subagents and commands run inside the turn, not in the background: a
    # background task comes back after the turn's result, outside its wall
    # limit and its record (measured on 2.1.330: claude then drops
    # run_in_background from the Agent tool's input).  env= can turn it back on
    # ("0"); what the CLI does between turns is then a turn of its own.
    env["CLAUDE_CODE_DISABLE_BACKGROUND_TASKS"] = "1"
    servers, overlay = _mcp_servers(start)
    args.extend(servers)
    args.extend(start.extra_args)
    return CommandSpec(
        args=tuple(args),
        stdin=stdin,
        env=env,
        unset_env=_UNSET_ENV,
        warnings=tuple(warnings),
        overlay=overlay,
    )


#: The caller's MCP servers' file in the run's private overlay (0600).
_MCP_FILE = "mcp-servers.json"


def _mcp_servers(start: Request) -> tuple[list[str], dict[str, bytes]]:
    """``mcp_servers=`` as ``--mcp-config`` naming a file of the run's private
    overlay (their ``env`` values never in argv); without an approver their
    tools are allowed (``-p`` would refuse them; with one, it decides)."""
    if not start.mcp_servers:
        return [], {}
    config = {
        "mcpServers": {
            name: {"type": "http", "url": spec.url}
            if spec.url is not None
            else {"command": spec.command, "args": list(spec.args), "env": dict(spec.env)}
            for name, spec in start.mcp_servers.items()
        }
    }
    args = [f"--mcp-config={{overlay}}/{_MCP_FILE}"]
    if start.approver is None:
        args.append("--allowedTools=" + ",".join(f"mcp__{name}" for name in start.mcp_servers))
    return args, {_MCP_FILE: json.dumps(config).encode("utf-8")}


def _settings_flags(start: Request) -> list[str]:
    """The settings claude reads, its model and its turn limit."""
    sources = start.setting_sources or SAFE_SOURCES
    args = ["--setting-sources=" + ",".join(sources)]
    if "project" not in sources:
        # Only --mcp-config's servers (ours, the mcp_config option): not the
        # project's .mcp.json, nor the user's own (documented).
        args.append("--strict-mcp-config")
    if start.model:
        args.append(f"--model={start.model}")
    max_turns = start.max_turns if start.max_turns is not None else start.options.get("max_turns")
    if max_turns is not None:
        args.append(f"--max-turns={int(max_turns)}")
    return args


def _permission_flags(start: Request, opts: Mapping[str, Any], warnings: list[str]) -> list[str]:
    """The permission mode and the tools allowed and refused (``permissions=``
    wins over the ``permission_mode`` option, with a warning)."""
    args: list[str] = []
    denied: tuple[str, ...] = ()
    granted: tuple[str, ...] = ()
    if start.permissions is not None:
        mode, denied, granted = _PERMISSIONS[start.permissions]
        args.append(f"--permission-mode={mode}")
        if opts.get("permission_mode"):
            warnings.append(
                f"option permission_mode={opts['permission_mode']!r} ignored: "
                f"permissions={start.permissions!r} sets the permission mode"
            )
    elif opts.get("permission_mode"):
        args.append(f"--permission-mode={opts['permission_mode']}")
    allowed = list(dict.fromkeys([*str_list(opts.get("allowed_tools")), *granted]))
    if allowed:
        args.append("--allowedTools=" + ",".join(allowed))
    disallowed = list(dict.fromkeys([*str_list(opts.get("disallowed_tools")), *denied]))
    if disallowed:
        args.append("--disallowedTools=" + ",".join(disallowed))
    return args


def _prompt_flags(start: Request, opts: Mapping[str, Any], warnings: list[str]) -> list[str]:
    """The system prompt and what is added to it, the extra directories and MCP servers."""
    args: list[str] = []
    if start.system_prompt is not None:
        args.append(f"--system-prompt={start.system_prompt}")
    append = first_class(
        start.append_system_prompt, "append_system_prompt", opts, "append_system_prompt", warnings
    )
    if append:
        args.append(f"--append-system-prompt={append}")
    for directory in str_list(first_class(start.add_dirs, "add_dirs", opts, "add_dirs", warnings)):
        args.append(f"--add-dir={directory}")
    if opts.get("mcp_config"):
        args.append(f"--mcp-config={opts['mcp_config']}")
    return args


#: The counters of a ``modelUsage`` entry (the rest, a context window, are not).
_MODEL_COUNTERS = (
    "inputTokens",
    "outputTokens",
    "cacheReadInputTokens",
    "cacheCreationInputTokens",
    "webSearchRequests",
    "costUSD",
)


def running_total(cost: object, by_model: Mapping[str, Any]) -> dict[str, float]:
    """claude's running session totals (``total_cost_usd``, ``modelUsage``)
    as the counters :class:`~coding_genesis.usage.RunningTotals` keeps."""
    flat: dict[str, float] = {}
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        flat["cost"] = cost
    for model, entry in by_model.items():
        if isinstance(entry, Mapping):
            for name in _MODEL_COUNTERS:
                value = entry.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    flat[f"{model}\0{name}"] = value
    return flat


def recorded_total(cost: float, models: Mapping[str, tuple[Tokens, float]]) -> dict[str, float]:
    """:func:`running_total` of a session as our records know it (the run
    log's shares, summed: its cost, and per model its tokens and cost)."""
    usage = {
        model: {
            "inputTokens": tokens.input,
            "outputTokens": tokens.output,
            "cacheReadInputTokens": tokens.cache_read,
            "cacheCreationInputTokens": tokens.cache_write,
            "costUSD": spent,
        }
        for model, (tokens, spent) in models.items()
    }
    return running_total(cost, usage)


def _shares(
    totals: RunningTotals, session: str, cost: object, by_model: object
) -> tuple[object, object]:
    """This run's share of claude's running session totals: ``total_cost_usd``
    and ``modelUsage`` count the whole session (across turns, and across
    ``--resume``), ``usage`` only the turn."""
    models = by_model if isinstance(by_model, dict) else {}
    share = totals.share(ClaudeTranslator.running_cli, session, running_total(cost, models))
    if "cost" in share:
        cost = round(share["cost"], 10)
    if models:
        by_model = {
            model: _entry_share(entry, f"{model}\0", share) if isinstance(entry, dict) else entry
            for model, entry in models.items()
        }
    return cost, by_model


def _entry_share(entry: dict[str, Any], prefix: str, share: dict[str, float]) -> dict[str, Any]:
    """One ``modelUsage`` entry with its counters replaced by their shares."""
    out = dict(entry)
    for name in _MODEL_COUNTERS:
        value = share.get(prefix + name)
        if value is not None:
            out[name] = round(value, 10) if name == "costUSD" else int(value)
    return out


def claude_failure_hint(result: RunResult) -> str | None:
    """Category from claude's own words for its failure (the result text, stderr).

    The HTTP status (``api_error_status``) is read by the core; this adds what
    only the wording says (an expired login, a usage limit, an oversized prompt)
    and that claude gave up on an output schema (its model's answers kept
    failing it: ``MAX_STRUCTURED_OUTPUT_RETRIES``, 5 by default).
    """
    if result.result_subtype == "error_max_structured_output_retries":
        return "invalid_output"
    if result.api_error_status is not None:
        return None  # the status is more precise than any wording
    for text in (result.message, result.stderr_tail[-4000:]):
        for category, pattern in _HINTS:
            if text and pattern.search(text):
                return category
    return None


#: Messages whose usage the folding translator keeps one by one; older ones
#: are summed per model (memory stays bounded however long the run).
MAX_FOLDED = 10_000


def _add_counts(sums: dict[str | None, list[int]], model: object, usage: dict[str, Any]) -> None:
    tokens = normalize_usage(usage)
    counts = sums.setdefault(model if type(model) is str else None, [0, 0, 0, 0, 0])
    counts[0] += tokens.input
    counts[1] += tokens.output
    counts[2] += tokens.cache_read
    counts[3] += tokens.cache_write
    counts[4] += 1


#: claude writes its messages as they stream (``stream_event`` lines), one-shot and live.
PARTIAL_FLAG = "--include-partial-messages"
#: A ``content_block_delta``'s kind -> (its event, the field with the piece).
_DELTAS: Mapping[str, tuple[type[TextDeltaEvent | ThoughtDeltaEvent], str]] = {
    "text_delta": (TextDeltaEvent, "text"),
    "thinking_delta": (ThoughtDeltaEvent, "thinking"),
}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


class ClaudeTranslator(Translator):
    """claude stream-json lines to normalized events.

    Runs once per line on the hot path: parsed JSON objects are plain dicts, so
    the type checks are against ``dict`` (an ABC check costs several times more).
    """

    __slots__ = (
        "_folded",
        "_last_id",
        "_last_usage",
        "_messages",
        "_streaming",
        "_tool_names",
        "_turn_id",
        "message_usage",
    )

    running_cli = "claude"

    def __init__(self) -> None:
        self._tool_names: dict[str, str] = {}
        #: What becomes of the usage claude reports per message (see
        #: coding_genesis.events.Translator): "live", "folded" or "off".
        self.message_usage = "live"
        #: (message id, usage) of the last usage event: claude repeats a
        #: message's usage on each of its lines; an unchanged repeat says nothing new.
        self._last_usage: tuple[object, dict[str, Any]] | None = None
        #: Folded: message id -> (model, its latest usage dict), and the last id.
        self._messages: dict[str, tuple[object, dict[str, Any]]] = {}
        self._last_id: str | None = None
        #: Folded beyond MAX_FOLDED messages: model -> [four counts, messages].
        self._folded: dict[str | None, list[int]] = {}
        #: The id of the message a ``stream_event`` piece belongs to (its ``message_start``).
        self._streaming: str | None = None
        #: The uuid of the turn's last assistant line (``RunResult.turn_id``).
        self._turn_id: str | None = None

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        kind = obj.get("type")
        if kind == "assistant":
            return self._assistant(obj)
        if kind == "user":
            return self._user(obj)
        if kind == "result":
            return self._result(obj)
        if kind == "system":
            return self._system(obj)
        if kind == "stream_event":
            return self._stream_event(obj)
        return ()

    def _stream_event(self, obj: dict[str, Any]) -> Sequence[Event]:
        """A piece of a message as the API streams it (``--include-partial-messages``):
        text and thinking deltas; the whole message follows as its ``assistant`` line."""
        event = obj.get("event")
        if type(event) is not dict:
            return ()
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta")
            found = _DELTAS.get(delta.get("type")) if type(delta) is dict else None  # type: ignore[arg-type]
            if found is None:
                return ()
            piece = delta.get(found[1])  # type: ignore[union-attr]
            return (found[0](piece, self._streaming),) if type(piece) is str and piece else ()
        if kind == "message_start":
            message = event.get("message")
            msg_id = message.get("id") if type(message) is dict else None
            self._streaming = msg_id if type(msg_id) is str else None
        return ()

    def _system(self, obj: dict[str, Any]) -> Sequence[Event]:
        subtype = obj.get("subtype")
        if subtype == "init":
            servers = obj.get("mcp_servers")
            return (
                SessionEvent(obj.get("session_id"), obj.get("model"), obj.get("cwd")),
                *(
                    McpServerEvent(server["name"], server["status"], _text(server.get("error")))
                    for server in (servers if isinstance(servers, list) else ())
                    if isinstance(server, dict)
                    and isinstance(server.get("name"), str)
                    and isinstance(server.get("status"), str)
                ),
            )
        if subtype == "api_retry":
            return (
                CliRetryEvent(
                    attempt=obj.get("attempt"),
                    max_retries=obj.get("max_retries"),
                    retry_delay_ms=obj.get("retry_delay_ms"),
                    error_status=as_int(obj.get("error_status")),
                    error=obj.get("error"),
                ),
            )
        if subtype == "compact_boundary":
            meta = obj.get("compact_metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            trigger = meta.get("trigger")
            return (
                CompactionEvent(
                    trigger if isinstance(trigger, str) else "auto", as_int(meta.get("pre_tokens"))
                ),
            )
        return ()

    def recorded_total(
        self, cost: float, models: Mapping[str, tuple[Tokens, float]]
    ) -> Mapping[str, float]:
        return recorded_total(cost, models)

    def flush(self) -> Sequence[Event]:
        """The folded per-message usage (at the result line, else at the end
        of the stream): per model, the sum of every message but the last,
        then the last one as itself (its prompt is the context in use)."""
        messages, self._messages = self._messages, {}
        folded, self._folded = self._folded, {}
        last = messages.pop(self._last_id, None) if self._last_id is not None else None
        for model, usage in messages.values():
            _add_counts(folded, model, usage)
        events: list[Event] = [
            UsageEvent(
                {
                    "input_tokens": counts[0],
                    "output_tokens": counts[1],
                    "cache_read_input_tokens": counts[2],
                    "cache_creation_input_tokens": counts[3],
                },
                model=model,
                messages=counts[4],
            )
            for model, counts in folded.items()
        ]
        if last is not None:
            msg_id = self._last_id
            events.append(
                UsageEvent.of_message(
                    last[1],
                    last[0] if type(last[0]) is str else None,
                    msg_id if type(msg_id) is str else None,
                )
            )
        return events

    def _fold_oldest(self) -> None:
        """Sum the oldest kept message (claude's lines of one message come
        together: one folded this long ago does not come back)."""
        messages = self._messages
        oldest = next(iter(messages))
        entry = messages.pop(oldest)
        if oldest == self._last_id:  # the last one stays itself: the next oldest
            messages[oldest] = entry
            oldest = next(iter(messages))
            entry = messages.pop(oldest)
        _add_counts(self._folded, entry[0], entry[1])

    def _assistant(self, obj: dict[str, Any]) -> Sequence[Event]:
        line_id = obj.get("uuid")
        if type(line_id) is str:
            self._turn_id = line_id  # the turn's last assistant line: a fork resumes at it
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return ()
        events: list[Event] = []
        usage = message.get("usage")  # type: ignore[union-attr]
        mode = self.message_usage if type(usage) is dict else "off"
        if mode == "folded":
            # Kept, not an event: one dict store per line (see flush).
            msg_id = message.get("id")  # type: ignore[union-attr]
            if type(msg_id) is not str:
                msg_id = ""  # kept hashable: a hostile id is one message
            messages = self._messages
            messages[msg_id] = (message.get("model"), usage)  # type: ignore[union-attr]
            self._last_id = msg_id
            if len(messages) > MAX_FOLDED:
                self._fold_oldest()
        elif mode == "live":
            # Per message: metering and budgets see usage as it streams.  claude
            # repeats a message's usage on each of its lines: an unchanged
            # repeat says nothing new (checked inline: this runs on every line).
            msg_id = message.get("id")  # type: ignore[union-attr]
            last = self._last_usage
            if last is None or last[0] != msg_id or last[1] != usage:
                self._last_usage = (msg_id, usage)
                model = message.get("model")  # type: ignore[union-attr]
                events.append(
                    UsageEvent.of_message(
                        usage,
                        model if isinstance(model, str) else None,
                        msg_id if isinstance(msg_id, str) else None,
                    )
                )
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                events.append(TextEvent(str(block.get("text") or "")))
            elif btype == "thinking" and block.get("thinking"):
                events.append(ThoughtEvent(str(block.get("thinking"))))
            elif btype == "tool_use":
                name = str(block.get("name") or "unknown")
                tool_id = str(block.get("id") or "")
                self._tool_names[tool_id] = name
                tool_input = block.get("input")
                key = _FILE_TOOLS.get(name)
                if key and isinstance(tool_input, dict) and isinstance(tool_input.get(key), str):
                    events.append(ToolCallEvent(tool_id, name, tool_input, [tool_input[key]]))
                else:
                    events.append(ToolCallEvent(tool_id, name, tool_input))
        return events

    def _user(self, obj: dict[str, Any]) -> Sequence[Event]:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return ()
        events: list[Event] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tool_id = str(block.get("tool_use_id") or "")
                events.append(
                    ToolResultEvent(
                        tool_id,
                        self._tool_names.get(tool_id, "unknown"),
                        bool(block.get("is_error")),
                        preview(block.get("content")),
                    )
                )
        return events

    def _result(self, obj: dict[str, Any]) -> Sequence[Event]:
        errors = obj.get("errors")
        text = obj.get("result")
        structured = obj.get("structured_output")
        if isinstance(structured, dict):  # with --json-schema: the answer itself
            text = json.dumps(structured, ensure_ascii=False)
        if not isinstance(text, str):
            text = "; ".join(str(e) for e in errors) if isinstance(errors, list) else None
        denials = obj.get("permission_denials")
        result = ResultEvent(
            is_error=bool(obj.get("is_error")) or (obj.get("subtype") not in (None, "success")),
            subtype=obj.get("subtype"),
            text=text,
            session_id=obj.get("session_id"),
            num_turns=as_int(obj.get("num_turns")),
            duration_ms=obj.get("duration_ms"),
            api_error_status=as_int(obj.get("api_error_status")),
            stop_reason=obj.get("stop_reason"),
            terminal_reason=obj.get("terminal_reason"),
            permission_denials=denials if isinstance(denials, list) else [],
            errors=errors if isinstance(errors, list) else [],
            **({"turn_id": self._turn_id} if self._turn_id else {}),
        )
        # The messages' folded usage first: it came before the run's total.
        events: list[Event] = list(self.flush())
        usage = obj.get("usage")  # this turn's
        cost = obj.get("total_cost_usd")  # the session's running total, as modelUsage
        by_model = obj.get("modelUsage")
        session = obj.get("session_id")
        if self.totals is not None and isinstance(session, str):
            cost, by_model = _shares(self.totals, session, cost, by_model)
        if usage is not None or cost is not None:
            if isinstance(by_model, dict):
                events.append(
                    UsageEvent(
                        usage if isinstance(usage, dict) else None,
                        cost if isinstance(cost, int | float) else None,
                        by_model=by_model,
                    )
                )
            else:
                events.append(
                    UsageEvent(
                        usage if isinstance(usage, dict) else None,
                        cost if isinstance(cost, int | float) else None,
                    )
                )
        events.append(result)
        return events
