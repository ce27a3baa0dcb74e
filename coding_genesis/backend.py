"""The backend base: the plug-in contract between the core and a CLI adapter.

A backend is pure: it builds the command line for a request and turns each
parsed stdout object into normalized events.  It never spawns, signals, reads
or waits on a process; the core does all of that.  A backend subclasses
:class:`Backend` (its translator :class:`Translator`); this module also holds
what a backend describes itself with (:class:`~coding_genesis.request.Request` in,
:class:`~coding_genesis.request.CommandSpec` out,
:class:`OptionSpec`, :class:`NodeScript`) and finds the backends other packages
install (the ``coding_genesis.backends`` entry points, :func:`load_plugin`).

A plug-in written against 0.1.0's ``Backend`` Protocol, without subclassing,
still loads: :func:`as_backend` wraps it once, when it is registered or loaded, in
an adapter that takes its members and fills in the defaults: the one place that
inspects a foreign object; everything else calls the typed members.
"""

from __future__ import annotations

import re
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from coding_genesis._util.node import NodeScript, node_launch, node_major
from coding_genesis._util.renamed import old_names
from coding_genesis._util.schema import OutputSchema
from coding_genesis.errors import ConfigError
from coding_genesis.events import CliRetryEvent, ErrorEvent, Translator
from coding_genesis.options import MessageUsage, Permissions
from coding_genesis.request import CommandSpec, Request
from coding_genesis.status import FailureCategory

if TYPE_CHECKING:
    from coding_genesis.control import ControlProtocol
    from coding_genesis.events import Event
    from coding_genesis.result import RunResult

__all__ = [
    "ALL_SETTING_SOURCES",
    "ENTRY_POINT_GROUP",
    "FATAL_STATUSES",
    "FATAL_WORDS",
    "Backend",
    "BackendPluginError",
    "CommandSpec",
    "MessageUsage",
    "NodeScript",
    "OptionSpec",
    "Permissions",
    "ProtocolBackend",
    "RepositoryFile",
    "Translator",
    "as_backend",
    "check_options",
    "client_version",
    "fatal_evidence",
    "is_factory",
    "load_plugin",
    "node_launch",
    "node_major",
    "plugin_entry_points",
    "plugin_names",
]


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One backend option: the value types it accepts and what it does."""

    types: tuple[type, ...]
    help: str = ""


@dataclass(frozen=True, slots=True)
class RepositoryFile:
    """A file or folder of the working directory that a CLI itself loads and
    runs programs from (hooks, MCP servers, helpers, plugins), or that changes
    what it may do: what a cloned repository can make it start before any
    tool call is asked about.  ``genesis chat`` and ``genesis run --ask``
    warn when the working directory holds one."""

    #: Relative to the working directory.
    path: str
    #: The settings source that reads it (``setting_sources=``): "project" or "local".
    source: str
    #: What the CLI takes from it, in a few words.
    what: str


#: Every combination of settings sources, for a CLI that reads each on its own.
ALL_SETTING_SOURCES: tuple[tuple[str, ...], ...] = (
    ("user",),
    ("project",),
    ("local",),
    ("user", "project"),
    ("user", "local"),
    ("project", "local"),
    ("user", "project", "local"),
)  #: 0.1.0's name (it is per attempt, not per run)


# -- the contract --------------------------------------------------------------------


_NO_OPTIONS: Mapping[str, OptionSpec] = MappingProxyType({})

_C = FailureCategory

#: The words of a CLI's retry event that no retry of the same call can change,
#: in order (first match wins).  ``rate_limit`` here is a *usage limit* (out of
#: quota until a reset): the run stops on it only if it resets after the deadline.
FATAL_WORDS: tuple[tuple[FailureCategory, re.Pattern[str]], ...] = tuple(
    (category, re.compile(words, re.I))
    for category, words in (
        (
            _C.CONTEXT_OVERFLOW,
            r"prompt is too long|context[ _-]length[ _-]exceeded|maximum context length|"
            r"exceeds the (?:model's )?(?:maximum )?context|context window (?:exceeded|is full)",
        ),
        (
            _C.AUTH,
            r"authentication[ _](?:failed|error)|invalid[ _-](?:x-)?api[ _-]?key|incorrect api key|"
            r"unauthori[sz]ed|unauthenticated|not logged in|permission[ _]denied",
        ),
        (_C.NOT_FOUND, r"model[ _]not[ _]found|\bmodel\b[^\n]{0,80}\b(?:not found|does not exist)"),
        (_C.RATE_LIMIT, r"usage limit|hit your (?:usage )?limit|limit reached"),
        (_C.INVALID_TASK, r"\binvalid[ _]request(?:[ _]error)?\b"),
    )
)

#: The HTTP statuses no retry of the same call can change (after :data:`FATAL_WORDS`).
FATAL_STATUSES: Mapping[int, FailureCategory] = MappingProxyType(
    {400: _C.INVALID_TASK, 401: _C.AUTH, 403: _C.AUTH, 404: _C.NOT_FOUND}
    | {413: _C.CONTEXT_OVERFLOW, 422: _C.INVALID_TASK}
)


def fatal_evidence(event: CliRetryEvent | ErrorEvent) -> FailureCategory | None:
    """The default of :meth:`Backend.fatal_evidence`: a retry event (the CLI
    will go on retrying a call that failed) read by its words, then its HTTP
    status.  An error event is no evidence by default: a fatal one comes with
    the CLI's own end, a non-fatal one is often noise the CLI recovers from."""
    if not isinstance(event, CliRetryEvent):
        return None
    for category, words in FATAL_WORDS:
        if event.error and words.search(event.error):
            return category
    return FATAL_STATUSES.get(event.error_status) if event.error_status is not None else None


