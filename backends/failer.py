"""Adapter for the embedded Process Failer (``coding_genesis/testing/failer.py``).

It speaks claude's stream-json, so it reuses the claude translator, and in a
live session claude's control protocol, so its :meth:`FailerBackend.control`
is claude's codec (:class:`~coding_genesis.backends.claude_control.ClaudeControl`):
sessions, approvals, hooks, host tools and structured output run offline.  It
needs no PATH lookup and no credentials, which makes it the default for trying
coding-genesis out.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import coding_genesis.backend
from coding_genesis.backend import Backend, CommandSpec, OptionSpec
from coding_genesis.request import Request
from coding_genesis.result import RunResult
from coding_genesis.retry import DEFAULT_RETRIES
from coding_genesis.status import FailureCategory

from .claude import PARTIAL_FLAG, ClaudeTranslator
from .claude_control import SESSION_FLAGS, ClaudeControl, agent_definitions

__all__ = ["ERROR_CATEGORIES", "RETRYABLE_CODES", "RETRYABLE_ENV", "FailerBackend"]

#: Failer error codes -> failure categories.
ERROR_CATEGORIES: Mapping[str, FailureCategory] = {
    "AGENT_ERROR": FailureCategory.AGENT_ERROR,
    "RATE_LIMIT": FailureCategory.RATE_LIMIT,
    "TRANSIENT_ERROR": FailureCategory.NETWORK,
    "INVALID_COMMAND": FailureCategory.INVALID_TASK,
}

#: The failer's error codes whose failures a retry may fix, read from the one
#: retry table (``coding_genesis.retry.DEFAULT_RETRIES``, which the failure
#: value's ``retryable`` is decided from): the failer's own body says
#: ``"retry_recommended"`` from this (given in ``RETRYABLE_ENV``), so the two agree.
RETRYABLE_CODES = tuple(
    code for code, category in ERROR_CATEGORIES.items() if category in DEFAULT_RETRIES
)
#: The variable the failer reads them from (its own, set for it by this backend).
RETRYABLE_ENV = "GENESIS_FAILER_RETRYABLE"

FAILER_SCRIPT = str(Path(coding_genesis.backend.__file__).with_name("testing") / "failer.py")


class FailerBackend(Backend):
    name = "failer"
    executable = "genesis-failer"
    path_env_var = "GENESIS_FAILER_PATH"
    #: Where it keeps its counters (``/fail-then-succeed``): a private directory
    #: under the temporary directory, unless given.
    env_needs = ("GENESIS_FAILER_STATE_DIR", "TMPDIR")
    supports_resume = True
    #: ``--json-schema``: it answers with a ``StructuredOutput`` call, as claude does.
    structured_output = True
    #: Sent to the CLI if the runner dies (it cleans up its own tools on SIGTERM).
    pdeath_signal = signal.SIGTERM
    #: Its tool calls (``/write``, ``/bash``) follow the level as claude's do:
    #: read-only refuses them, edit allows writes under the cwd, full everything.
    permission_levels = frozenset({"read-only", "edit", "full"})
    #: ``partial``: it writes claude's ``stream_event`` pieces before each text.
    #: ``agents=``: its ``/agent <name> <task>`` runs one, between claude's subagent hooks.
    takes = frozenset({"partial", "agents"})
    notes = (
        "the embedded test CLI: no model (model= is ignored), scripted tool calls, no API retries",
    )
    options: Mapping[str, OptionSpec] = {
        "state_dir": OptionSpec((str,), "where /fail-then-succeed keeps its counters"),
    }

    def default_program(self) -> Sequence[str] | None:
        return (sys.executable, FAILER_SCRIPT)

    def install_hint(self) -> str:
        return "it ships with coding-genesis; reinstall the package"

    def build_command(self, request: Request) -> CommandSpec:
        args = ["-p", "--output-format", "stream-json", "--verbose"]
        if request.request_key:
            args.append(f"--request-key={request.request_key}")
        if request.agents:  # a session's go in initialize, as claude's do
            args.append(f"--agents={json.dumps(agent_definitions(request))}")
        return _command(args, request, stdin=request.prompt.encode("utf-8"))

    def control(self) -> ClaudeControl:
        """claude's control protocol: the failer plays claude's side of it."""
        return ClaudeControl(
            command=lambda start: _command(list(SESSION_FLAGS), start),
            translator=self.translator,
            cli="failer",
        )

    def failure_hint(self, result: RunResult) -> str | None:
        """The failer names its failures with error codes in its JSON body."""
        code = (result.data or {}).get("error_code")
        category = ERROR_CATEGORIES.get(code) if isinstance(code, str) else None
        return category.value if category is not None else None

    def translator(self) -> ClaudeTranslator:
        return ClaudeTranslator()


def _command(args: list[str], start: Request, stdin: bytes | None = None) -> CommandSpec:
    """The argv of a one-shot run (``-p``) or of a live session: the options are
    spelled the same in both."""
    state_dir = start.options.get("state_dir")
    if state_dir:
        args.append(f"--state-dir={state_dir}")
    warnings: tuple[str, ...] = ()
    if start.model:
        args.append(f"--model={start.model}")
        warnings = (f"the failer has no model: model={start.model!r} is ignored",)
    if start.resume:
        args.append(f"--resume={start.resume}")
        if start.fork:
            args.append("--fork-session")
            if start.resume_at:
                args.append(f"--resume-session-at={start.resume_at}")
    if start.permissions is not None:
        args.append(f"--permissions={start.permissions}")
    if start.max_turns is not None:
        args.append(f"--max-turns={start.max_turns}")
    if start.output_schema is not None:
        args.append("--json-schema=" + json.dumps(start.output_schema, separators=(",", ":")))
    if start.partial:
        args.append(PARTIAL_FLAG)
    args.extend(start.extra_args)
    return CommandSpec(
        args=tuple(args),
        stdin=stdin,
        env={RETRYABLE_ENV: ",".join(RETRYABLE_CODES)},
        warnings=warnings,
    )
