"""Adapter for the Qwen Code CLI (``qwen --output-format stream-json``).

The prompt goes to stdin (with no ``-p``, qwen reads its prompt from a piped
stdin), never to argv.  Facts this adapter is built on (measured on
``@qwen-code/qwen-code`` 0.24.4):

* Its stream-json is claude's (``system/init``, ``assistant``, ``user``,
  ``result``) plus ``system/retry`` events for its own API retries; a failed
  result carries ``error.message`` (``[API Error: 401 ...]``).
* The ``qwen`` bin is a wrapper that ``spawnSync``s ``node --expose-gc cli.js``:
  SIGTERM to it leaves the real CLI and its tool running.  The backend
  declares the real entry point (:data:`NODE_SCRIPT`); the core runs it under a
  node >= 22 (qwen needs it) that it finds or is given.  ``cli.js`` itself
  relaunches in a child node for a larger heap (on a machine with enough
  memory) unless ``QWEN_CODE_NO_RELAUNCH`` is set, which we do.  Run directly
  as one process, SIGTERM stops the tool, writes a cancelled ``tool_result``
  and exits 130.
* A 429 is retried for many minutes; ``model.generationConfig.maxRetries``
  (a settings file only) caps the rate-limit retries: the run gets a private
  system-settings overlay (``QWEN_CODE_SYSTEM_SETTINGS_PATH``).
* Its folder trust is off by default, so it reads the working directory's
  ``.qwen/settings.json`` (hooks, MCP servers) wherever it runs.  Its safe
  mode (``QWEN_CODE_SAFE_MODE=1``) starts none of them, the user's own hooks,
  MCP servers, extensions, skills and QWEN.md included, and keeps the approval
  mode: set only when ``setting_sources`` leaves "project" out (not by
  default).  Turning folder trust on instead drops ``--approval-mode=yolo``
  in an untrusted folder.
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
    NodeScript,
    OptionSpec,
    RepositoryFile,
)
from coding_genesis.control import ControlProtocol
from coding_genesis.events import CliRetryEvent, Event, ResultEvent, UsageEvent
from coding_genesis.request import Request
from coding_genesis.result import RunResult

from . import acp_agents
from ._common import PROXY_ENV, as_int, first_class, first_hint
from .acp import AcpControl
from .claude import PARTIAL_FLAG, ClaudeTranslator

__all__ = ["NODE_SCRIPT", "QwenBackend", "QwenTranslator", "qwen_failure_hint"]

#: qwen's real entry point, run without its ``qwen`` wrapper.
NODE_SCRIPT = NodeScript(
    package="@qwen-code/qwen-code",
    script="cli.js",
    node_args=("--expose-gc",),
    min_node=22,
    node_env_var="GENESIS_QWEN_NODE",
)

#: Our permission levels as qwen approval modes (enforced by the CLI).
_APPROVAL = {"read-only": "plan", "edit": "auto-edit", "full": "yolo"}

#: ``[API Error: 401 Incorrect API key provided: fake.]``
_API_STATUS = re.compile(r"API Error: (\d{3})\b")

#: Start-up chatter on stderr, even on success (its vendored ripgrep is not executable
#: when npm ran no install scripts: "... rg EACCES" would read as a tool error).
_NOISE = re.compile(
    r"^(?:Ripgrep not available|YOLO mode is enabled|\W*SAFE MODE \W|"
    r"\[perf\] acp agent event loop stall)"
)

_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("rate_limit", re.compile(r"rate limit|quota|too many requests", re.I)),
    ("auth", re.compile(r"incorrect api key|invalid api key|unauthori[sz]ed", re.I)),
    ("network", re.compile(r"ECONNREFUSED|ECONNRESET|fetch failed|connection error", re.I)),
)


def qwen_failure_hint(result: RunResult) -> str | None:
    """Category from qwen's words for its failure (its HTTP status is read by the core)."""
    if result.api_error_status is not None:
        return None
    return first_hint((result.message, result.stderr_tail[-4000:]), _HINTS)