class Backend(ABC):
    """A coding-agent CLI adapter: the plug-in contract.

    A subclass sets ``name`` and ``executable`` and implements :meth:`build_command`
    and :meth:`translator`; every other member has a default and is overridden only
    where the CLI differs:

    * ``path_env_var`` (``""``): the variable that overrides the program's path,
      e.g. ``GENESIS_CLAUDE_PATH``.
    * ``supports_resume`` (False): a failed attempt can continue the CLI's session.
    * ``options`` (none): what ``options=`` may set; an unknown one is a ConfigError.
    * ``pdeath_signal`` (SIGTERM): the signal the CLI gets if the runner dies (Linux
      ``PR_SET_PDEATHSIG``); SIGKILL for a CLI known to ignore SIGTERM; None: none.
    * ``node_script`` (None): the real entry point of an npm CLI whose ``bin`` is a
      wrapper (:class:`NodeScript`); the core runs it under a recent enough node.
    * ``env_needs`` (none): the variables it needs under ``inherit_env=False``
      (a trailing ``*`` matches a prefix).
    * ``permission_levels`` (none): the levels of ``permissions=`` it enforces; a
      level it lacks is refused rather than run with more permissions.
    * ``stderr_noise`` (None): a pattern of stderr lines that say nothing about a
      failure (start-up chatter), left out of its analysis.
    * ``notes`` (none): what ``genesis doctor`` and the backends table (README, ``docs/backends.md``)
      say about it.
    * ``version_args`` (``--version``): the arguments that print its version.
    * ``structured_output`` (False): the CLI takes a JSON Schema for its final
      answer (``Request.output_schema``);
      without it ``output_schema=`` is refused.
    * ``setting_sources`` (none): the combinations of settings sources it can
      be told to read exactly (``Request.setting_sources``); any other
      ``setting_sources=`` is refused.
      ``default_setting_sources`` (None: unknown): what it reads when a request
      names none.
    * ``repository_files`` (none): the files of the working directory it loads
      and runs programs from (:class:`RepositoryFile`).
    * ``takes`` (none): the request's options beyond the shared vocabulary it
      maps (``system_prompt``, ``add_dirs``, ...); the capability check refuses
      the others (:mod:`coding_genesis.capabilities`).
    * :meth:`default_program`, :meth:`install_hint`, :meth:`failure_hint`,
      :meth:`stderr_retries`, :meth:`fatal_evidence`: see each.
    * :meth:`control`: the two-way protocol of a live session, if the CLI has one.
    * ``two_way_only`` (False): the CLI speaks only that protocol (an Agent
      Client Protocol agent): every run is one turn of a live process
      (:meth:`runs_live`), and :meth:`build_command` only describes the
      command (``genesis doctor``).
    """

    #: Registry name, e.g. "claude".
    name: str
    #: Program name looked up on PATH, e.g. "claude".
    executable: str
    path_env_var: str = ""
    supports_resume: bool = False
    options: Mapping[str, OptionSpec] = _NO_OPTIONS
    pdeath_signal: int | None = signal.SIGTERM
    node_script: NodeScript | None = None
    env_needs: tuple[str, ...] = ()
    permission_levels: frozenset[str] = frozenset()
    stderr_noise: re.Pattern[str] | None = None
    notes: tuple[str, ...] = ()
    version_args: tuple[str, ...] = ("--version",)
    structured_output: bool = False
    two_way_only: bool = False
    setting_sources: tuple[tuple[str, ...], ...] = ()
    default_setting_sources: tuple[str, ...] | None = None
    repository_files: tuple[RepositoryFile, ...] = ()
    takes: frozenset[str] = frozenset()

    @abstractmethod
    def build_command(self, request: Request) -> CommandSpec:
        """The CLI arguments for a request (one attempt of it: its prompt, its
        session to resume).  The prompt must never become a flag."""

    @abstractmethod
    def translator(self) -> Translator:
        """A fresh translator for one run."""

    def default_program(self) -> Sequence[str] | None:
        """A program that needs no PATH lookup (the embedded failer); None: look up
        ``executable``."""
        return None

    def install_hint(self) -> str:
        """How to install the CLI, for 'not found' messages."""
        where = f", or set {self.path_env_var}" if self.path_env_var else ""
        return f"install {self.executable!r} on PATH{where}"

    def failure_hint(self, result: RunResult) -> str | None:
        """A failure category from the CLI's own words for a failed run; None: the
        core's analysis alone decides."""
        return None

    def stderr_retries(self, stderr: str) -> int:
        """How many API retries the CLI reported on stderr (for a CLI that reports
        them nowhere else)."""
        return 0

    def fatal_evidence(self, event: CliRetryEvent | ErrorEvent) -> FailureCategory | None:
        """The failure a CLI's retry or error event proves when retrying cannot
        fix it (auth, an invalid request, a missing model, a context overflow,
        a usage limit): the core then stops the run at once with that category
        and the CLI's words, instead of waiting out the CLI's own retries.
        None: go on.  Called only for these two (rare) event types; the
        default reads the words and HTTP status (:func:`fatal_evidence`)."""
        return fatal_evidence(event)

    def reads_project(self, sources: tuple[str, ...] | None) -> bool:
        """Whether a request of ``sources`` (None: the default) reads the
        working directory's shared settings ("project")."""
        chosen = sources if sources is not None else self.default_setting_sources
        return chosen is None or "project" in chosen

    def runs_live(self, request: Request) -> bool:
        """Whether a run of ``request`` is one turn of a live process over
        :meth:`control`'s protocol (rather than a one-shot process): an
        approver, hooks, host tools, an asker or MCP servers the one-shot
        command cannot declare ask for one, and a CLI that speaks
        nothing else (``two_way_only``) has no other transport.  An output
        schema the CLI does not take itself goes in the live turn's prompt
        (the capability check allowed it only where the protocol carries it),
        and so does ``partial=True`` where the one-shot stream has no deltas
        (``"partial"`` not in :attr:`takes`: codex exec, gemini, opencode); a
        prompt's images and files are sent as the protocol's content blocks."""
        schema = request.output_schema is not None and not self.structured_output
        partial = request.partial and "partial" not in self.takes
        # the caller's MCP servers: declared by the one-shot command, else by the protocol
        servers = bool(request.mcp_servers) and "mcp_servers" not in self.takes
        parts = bool(request.parts)
        return self.two_way_only or request.two_way or schema or partial or servers or parts

    def control(self) -> ControlProtocol | None:
        """A fresh two-way protocol for one live session (``agent.session()``,
        ``approver=``); None: this backend has none (see
        :mod:`coding_genesis.control`)."""
        return None


