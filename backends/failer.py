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
from coding_genesis.retry import DEFAULT_RETRIES
from coding_genesis.status import FailureCategory

from .claude import ClaudeTranslator

__all__ = ["ERROR_CATEGORIES", "RETRYABLE_CODES", "RETRYABLE_ENV", "FailerBackend"]

#: Failer error codes -> failure categories.
ERROR_CATEGORIES: Mapping[str, FailureCategory] = {
    "AGENT_ERROR": FailureCategory.INTERNAL,
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

FAILER_SCRIPT = str(Path(coding_genesis.__file__).with_name("testing") / "failer.py")


class FailerBackend(Backend):
    name = "failer"
    executable = "genesis-failer"
    path_env_var = "GENESIS_FAILER_PATH"
    #: Where it keeps its counters (``/fail-then-succeed``): a private directory
    #: under the temporary directory, unless given.
    env_needs = ("GENESIS_FAILER_STATE_DIR", "TMPDIR")
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
        return CommandSpec(
            args=tuple(args),
            stdin=request.prompt.encode("utf-8"),
            env={RETRYABLE_ENV: ",".join(RETRYABLE_CODES)},
        )

    def failure_hint(self, result: RunResult) -> str | None:
        """The failer names its failures with error codes in its JSON body."""
        code = (result.data or {}).get("error_code")
        category = ERROR_CATEGORIES.get(code) if isinstance(code, str) else None
        return category.value if category is not None else None

    def translator(self) -> ClaudeTranslator:
        return ClaudeTranslator()
