"""Adapter for the ``opencode`` CLI (``opencode run --format json``).

The prompt goes to stdin, which is then closed: with no message argument,
``opencode run`` takes its prompt from stdin (and an open stdin would block it
forever).  Facts this adapter is built on (measured on ``opencode-ai`` 1.18.33):

* There is no final result event: the run's end is the last ``step_finish``
  whose ``reason`` is ``"stop"``; a failed run ends with an ``error`` event
  (``{"name": "APIError", "data": {"statusCode": 401, ...}}``) and exit code 1.
* A tool shows up only once it has finished (``tool_use`` with its state).
* It ignored SIGTERM for 15-30 s in 4 runs of 10, and its ``bash`` tool runs in
  a session of its own: the supervisor stops the whole tree, and the CLI gets
  SIGKILL if the runner dies.
* Its own API retries (6 attempts over ~80 s on a 429) cannot be capped.
* It reads the working directory's ``opencode.json`` and ``.opencode/``
  (MCP servers it starts, plugins it imports, custom tools, permissions) up
  to the git root; ``OPENCODE_DISABLE_PROJECT_CONFIG=1`` skips them, and the
  project's ``AGENTS.md`` with them, so it is set only when ``setting_sources``
  leaves "project" out (not by default).
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
    RepositoryFile,
    Translator,
)
from coding_genesis.control import ControlProtocol
from coding_genesis.events import (
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

from . import acp_agents
from ._common import PROXY_ENV, as_int, first_hint, preview
from .acp import AcpControl

__all__ = ["OpencodeBackend", "OpencodeTranslator", "opencode_failure_hint"]

#: ``step_finish`` reasons that end the run: ``stop`` is a finished answer, the
#: others an answer cut short.
_FINAL_REASONS = frozenset({"stop", "length", "content-filter", "error"})

#: Our permission levels as opencode's ``permission`` config (``OPENCODE_PERMISSION``).
_PERMISSIONS = {
    "read-only": {"edit": "deny", "bash": "deny"},
    "edit": {"edit": "allow", "bash": "deny"},
    "full": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
}

#: Tools whose input names a file they modify.
_FILE_TOOLS = {"edit": "filePath", "write": "filePath", "patch": "filePath"}

#: What opencode loads from a working directory (docs/security.md's table).
REPOSITORY_FILES = (
    RepositoryFile("opencode.json", "project", "MCP servers, plugins, permissions, providers"),
    RepositoryFile("opencode.jsonc", "project", "MCP servers, plugins, permissions, providers"),
    RepositoryFile(".opencode", "project", "plugins and custom tools (code it imports)"),
)

_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("rate_limit", re.compile(r"rate limit|too many requests|quota", re.I)),
    ("auth", re.compile(r"incorrect api key|invalid api key|unauthori[sz]ed|api key", re.I)),
    (
        "network",
        re.compile(r"ECONNREFUSED|ECONNRESET|unable to connect|fetch failed|timed? ?out", re.I),
    ),
)


def opencode_failure_hint(result: RunResult) -> str | None:
    """Category from opencode's error event (its status code is read by the core)."""
    if result.api_error_status is not None:
        return None
    return first_hint((result.message, *reversed(result.cli_errors)), _HINTS)