def client_version() -> str:
    """This package's version, as a backend names its client to a CLI (codex's
    ``clientInfo``): read from the package metadata on first use."""
    from coding_genesis._util.version import version  # lazy: importlib.metadata costs ~20 ms

    return version()


def check_options(backend: Backend, options: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for an option ``backend`` does not know, or a
    value of the wrong type."""
    valid = backend.options
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


# -- plug-ins written against 0.1.0's Protocol ---------------------------------------

#: What a foreign backend object must have for the core to drive it.
_REQUIRED = ("name", "executable", "build_command", "translator")


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value or ())


def _levels(value: Any) -> frozenset[str]:
    return frozenset(value) if isinstance(value, frozenset | set | tuple | list) else frozenset()


#: Its optional attributes, each made the declared type (a value that cannot be: the default).
_ATTRIBUTES: Mapping[str, Callable[[Any], Any]] = {
    "path_env_var": lambda v: str(v or ""),
    "supports_resume": bool,
    "options": lambda v: v if isinstance(v, Mapping) else _NO_OPTIONS,
    "pdeath_signal": lambda v: v if v is None or isinstance(v, int) else signal.SIGTERM,
    "node_script": lambda v: v if isinstance(v, NodeScript) else None,
    "env_needs": _strings,
    "permission_levels": _levels,
    "stderr_noise": lambda v: v if isinstance(v, re.Pattern) else None,
    "notes": _strings,
    "version_args": _strings,
    "structured_output": bool,
    "two_way_only": bool,
    "setting_sources": lambda v: tuple(tuple(str(s) for s in c) for c in v or ()),
    "default_setting_sources": lambda v: None if v is None else tuple(str(s) for s in v),
    "repository_files": lambda v: tuple(f for f in v or () if isinstance(f, RepositoryFile)),
    "takes": lambda v: frozenset(str(s) for s in v or ()),
}
_METHODS = ("default_program", "install_hint", "failure_hint", "stderr_retries", "fatal_evidence")


class ProtocolTranslator(Translator):
    """A foreign translator (``translate`` only, maybe ``flush`` and ``message_usage``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._translate: Callable[[dict[str, Any]], Sequence[Event]] = inner.translate
        flush = getattr(inner, "flush", None)
        self._flush: Callable[[], Sequence[Event]] | None = flush if callable(flush) else None
        self._forward_usage = hasattr(inner, "message_usage")

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "message_usage" and self._forward_usage:
            self.inner.message_usage = value
        object.__setattr__(self, name, value)

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        return self._translate(obj)

    def flush(self) -> Sequence[Event]:
        return self._flush() if self._flush is not None else ()


class ProtocolBackend(Backend):
    """A plug-in object that implements 0.1.0's ``Backend`` Protocol without
    subclassing :class:`Backend`: its members, taken once, with the defaults for
    what it lacks.  ``plugin`` is the object itself."""

    def __init__(self, plugin: Any) -> None:
        self.plugin = plugin
        self.name = str(plugin.name)
        self.executable = str(plugin.executable)
        for attribute, convert in _ATTRIBUTES.items():
            if hasattr(plugin, attribute):
                setattr(self, attribute, convert(getattr(plugin, attribute)))
        found = {m: getattr(plugin, m, None) for m in _METHODS}
        self._calls: dict[str, Callable[..., Any]] = {m: f for m, f in found.items() if callable(f)}

    def __repr__(self) -> str:
        return f"ProtocolBackend({self.plugin!r})"

    def build_command(self, request: Request) -> CommandSpec:
        spec: CommandSpec = self.plugin.build_command(request)
        return spec

    def translator(self) -> Translator:
        made = self.plugin.translator()
        return made if isinstance(made, Translator) else ProtocolTranslator(made)

    def default_program(self) -> Sequence[str] | None:
        call = self._calls.get("default_program")
        return call() if call is not None else None

    def install_hint(self) -> str:
        call = self._calls.get("install_hint")
        return str(call()) if call is not None else super().install_hint()

    def failure_hint(self, result: RunResult) -> str | None:
        call = self._calls.get("failure_hint")
        hint = call(result) if call is not None else None
        return hint if isinstance(hint, str) else None

    def stderr_retries(self, stderr: str) -> int:
        call = self._calls.get("stderr_retries")
        return int(call(stderr)) if call is not None else 0

    def fatal_evidence(self, event: CliRetryEvent | ErrorEvent) -> FailureCategory | None:
        call = self._calls.get("fatal_evidence")
        if call is None:
            return super().fatal_evidence(event)
        found = call(event)
        return found if isinstance(found, FailureCategory) else None


def is_factory(target: object) -> bool:
    """Whether ``target`` makes a backend (a class or a zero-argument factory)
    rather than being one."""
    return isinstance(target, type) or (
        callable(target) and not callable(getattr(target, "translator", None))
    )


def as_backend(obj: object) -> Backend:
    """``obj`` itself if it is a :class:`Backend`; a :class:`ProtocolBackend` around
    an object with the Protocol's members; else a ConfigError naming what it lacks."""
    if isinstance(obj, Backend):
        return obj
    missing = [member for member in _REQUIRED if not hasattr(obj, member)]
    if missing:
        raise ConfigError(f"it lacks {', '.join(missing)}")
    return ProtocolBackend(obj)


# -- plug-ins: the coding_genesis.backends entry points ------------------------------
#
# A plug-in package declares, in its pyproject.toml:
#
#     [project.entry-points."coding_genesis.backends"]
#     mycli = "mycli_genesis:MyCliBackend"
#
# The entry point's name is the backend's name; its object is a Backend class, a
# zero-argument factory, or a Backend object.  Nothing is imported until that name is
# asked for (or `genesis doctor` checks every backend), and a plug-in that fails to
# load is a BackendPluginError that names it and says why, without hiding the other
# backends.  (`genesis run --help` lists the names without importing anything of
# ours: coding_genesis/_cli/backends.py.)

ENTRY_POINT_GROUP = "coding_genesis.backends"


class BackendPluginError(ConfigError):
    """An installed backend plug-in could not be loaded or is not a backend."""


def plugin_entry_points() -> dict[str, EntryPoint]:
    """The installed plug-ins by backend name (the first one of a name wins)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def plugin_names() -> list[str]:
    return sorted(plugin_entry_points())


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    where = f" from {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {ep.name} = {ep.value}{where}"


def load_plugin(name: str) -> Backend | None:
    """The plug-in backend ``name`` (None: no such plug-in is installed)."""
    ep = plugin_entry_points().get(name)
    if ep is None:
        return None
    try:
        target: Any = ep.load()
    except Exception as exc:  # noqa: BLE001  (a plug-in may raise anything while loading: reported as BackendPluginError)
        raise BackendPluginError(
            f"backend plug-in {name!r} ({_origin(ep)}) failed to load: {type(exc).__name__}: {exc}"
        ) from None
    backend = target
    if is_factory(target):
        try:
            backend = target()
        except Exception as exc:  # noqa: BLE001  (a plug-in may raise anything while loading: reported as BackendPluginError)
            raise BackendPluginError(
                f"backend plug-in {name!r} ({_origin(ep)}) failed to start: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    try:
        return as_backend(backend)
    except ConfigError as exc:
        raise BackendPluginError(
            f"backend plug-in {name!r} ({_origin(ep)}) is not a backend: {exc}"
        ) from None


# -- 0.1's names ----------------------------------------------------------------------


class _AttemptRequest(Request):
    """``AttemptRequest(prompt, cwd, resume_session=..., output_schema={...})``
    as 0.1 spelled it: a :class:`~coding_genesis.request.Request`."""

    __slots__ = ()

    def __init__(self, prompt: str, cwd: str, **fields: Any) -> None:
        if "resume_session" in fields:
            fields["resume"] = fields.pop("resume_session")
        schema = fields.get("output_schema")
        if schema is not None and not isinstance(schema, OutputSchema):
            fields["output_schema"] = OutputSchema(schema)
        for name in ("extra_args", "setting_sources"):
            if fields.get(name) is not None:
                fields[name] = tuple(fields[name])
        Request.__init__(self, prompt, cwd, **fields)


#: Deprecated names: old name -> what it is now (each use warns).
__getattr__ = old_names(
    __name__,
    {
        "AttemptRequest": ("use coding_genesis.request.Request", lambda: _AttemptRequest),
        "RunRequest": ("use coding_genesis.request.Request", lambda: _AttemptRequest),
    },
)
