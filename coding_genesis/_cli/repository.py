"""What the command line says and takes about a working directory's own
settings: ``--setting-sources`` (which settings the CLI reads; by default the
user's alone), the warning of ``genesis chat`` and ``genesis run --ask`` when
the directory holds files a CLI would start programs from, and paths made
absolute where they are parsed (``--writes-under DIR`` means DIR as the shell
sees it, never a directory of some request's own cwd)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coding_genesis.backend import Backend

__all__ = [
    "absolute_path",
    "add_setting_sources_argument",
    "batch_sources_problem",
    "repository_warning",
    "setting_sources_arg",
]

#: What ``--setting-sources`` may name (the library checks them again).
_SOURCES = ("user", "project", "local")


def absolute_path(text: str) -> str:
    """argparse type: a path, made absolute against the shell's working directory."""
    if not text or "\0" in text:
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r}")
    return os.path.abspath(text)


def setting_sources_arg(text: str) -> tuple[str, ...]:
    """argparse type: ``user,project,local`` (one or more, comma-separated)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in _SOURCES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected one or more of {', '.join(_SOURCES)}, comma-separated; got {text!r}"
        )
    return tuple(s for s in _SOURCES if s in names)


def add_setting_sources_argument(parser: argparse.ArgumentParser, *, batch: bool = False) -> None:
    parser.add_argument(
        "--setting-sources",
        metavar="SOURCES",
        type=setting_sources_arg,
        default=None,
        help="the settings the CLI reads, comma-separated: user, project (the working "
        "directory's, e.g. .claude/settings.json, .mcp.json), local; default: the user's "
        "alone, so no hook, MCP server or helper of the directory runs (see docs/security.md)"
        + (
            "; project and local need --trusted-input (a batch line's cwd is data)" if batch else ""
        ),
    )


def repository_warning(backend: Backend, cwd: str, sources: tuple[str, ...] | None) -> str | None:
    """The warning for a working directory holding files ``backend`` loads and
    runs programs from (None: it holds none): which, and whether this run reads them."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._util.display import printable

    chosen = sources if sources is not None else backend.default_setting_sources
    found = [f for f in backend.repository_files if os.path.lexists(os.path.join(cwd, f.path))]
    if not found:
        return None
    where = cwd.replace("\n", "\\n")
    lines = [f"warning: {where} holds files {backend.name} starts programs from:"]
    for entry in found:
        read = chosen is None or entry.source in chosen
        state = (
            f"READ (--setting-sources names {entry.source})"
            if read and sources is not None
            else "READ"
            if read
            else f"not read (--setting-sources {entry.source} would read it)"
        )
        lines.append(f"  {entry.path}: {entry.what}: {state}")
    return printable("\n".join(lines))


def batch_sources_problem(sources: tuple[str, ...] | None, *, trusted: bool) -> str | None:
    """Why ``run-many --setting-sources`` cannot be used as given (None: it can):
    the settings of each line's cwd, which an untrusted line chooses."""
    if trusted or sources is None or sources == ("user",):
        return None
    return (
        f"--setting-sources {','.join(sources)} reads the settings of each line's cwd, "
        "which a batch line chooses: pass --trusted-input too (or leave it out: the "
        "user's settings alone)"
    )