#: What qwen loads from a working directory (docs/security.md's table).
REPOSITORY_FILES = (
    RepositoryFile(".qwen/settings.json", "project", "hooks, MCP servers"),
    RepositoryFile(".qwen/commands", "project", "slash commands"),
)


def _shared(
    request: Request, *, safe: bool
) -> tuple[list[str], dict[str, str], dict[str, bytes], list[str]]:
    """The arguments, environment, settings overlay and warnings a one-shot
    run and a live session share; ``safe``: qwen's safe mode (the working
    directory's settings unread)."""
    opts = request.options
    args: list[str] = []
    warnings: list[str] = []
    if request.model:
        args += ["-m", request.model]
    if request.max_turns is not None:
        args.append(f"--max-session-turns={int(request.max_turns)}")
    if opts.get("max_tool_calls") is not None:
        args.append(f"--max-tool-calls={int(opts['max_tool_calls'])}")
    if request.system_prompt is not None:
        args.append(f"--system-prompt={request.system_prompt}")
    if request.append_system_prompt is not None:
        args.append(f"--append-system-prompt={request.append_system_prompt}")
    dirs = first_class(request.add_dirs, "add_dirs", opts, "add_dirs", warnings)
    for directory in (dirs,) if isinstance(dirs, str) else dirs or ():
        args.append(f"--add-dir={directory}")
    # cli.js relaunches itself in a child node for a larger heap (when half the
    # machine's memory exceeds node's default); SIGTERM then stops only the parent.
    env = {"QWEN_CODE_NO_RELAUNCH": "true", "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}
    if safe:
        env["QWEN_CODE_SAFE_MODE"] = "1"
    retries = opts.get("max_retries")
    if retries is None:
        retries = request.cli_max_retries
    overlay: dict[str, bytes] = {}
    if retries is not None:
        settings = {"model": {"generationConfig": {"maxRetries": max(0, int(retries))}}}
        overlay["settings.json"] = json.dumps(settings).encode("utf-8")
        env["QWEN_CODE_SYSTEM_SETTINGS_PATH"] = "{overlay}/settings.json"
    return args, env, overlay, warnings


class QwenBackend(Backend):
    name = "qwen"
    executable = "qwen"
    path_env_var = "GENESIS_QWEN_PATH"
    #: Run ``node --expose-gc <package>/cli.js``, not the ``qwen`` wrapper.
    node_script = NODE_SCRIPT
    #: What it needs from the environment under ``inherit_env=False``.
    env_needs = (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "DASHSCOPE_API_KEY",
        "QWEN_*",
        *PROXY_ENV,
    )
    supports_resume = True
    #: Run directly, it stops its tools and exits on SIGTERM.
    pdeath_signal = signal.SIGTERM
    permission_levels = frozenset(_APPROVAL)
    setting_sources = (("user",), ("user", "project"))
    #: Its one switch (safe mode) also drops the user's own customizations:
    #: ("user",) asks for it.
    default_setting_sources = ("user", "project")
    repository_files = REPOSITORY_FILES
    #: stderr lines that say nothing about a failure (left out of its analysis).
    stderr_noise = _NOISE
    notes = (
        "runs qwen's real entry point (cli.js) under node >= 22, not the `qwen` wrapper, "
        "with its own relaunch off (QWEN_CODE_NO_RELAUNCH: node's default heap size)",
        "cli_max_retries caps its rate-limit retries (model.generationConfig.maxRetries); "
        "its transport backoff still retries a 429 for about a minute",
        "reads the working directory's .qwen/settings.json (hooks, MCP servers) unless "
        "setting_sources=('user',) (its safe mode, which also drops the user's own hooks, "
        "MCP servers, extensions, skills and QWEN.md)",
        "live sessions and approvals over ACP (cli.js --acp)",
    )
    options: Mapping[str, OptionSpec] = {
        "approval_mode": OptionSpec(
            (str,), "--approval-mode (plan, default, auto-edit, auto, yolo)"
        ),
        "max_retries": OptionSpec((int,), "model.generationConfig.maxRetries of the overlay"),
        "max_tool_calls": OptionSpec((int,), "--max-tool-calls"),
        "add_dirs": OptionSpec((str, list, tuple), "--add-dir, repeated"),
    }
    takes = frozenset({"system_prompt", "append_system_prompt", "add_dirs", "partial"})

    def install_hint(self) -> str:
        return (
            "install it with `npm install -g @qwen-code/qwen-code` under node >= 22, "
            "or set GENESIS_QWEN_PATH (and GENESIS_QWEN_NODE for the node to run it with)"
        )

    def build_command(self, request: Request) -> CommandSpec:
        args: list[str] = ["--output-format", "stream-json"]
        mode = request.options.get("approval_mode")
        if not mode and request.permissions:
            mode = _APPROVAL.get(request.permissions)
        if mode:
            args.append(f"--approval-mode={mode}")
        shared, env, overlay, warnings = _shared(
            request, safe=not self.reads_project(request.setting_sources)
        )
        args += shared
        if request.resume:
            args.append(f"--resume={request.resume}")
        if request.partial:
            args.append(PARTIAL_FLAG)  # claude's stream_event lines
        args.extend(request.extra_args)
        return CommandSpec(
            args=tuple(args),
            stdin=request.prompt.encode("utf-8"),
            env=env,
            overlay=overlay,
            warnings=tuple(warnings),
        )

    def control(self) -> ControlProtocol:
        """A live session over ACP (``cli.js --acp``): see :mod:`.acp`."""
        return AcpControl(acp_agents.QWEN, self._acp_command)

    def _acp_command(self, request: Request) -> CommandSpec:
        """``cli.js --acp``: modes (``permissions=``, an approver) are set over
        the protocol; the system prompt, the directories and the retry cap are
        the same arguments and settings overlay as a run's."""
        shared, env, overlay, warnings = _shared(
            request, safe=not self.reads_project(request.setting_sources)
        )
        if request.options.get("approval_mode"):
            warnings.append(
                "option approval_mode is not used in a live session: permissions= and "
                "approver= pick qwen's mode (session/set_mode)"
            )
        return CommandSpec(
            args=("--acp", *shared, *request.extra_args),
            env=env,
            overlay=overlay,
            warnings=tuple(warnings),
        )

    def translator(self) -> QwenTranslator:
        return QwenTranslator()

    def failure_hint(self, result: RunResult) -> str | None:
        return qwen_failure_hint(result)


class QwenTranslator(ClaudeTranslator):
    """qwen stream-json: claude's, plus ``system/retry`` and ``error.message`` results."""

    __slots__ = ()

    def _system(self, obj: dict[str, Any]) -> Sequence[Event]:
        if obj.get("subtype") == "retry":
            data = obj.get("data")
            data = data if isinstance(data, dict) else {}
            attempt = as_int(data.get("attempt"))
            if attempt is None:  # "retrying the provider call" notice, not a new retry
                return ()
            delay = data.get("delayMs")
            return (
                CliRetryEvent(
                    attempt=attempt,
                    max_retries=as_int(data.get("maxRetries")),
                    error_status=None,
                    error=str(data.get("reason") or "retry"),
                    retry_delay_ms=delay
                    if isinstance(delay, int | float) and not isinstance(delay, bool)
                    else None,
                ),
            )
        return super()._system(obj)

    def _result(self, obj: dict[str, Any]) -> Sequence[Event]:
        events = list(super()._result(obj))
        error = obj.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            return events
        status = _API_STATUS.search(message)
        fixed: list[Event] = []
        for event in events:
            if isinstance(event, ResultEvent) and not isinstance(event, UsageEvent):
                event = ResultEvent(
                    is_error=True,
                    subtype=event.subtype,
                    text=event.text or message,
                    session_id=event.session_id,
                    num_turns=event.num_turns,
                    duration_ms=event.duration_ms,
                    api_error_status=int(status.group(1)) if status else None,
                    errors=[message],
                )
            fixed.append(event)
        return fixed
