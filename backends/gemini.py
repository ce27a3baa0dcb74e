"""Adapter for Google's ``gemini`` CLI (``gemini --output-format stream-json --skip-trust``).

The prompt goes to stdin (with no ``-p``, gemini reads its whole prompt from a
piped stdin), never to argv.  Facts this adapter is built on (measured on
``@google/gemini-cli`` 0.61.0):

* By default ``gemini`` relaunches itself in a child node process and the
  parent ignores SIGTERM, SIGINT and SIGHUP: ``GEMINI_CLI_NO_RELAUNCH=true``
  keeps one process, which exits on SIGTERM, with code 0 and no ``result``
  line (the core counts a run without its result as a failure).
* An API error ends the CLI with the HTTP status mod 256 (401 -> 145,
  429 -> 173), which is not a signal; an untrusted folder exits 55
  (``--skip-trust`` avoids it), a rejected auth method 41.
* A 429 is retried for minutes with nothing on stdout, only stderr lines
  ``Attempt N failed with status 429. Retrying with backoff...`` (counted as
  ``cli_retries``).  The number of attempts is the ``general.maxAttempts``
  setting, which only a settings file carries, and gemini ignores a system
  settings file (``GEMINI_CLI_SYSTEM_SETTINGS_PATH``) unless it and every
  directory above it are owned by root and writable by no one else: a private
  per-run overlay under the temporary directory is refused ("Parent directory
  '/tmp' is insecure").  So ``cli_max_retries`` and ``max_turns``
  (``model.maxSessionTurns``) are reported as not honored; set them in the
  user's own ``~/.gemini/settings.json``.
* Without an approval mode, headless gemini does not even offer the model its
  write and shell tools.
* The working directory's ``.gemini/settings.json`` (hooks, MCP servers, the
  tool discovery command) and ``.env`` are read in a folder gemini trusts: one
  the user trusted (``~/.gemini/trustedFolders.json``) or any under
  ``GEMINI_CLI_TRUST_WORKSPACE=true``.  ``--skip-trust`` sets that variable only
  after the settings are loaded, and ``GEMINI_CLI_TRUST_WORKSPACE=false`` (our
  default) keeps them unread even in a folder the user trusted, while the run
  goes on (its approval mode included); ``setting_sources`` with "project"
  sets it to ``true``.
"""

from __future__ import annotations

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
from ._common import PROXY_ENV, as_int, first_class, first_hint, preview
from .acp import AcpControl

__all__ = ["GeminiBackend", "GeminiTranslator", "gemini_failure_hint", "gemini_stderr_retries"]

#: Our permission levels as gemini approval modes (all enforced by the CLI itself:
#: ``plan`` is read-only, ``auto_edit`` approves edits but no shell, ``yolo`` all).
_APPROVAL = {"read-only": "plan", "edit": "auto_edit", "full": "yolo"}

#: Exit codes gemini chooses itself (not signals): the HTTP status mod 256, and its own.
_EXIT_HINTS = {
    401 & 0xFF: "auth",
    403 & 0xFF: "auth",
    429 & 0xFF: "rate_limit",
    41: "auth",  # "Invalid auth method selected."
    55: "auth",  # untrusted folder
    53: "partial",  # the session's turn limit
}

_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "rate_limit",
        re.compile(r"resource has been exhausted|RESOURCE_EXHAUSTED|quota|status 429", re.I),
    ),
    (
        "auth",
        re.compile(
            r"UNAUTHENTICATED|invalid authentication|invalid auth method|api key not valid|"
            r"PERMISSION_DENIED|folder is not trusted|untrusted (?:folder|workspace)",
            re.I,
        ),
    ),
    ("network", re.compile(r"fetch failed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|socket hang up", re.I)),
)

#: ``{"error":{"code":401,...}}`` inside gemini's ``[API Error: ...]`` message.
_CODE = re.compile(r'"code"\s*:\s*(\d{3})\b')
#: stderr: ``Attempt 1 failed with status 429. Retrying with backoff...``
_RETRY_LINE = re.compile(r"^Attempt \d+ failed(?: with status \d{3})?\. Retrying", re.M)

#: Start-up chatter on stderr, even on success ("... start mark ... not found" would
#: read as a missing file).
_NOISE = re.compile(
    r"^(?:Warning: 256-color support|Ripgrep is not available|\[STARTUP\]|"
    r"Loaded cached credentials|Data collection is disabled)"
)

#: Tools whose parameters name a file they modify.
_FILE_TOOLS = {"write_file": "file_path", "replace": "file_path", "edit": "file_path"}

