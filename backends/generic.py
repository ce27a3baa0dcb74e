"""A backend for any CLI that speaks a format we already read.

Several CLIs print claude's stream-json (``system``/``assistant``/``user``/
``result`` lines); others print codex's ``exec --json`` events.  For those, a
backend is an argv template and a format, configured in code::

    register_backend("mycli", lambda: GenericBackend(
        "mycli",
        command=["mycli", "-p", "--output-format", "stream-json"],
        format="claude-stream-json",
        model_args=["--model", "{model}"],
        resume_args=["--resume={resume}"],
    ))

or in a TOML file (:func:`load_backends_file`; the library never reads one by
itself: ``genesis`` takes ``--backends-file`` or ``$GENESIS_BACKENDS_FILE``)::

    [backends.mycli]
    command = ["mycli", "-p", "--output-format", "stream-json"]
    format = "claude-stream-json"
    model_args = ["--model", "{model}"]

The prompt always goes on stdin, which is then closed: a ``{prompt}``
placeholder is refused.  The placeholders are ``{model}``, ``{cwd}``,
``{resume}``, ``{max_turns}`` and ``{cli_max_retries}``; a group of arguments
(``model_args``, ``resume_args``, ...) is left out when its value is not set.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tomllib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coding_genesis.backend import Backend, CommandSpec, Translator
from coding_genesis.errors import ConfigError
from coding_genesis.request import Request
from coding_genesis.result import RunResult

from .acp_generic import ACP_KEYS, AcpBackend
from .claude import ClaudeTranslator, claude_failure_hint
from .codex import CodexTranslator, codex_failure_hint

__all__ = ["FORMATS", "GenericBackend", "load_backends_file"]

#: format name -> (translator factory, failure hint)
FORMATS: dict[str, tuple[Callable[[], Translator], Callable[[RunResult], str | None]]] = {
    "claude-stream-json": (ClaudeTranslator, claude_failure_hint),
    "codex-json": (CodexTranslator, codex_failure_hint),
}

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_VALUES = ("model", "cwd", "resume", "max_turns", "cli_max_retries")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_LEVELS = ("read-only", "edit", "full")


def _strings(field: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{field} must be a list of strings, got {value!r}")
    if any(not isinstance(v, str) or "\0" in v for v in value):
        raise ConfigError(f"{field} must be a list of strings without NUL bytes")
    for arg in value:
        for name in _PLACEHOLDER.findall(arg):
            if name == "prompt":
                raise ConfigError(
                    f"{field}: a {{prompt}} placeholder is refused: the prompt always goes "
                    "on stdin, never into the command line (where it could become a flag)"
                )
            if name not in _VALUES:
                raise ConfigError(
                    f"{field}: unknown placeholder {{{name}}} in {arg!r}; "
                    f"known: {', '.join('{' + v + '}' for v in _VALUES)}"
                )
    return tuple(value)


class GenericBackend(Backend):
    """A CLI speaking a known format, described by an argv template."""

    def __init__(
        self,
        name: str,
        *,
        command: Sequence[str],
        format: str = "claude-stream-json",
        model_args: Sequence[str] = (),
        resume_args: Sequence[str] = (),
        cwd_args: Sequence[str] = (),
        max_turns_args: Sequence[str] = (),
        cli_max_retries_args: Sequence[str] = (),
        permission_args: Mapping[str, Sequence[str]] | None = None,
        env: Mapping[str, str] | None = None,
        version_args: Sequence[str] = ("--version",),
        notes: Sequence[str] = (),
        install_hint: str = "",
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"backend name must be letters, digits, '_', '.', '-', got {name!r}")
        if format not in FORMATS:
            raise ConfigError(
                f"backend {name!r}: unknown format {format!r}; known: {', '.join(FORMATS)}"
                + (" (an ACP agent is an AcpBackend)" if format == "acp" else "")
            )
        argv = _strings(f"backend {name!r} command", command)
        if not argv or _PLACEHOLDER.search(argv[0]):
            raise ConfigError(f"backend {name!r}: command must start with the program's name")
        self.name = name
        self.format = format
        self.executable = argv[0]
        self._args = argv[1:]
        self._model_args = _strings(f"backend {name!r} model_args", model_args)
        self._resume_args = _strings(f"backend {name!r} resume_args", resume_args)
        self._cwd_args = _strings(f"backend {name!r} cwd_args", cwd_args)
        self._max_turns_args = _strings(f"backend {name!r} max_turns_args", max_turns_args)
        self._retries_args = _strings(
            f"backend {name!r} cli_max_retries_args", cli_max_retries_args
        )
        permission_args = dict(permission_args or {})
        unknown = sorted(set(permission_args) - set(_LEVELS))
        if unknown:
            raise ConfigError(
                f"backend {name!r}: unknown permission level(s) {unknown}; known: {_LEVELS}"
            )
        self._permission_args = {
            level: _strings(f"backend {name!r} permission_args[{level!r}]", args)
            for level, args in permission_args.items()
        }
        #: Only the levels it was told how to enforce.
        self.permission_levels = frozenset(self._permission_args)
        env = dict(env or {})
        if any(not isinstance(k, str) or not isinstance(v, str) for k, v in env.items()):
            raise ConfigError(f"backend {name!r}: env must map names to strings")
        self._env = env
        self.supports_resume = bool(self._resume_args)
        self.version_args = _strings(f"backend {name!r} version_args", version_args)
        self.notes = tuple(str(n) for n in notes)
        self.path_env_var = "GENESIS_" + re.sub(r"[^A-Z0-9]", "_", name.upper()) + "_PATH"
        self._install_hint = install_hint
        self._translator, self._hint = FORMATS[format]

    def __repr__(self) -> str:
        return f"GenericBackend({self.name!r}, command={[self.executable, *self._args]!r})"

    def install_hint(self) -> str:
        return self._install_hint or f"install {self.executable!r}, or set {self.path_env_var}"

    def build_command(self, request: Request) -> CommandSpec:
        values: dict[str, str | None] = {
            "model": request.model,
            "cwd": request.cwd,
            "resume": request.resume,
            "max_turns": None if request.max_turns is None else str(request.max_turns),
            "cli_max_retries": (
                None if request.cli_max_retries is None else str(request.cli_max_retries)
            ),
        }
        warnings: list[str] = []
        args = [a for a in (_fill(arg, values) for arg in self._args) if a is not None]
        for group in (self._cwd_args, self._model_args, self._resume_args):
            args += _group(group, values)
        if request.permissions is not None:
            args += self._permission_args[request.permissions]
        if request.max_turns is not None:
            if self._max_turns_args:
                args += _group(self._max_turns_args, values)
            else:
                warnings.append(f"max_turns={request.max_turns} not honored by {self.name}")
        if request.cli_max_retries is not None:
            if self._retries_args:
                args += _group(self._retries_args, values)
            else:
                warnings.append(
                    f"cli_max_retries={request.cli_max_retries} not honored by {self.name}"
                )
        if request.model and not self._model_args and not _uses(self._args, "model"):
            warnings.append(f"model={request.model!r} not honored by {self.name}")
        args.extend(request.extra_args)
        return CommandSpec(
            args=tuple(args),
            stdin=request.prompt.encode("utf-8"),
            env=dict(self._env),
            warnings=tuple(warnings),
        )

    def translator(self) -> Translator:
        return self._translator()

    def failure_hint(self, result: RunResult) -> str | None:
        return self._hint(result)


def _uses(args: Sequence[str], name: str) -> bool:
    return any(name in _PLACEHOLDER.findall(a) for a in args)


def _fill(arg: str, values: Mapping[str, str | None]) -> str | None:
    """``arg`` with its placeholders filled; None when one has no value."""
    missing = False

    def sub(match: re.Match[str]) -> str:
        nonlocal missing
        value = values.get(match.group(1))
        if value is None:
            missing = True
            return ""
        return value

    text = _PLACEHOLDER.sub(sub, arg)
    return None if missing else text


def _group(group: Sequence[str], values: Mapping[str, str | None]) -> list[str]:
    filled = [_fill(arg, values) for arg in group]
    return [] if any(a is None for a in filled) else [a for a in filled if a is not None]


_TOML_KEYS = frozenset(
    {
        "command",
        "format",
        "model_args",
        "resume_args",
        "cwd_args",
        "max_turns_args",
        "cli_max_retries_args",
        "permission_args",
        "env",
        "version_args",
        "notes",
        "install_hint",
    }
)


#: The largest backends file read (a few tables: KiB).
MAX_BACKENDS_FILE = 4 * 1024 * 1024


def _read_regular(where: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit``: a FIFO never blocks
    the open (``O_NONBLOCK``), a directory or device is refused.  (The same
    checks as the core's reader of files someone could plant, which a backend
    may not import: backends use public modules only.)"""
    fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"too big ({st.st_size} bytes; at most {limit})")
        data = os.read(fd, limit + 1)
        while len(data) <= limit and (more := os.read(fd, limit + 1 - len(data))):
            data += more
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"too big (more than {limit} bytes)")
    return data


