"""A backend for any command that speaks the Agent Client Protocol: no code needed.

About 40 agents speak ACP on stdin/stdout.  One of them is a backend given
its command and the few facts that differ between agents, in code::

    register_backend("myagent", lambda: AcpBackend(
        "myagent",
        command=["myagent", "--acp"],
        modes={"read-only": "plan", "edit": "acceptEdits", "full": "bypassPermissions"},
        ask_mode="default",
    ))

or in the backends file (``format = "acp"``, see
:func:`~coding_genesis.backends.generic.load_backends_file`)::

    [backends.myagent]
    format = "acp"
    command = ["myagent", "--acp"]
    env = { MYAGENT_NO_UPDATE = "1" }
    modes = { "read-only" = "plan", edit = "acceptEdits", full = "bypassPermissions" }
    ask_mode = "default"

Every run of such a backend is one turn of a live process
(:attr:`~coding_genesis.backend.Backend.two_way_only`): the agent has no
one-shot output to read.  ``modes``: the ``session/set_mode`` id of each
permission level the agent enforces (only those levels are accepted);
``ask_mode``: the mode in which it asks before each tool call (set when an
approver decides, and when no level is given: never the agent's own starting
mode); ``resume``: whether ``resume=`` may use ``session/load`` (where the
agent offers it; False refuses it); ``model_args``: how the model
is given on the command line (``{model}``), when it can be; ``mcp_title``: how
the agent titles its permission request for a tool of an MCP server
(``{tool}``, ``{server}``; see :attr:`~.acp.AcpAgent.mcp_title`), so the
caller's own functions (``tools=``) are called without asking the approver.  ``add_dirs=``
goes in ``session/new``'s ``additionalDirectories`` (an agent that does not
offer them fails the opening, saying so); ``system_prompt=`` is refused (ACP
has no field for it).  ``setting_sources``: the combinations of settings
sources it can be told to read (``setting_sources=``; the backend's
attribute, which the capability check reads), ``default_setting_sources``
the one read when none is named, ``session_meta`` how it is told: the
``_meta`` of ``session/new`` with ``"{setting_sources}"`` and
``"{without_project}"`` filled in (:attr:`~.acp.AcpAgent.session_meta`;
claude-agent-acp's ``claudeCode.options``).  An agent that lists only
combinations with "project" always reads the working directory's settings:
an approver is refused there unless ``setting_sources=`` names the project
(:mod:`coding_genesis.capabilities`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from coding_genesis.backend import Backend, CommandSpec, Translator
from coding_genesis.control import ControlProtocol
from coding_genesis.errors import ConfigError
from coding_genesis.request import Request, check_setting_sources

from .acp import AcpAgent, AcpControl, AcpTranslator, ReportingAcpControl

__all__ = ["ACP_KEYS", "AcpBackend"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_LEVELS = ("read-only", "edit", "full")

#: The keys of a ``format = "acp"`` table of the backends file.
ACP_KEYS = frozenset(
    {
        "format",
        "command",
        "env",
        "modes",
        "ask_mode",
        "resume",
        "model_args",
        "version_args",
        "notes",
        "install_hint",
        "mcp_title",
        "context_usage",
        "setting_sources",
        "default_setting_sources",
        "session_meta",
    }
)


def _strings(field: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{field} must be a list of strings, got {value!r}")
    if any(not isinstance(v, str) or "\0" in v for v in value):
        raise ConfigError(f"{field} must be a list of strings without NUL bytes")
    return tuple(value)


def _sources(
    name: str, combos: object, default: object, meta: object
) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...] | None, dict[str, object]]:
    """The entry's ``setting_sources`` (the combinations the agent can be told
    to read), ``default_setting_sources`` and ``session_meta`` (how it is told),
    checked together: a claim to honor ``setting_sources=`` needs the ``_meta``
    that says it."""
    if not isinstance(meta, Mapping):
        raise ConfigError(f"backend {name!r}: session_meta must be a table, got {meta!r}")
    if isinstance(combos, str) or not isinstance(combos, Sequence):
        raise ConfigError(f"backend {name!r}: setting_sources must be a list of lists")
    try:
        can = tuple(tuple(check_setting_sources(c) or ()) for c in combos)
        chosen = check_setting_sources(default)
    except ConfigError as exc:
        raise ConfigError(f"backend {name!r}: {exc}") from None
    told = "{setting_sources}" in repr(meta)
    if told and not can:
        raise ConfigError(
            f'backend {name!r}: session_meta says "{{setting_sources}}", but the entry '
            "lists no setting_sources the agent can be told"
        )
    if len(can) > 1 and not told:
        raise ConfigError(
            f"backend {name!r}: setting_sources lists several choices, but session_meta "
            'has no "{setting_sources}" to tell the agent which'
        )
    if can and (chosen is None or chosen not in can):
        raise ConfigError(
            f"backend {name!r}: default_setting_sources must be one of setting_sources, "
            f"got {default!r}"
        )
    return can, (chosen if can else None), dict(meta)


def _mode_id(field: str, value: object) -> str:
    if not isinstance(value, str) or not value or "\0" in value or len(value) > 200:
        raise ConfigError(f"{field} must be a mode id (a non-empty string), got {value!r}")
    return value


class AcpBackend(Backend):
    """Any command that speaks ACP (see the module's docstring)."""

    two_way_only = True
    #: ``add_dirs=`` go over the protocol (``additionalDirectories``): an agent
    #: that does not offer them fails the session's opening, saying so.
    takes = frozenset({"add_dirs"})

    def __init__(
        self,
        name: str,
        *,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        modes: Mapping[str, str] | None = None,
        ask_mode: str | None = None,
        resume: bool = True,
        model_args: Sequence[str] = (),
        version_args: Sequence[str] = ("--version",),
        notes: Sequence[str] = (),
        install_hint: str = "",
        mcp_title: str = "",
        setting_sources: Sequence[Sequence[str]] = (),
        default_setting_sources: Sequence[str] | None = None,
        session_meta: Mapping[str, object] | None = None,
        context_usage: bool = False,
        format: str = "acp",
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"backend name must be letters, digits, '_', '.', '-', got {name!r}")
        if format != "acp":
            raise ConfigError(f"backend {name!r}: an AcpBackend's format is 'acp', got {format!r}")
        argv = _strings(f"backend {name!r} command", command)
        if not argv or not argv[0]:
            raise ConfigError(f"backend {name!r}: command must start with the program's name")
        if any("{" in arg for arg in argv):
            raise ConfigError(
                f"backend {name!r}: an ACP command takes no placeholders (the prompt goes "
                "over the protocol, the working directory in session/new)"
            )
        self._model_args = _strings(f"backend {name!r} model_args", model_args)
        bad = [a for a in self._model_args if "{" in a and a.replace("{model}", "").count("{")]
        if bad:
            raise ConfigError(f"backend {name!r}: model_args know only {{model}}, got {bad}")
        given = dict(modes or {})
        unknown = sorted(str(k) for k in given if k not in _LEVELS)
        if unknown:
            raise ConfigError(
                f"backend {name!r}: unknown permission level(s) {unknown} in modes; known: {_LEVELS}"
            )
        levels = {k: _mode_id(f"backend {name!r} modes[{k!r}]", v) for k, v in given.items()}
        ask = None if ask_mode is None else _mode_id(f"backend {name!r} ask_mode", ask_mode)
        env = dict(env or {})
        if any(not isinstance(k, str) or not isinstance(v, str) for k, v in env.items()):
            raise ConfigError(f"backend {name!r}: env must map names to strings")
        if mcp_title != "" and (
            not isinstance(mcp_title, str)
            or len(mcp_title) > 200
            or sorted(re.findall(r"{([^}]*)}", mcp_title)) != ["server", "tool"]
        ):
            # The session's own, unguessable server name must be in it: a title
            # of the tool alone would let a repository's server of the same
            # tool name past the approver.
            raise ConfigError(
                f"backend {name!r}: mcp_title must name the {{server}} and the {{tool}} "
                f"once each, got {mcp_title!r}"
            )
        if not isinstance(resume, bool):
            raise ConfigError(f"backend {name!r}: resume must be true or false, got {resume!r}")
        if not isinstance(context_usage, bool):
            raise ConfigError(f"backend {name!r}: context_usage must be true or false")
        can, default, meta = _sources(
            name, setting_sources, default_setting_sources, session_meta or {}
        )
        self.name = name
        self.executable = argv[0]
        self._args = argv[1:]
        self._env = env
        self.agent = AcpAgent(
            name,
            modes=levels,
            ask_mode=ask,
            resume=None
            if resume
            else f"resume is off for {name} (its backend says resume = false)",
            directories=True,
            mcp_title=mcp_title,
            session_meta=meta,
            settings_default=default or (),
            usage=context_usage,
        )
        #: The settings it can be told to read (by ``session_meta``), and what
        #: it reads unasked: the capability check's, and ``setting_sources=``'s.
        self.setting_sources = can
        self.default_setting_sources = default
        #: Only the levels it was told the mode of.
        self.permission_levels = frozenset(levels)
        self.supports_resume = resume
        self.version_args = _strings(f"backend {name!r} version_args", version_args)
        self.notes = (
            "an Agent Client Protocol agent: every run is one turn of a live session",
            *(str(n) for n in notes),
        )
        self.path_env_var = "GENESIS_" + re.sub(r"[^A-Z0-9]", "_", name.upper()) + "_PATH"
        self._install_hint = install_hint

    def __repr__(self) -> str:
        return f"AcpBackend({self.name!r}, command={[self.executable, *self._args]!r})"

    def install_hint(self) -> str:
        return self._install_hint or f"install {self.executable!r}, or set {self.path_env_var}"

    def _argv(self, model: str | None) -> tuple[list[str], list[str]]:
        args = list(self._args)
        warnings: list[str] = []
        if model:
            if self._model_args:
                args += [a.replace("{model}", model) for a in self._model_args]
            else:
                warnings.append(f"model={model!r} not honored by {self.name} (no model_args)")
        return args, warnings

    def build_command(self, request: Request) -> CommandSpec:
        """The agent's command (what ``genesis doctor`` checks): a run never
        spawns it this way, every run is a live session's turn."""
        args, warnings = self._argv(request.model)
        return CommandSpec(args=tuple(args), env=dict(self._env), warnings=tuple(warnings))

    def _command(self, request: Request) -> CommandSpec:
        args, warnings = self._argv(request.model)
        if request.max_turns is not None:
            warnings.append(f"max_turns={request.max_turns} not honored by {self.name}")
        if request.cli_max_retries is not None:
            warnings.append(f"cli_max_retries={request.cli_max_retries} not honored by {self.name}")
        return CommandSpec(
            args=(*args, *request.extra_args), env=dict(self._env), warnings=tuple(warnings)
        )

    def translator(self) -> Translator:
        return AcpTranslator()

    def control(self) -> ControlProtocol:
        reporting = ReportingAcpControl if self.agent.usage else AcpControl
        return reporting(self.agent, self._command)
