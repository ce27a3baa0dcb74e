"""argparse that forgives: a misspelt option or command gets "did you mean" (Python
3.11's argparse suggests nothing) with the command's usage, and a bad value is one line.

Every ``genesis`` parser is a :class:`GenesisParser` (the subcommands' too, through
``add_subparsers(parser_class=...)``); each still exits 2 on a usage error.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from coding_genesis._util.display import printable

__all__ = ["COMMAND_HELP", "GenesisParser", "suggestion"]

#: Each command's module under coding_genesis._cli and its line in ``genesis --help``,
#: in that order: here, so that the top-level help lists the commands without
#: importing them (a command's module registers its parser with its line from here).
COMMAND_HELP: dict[str, str] = {
    "run": "run one request and print the answer",
    "chat": "a live session in the terminal: turns, inline approvals, Ctrl-C",
    "run_many": "run a JSON-lines file of requests, several at a time",
    "runs": "list recent recorded runs",
    "show": "show one recorded run",
    "replay": "re-parse a recorded CLI stream and print the response it gives",
    "doctor": "check that the backends can run here, with a fix per problem",
    "stats": "runs, failures, tokens and cost from the run log",
    "reap": "stop what runs of dead runners left running",
    "worktrees": "list (or prune) the git worktrees of isolated runs",
    "serve": "serve runs over HTTP and Server-Sent Events (pip install coding-genesis[serve])",
    "mcp": "serve MCP tools on stdio: other agents run CLIs through us (coding-genesis[mcp])",
    "approvals": "the approval inbox of genesis serve: list, answer, watch",
}

_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)$")
_UNRECOGNIZED = "unrecognized arguments: "


def suggestion(word: str, known: Sequence[str]) -> str:
    """``"; did you mean X?"`` for the closest of ``known`` to ``word``, else ""."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


class GenesisParser(argparse.ArgumentParser):
    """See the module's docstring.  ``argv``: what the top-level parser is about to
    parse (the command it names tells which usage and which options to suggest)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.argv: Sequence[str] = ()

    def _commands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    def error(self, message: str) -> NoReturn:
        commands = self._commands()
        choice = _CHOICE.search(message)
        if message.startswith("argument COMMAND:") and choice:
            wrong, names = choice["value"], [n for n in commands if not n.startswith("_")]
            hint = suggestion(wrong, names).replace("mean ", "mean genesis ")
            self._fail(f"unknown command {wrong!r}{hint} (the commands: {', '.join(names)})")
        if choice:
            names = [c.strip().strip("'") for c in choice["choices"].split(",")]
            self._fail(message + suggestion(choice["value"], names), usage=False)
        if message.startswith(_UNRECOGNIZED):
            command = next((a for a in self.argv if a in commands), None)
            parser = commands.get(command or "", self)
            parser._unrecognized(message[len(_UNRECOGNIZED) :].split())  # type: ignore[attr-defined]
        self._fail(message, usage=False)

    def _unrecognized(self, extras: list[str]) -> NoReturn:
        flags = [e for e in extras if e.startswith("-") and e != "-"]
        if flags:
            name = flags[0].split("=", 1)[0]
            known = [o for o in self._option_string_actions if o.startswith("--")]
            self._fail(f"unknown option {name}{suggestion(name, known)}")
        words = " ".join(extras)
        self._fail(f"unexpected argument {words!r} (a prompt of several words needs quotes)")

    def _fail(self, message: str, *, usage: bool = True) -> NoReturn:
        """The error (with this parser's usage, else a pointer to its --help), exit 2."""
        if usage:
            self.print_usage(sys.stderr)
        else:
            message = f"{message} (see {self.prog} --help)"
        self.exit(2, printable(f"{self.prog}: error: {message}") + "\n")
