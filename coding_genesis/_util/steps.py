"""One-line descriptions of tool calls: the "Work completed before failure"
of a failure report, e.g. ``Ran Bash: pytest -q`` or ``Wrote src/x.py``.

Pure functions; paths under the run's working directory come back relative.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MAX_STEP_CHARS", "describe_step", "relative_path"]

#: A step is one line of a report, short enough to read at a glance.
MAX_STEP_CHARS = 160

# codex runs commands as ``/bin/bash -lc 'CMD'``: show CMD.
_SHELL_WRAPPER = re.compile(r"^(?:/usr)?(?:/bin/)?(?:ba|z|da)?sh -l?c '(.*)'$", re.S)

_CODEX_KINDS = {"add": "Created", "delete": "Deleted", "update": "Modified"}


def relative_path(path: str, cwd: str | None) -> str:
    """``path`` relative to ``cwd`` when it lies under it; else unchanged."""
    if not cwd or not os.path.isabs(path):
        return path
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel == ".." or rel.startswith(".." + os.sep) else rel


def _one_line(text: str, limit: int = MAX_STEP_CHARS) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[0] + (" …" if len(lines) > 1 else "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _command(value: Any) -> str:
    if isinstance(value, list):
        value = " ".join(str(v) for v in value)
    if not isinstance(value, str):
        return ""
    text: str = value
    match = _SHELL_WRAPPER.match(text.strip())
    if match:
        text = match.group(1).replace("'\\''", "'")
    return text


def _field(tool_input: Mapping[str, Any], *names: str) -> str:
    for name in names:
        value = tool_input.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _path(data: Mapping[str, Any], cwd: str | None, *keys: str) -> str:
    value = _field(data, *keys)
    return relative_path(value, cwd) if value else ""


def _ran(name: str, data: Mapping[str, Any], cwd: str | None) -> str:
    command = _command(data.get("command"))
    return f"Ran {name}: {command}" if command else f"Ran {name}"


def _changed(name: str, data: Mapping[str, Any], cwd: str | None) -> str:
    changes = [c for c in data.get("changes") or () if isinstance(c, Mapping) and c.get("path")]
    if len(changes) == 1:
        kind = _CODEX_KINDS.get(str(changes[0].get("kind")), "Changed")
        return f"{kind} {relative_path(str(changes[0]['path']), cwd)}"
    if changes:
        files = ", ".join(relative_path(str(c["path"]), cwd) for c in changes)
        return f"Changed {len(changes)} files: {files}"
    return "Changed files"


#: What a call of one tool did: (tool name, its input, the run's cwd) → one line.
_Describer = Callable[[str, Mapping[str, Any], "str | None"], str]

#: Each tool name (as every CLI spells it) and its describer.
_DESCRIBERS: dict[str, _Describer] = {
    **dict.fromkeys(
        ("Bash", "command_execution", "shell", "local_shell", "run_shell_command", "bash"), _ran
    ),
    **dict.fromkeys(
        ("Write", "write_file", "write"),
        lambda _, data, cwd: f"Wrote {_path(data, cwd, 'file_path', 'filePath')}",
    ),
    **dict.fromkeys(
        ("Edit", "MultiEdit"), lambda _, data, cwd: f"Edited {_path(data, cwd, 'file_path')}"
    ),
    "NotebookEdit": lambda _, data, cwd: f"Edited notebook {_path(data, cwd, 'notebook_path')}",
    "Read": lambda _, data, cwd: f"Read {_path(data, cwd, 'file_path')}",
    "file_change": _changed,
    "Glob": lambda _, data, cwd: f"Listed files matching {_field(data, 'pattern')}",
    "Grep": lambda _, data, cwd: f"Searched for {_field(data, 'pattern')!r}",
    "WebFetch": lambda _, data, cwd: f"Fetched {_field(data, 'url')}",
    **dict.fromkeys(
        ("WebSearch", "web_search"),
        lambda _, data, cwd: f"Searched the web: {_field(data, 'query')}",
    ),
    **dict.fromkeys(
        ("Task", "Agent"),
        lambda _, data, cwd: f"Ran a subagent: {_field(data, 'description', 'prompt')}",
    ),
    "TodoWrite": lambda _, data, cwd: "Updated the todo list",
}


def describe_step(name: str, tool_input: Any, cwd: str | None = None) -> str:
    """What one successful tool call did, in one line."""
    data: Mapping[str, Any] = tool_input if isinstance(tool_input, Mapping) else {}
    describe = _DESCRIBERS.get(name)
    if describe is not None:
        text = describe(name, data, cwd)
    elif name.startswith("mcp"):
        text = f"Called {name}"
    else:
        text = ""
    return _one_line(text.rstrip(": ") or f"Used {name}")
