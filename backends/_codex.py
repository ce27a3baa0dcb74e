"""What ``codex exec`` and ``codex app-server`` share: the sandbox a request
runs in, the ``-c`` overrides, the HTTP status in codex's error words, the
output schema's strict form."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coding_genesis.backend import Permissions, RepositoryFile
from coding_genesis.request import Request

__all__ = [
    "REPOSITORY_FILES",
    "SANDBOX",
    "SANDBOX_POLICY",
    "SETTING_SOURCES",
    "TAKES",
    "CodexExtras",
    "codex_overrides",
    "codex_sandbox",
    "http_status",
    "request_extras",
    "strict_schema_warning",
    "untrusted_project",
]

#: permissions= → codex's sandbox (enforced by codex for the commands it runs).
SANDBOX = {
    "read-only": "read-only",
    "edit": "workspace-write",
    "full": "danger-full-access",
}
#: The same levels as app-server's per-turn ``sandboxPolicy`` types (``turn/start``).
SANDBOX_POLICY = {
    "read-only": "readOnly",
    "edit": "workspaceWrite",
    "full": "dangerFullAccess",
}

#: What ``setting_sources=`` can ask of codex: its user's configuration
#: (``$CODEX_HOME``) is always read; the project's ``.codex/`` only with "project".
SETTING_SOURCES: tuple[tuple[str, ...], ...] = (("user",), ("user", "project"))

#: What codex loads from a working directory (docs/security.md's table).
REPOSITORY_FILES = (
    RepositoryFile(
        ".codex",
        "project",
        "config.toml (MCP servers, notify, model provider, sandbox), hooks, rules: "
        "only in a project marked trusted in $CODEX_HOME/config.toml",
    ),
)

#: What codex takes beyond the shared vocabulary (``Backend.takes``), in exec
#: and app-server alike: each is mapped by :func:`request_extras`.
TAKES: frozenset[str] = frozenset({"system_prompt", "append_system_prompt", "add_dirs"})


@dataclass(frozen=True, slots=True)
class CodexExtras:
    """How ``codex exec`` and ``codex app-server`` are told what codex takes
    beyond the shared vocabulary: exec's arguments, the params of
    ``thread/start`` and ``thread/resume``, those of ``turn/start``."""

    exec_args: tuple[str, ...] = ()
    thread: Mapping[str, Any] = field(default_factory=dict)
    turn: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def request_extras(request: Request) -> CodexExtras:
    """The one mapping of :data:`TAKES` to exec and app-server (one place, so
    that the two never disagree).  ``system_prompt``: codex's base instructions
    (exec ``-c instructions=``, measured on 0.169: the first developer message
    of the model request); ``append_system_prompt``: its developer
    instructions; ``add_dirs``: writable roots beside the working directory,
    which codex has only in its workspace-write sandbox."""
    exec_args: list[str] = []
    thread: dict[str, Any] = {}
    turn: dict[str, Any] = {}
    warnings: list[str] = []
    if request.system_prompt is not None:
        exec_args += ["-c", f"instructions={_toml(request.system_prompt)}"]
        thread["baseInstructions"] = request.system_prompt
    if request.append_system_prompt is not None:
        exec_args += ["-c", f"developer_instructions={_toml(request.append_system_prompt)}"]
        thread["developerInstructions"] = request.append_system_prompt
    if request.add_dirs:
        sandbox, _ = codex_sandbox(request.permissions, request.options)
        if sandbox == "workspace-write":
            for directory in request.add_dirs:
                exec_args += ["--add-dir", directory]
            turn["sandboxPolicy"] = {
                "type": "workspaceWrite",
                "writableRoots": list(request.add_dirs),
            }
        elif sandbox != "danger-full-access":  # full access writes anywhere already
            warnings.append(
                f"add_dirs={list(request.add_dirs)!r} not honored: codex writes beside its "
                f"working directory only in its workspace-write sandbox (permissions='edit'), "
                f"not in {sandbox or 'its default one'}"
            )
    return CodexExtras(tuple(exec_args), thread, turn, tuple(warnings))


def _toml(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; characters kept as they are)."""
    return json.dumps(text, ensure_ascii=False)


#: "last status: 429 Too Many Requests", "unexpected status 401 Unauthorized".
_STATUS = re.compile(r"\bstatus:?\s+(\d{3})\b")


def http_status(message: str) -> int | None:
    """The HTTP status a codex error message names, if any."""
    match = _STATUS.search(message)
    return int(match.group(1)) if match else None


