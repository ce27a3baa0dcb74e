"""The one boundary between the core and the CLI adapters.

A backend is pure: it builds the command line for a request and turns each
parsed stdout object into normalized events.  It never spawns, signals, reads
or waits on a process; the core does all of that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from coding_genesis.errors import ConfigError
from coding_genesis.events import Event

__all__ = ["Backend", "CommandSpec", "OptionSpec", "RunRequest", "Translator", "check_options"]


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One backend option: the value types it accepts and what it does."""

    types: tuple[type, ...]
    help: str = ""


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What one attempt asks of a backend."""

    prompt: str
    cwd: str
    model: str | None = None
    #: Continue this CLI session instead of starting a new one.
    resume_session: str | None = None
    #: One permission level across CLIs: "read-only", "edit" or "full"; None: the CLI's default.
    permissions: str | None = None
    #: The CLI's own turn limit (passed to the CLI; not a budget of ours).
    max_turns: int | None = None
    #: Cap on the CLI's own API retries where it allows one; None: the CLI's default.
    cli_max_retries: int | None = None
    #: Stable across retries of the same logical request.
    request_key: str = ""
    #: Backend-specific options (max_turns, permission_mode, allowed_tools, sandbox, ...).
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Extra CLI arguments, appended before the prompt marker.
    extra_args: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """How to start the CLI: arguments after the program, stdin, environment."""

    args: tuple[str, ...]
    #: Written to stdin, which is then closed.  None: stdin is /dev/null.
    stdin: bytes | None = None
    #: Variables added to the inherited environment.
    env: Mapping[str, str] = field(default_factory=dict)
    #: Inherited variables to remove; a trailing ``*`` matches a prefix.
    unset_env: tuple[str, ...] = ()
    #: Files of a private temporary settings overlay, by relative path: the core writes
    #: them (0600) in a fresh 0700 directory, replaces ``{overlay}`` in ``args`` and in
    #: ``env`` values with that directory's path, and removes it after the run.
    overlay: Mapping[str, bytes] = field(default_factory=dict)
    #: Options the CLI cannot honour, reported as warnings in the result.
    warnings: tuple[str, ...] = ()


@runtime_checkable
class Translator(Protocol):
    """Per-run, stateful line translator (e.g. remembers tool ids).

    Optional attribute ``message_usage`` (``"live"`` by default): what becomes
    of the usage a CLI reports mid-stream (claude: per message).  ``"live"``:
    a usage event each (budgets, usage subscribers); ``"folded"``: kept and
    summed, given as usage events by ``flush`` at the end of the stream (what
    metering needs, for a dict store per line); ``"off"``: dropped (nothing
    hears usage).  The CLI's final usage is translated whatever the mode, and
    the run's result is the same.

    Optional method ``flush() -> Sequence[Event]``: the events held back until
    the end of the stream (called once, at EOF, whatever ended the stream).
    """

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        """Normalized events for one parsed stdout object.  Unknown types give ()."""
        ...


@runtime_checkable
class Backend(Protocol):
    """A coding-agent CLI adapter.

    Optional attribute ``pdeath_signal`` (an ``int`` or None; default
    ``SIGTERM``): the signal the CLI gets if the runner dies (Linux
    ``PR_SET_PDEATHSIG``); SIGKILL for a CLI known to ignore SIGTERM.
    """

    #: Registry name, e.g. "claude".
    name: str
    #: Program name looked up on PATH, e.g. "claude".
    executable: str
    #: Environment variable that overrides the program path, e.g. GENESIS_CLAUDE_PATH.
    path_env_var: str
    #: Whether a failed attempt can continue the CLI's own session.
    supports_resume: bool
    #: The options ``options=`` may set (an unknown one is a ConfigError).
    options: Mapping[str, OptionSpec]

    def default_program(self) -> Sequence[str] | None:
        """A program that needs no PATH lookup (the embedded failer), else None."""
        ...

    def build_command(self, request: RunRequest) -> CommandSpec:
        """The CLI arguments for a request.  The prompt must never become a flag."""
        ...

    def translator(self) -> Translator:
        """A fresh translator for one run."""
        ...

    def install_hint(self) -> str:
        """How to install the CLI, for 'not found' messages."""
        ...


def check_options(backend: Backend, options: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for an option ``backend`` does not know, or a
    value of the wrong type.  A backend that declares no ``options`` (an older
    plug-in) accepts any."""
    valid: Mapping[str, OptionSpec] | None = getattr(backend, "options", None)
    if valid is None:
        return
    if not isinstance(options, Mapping):
        raise ConfigError(f"options must be a mapping, got {options!r}")
    unknown = sorted(str(name) for name in options if name not in valid)
    if unknown:
        names = ", ".join(sorted(valid)) or "(none)"
        raise ConfigError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for backend "
            f"{backend.name!r}; valid options: {names}"
        )
    for name, value in options.items():
        spec = valid[name]
        if value is not None and not isinstance(value, spec.types):
            kinds = " or ".join(t.__name__ for t in spec.types)
            raise ConfigError(
                f"option {name!r} of backend {backend.name!r} must be {kinds}, got {value!r}"
            )