def load_backends_file(
    path: str | os.PathLike[str],
) -> dict[str, GenericBackend | AcpBackend]:
    """The generic backends a TOML file describes (``[backends.NAME]`` tables),
    checked; register them with :func:`~coding_genesis.backends.register_backend`.
    A table with ``format = "acp"`` is an Agent Client Protocol agent
    (:class:`~coding_genesis.backends.acp_generic.AcpBackend`: ``command``,
    ``env``, ``modes``, ``ask_mode``, ``resume``, ``model_args``...).  Any
    mistake is a :class:`ConfigError` naming the file and the backend."""
    where = os.fspath(path)
    try:
        text = _read_regular(where, MAX_BACKENDS_FILE).decode("utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise ConfigError(f"cannot read backends file {where!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"backends file {where!r} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"backends file {where!r} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"backends file {where!r} is nested too deep") from None
    tables = data.get("backends")
    unknown_top = sorted(set(data) - {"backends"})
    if not isinstance(tables, dict) or unknown_top:
        raise ConfigError(
            f"backends file {where!r} must hold [backends.NAME] tables only"
            + (f" (unknown: {', '.join(unknown_top)})" if unknown_top else "")
        )
    found: dict[str, GenericBackend | AcpBackend] = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ConfigError(f"backends file {where!r}: backends.{name} must be a table")
        keys = ACP_KEYS if table.get("format") == "acp" else _TOML_KEYS
        unknown = sorted(set(table) - keys)
        if unknown:
            raise ConfigError(
                f"backends file {where!r}: backends.{name}: unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(keys))}"
            )
        if "command" not in table:
            raise ConfigError(f"backends file {where!r}: backends.{name} needs a command")
        settings: dict[str, Any] = dict(table)
        try:
            if table.get("format") == "acp":  # an Agent Client Protocol agent
                found[name] = _acp(name, settings)
                continue
            found[name] = GenericBackend(name, **settings)
        except ConfigError as exc:
            raise ConfigError(f"backends file {where!r}: {exc}") from None
        except TypeError as exc:
            raise ConfigError(f"backends file {where!r}: backends.{name}: {exc}") from None
    return found


def _acp(name: str, settings: dict[str, Any]) -> AcpBackend:
    """An ``format = "acp"`` table: its modes a table of strings."""
    modes = settings.get("modes")
    if modes is not None and not isinstance(modes, dict):
        raise ConfigError(f"backends.{name}: modes must be a table of mode ids")
    return AcpBackend(name, **settings)
