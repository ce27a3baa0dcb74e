"""One-line descriptions of tool calls: the "Work completed before failure"
of a failure report, e.g. ``Ran Bash: pytest -q`` or ``Wrote src/x.py``.

Pure functions; paths under the run's working directory come back relative.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
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


def describe_step(name: str, tool_input: Any, cwd: str | None = None) -> str:  # noqa: C901
    """What one successful tool call did, in one line."""
    data: Mapping[str, Any] = tool_input if isinstance(tool_input, Mapping) else {}

    def path(*keys: str) -> str:
        value = _field(data, *keys)
        return relative_path(value, cwd) if value else ""

    text = ""
    if name in ("Bash", "command_execution", "shell", "local_shell", "run_shell_command", "bash"):
        command = _command(data.get("command"))
        text = f"Ran {name}: {command}" if command else f"Ran {name}"
    elif name in ("Write", "write_file", "write"):
        text = f"Wrote {path('file_path', 'filePath')}"
    elif name in ("Edit", "MultiEdit"):
        text = f"Edited {path('file_path')}"
    elif name == "NotebookEdit":
        text = f"Edited notebook {path('notebook_path')}"
    elif name == "Read":
        text = f"Read {path('file_path')}"
    elif name == "file_change":
        changes = [c for c in data.get("changes") or () if isinstance(c, Mapping) and c.get("path")]
        if len(changes) == 1:
            kind = _CODEX_KINDS.get(str(changes[0].get("kind")), "Changed")
            text = f"{kind} {relative_path(str(changes[0]['path']), cwd)}"
        elif changes:
            files = ", ".join(relative_path(str(c["path"]), cwd) for c in changes)
            text = f"Changed {len(changes)} files: {files}"
        else:
            text = "Changed files"
    elif name == "Glob":
        text = f"Listed files matching {_field(data, 'pattern')}"
    elif name == "Grep":
        text = f"Searched for {_field(data, 'pattern')!r}"
    elif name == "WebFetch":
        text = f"Fetched {_field(data, 'url')}"
    elif name in ("WebSearch", "web_search"):
        text = f"Searched the web: {_field(data, 'query')}"
    elif name in ("Task", "Agent"):
        text = f"Ran a subagent: {_field(data, 'description', 'prompt')}"
    elif name == "TodoWrite":
        text = "Updated the todo list"
    elif name.startswith("mcp"):
        text = f"Called {name}"
    return _one_line(text.rstrip(": ") or f"Used {name}")