class OpencodeBackend(Backend):
    name = "opencode"
    executable = "opencode"
    path_env_var = "GENESIS_OPENCODE_PATH"
    #: What it needs from the environment under ``inherit_env=False``.
    env_needs = (
        "OPENCODE_*",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        *PROXY_ENV,
    )
    supports_resume = True
    #: It may ignore SIGTERM for tens of seconds: SIGKILL if the runner dies.
    pdeath_signal = signal.SIGKILL
    #: Enforced by opencode itself through ``OPENCODE_PERMISSION``: a denied tool is
    #: not even offered to the model (checked with 1.18.33: ``bash: deny`` drops it).
    permission_levels = frozenset(_PERMISSIONS)
    setting_sources = (("user",), ("user", "project"))
    #: Its one switch also drops the project's AGENTS.md: ("user",) asks for it.
    default_setting_sources = ("user", "project")
    repository_files = REPOSITORY_FILES
    notes = (
        "API retries cannot be capped (about 6 attempts over ~80 s on a 429)",
        "no turn limit flag (max_turns is not honored)",
        "permissions= is passed as OPENCODE_PERMISSION (over the user's own)",
        "no final result event: the last step_finish with reason 'stop' ends the run",
        "may ignore SIGTERM for 15-30 s: stopped by SIGKILL after the grace period",
        "reads the working directory's opencode.json and .opencode/ (plugins, MCP servers) "
        "unless setting_sources=('user',) (OPENCODE_DISABLE_PROJECT_CONFIG, which also "
        "drops the project's AGENTS.md)",
        "live sessions and approvals over ACP (opencode acp); model= and an approver's "
        "permission: ask go in OPENCODE_CONFIG_CONTENT (over the user's own)",
    )
    options: Mapping[str, OptionSpec] = {
        "agent": OptionSpec((str,), "--agent"),
        "variant": OptionSpec((str,), "--variant"),
    }

    def install_hint(self) -> str:
        return "install it with `npm install -g opencode-ai`, or set GENESIS_OPENCODE_PATH"

    def build_command(self, request: Request) -> CommandSpec:
        opts = request.options
        args: list[str] = ["run", "--format", "json", "--dir", request.cwd]
        warnings: list[str] = []
        if request.model:
            args += ["-m", request.model]
        if opts.get("agent"):
            args += ["--agent", str(opts["agent"])]
        if opts.get("variant"):
            args += ["--variant", str(opts["variant"])]
        if request.resume:
            args += ["--session", request.resume]
        if request.max_turns is not None:
            warnings.append("opencode has no turn limit flag: max_turns is not honored")
        if request.cli_max_retries is not None:
            warnings.append("opencode's API retries cannot be capped: cli_max_retries ignored")
        args.extend(request.extra_args)
        env = self._env(request.setting_sources)
        permission = _PERMISSIONS.get(request.permissions or "")
        if permission is not None:
            env["OPENCODE_PERMISSION"] = json.dumps(permission)
        return CommandSpec(
            args=tuple(args),
            stdin=request.prompt.encode("utf-8"),
            env=env,
            warnings=tuple(warnings),
        )

    def _env(self, sources: tuple[str, ...] | None) -> dict[str, str]:
        """No update, no sharing; the working directory's configuration read
        only when ``setting_sources`` says so (a run and a live session alike)."""
        env = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1"}
        if not self.reads_project(sources):
            env["OPENCODE_DISABLE_PROJECT_CONFIG"] = "1"
        return env

    def translator(self) -> OpencodeTranslator:
        return OpencodeTranslator()

    def control(self) -> ControlProtocol:
        """A live session over ACP (``opencode acp``): see :mod:`.acp`."""
        return AcpControl(acp_agents.OPENCODE, self._acp_command)

    def _acp_command(self, request: Request) -> CommandSpec:
        """``opencode acp --cwd DIR``.  opencode has no permission modes: with an
        approver its configuration says ``"permission": "ask"`` (through
        ``OPENCODE_CONFIG_CONTENT``: every tool call asked; measured), else
        ``permissions=`` is ``OPENCODE_PERMISSION`` as for a run.  The model is
        its configuration's ``model`` too (``opencode acp`` takes no ``-m``)."""
        args = ["acp", "--cwd", request.cwd]
        warnings: list[str] = []
        for name in ("agent", "variant"):
            if request.options.get(name):
                warnings.append(f"option {name} is not used by opencode acp")
        if request.max_turns is not None:
            warnings.append("opencode has no turn limit flag: max_turns is not honored")
        if request.cli_max_retries is not None:
            warnings.append("opencode's API retries cannot be capped: cli_max_retries ignored")
        env = self._env(request.setting_sources)
        config: dict[str, Any] = {}
        if request.model:
            config["model"] = request.model
        if request.approvals and request.permissions != "read-only":
            config["permission"] = "ask"
        else:
            permission = _PERMISSIONS.get(request.permissions or "")
            if permission is not None:
                env["OPENCODE_PERMISSION"] = json.dumps(permission)
        if config:
            env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config)
        return CommandSpec(args=(*args, *request.extra_args), env=env, warnings=tuple(warnings))

    def failure_hint(self, result: RunResult) -> str | None:
        return opencode_failure_hint(result)


class OpencodeTranslator(Translator):
    """opencode ``--format json`` lines to normalized events."""

    __slots__ = ("_session", "_text")

    def __init__(self) -> None:
        self._session: str | None = None
        self._text: str | None = None

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        events: list[Event] = []
        session = obj.get("sessionID")
        if isinstance(session, str) and session and session != self._session:
            self._session = session
            events.append(SessionEvent(session))
        kind = obj.get("type")
        part = obj.get("part")
        part = part if isinstance(part, dict) else {}
        if kind == "text":
            text = part.get("text")
            if isinstance(text, str):
                self._text = text
                events.append(TextEvent(text))
        elif kind == "tool_use":
            events.extend(self._tool(part))
        elif kind == "step_start":
            self._text = None
        elif kind == "step_finish":
            events.extend(self._step_finish(part))
        elif kind == "error":
            events.extend(self._error(obj.get("error")))
        return events

    def _tool(self, part: dict[str, Any]) -> Sequence[Event]:
        name = str(part.get("tool") or "unknown")
        call_id = str(part.get("callID") or part.get("id") or "")
        state = part.get("state")
        state = state if isinstance(state, dict) else {}
        tool_input = state.get("input")
        key = _FILE_TOOLS.get(name)
        files = (
            [tool_input[key]]
            if key and isinstance(tool_input, dict) and isinstance(tool_input.get(key), str)
            else []
        )
        events: list[Event] = [ToolCallEvent(call_id, name, tool_input, files)]
        status = state.get("status")
        if status in ("completed", "error"):
            metadata = state.get("metadata")
            exit_code = as_int(metadata.get("exit")) if isinstance(metadata, dict) else None
            output = state.get("output") if status == "completed" else state.get("error")
            is_error = status == "error" or (exit_code not in (None, 0))
            events.append(ToolResultEvent(call_id, name, is_error, preview(output)))
        return events

    def _step_finish(self, part: dict[str, Any]) -> Sequence[Event]:
        events: list[Event] = []
        tokens = part.get("tokens")
        cost = part.get("cost")
        if isinstance(tokens, dict) or isinstance(cost, int | float):
            events.append(
                UsageEvent(
                    tokens if isinstance(tokens, dict) else None,
                    cost if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
                )
            )
        reason = part.get("reason")
        if isinstance(reason, str) and reason in _FINAL_REASONS:
            events.append(
                ResultEvent(
                    is_error=reason != "stop",
                    subtype=str(reason),
                    text=self._text,
                    session_id=self._session,
                    stop_reason=str(reason),
                )
            )
        return events

    def _error(self, error: Any) -> Sequence[Event]:
        error = error if isinstance(error, dict) else {}
        data = error.get("data")
        data = data if isinstance(data, dict) else {}
        message = str(data.get("message") or error.get("name") or "opencode reported an error")
        return (
            ErrorEvent(message, fatal=True),
            ResultEvent(
                is_error=True,
                subtype=str(error.get("name") or "error"),
                text=message,
                session_id=self._session,
                api_error_status=as_int(data.get("statusCode")),
                errors=[message],
            ),
        )
