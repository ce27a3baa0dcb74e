"""What a backend can do with a request: the one check every entry point asks.

:func:`check` answers, for a backend and the settings of a request (an
agent's, or one call's), the first thing the backend cannot honor, worded
once: the agent's constructor raises it (:func:`require`,
:class:`~coding_genesis.errors.RefusedError`), a call answers status 64 with
the same words, ``session()`` raises them, a batch line and ``run-many``
answer them at the line's index.  The rows are checked in the order of
:data:`ROWS`; the first refusal wins.

Beside it, :data:`UNTRUSTED`: what input that is not the caller's own code (a
``run-many`` line without ``--trusted-input``, a request served by ``genesis
serve``) may set.  Every option is classified there when it is added (a test fails
otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypeAlias

from coding_genesis.backend import check_options
from coding_genesis.config import require_permissions, require_setting_sources
from coding_genesis.errors import ConfigError, RefusedError
from coding_genesis.hooks import declared, hook_points
from coding_genesis.prompts import FileRef, Image, part_kind, path_parts
from coding_genesis.request import Request, Unsupported

if TYPE_CHECKING:
    from coding_genesis.backend import Backend
    from coding_genesis.control import ControlProtocol
    from coding_genesis.options import Mode
    from coding_genesis.request import RequestSettings

__all__ = [
    "ROWS",
    "TAKES",
    "UNTRUSTED",
    "UNTRUSTED_APPROVAL_TIMEOUT",
    "UNTRUSTED_OPTIONS",
    "Trust",
    "always_reads_project",
    "backends_that",
    "check",
    "require",
    "session_refusal",
    "steer_refusal",
    "takes_mcp_servers",
    "takes_partial",
    "takes_schema",
    "untrusted_backend_problem",
    "untrusted_problem",
]

#: The rows of the check, in the order they are asked.
ROWS = (
    "options",
    "session",
    "isolation",
    "resume",
    "fork",
    "approver",
    "hooks",
    "tools",
    "output_schema",
    "permissions",
    "setting_sources",
    "takes",
    "mcp_servers",
    "asker",
    "partial",
    "parts",
    "turn",
)

#: The options a backend maps only where it says so (``Backend.takes``), each
#: with the noun its refusal names.
TAKES: Mapping[str, str] = {
    "system_prompt": "system prompt",
    "append_system_prompt": "appended system prompt",
    "add_dirs": "extra directories",
    "agents": "subagent definitions",
}


def backends_that(need: str) -> list[str]:
    """The registered backends that have ``need`` ("two_way", "tools",
    "output_schema", a session's fact: "steer", "fork", "compact",
    "context_usage", an option of :data:`TAKES`, or ``"turn <option>"``:
    a turn of a live session sets that option for itself): only a refusal's
    words load the registry."""
    # lazy: the registry loads every backend: only an answer that names them needs it
    from coding_genesis.backends import get_backend, registered_backends

    names = []
    for name in registered_backends():
        backend = get_backend(name)
        protocol = backend.control()
        kind, _, option = need.partition(" ")
        if kind == "turn":
            if protocol is not None and option in protocol.turn_options:
                names.append(name)
            continue
        if kind == "parts":
            if protocol is not None and option in protocol.prompt_parts:
                names.append(name)
            continue
        has = {
            "two_way": protocol is not None,
            **{
                fact: protocol is not None and getattr(protocol, attr)
                for fact, (attr, _) in _FACTS.items()
            },
            "tools": protocol is not None and protocol.can_host_tools,
            "output_schema": takes_schema(backend, protocol),
            "partial": takes_partial(backend, protocol),
            "mcp_servers": takes_mcp_servers(backend, protocol),
            "asker": protocol is not None and protocol.asks_questions,
        }.get(need, need in backend.takes)
        if has:
            names.append(name)
    return names


def takes_schema(backend: Backend, protocol: ControlProtocol | None) -> bool:
    """``output_schema=`` can be honored: the CLI takes the schema itself, or
    its two-way protocol carries it in the turn's prompt (ACP; the answer is
    validated by us either way, and a run with a schema then runs live)."""
    return backend.structured_output or (protocol is not None and protocol.schema_in_prompt)


def takes_partial(backend: Backend, protocol: ControlProtocol | None) -> bool:
    """``partial=`` can be honored by a session (the protocol's ``deltas``) or
    a run: one-shot where the backend ``takes`` it, else one live turn."""
    return (protocol is not None and protocol.deltas) or "partial" in backend.takes


def _partial_refusal(
    backend: Backend, protocol: ControlProtocol | None, settings: RequestSettings, mode: Mode
) -> Unsupported | None:
    """The ``partial`` row: deltas from the protocol of a live session (or of a
    run that runs live), else from the one-shot stream where the backend takes it."""
    if not getattr(settings, "partial", False):
        return None
    live = mode == "session" or (isinstance(settings, Request) and backend.runs_live(settings))
    deltas = protocol is not None and protocol.deltas
    if deltas if live else takes_partial(backend, protocol):
        return None
    return Unsupported(
        "partial",
        f"backend {backend.name!r} cannot stream text and thinking as written, which "
        "partial= needs" + _listed("backends that can", "partial"),
    )


def takes_mcp_servers(backend: Backend, protocol: ControlProtocol | None) -> bool:
    """``mcp_servers=`` can be honored: the one-shot command declares them
    (``Backend.takes``), or the two-way protocol does (a run with them then
    runs live: :meth:`~coding_genesis.backend.Backend.runs_live`)."""
    return "mcp_servers" in backend.takes or (protocol is not None and protocol.takes_mcp_servers)


def _listed(prefix: str, need: str) -> str:
    return f"; {prefix}: {', '.join(backends_that(need)) or '(none)'}"


def _no_two_way(backend: Backend, what: str) -> str:
    return f"backend {backend.name!r} has no two-way protocol, which {what} needs" + _listed(
        "backends that have one", "two_way"
    )


def _live_refusal(
    backend: Backend, protocol: ControlProtocol | None, settings: RequestSettings, mode: Mode
) -> Unsupported | None:
    """The rows of a live CLI (session, isolation, resume): a session needs a
    two-way protocol and runs where it is; a resumed live turn needs a protocol
    that can continue the session (gemini's ACP ``session/load`` wipes it)."""
    if mode == "session":
        if protocol is None:
            return Unsupported("session", _no_two_way(backend, "a live session"))
        if getattr(settings, "isolation", None) is not None or getattr(settings, "verify", None):
            return Unsupported(
                "isolation",
                "a live session runs in its working directory: isolation= and verify= "
                "apply to one-shot runs only",
            )
    if isinstance(settings, Request) and settings.resume and protocol is not None:
        broken = protocol.resume_refusal
        if broken is not None and (mode == "session" or backend.runs_live(settings)):
            return Unsupported(
                "resume",
                f"backend {backend.name!r} cannot resume a session over its two-way "
                f"protocol: {broken}",
            )
    if isinstance(settings, Request) and settings.fork:
        refused = session_refusal(backend, "fork")
        if refused is not None:
            return Unsupported("fork", refused)
    return None


def _beyond(
    backend: Backend, protocol: ControlProtocol, settings: RequestSettings
) -> Unsupported | None:
    """A hook that declared an effect (``hooks.wants``) its point cannot apply here."""
    points = hook_points(protocol.hook_effects)
    for event, hooks in settings.hooks.items():
        can = points.get(event, frozenset())
        for hook in hooks:
            beyond = declared(hook) - can
            if beyond:
                name = getattr(hook, "__qualname__", None) or type(hook).__name__
                there = f"can only {', '.join(sorted(can))}" if can else "only observes"
                return Unsupported(
                    "hooks",
                    f"backend {backend.name!r} cannot apply a {event} hook's "
                    f"{', '.join(sorted(beyond))}, which hook {name} declares "
                    f"(wants): a {event} hook there {there}",
                )
    return None


def check(backend: Backend, settings: RequestSettings, mode: Mode = "run") -> Unsupported | None:
    """The first thing ``backend`` cannot do of what ``settings`` ask (None:
    it can do all of it).  ``mode``: "session" for a live session (it needs a
    two-way protocol, and runs where it is), "run" for one request, "turn" for
    one turn of a live session (the options it sets for itself: the rest was
    checked when the session opened)."""
    if mode == "turn":
        return _parts_refusal(backend, settings) or _turn_refusal(backend, settings)
    return _refusal(backend, settings, mode) or _parts_refusal(backend, settings)


def _refusal(backend: Backend, settings: RequestSettings, mode: Mode) -> Unsupported | None:
    """:func:`check` of a run or a session, row by row."""
    try:
        check_options(backend, settings.options)
    except ConfigError as exc:
        return Unsupported("options", str(exc))
    protocol = backend.control()
    refused = _live_refusal(backend, protocol, settings, mode)
    if refused is not None:
        return refused
    if settings.approver is not None and protocol is None:
        return Unsupported("approver", _no_two_way(backend, "approver="))
    if settings.hooks:
        if protocol is None:
            return Unsupported("hooks", _no_two_way(backend, "hooks="))
        reported = hook_points(protocol.hook_effects)
        missing = [event for event in settings.hooks if event not in reported]
        if missing:
            return Unsupported(
                "hooks",
                f"backend {backend.name!r} reports no {', '.join(missing)} hook point, "
                f"which hooks= needs (its hook events: {', '.join(reported) or 'none'})",
            )
        refused = _beyond(backend, protocol, settings)
        if refused is not None:
            return refused
    if settings.tools and (protocol is None or not protocol.can_host_tools):
        return Unsupported(
            "tools",
            f"backend {backend.name!r} cannot call the caller's functions, which tools= needs"
            + _listed("backends that can", "tools"),
        )
    if settings.output_schema is not None and not takes_schema(backend, protocol):
        return Unsupported(
            "output_schema",
            f"backend {backend.name!r} takes no output schema, which output_schema= needs"
            + _listed("backends that do", "output_schema"),
        )
    try:  # their words are config's: an agent's settings are checked with them too
        require_permissions(backend, settings.permissions)
    except ConfigError as exc:
        return Unsupported("permissions", str(exc))
    try:
        require_setting_sources(backend, settings.setting_sources)
    except ConfigError as exc:
        return Unsupported("setting_sources", str(exc))
    refused = _unseen_project(backend, settings)
    if refused is not None:
        return refused
    for option, noun in TAKES.items():
        if getattr(settings, option, None) and option not in backend.takes:
            return Unsupported(
                option,
                f"backend {backend.name!r} takes no {noun}, which {option}= needs"
                + _listed("backends that do", option),
            )
    return _mcp_or_asker(backend, protocol, settings) or _partial_refusal(
        backend, protocol, settings, mode
    )


def _mcp_or_asker(
    backend: Backend, protocol: ControlProtocol | None, settings: RequestSettings
) -> Unsupported | None:
    """The ``mcp_servers`` and ``asker`` rows: the caller's MCP servers need a
    command or a protocol that declares them to the CLI; an asker, a protocol
    whose CLI's questions reach the session."""
    if getattr(settings, "mcp_servers", None) and not takes_mcp_servers(backend, protocol):
        return Unsupported(
            "mcp_servers",
            f"backend {backend.name!r} cannot be given MCP servers, which mcp_servers= needs"
            + _listed("backends that can", "mcp_servers"),
        )
    if getattr(settings, "asker", None) is not None and not (
        protocol is not None and protocol.asks_questions
    ):
        return Unsupported(
            "asker",
            f"backend {backend.name!r} cannot bring its CLI's questions to the user, "
            "which asker= needs" + _listed("backends that can", "asker"),
        )
    return None


def _parts_refusal(backend: Backend, settings: RequestSettings) -> Unsupported | None:
    """The ``parts`` row: a part of the prompt (an image, a file) the backend's
    protocol cannot send (``ControlProtocol.prompt_parts``: a prompt with
    parts runs live)."""
    parts: tuple[Image | FileRef, ...] = getattr(settings, "parts", ())
    if not parts:
        return None
    protocol = backend.control()
    can = protocol.prompt_parts if protocol is not None else frozenset()
    for part in parts:
        kind = part_kind(part)
        if kind not in can:
            return Unsupported(
                "parts",
                f"backend {backend.name!r} cannot send a prompt's {kind} part "
                f"({type(part).__name__}), which the prompt holds"
                + _listed("backends that can", f"parts {kind}"),
            )
    return None


def _turn_refusal(backend: Backend, settings: RequestSettings) -> Unsupported | None:
    """The ``turn`` row: an option one turn sets for itself
    (``Request.turn_options``) that the session's protocol cannot change
    between turns (``ControlProtocol.turn_options``); a permission level is
    then one the backend can enforce."""
    asked: frozenset[str] = getattr(settings, "turn_options", frozenset())
    if not asked:
        return None
    protocol = backend.control()
    can = protocol.turn_options if protocol is not None else frozenset()
    beyond = sorted(asked - can)
    if beyond:
        option = beyond[0]
        return Unsupported(
            "turn",
            f"backend {backend.name!r} cannot set {option}= for one turn of a live session "
            "(the session's setting holds; open a session with it instead)"
            + _listed("backends that can", f"turn {option}"),
        )
    fixed_schema = protocol is not None and protocol.turn_schema_in_prompt
    if "output_schema" in asked and fixed_schema and getattr(settings, "opened_schema", False):
        return Unsupported(
            "turn",
            f"backend {backend.name!r} cannot set output_schema= for one turn of a live "
            "session opened with its own output_schema= (the CLI took it at start and "
            "holds it for every turn); open a session without one instead",
        )
    if "permissions" in asked:
        try:
            require_permissions(backend, settings.permissions)
        except ConfigError as exc:
            return Unsupported("turn", str(exc))
        return _widened(backend, protocol, settings)
    return None


def _widened(
    backend: Backend, protocol: ControlProtocol | None, settings: RequestSettings
) -> Unsupported | None:
    """A turn's level that the level its session opened at fixed out of reach
    (``ControlProtocol.fixed_levels``: rules the CLI took at start and keeps)."""
    opened = getattr(settings, "opened_permissions", None)
    wanted = settings.permissions
    fixed = protocol.fixed_levels.get(opened or "", frozenset()) if protocol else frozenset()
    if wanted not in fixed:
        return None
    return Unsupported(
        "turn",
        f"backend {backend.name!r} cannot switch a live session opened with "
        f"permissions={opened!r} to {wanted!r} for a turn (it fixed the {opened!r} "
        f"rules when the session started); open a session with permissions={wanted!r} instead",
    )


def always_reads_project(backend: Backend) -> bool:
    """``backend`` cannot be told not to read the working directory's own
    settings (every combination it can be told names "project": codex-acp
    trusts the directory): what a repository puts there (MCP servers, hooks)
    runs in every run of it there."""
    can = backend.setting_sources
    return bool(can) and all("project" in c for c in can)


def _always_read(backend: Backend) -> str:
    return (
        f"backend {backend.name!r} always reads the working directory's own settings "
        "(it cannot be told not to): what a repository puts there (MCP servers, hooks, "
        "commands) would run"
    )


def _unseen_project(backend: Backend, settings: RequestSettings) -> Unsupported | None:
    """An approver on a backend that :func:`always_reads_project`: what a
    repository puts there would act behind the approver, which callers rely
    on as a boundary.  Refused unless ``setting_sources=`` says the caller
    reads the project knowingly."""
    if settings.approver is None or settings.setting_sources is not None:
        return None
    if not always_reads_project(backend):
        return None
    return Unsupported(
        "approver",
        f"{_always_read(backend)} behind the approver, unasked.  Pass "
        f"setting_sources={backend.setting_sources[0]!r} to accept that for a repository "
        "you trust",
    )


def require(backend: Backend, settings: RequestSettings, mode: Mode = "run") -> None:
    """:func:`check`, raised: what a constructor (or ``session()``) does."""
    refused = check(backend, settings, mode)
    if refused is not None:
        raise RefusedError(refused.message)


#: What a session can be asked beside its turns: the protocol's fact that says
#: it can, and the words of its refusal.
_FACTS: Mapping[str, tuple[str, str]] = {
    "steer": ("can_steer", "steer a running turn"),
    "fork": ("can_fork", "fork a session (a new one from its history)"),
    "compact": ("can_compact", "compact its context on demand"),
    "context_usage": ("context_usage", "say its context's use now"),
}


def session_refusal(backend: Backend, what: str) -> str | None:
    """Why a session of ``backend`` cannot do ``what`` ("steer", "fork",
    "compact", "context_usage"; None: it can), in the check's words."""
    attr, words = _FACTS[what]
    protocol = backend.control()
    if protocol is not None and getattr(protocol, attr):
        return None
    return f"backend {backend.name!r} cannot {words}" + _listed("backends that can", what)


def steer_refusal(backend: Backend) -> str | None:
    """Why a running turn of ``backend`` cannot be steered (None: it can)."""
    return session_refusal(backend, "steer")


# -- untrusted input ----------------------------------------------------------------

#: data: untrusted input may set it; trusted: only with ``--trusted-input``
#: (it runs a program, widens what the CLI may do or writes somewhere);
#: never: code or objects, which no line of data can name.
Trust: TypeAlias = Literal["data", "trusted", "never"]

_DATA = (
    "prompt backend model timeout idle_timeout cwd name resume fork resume_at request_key "
    "retry options "
    "isolation isolation_base keep carry_uncommitted include_diff keep_results "
    "system_prompt append_system_prompt approval_timeout partial"
)
_TRUSTED = (
    "cli_path node_path env inherit_env env_allow extra_args verify verify_timeout "
    "permissions max_turns cli_max_retries hook_timeout output_schema grace "
    "stall_timeout linger eof_grace stop_signals kill_leftovers max_line_bytes "
    "stderr_tail_bytes transcripts transcript_max_bytes worktrees_dir keep_branch run_log "
    "metering prices ledger telemetry telemetry_content circuit_breaker budget setting_sources "
    "add_dirs agents mcp_servers question_timeout"
)
_NEVER = (
    "approver tools approve_tools deny_commands writes_under hooks observers clock on_stderr asker"
)

#: Every option of an agent, a call and a batch line, classified.
UNTRUSTED: Mapping[str, Trust] = {
    **dict.fromkeys(_DATA.split(), "data"),
    **dict.fromkeys(_TRUSTED.split(), "trusted"),
    **dict.fromkeys(_NEVER.split(), "never"),
}
#: The ``options=`` keys untrusted input may set (the others need trust).
UNTRUSTED_OPTIONS = frozenset({"max_turns"})
#: The longest ``approval_timeout`` untrusted input may set (a day): its expiry
#: only denies, but the wait holds the run's process (and a server's slot).
UNTRUSTED_APPROVAL_TIMEOUT = 86_400
#: The approver's fields: only the command line names an approver.
_APPROVER = frozenset({"approver", "approve_tools", "deny_commands", "writes_under"})


def untrusted_problem(fields: Mapping[str, object], *, trusted: bool = False) -> str | None:
    """Why a line of data (a run-many line, a served request) may not run as
    written (None: it may).  ``trusted``: the caller said it trusts the input
    (only "never" fields are refused)."""
    named = sorted(str(k) for k in fields if k in _APPROVER)
    if named:
        return (
            f"refused field(s) {', '.join(named)}: an approver comes only from the command line "
            "(--approve-tools, --deny-commands, --writes-under), never from a batch line"
        )
    if trusted:
        return None
    refused = sorted(str(k) for k in fields if UNTRUSTED.get(str(k)) != "data")
    options = fields.get("options")
    if options is not None:
        if not isinstance(options, Mapping):
            refused.append("options")
        else:
            refused += sorted(f"options.{k}" for k in options if k not in UNTRUSTED_OPTIONS)
    if refused:
        data = sorted(name for name, trust in UNTRUSTED.items() if trust == "data")
        return (
            f"refused field(s) {', '.join(refused)}: a run-many file may set only "
            f"{', '.join(data)} (options: {', '.join(sorted(UNTRUSTED_OPTIONS))}); "
            "pass --trusted-input to accept the rest (it lets the file run any program)"
        )
    named = path_parts(fields.get("prompt"))
    if named:
        return (
            f"refused prompt part(s) naming a path ({', '.join(repr(p[:60]) for p in named)}): "
            "an image or file read from disk is sent to the model; pass --trusted-input to "
            "accept it (an image may come as base64 data)"
        )
    for key in ("model", "resume", "resume_at"):
        text = fields.get(key)
        if isinstance(text, str) and text.startswith("-"):
            return f"refused {key} {text[:40]!r}: it would read as a command-line option"
    wait = fields.get("approval_timeout")  # its type: the option's own check, later
    if isinstance(wait, int | float) and wait > UNTRUSTED_APPROVAL_TIMEOUT:
        return (
            f"refused approval_timeout {wait!r}: untrusted input may wait at most "
            f"{UNTRUSTED_APPROVAL_TIMEOUT:g} seconds (a day) for an approval; pass "
            "--trusted-input to accept more"
        )
    return None


def untrusted_backend_problem(backend: Backend) -> str | None:
    """Why untrusted input may not run ``backend`` at all (None: it may): it
    :func:`always_reads_project`, and the input chooses the working directory
    (a batch line's ``cwd``), so the input would choose which repository's
    programs run.  Only ``--trusted-input`` accepts that."""
    if not always_reads_project(backend):
        return None
    return (
        f"refused: {_always_read(backend)}, and a batch line chooses its cwd; "
        "pass --trusted-input to run it for input you trust"
    )
