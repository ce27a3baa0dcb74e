"""One line per tool call (`describe_step`): each tool name every CLI spells,
its line, and the fallbacks (an MCP tool, an unknown one; input that is not a
mapping reads as empty)."""

from __future__ import annotations

from typing import Any

import pytest

from coding_genesis._util.steps import describe_step


@pytest.mark.parametrize(
    ("name", "tool_input", "line"),
    [
        ("Bash", {"command": "ls -la"}, "Ran Bash: ls -la"),
        ("run_shell_command", {}, "Ran run_shell_command"),
        ("Write", {"file_path": "/w/src/a.py"}, "Wrote src/a.py"),
        ("write_file", {"filePath": "/w/b.py"}, "Wrote b.py"),
        ("MultiEdit", {"file_path": "/w/a.py"}, "Edited a.py"),
        ("NotebookEdit", {"notebook_path": "/w/n.ipynb"}, "Edited notebook n.ipynb"),
        ("Read", {"file_path": "/elsewhere/r.txt"}, "Read /elsewhere/r.txt"),
        ("file_change", {"changes": [{"path": "/w/x", "kind": "add"}]}, "Created x"),
        (
            "file_change",
            {"changes": [{"path": "/w/x", "kind": "delete"}, {"path": "/w/y"}]},
            "Changed 2 files: x, y",
        ),
        ("file_change", {"changes": [{"kind": "add"}]}, "Changed files"),
        ("Glob", {"pattern": "*.py"}, "Listed files matching *.py"),
        ("Grep", {"pattern": "TODO"}, "Searched for 'TODO'"),
        ("WebFetch", {"url": "https://example.com"}, "Fetched https://example.com"),
        ("web_search", {"query": "anyio"}, "Searched the web: anyio"),
        ("Agent", {"prompt": "look"}, "Ran a subagent: look"),
        ("TodoWrite", {"todos": []}, "Updated the todo list"),
        ("mcp__files__list", {}, "Called mcp__files__list"),
        ("Unknown", {"x": 1}, "Used Unknown"),
        ("Write", "not a mapping", "Wrote"),
    ],
)
def test_each_tool_has_its_line(name: str, tool_input: Any, line: str) -> None:
    assert describe_step(name, tool_input, "/w") == line