#: What gemini loads from a working directory (docs/security.md's table).
REPOSITORY_FILES = (
    RepositoryFile(
        ".gemini/settings.json",
        "project",
        "hooks, MCP servers, tool discovery and call commands",
    ),
    RepositoryFile(".env", "project", "environment variables (in a trusted folder)"),
    RepositoryFile(
        ".gemini/commands",
        "project",
        "slash commands (their !{command} runs under --approval-mode=yolo only)",
    ),
)


def gemini_stderr_retries(stderr: str) -> int:
    """How many times gemini retried an API call by itself (it says so on stderr only)."""
    return len(_RETRY_LINE.findall(stderr))


def gemini_failure_hint(result: RunResult) -> str | None:
    """Category from gemini's exit code (HTTP status mod 256, its own codes) and wording."""
    if result.api_error_status is not None:
        return None
    hint = first_hint(
        (result.message, *reversed(result.cli_errors), result.stderr_tail[-4000:]), _HINTS
    )
    if hint is not None:
        return hint
    if result.signal is None and result.exit_code is not None:
        return _EXIT_HINTS.get(result.exit_code)
    return None


def _shared(request: Request) -> tuple[list[str], list[str]]:
    """The arguments (model, directories) and warnings a one-shot run and a
    live session share."""
    args: list[str] = []
    warnings: list[str] = []
    if request.model:
        args += ["-m", request.model]
    opts = request.options
    dirs = first_class(request.add_dirs, "add_dirs", opts, "include_directories", warnings)
    if dirs:
        joined = dirs if isinstance(dirs, str) else ",".join(str(d) for d in dirs)
        args.append(f"--include-directories={joined}")
    if request.cli_max_retries is not None:
        warnings.append(
            "gemini's API retries cannot be capped per run (general.maxAttempts in "
            "~/.gemini/settings.json): cli_max_retries not honored"
        )
    if request.max_turns is not None:
        warnings.append(
            "gemini has no turn limit flag (model.maxSessionTurns in its settings): "
            "max_turns not honored"
        )
    return args, warnings


class GeminiBackend(Backend):
    name = "gemini"
    executable = "gemini"
    path_env_var = "GENESIS_GEMINI_PATH"
    #: What it needs from the environment under ``inherit_env=False``.
    env_needs = (
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GEMINI_CLI_HOME",
        "GEMINI_MODEL",
        *PROXY_ENV,
    )
    supports_resume = True
    #: One process (relaunch off) that exits on SIGTERM; its shell tool runs in a
    #: session of its own, which the supervisor stops itself.
    pdeath_signal = signal.SIGTERM
    permission_levels = frozenset(_APPROVAL)
    setting_sources = (("user",), ("user", "project"))
    default_setting_sources = ("user",)
    repository_files = REPOSITORY_FILES
    #: stderr lines that say nothing about a failure (left out of its analysis).
    stderr_noise = _NOISE
    notes = (
        "SIGTERM makes gemini exit 0 without a result: counted as a failure",
        "API retries cannot be capped per run (general.maxAttempts in ~/.gemini/settings.json "
        "caps them for every run); a 429 is retried for about 270 s by default",
        "no turn limit flag (model.maxSessionTurns in its settings only)",
        "its API errors exit with the HTTP status mod 256 (401 -> 145, 429 -> 173)",
        "the working directory's .gemini/settings.json and .env are not read, even in a "
        "folder the user trusted (GEMINI_CLI_TRUST_WORKSPACE=false); "
        "setting_sources=('user', 'project') reads them",
        "live sessions and approvals over ACP (gemini --acp --skip-trust); resume= in a live "
        "session is refused (its session/load wipes the session)",
    )
    options: Mapping[str, OptionSpec] = {
        "approval_mode": OptionSpec((str,), "--approval-mode (default, auto_edit, yolo, plan)"),
        "include_directories": OptionSpec((str, list, tuple), "--include-directories"),
    }
    takes = frozenset({"add_dirs"})

    def install_hint(self) -> str:
        return "install it with `npm install -g @google/gemini-cli`, or set GENESIS_GEMINI_PATH"

    def build_command(self, request: Request) -> CommandSpec:
        args: list[str] = ["--output-format", "stream-json", "--skip-trust"]
        shared, warnings = _shared(request)
        mode = request.options.get("approval_mode")
        if not mode and request.permissions:
            mode = _APPROVAL.get(request.permissions)
        if mode:
            args.append(f"--approval-mode={mode}")
        args += shared
        if request.resume:
            args.append(f"--resume={request.resume}")
        args.extend(request.extra_args)
        return CommandSpec(
            args=tuple(args),
            stdin=request.prompt.encode("utf-8"),
            env=self._env(request.setting_sources),
            warnings=tuple(warnings),
        )

    def _env(self, sources: tuple[str, ...] | None) -> dict[str, str]:
        """One process (relaunch off), and the working directory's settings
        read only when ``setting_sources`` says so (a one-shot run and a live
        session alike)."""
        trust = "true" if self.reads_project(sources) else "false"
        return {"GEMINI_CLI_NO_RELAUNCH": "true", "GEMINI_CLI_TRUST_WORKSPACE": trust}

    def control(self) -> ControlProtocol:
        """A live session over ACP (``gemini --acp``): see :mod:`.acp`."""
        return AcpControl(acp_agents.GEMINI, self._acp_command)

    def _acp_command(self, request: Request) -> CommandSpec:
        """``gemini --acp --skip-trust``: modes (``permissions=``, an approver)
        are set over the protocol, not on the command line; the directories
        (``add_dirs=``) are the run's ``--include-directories``."""
        shared, warnings = _shared(request)
        if request.options.get("approval_mode"):
            warnings.append(
                "option approval_mode is not used in a live session: permissions= and "
                "approver= pick gemini's mode (session/set_mode)"
            )
        return CommandSpec(
            args=("--acp", "--skip-trust", *shared, *request.extra_args),
            env=self._env(request.setting_sources),
            warnings=tuple(warnings),
        )

    def translator(self) -> GeminiTranslator:
        return GeminiTranslator()

    def failure_hint(self, result: RunResult) -> str | None:
        return gemini_failure_hint(result)

    def stderr_retries(self, stderr: str) -> int:
        return gemini_stderr_retries(stderr)


