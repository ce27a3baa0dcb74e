"""Context hygiene: the instruction files (CLAUDE.md, AGENTS.md, ...) a CLI
reads from the directories above its cwd, compared between a worktree and
the caller's checkout, so that a run in a worktree is told what it no longer
sees (or newly sees)."""

from __future__ import annotations

import contextlib
from pathlib import Path

__all__ = ["INSTRUCTION_FILES", "instruction_warnings"]

#: Files coding-agent CLIs read as instructions from the directories above their cwd.
INSTRUCTION_FILES = (
    "CLAUDE.md",
    "CLAUDE.local.md",
    "AGENTS.md",
    "AGENTS.override.md",
    "GEMINI.md",
    "QWEN.md",
    ".cursorrules",
)


def _instructions_above(directory: str) -> dict[str, str]:
    """Instruction files in the directories strictly above ``directory``:
    {name relative to its directory's depth: absolute path}."""
    found: dict[str, str] = {}
    current = Path(directory).resolve().parent
    while True:
        for name in INSTRUCTION_FILES:
            candidate = current / name
            with contextlib.suppress(OSError):
                if candidate.is_file():
                    found[str(candidate)] = str(candidate)
        if current.parent == current:
            break
        current = current.parent
    return found


def instruction_warnings(worktree_root_cwd: str, caller_cwd: str) -> list[str]:
    """Warnings for instruction files a CLI reads from the directories above
    the worktree that are not those above the caller's checkout (and the
    reverse: those it no longer sees)."""
    try:
        above_worktree = _instructions_above(_top_of(worktree_root_cwd))
        above_checkout = _instructions_above(_top_of(caller_cwd))
    except OSError:
        return []
    warnings = [
        f"instruction file {path} is above the worktree (the CLI may read it) "
        "but not above your checkout"
        for path in sorted(set(above_worktree) - set(above_checkout))
    ]
    warnings += [
        f"instruction file {path} is above your checkout but not above the worktree "
        "(the CLI will not read it there)"
        for path in sorted(set(above_checkout) - set(above_worktree))
    ]
    return warnings


def _top_of(directory: str) -> str:
    """The nearest directory at or above ``directory`` holding ``.git``."""
    current = Path(directory).resolve()
    while True:
        if (current / ".git").exists():
            return str(current)
        if current.parent == current:
            return directory
        current = current.parent
