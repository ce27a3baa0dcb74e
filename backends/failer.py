"""Adapter for the embedded Process Failer (``coding_genesis/failer.py``).

It speaks claude's stream-json, so it reuses the claude translator; it needs
no PATH lookup and no credentials, which makes it the default for trying
coding-genesis out.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import coding_genesis
from coding_genesis.backend import AttemptRequest, Backend, CommandSpec, OptionSpec
from coding_genesis.result import RunResult

from .claude import ClaudeTranslator

__all__ = ["FailerBackend"]

#: Failer error codes -> failure categories.
_HINTS = {
    "AGENT_ERROR": "internal",
    "RATE_LIMIT": "rate_limit",
    "TRANSIENT_ERROR": "network",
    "INVALID_COMMAND": "invalid_task",
}

FAILER_SCRIPT = str(Path(coding_genesis.__file__).with_name("testing") / "failer.py")


class FailerBackend(Backend):
    name = "failer"
    executable = "genesis-failer"
    path_env_var = "GENESIS_FAILER_PATH"
    #: Where it keeps its counters (``/fail-then-succeed``).
    env_needs = ("GENESIS_FAILER_STATE_DIR", "XDG_STATE_HOME")
    supports_resume = True
    #: Sent to the CLI if the runner dies (it cleans up its own tools on SIGTERM).
    pdeath_signal = signal.SIGTERM
    #: It runs no tool and writes nothing: every level holds.
    permission_levels = frozenset({"read-only", "edit", "full"})
    notes = ("the embedded test CLI: no model, no tools, no API retries",)
    options: Mapping[str, OptionSpec] = {
        "state_dir": OptionSpec((str,), "where /fail-then-succeed keeps its counters"),
    }

    def default_program(self) -> Sequence[str] | None:
        return (sys.executable, FAILER_SCRIPT)

    def install_hint(self) -> str:
        return "it ships with coding-genesis; reinstall the package"

    def build_command(self, request: AttemptRequest) -> CommandSpec:
        args = ["-p", "--output-format", "stream-json", "--verbose"]
        if request.request_key:
            args.append(f"--request-key={request.request_key}")
        state_dir = request.options.get("state_dir")
        if state_dir:
            args.append(f"--state-dir={state_dir}")
        if request.model:
            args.append(f"--model={request.model}")
        if request.resume_session:
            args.append(f"--resume={request.resume_session}")
        if request.permissions is not None:
            args.append(f"--permissions={request.permissions}")
        if request.max_turns is not None:
            args.append(f"--max-turns={request.max_turns}")
        args.extend(request.extra_args)
        return CommandSpec(args=tuple(args), stdin=request.prompt.encode("utf-8"))

    def failure_hint(self, result: RunResult) -> str | None:
        """The failer names its failures with error codes in its JSON body."""
        code = (result.data or {}).get("error_code")
        return _HINTS.get(code) if isinstance(code, str) else None

    def translator(self) -> ClaudeTranslator:
        return ClaudeTranslator()
