"""The approval flags of ``genesis run``, ``genesis run-many`` and ``genesis
chat``: the ready-made approvers of :mod:`coding_genesis.approval`, built from
the command line and chained (refusals first), and, for a person at a
terminal, the question asked inline (``--ask``; always in ``genesis chat``).

An approver of a batch comes from the command line only: a JSON line is data,
and a line that names one is refused
(:func:`~coding_genesis.capabilities.untrusted_problem`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from coding_genesis._cli.common import positive_seconds
from coding_genesis._cli.repository import absolute_path

if TYPE_CHECKING:
    from coding_genesis.approval import Approver

__all__ = [
    "ASK_TIMEOUT",
    "add_approver_arguments",
    "approval_timeout",
    "approver_from",
]

#: What a person has to answer a question asked at the terminal, by default.
ASK_TIMEOUT = 300.0


def add_approver_arguments(parser: argparse.ArgumentParser, *, ask: bool = False) -> None:
    """The approval flags; ``ask``: also ``--ask`` (``genesis run``)."""
    group = parser.add_argument_group(
        "approvals",
        "decide each tool call the CLI asks to make (claude, codex, failer: the CLI is then run "
        "through its two-way protocol); the first flag that settles a call wins, in this "
        "order: --deny-commands, --writes-under, --approve-tools"
        + (", then --ask" if ask else "")
        + "; a call none settles is denied",
    )
    if ask:
        group.add_argument(
            "--ask",
            action="store_true",
            help="ask on the terminal about each tool call the flags above leave open "
            "([y]es / [n]o / [a]lways for this run); stdin must be a terminal",
        )
    group.add_argument(
        "--approve-tools",
        metavar="NAME",
        nargs="+",
        action="extend",
        default=[],
        help="allow these tools (the CLI's own names: Bash, Write, commandExecution) or "
        "kinds (command, write, read); put the prompt before, or -- after, the names",
    )
    group.add_argument(
        "--deny-commands",
        metavar="PATTERN",
        nargs="+",
        action="extend",
        default=[],
        help='deny a shell command matching any of these globs ("rm -rf *", "git push*"), '
        "each command of a pipeline or a list included; a convenience, not a security boundary",
    )
    group.add_argument(
        "--writes-under",
        metavar="DIR",
        type=absolute_path,
        action="append",
        default=[],
        help="allow a write tool's call (Write, Edit, a patch) whose every path, both ends "
        "of a move included, is under DIR (symlinks followed; a relative DIR is taken from "
        "here, whatever the run's cwd), deny any other; a shell command's own writes (>, "
        "tee, sed -i) are commands, not writes, and are not checked: pair it with --ask or "
        "--deny-commands; repeatable",
    )
    group.add_argument(
        "--approval-timeout",
        type=positive_seconds,
        default=None,
        help="seconds an approval may take before the call is denied "
        f"(default {ASK_TIMEOUT:g} when asking a person, else 60)",
    )


def approver_from(args: argparse.Namespace, ask: Approver | None = None) -> Approver | None:
    """The flags' approvers chained (refusals first), ``ask`` last; None when
    no flag is given and there is nothing to ask.  Raises ``ConfigError`` for
    a bad value."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.approval import allow_tools, chain, deny_commands, writes_under

    approvers: list[Approver] = []
    if args.deny_commands:
        approvers.append(deny_commands(*args.deny_commands))
    if args.writes_under:
        approvers.append(writes_under(*args.writes_under))
    if args.approve_tools:
        approvers.append(allow_tools(*args.approve_tools))
    if ask is not None:
        approvers.append(ask)
    if not approvers:
        return None
    return approvers[0] if len(approvers) == 1 else chain(*approvers)


def approval_timeout(args: argparse.Namespace, *, asking: bool) -> float | None:
    """``approval_timeout`` as the flags set it (None: the agent's); a person
    asked gets longer."""
    timeout: float | None = args.approval_timeout
    return ASK_TIMEOUT if timeout is None and asking else timeout