def codex_sandbox(
    permissions: Permissions | None, options: Mapping[str, Any]
) -> tuple[str | None, list[str]]:
    """The sandbox codex runs commands in (``permissions=`` wins over the
    ``sandbox`` option; None: codex's default) and the warning when both are
    set.  Shared by ``codex exec`` and ``codex app-server``."""
    chosen = options.get("sandbox")
    if permissions is None:
        return (str(chosen) if chosen else None), []
    warnings = []
    if chosen:
        warnings.append(
            f"option sandbox={chosen!r} ignored: permissions={permissions!r} sets the sandbox"
        )
    return SANDBOX[permissions], warnings


def codex_overrides(
    options: Mapping[str, Any], max_turns: int | None, cli_max_retries: int | None
) -> tuple[list[str], list[str]]:
    """The ``-c key=value`` arguments (the ``config`` option, the retry cap) and
    the warnings of what codex cannot honor.  Shared by ``codex exec`` and
    ``codex app-server`` (which takes ``-c`` but neither ``-m`` nor ``-s``)."""
    args: list[str] = []
    warnings: list[str] = []
    config = options.get("config")
    if isinstance(config, Mapping):
        for key, value in config.items():
            args += ["-c", f"{key}={value}"]
    if max_turns is not None:
        warnings.append(f"max_turns={max_turns} not honored: codex has no turn limit")
    if cli_max_retries is not None:
        provider = config.get("model_provider") if isinstance(config, Mapping) else None
        if isinstance(provider, str) and provider:
            n = cli_max_retries
            args += [
                "-c",
                f"model_providers.{provider}.request_max_retries={n}",
                "-c",
                f"model_providers.{provider}.stream_max_retries={n}",
            ]
        else:
            warnings.append(
                f"cli_max_retries={cli_max_retries} not honored: codex caps "
                "retries per model provider; name it with "
                "options={'config': {'model_provider': NAME}}"
            )
    return args, warnings


def strict_schema_warning(schema: Mapping[str, Any] | None) -> list[str]:
    """A warning when ``output_schema`` is not in the strict form codex sends
    it in (OpenAI's strict JSON-Schema response format, which the OpenAI API
    refuses otherwise): every object closed (``additionalProperties: false``)
    with every property required."""
    if schema is None:
        return []
    where = _open_object(schema, "$", 0)
    if where is None:
        return []
    return [
        f"output_schema at {where} is not in OpenAI's strict form (every object needs "
        "additionalProperties: false and every property in required; a pydantic model: "
        'extra="forbid", no defaults): codex sends it strict, and the OpenAI API refuses it'
    ]


def _open_object(node: Any, where: str, depth: int) -> str | None:
    if not isinstance(node, Mapping) or depth > 64:
        return None
    props = node.get("properties")
    if node.get("type") == "object" or isinstance(props, Mapping):
        names = set(props) if isinstance(props, Mapping) else set()
        required = node.get("required")
        if node.get("additionalProperties") is not False or names - set(required or ()):
            return where
    for key, value in node.items():
        subs = value.items() if key in ("properties", "$defs", "definitions") else ()
        if isinstance(value, Mapping) and subs:
            for name, sub in subs:
                found = _open_object(sub, f"{where}.{name}", depth + 1)
                if found is not None:
                    return found
        elif key in ("items", "additionalProperties"):
            found = _open_object(value, f"{where}[]", depth + 1)
            if found is not None:
                return found
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            for sub in value:
                found = _open_object(sub, where, depth + 1)
                if found is not None:
                    return found
    return None


def untrusted_project(cwd: str, sources: tuple[str, ...] | None) -> list[str]:
    """The ``-c`` override that keeps a project's ``.codex/`` unread unless
    ``setting_sources`` names "project": the working directory and every
    directory above it marked untrusted (codex looks its trust up there, and a
    ``-c`` table is merged into the user's ``projects``, so the user's entries
    for these paths are overridden and the rest kept).  Measured on codex
    0.169: a project the user marked trusted then starts no MCP server of its
    ``config.toml``, in ``exec`` and ``app-server`` alike; an untrusted one
    never did."""
    if sources is not None and "project" in sources:
        return []
    dirs: dict[str, None] = {}
    for start in (cwd, os.path.realpath(cwd)) if os.path.isabs(cwd) else (cwd,):
        path = start
        while path and path not in dirs:
            dirs[path] = None
            path = os.path.dirname(path) if os.path.dirname(path) != path else ""
    table = ",".join(
        f'{json.dumps(d, ensure_ascii=False)}={{trust_level="untrusted"}}' for d in dirs
    )
    return ["-c", f"projects={{{table}}}"]