class GeminiTranslator(Translator):
    """gemini stream-json lines to normalized events.

    Assistant text comes as ``delta`` chunks: one text event per message, its
    chunks joined, given at the next line that is not one of them (a text
    event means "a message" on every backend); the chunks since the last tool
    call make the result's text (gemini's ``result`` line carries none).
    """

    __slots__ = ("_chunks", "_open", "_tool_names")

    def __init__(self) -> None:
        self._tool_names: dict[str, str] = {}
        self._chunks: list[str] = []
        #: The chunks of the message not given as its event yet.
        self._open: list[str] = []

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        if obj.get("type") == "message" and obj.get("role") == "assistant":
            text = obj.get("content")
            if not isinstance(text, str):
                return ()
            whole = [] if obj.get("delta") else self.flush()
            if not obj.get("delta"):
                self._chunks.clear()
            self._chunks.append(text)
            self._open.append(text)
            return whole
        whole = self.flush()
        events = self._line(obj)
        return [*whole, *events] if whole else events

    def flush(self) -> Sequence[Event]:
        """The open message as one text event (none: nothing)."""
        if not self._open:
            return []
        text, self._open = "".join(self._open), []
        return [TextEvent(text)]

    def _line(self, obj: dict[str, Any]) -> Sequence[Event]:
        kind = obj.get("type")
        if kind == "tool_use":
            self._chunks.clear()
            name = str(obj.get("tool_name") or "unknown")
            tool_id = str(obj.get("tool_id") or "")
            self._tool_names[tool_id] = name
            params = obj.get("parameters")
            key = _FILE_TOOLS.get(name)
            if key and isinstance(params, dict) and isinstance(params.get(key), str):
                return (ToolCallEvent(tool_id, name, params, [params[key]]),)
            return (ToolCallEvent(tool_id, name, params),)
        if kind == "tool_result":
            self._chunks.clear()
            tool_id = str(obj.get("tool_id") or "")
            error = obj.get("error")
            output = obj.get("output")
            if output is None and isinstance(error, dict):
                output = error.get("message")
            return (
                ToolResultEvent(
                    tool_id,
                    self._tool_names.get(tool_id, "unknown"),
                    obj.get("status") != "success",
                    preview(output),
                ),
            )
        if kind == "init":
            return (SessionEvent(obj.get("session_id"), obj.get("model")),)
        if kind == "result":
            return self._result(obj)
        if kind == "error":
            return (ErrorEvent(str(obj.get("message") or ""), fatal=False),)
        return ()

    def _result(self, obj: dict[str, Any]) -> Sequence[Event]:
        events: list[Event] = []
        stats = obj.get("stats")
        if isinstance(stats, dict):
            events.append(UsageEvent(stats))
        status = obj.get("status")
        error = obj.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        is_error = status != "success"
        text = "".join(self._chunks) or None
        code = _CODE.search(message) if isinstance(message, str) else None
        events.append(
            ResultEvent(
                is_error=is_error,
                subtype=str(status) if status is not None else None,
                text=str(message) if is_error and message else text,
                api_error_status=as_int(code.group(1)) if code else None,
                errors=[message] if message else [],
            )
        )
        return events
